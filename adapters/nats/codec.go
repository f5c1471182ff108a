package nats

import (
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

// codec is the adapter's only contact with natsmap.
type codec struct {
	enc natsmap.EncodeOptions
	dec natsmap.DecodeOptions
}

func newCodec(groupHeader string, opt mapping.Options) codec {
	return codec{
		enc: natsmap.EncodeOptions{Options: opt, GroupHeader: groupHeader},
		dec: natsmap.DecodeOptions{GroupHeader: groupHeader},
	}
}

// encode encodes m for subject, into sc when it is not nil (see
// natsmap.EncodeScratch).
func (c *codec) encode(sc *natsmap.Scratch, m *mapping.Message, subject string) (*nats.Msg, error) {
	return natsmap.EncodeScratch(sc, m, subject, c.enc)
}

// decodeInto decodes msg into m, the zero Message (natsmap.DecodeInto).
func (c *codec) decodeInto(m *mapping.Message, msg *nats.Msg) error {
	return natsmap.DecodeInto(m, msg, c.dec)
}

// decodeJS decodes a JetStream delivery with the metadata the jetstream
// package already parsed (natsmap fills the source facts from it).
func (c *codec) decodeJS(msg *nats.Msg, meta *jetstream.MsgMetadata) (*mapping.Message, error) {
	opt := c.dec
	opt.JetStream = jsMeta(meta)
	return natsmap.Decode(msg, opt)
}

func jsMeta(meta *jetstream.MsgMetadata) *natsmap.JetStreamMeta {
	if meta == nil {
		return nil
	}
	return &natsmap.JetStreamMeta{
		Stream: meta.Stream, Consumer: meta.Consumer, Domain: meta.Domain,
		StreamSeq: meta.Sequence.Stream, ConsumerSeq: meta.Sequence.Consumer,
		NumDelivered: meta.NumDelivered, NumPending: meta.NumPending,
		Timestamp: meta.Timestamp,
	}
}

// RefusedEnvelopeAttr is mapping.RefusedEnvelopeAttr.
const RefusedEnvelopeAttr = mapping.RefusedEnvelopeAttr

// decodeRaw is what a message natsmap refused still yields, for the
// dead-letter copy (driver.DecodeErrorer): decoded without the carry
// envelope (the usual culprit), or else just its body and source facts.
func (c *codec) decodeRaw(msg *nats.Msg, meta *jetstream.MsgMetadata) *mapping.Message {
	bare := &nats.Msg{Subject: msg.Subject, Reply: msg.Reply, Data: msg.Data, Header: nats.Header{}}
	for k, v := range msg.Header {
		if !strings.EqualFold(k, mapping.EnvelopeName) {
			bare.Header[k] = v
		}
	}
	opt := c.dec
	opt.JetStream = jsMeta(meta)
	if m, err := natsmap.Decode(bare, opt); err == nil {
		// The refused envelope travels on as a plain attribute, for
		// whoever inspects the dead letter: the dead-letter sink writes a
		// carry envelope of its own.
		for k, v := range msg.Header {
			if strings.EqualFold(k, mapping.EnvelopeName) && len(v) > 0 {
				m.SetAttr(RefusedEnvelopeAttr, mapping.String(v[0]))
			}
		}
		return m
	}
	m := &mapping.Message{Body: msg.Data, Source: mapping.Source{
		Protocol: natsmap.Wire, Address: msg.Subject, DeliveryCount: 1, PartitionID: -1,
	}}
	if opt.JetStream != nil {
		natsmap.ApplyJetStreamMeta(m, *opt.JetStream)
	}
	return m
}
