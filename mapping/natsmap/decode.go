package natsmap

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
)

// DecodeOptions configure Decode.
type DecodeOptions struct {
	// GroupHeader is the header that carries GroupKey (DefaultGroupHeader
	// when empty).
	GroupHeader string
	// JetStream, when set, gives the message's JetStream metadata (e.g. from
	// the jetstream package's Msg.Metadata). When nil, Decode reads it from
	// the $JS.ACK reply subject, if the message has one.
	JetStream *JetStreamMeta
}

// JetStreamMeta is what JetStream says about a delivered message. It
// mirrors jetstream.MsgMetadata without importing that package.
type JetStreamMeta struct {
	Stream, Consumer, Domain string
	StreamSeq, ConsumerSeq   uint64
	NumDelivered, NumPending uint64
	Timestamp                time.Time // when the stream stored the message
}

// ParseAckSubject reads the metadata of a JetStream message from its reply
// subject, $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>
// or the newer form with domain and account hash after ACK.
func ParseAckSubject(reply string) (JetStreamMeta, bool) {
	if !strings.HasPrefix(reply, "$JS.ACK.") {
		return JetStreamMeta{}, false
	}
	t := strings.Split(reply, ".")
	var meta JetStreamMeta
	switch {
	case len(t) == 9:
		t = append([]string{t[0], t[1], "", ""}, t[2:]...)
	case len(t) >= 11:
		if t[2] != "_" {
			meta.Domain = t[2]
		}
	default:
		return JetStreamMeta{}, false
	}
	// t: $JS ACK domain hash stream consumer delivered sseq cseq ns pending ...
	var n [5]uint64
	for i := range n {
		v, err := strconv.ParseUint(t[6+i], 10, 64)
		if err != nil {
			return JetStreamMeta{}, false
		}
		n[i] = v
	}
	meta.Stream, meta.Consumer = t[4], t[5]
	meta.NumDelivered, meta.StreamSeq, meta.ConsumerSeq, meta.NumPending = n[0], n[1], n[2], n[4]
	if n[3] > math.MaxInt64 {
		return JetStreamMeta{}, false
	}
	meta.Timestamp = time.Unix(0, int64(n[3])).UTC()
	return meta, true
}

// ApplyJetStreamMeta fills the source facts from JetStream metadata:
// SequenceNumber is the stream sequence, EnqueuedTime the stored time,
// DeliveryCount NumDelivered.
func ApplyJetStreamMeta(m *mapping.Message, meta JetStreamMeta) {
	m.Source.SequenceNumber = strconv.FormatUint(meta.StreamSeq, 10)
	if !meta.Timestamp.IsZero() {
		m.Source.EnqueuedTime = meta.Timestamp.UTC()
	}
	if meta.NumDelivered > 0 {
		m.Source.DeliveryCount = int(min(meta.NumDelivered, math.MaxInt32))
	}
}

// header is one header as received.
type header struct {
	name string
	vals []string
}

// Decode builds a message from a received NATS message. Body refers to
// msg.Data.
func Decode(msg *nats.Msg, opt DecodeOptions) (*mapping.Message, error) {
	m := new(mapping.Message)
	if err := DecodeInto(m, msg, opt); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInto is Decode into m, which must be the zero Message: an adapter
// that reuses its messages (driver.Recycler) decodes without allocating
// one. On an error m holds part of the message and is to be discarded.
func DecodeInto(m *mapping.Message, msg *nats.Msg, opt DecodeOptions) error {
	if msg == nil {
		return errors.New("natsmap: nil message")
	}
	gh := opt.GroupHeader
	if gh == "" {
		gh = DefaultGroupHeader
	}
	m.Body = msg.Data
	m.Source = mapping.Source{Protocol: "nats", Address: msg.Subject, DeliveryCount: 1, PartitionID: -1}
	jsDelivery := false
	if opt.JetStream != nil {
		ApplyJetStreamMeta(m, *opt.JetStream)
		jsDelivery = true
	} else if meta, ok := ParseAckSubject(msg.Reply); ok {
		ApplyJetStreamMeta(m, meta)
		jsDelivery = true
	} else if msg.Reply != "" && !strings.HasPrefix(msg.Reply, "$JS.") {
		m.ReplyTo = msg.Reply // a core request's reply subject
	}

	var envText, traceparent, tracestate *header
	var seen [5]string // the header names read as fields, to refuse doubles
	var buf [16]header // on the stack for most messages
	attrs := buf[:0]
	for k, vs := range msg.Header {
		if len(vs) == 0 {
			continue
		}
		slot := -1
		switch {
		case strings.EqualFold(k, nats.MsgIdHdr):
			slot = 0
		case len(k) >= len(natsPrefix) && strings.EqualFold(k[:len(natsPrefix)], natsPrefix):
			if jsDelivery && strings.EqualFold(k, hdrPinID) {
				continue // the delivery's pin, not the message's
			}
			m.Annotations = append(m.Annotations, mapping.Attribute{Name: k, Value: stringsValue(vs)})
			continue
		case strings.EqualFold(k, hdrContentType):
			slot = 1
		case strings.EqualFold(k, gh):
			slot = 2
		case strings.EqualFold(k, mapping.EnvelopeName):
			slot = 3
			envText = &header{k, vs}
		case strings.EqualFold(k, hdrTraceparent):
			traceparent = &header{k, vs}
			continue
		case strings.EqualFold(k, hdrTracestate):
			tracestate = &header{k, vs}
			continue
		default:
			attrs = append(attrs, header{k, vs})
			continue
		}
		if seen[slot] != "" {
			return mapping.Rejectf(Wire, fmt.Sprintf("header %q", k), "given twice (also as %q)", seen[slot])
		}
		seen[slot] = k
		if len(vs) > 1 {
			return mapping.Rejectf(Wire, fmt.Sprintf("header %q", k), "has %d values, want one", len(vs))
		}
		switch slot {
		case 0:
			if !mapping.IsMadeUpID(vs[0]) { // an encoder's, not the message's (IDFromSourceKey)
				m.DedupID = vs[0]
			}
		case 1:
			m.ContentType = vs[0]
		case 2:
			m.GroupKey = vs[0]
		}
	}

	// A trace that does not parse stays what it was: user headers.
	if traceparent != nil {
		t, err := mapping.ParseTraceparent(traceparent.vals[0])
		if len(traceparent.vals) == 1 && err == nil {
			if tracestate != nil {
				t.State = strings.Join(tracestate.vals, ",") // W3C: several headers combine
				tracestate = nil
			}
			m.Trace = t
		} else {
			attrs = append(attrs, *traceparent)
		}
	}
	if tracestate != nil {
		attrs = append(attrs, *tracestate)
	}

	var env *mapping.Envelope
	if envText != nil {
		var err error
		if env, err = mapping.ParseEnvelope(envText.vals[0]); err != nil {
			return mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
		}
	}
	slices.SortFunc(attrs, func(x, y header) int { return cmp.Compare(x.name, y.name) })
	m.Attributes = make([]mapping.Attribute, 0, len(attrs))
	for _, a := range attrs {
		v, err := attributeValue(a, env)
		if err != nil {
			return mapping.Rejectf(Wire, fmt.Sprintf("header %q", a.name), "%v", err)
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: a.name, Value: v})
	}
	slices.SortFunc(m.Annotations, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
	if env == nil {
		return nil
	}
	// Nats-Msg-Id was the id of a message without a dedup id of its own.
	if c := env.Fields; c != nil && c.DedupID == "" && c.ID != "" && c.ID == m.DedupID {
		m.DedupID = ""
	}
	if err := env.Apply(m); err != nil {
		return mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
	}
	b, err := env.DecodeBody(m.Body)
	if err != nil {
		return mapping.Rejectf(Wire, "body", "%v", err)
	}
	m.Body = b
	slices.SortStableFunc(m.Attributes, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
	return nil
}

// attributeValue rebuilds an attribute from its header values and the type
// the envelope records, if any.
func attributeValue(a header, env *mapping.Envelope) (mapping.Value, error) {
	dt, typed := env.TypeOf(a.name)
	switch {
	case !typed:
		return stringsValue(a.vals), nil
	case len(a.vals) == 1:
		return mapping.ParseValue(dt, a.vals[0])
	case dt == mapping.Strings().DataType():
		return mapping.Strings(slices.Clone(a.vals)...), nil
	}
	return mapping.Value{}, fmt.Errorf("%d values, but the envelope types it %s", len(a.vals), dt)
}

// stringsValue: one value is a String, several are Strings.
func stringsValue(vs []string) mapping.Value {
	if len(vs) == 1 {
		return mapping.String(vs[0])
	}
	return mapping.Strings(slices.Clone(vs)...)
}
