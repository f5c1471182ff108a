package amqpmap

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// decodeBody maps the body sections (see mapping.BodyType). go-amqp cannot
// tell an amqp-value holding null from no body: both decode as empty data.
func (d *Dialect) decodeBody(msg *amqp.Message, m *mapping.Message) error {
	kinds := 0
	for _, present := range []bool{len(msg.Data) > 0, msg.Value != nil, len(msg.Sequence) > 0} {
		if present {
			kinds++
		}
	}
	if kinds > 1 {
		return mapping.Rejectf(d.Wire, "body", "mixes data, amqp-value and amqp-sequence sections")
	}
	switch {
	case len(msg.Data) == 1:
		m.Body, m.BodyType = msg.Data[0], mapping.BodyData
	case len(msg.Data) > 1:
		items := make([]mapping.Value, len(msg.Data))
		for i, b := range msg.Data {
			items[i] = mapping.Binary(b)
		}
		return d.jsonBody(m, mapping.BodyMultiData, mapping.List(items...))
	case msg.Value != nil:
		if s, ok := msg.Value.(string); ok {
			m.Body, m.BodyType = []byte(s), mapping.BodyText
			return nil
		}
		v, err := value(msg.Value)
		if err != nil {
			return mapping.Rejectf(d.Wire, "body", "amqp-value: %v", err)
		}
		return d.jsonBody(m, mapping.BodyValue, v)
	case len(msg.Sequence) > 0:
		seqs := make([]mapping.Value, len(msg.Sequence))
		for i, s := range msg.Sequence {
			v, err := listValue(s)
			if err != nil {
				return mapping.Rejectf(d.Wire, "body", "amqp-sequence %d: %v", i, err)
			}
			seqs[i] = v
		}
		return d.jsonBody(m, mapping.BodySequence, mapping.List(seqs...))
	}
	return nil
}

func (d *Dialect) jsonBody(m *mapping.Message, t mapping.BodyType, v mapping.Value) error {
	b, err := json.Marshal(v)
	if err != nil {
		return mapping.Rejectf(d.Wire, "body", "%s body: %v", t, err)
	}
	m.Body, m.BodyType = b, t
	return nil
}

// encodeBody writes the body in its natural sections. A body the sections
// cannot hold exactly (text that is not UTF-8, a value with a kind go-amqp
// cannot encode, a typed JSON that does not parse...) goes as one data
// section with its body type carried in the envelope, so nothing is lost.
// It reports whether it fell back.
func (d *Dialect) encodeBody(m *mapping.Message, msg *amqp.Message) (fellBack bool) {
	if d.Native&mapping.FieldBodyType == 0 || m.BodyType == mapping.BodyData {
		msg.Data = [][]byte{bodyBytes(m.Body)}
		return false
	}
	enc := d.encoder()
	switch m.BodyType {
	case mapping.BodyText:
		if utf8.Valid(m.Body) {
			msg.Value = string(m.Body)
			return false
		}
	case mapping.BodyValue:
		v, err := mapping.UnmarshalValueJSON(m.Body)
		if err != nil || v.Kind == mapping.KindString || v.Kind == mapping.KindNull {
			break // a string is BodyText; a null amqp-value reads back as no body
		}
		if n, f, err := enc.native(v, inBody); err == nil && f <= demoted {
			msg.Value = n
			return false
		}
	case mapping.BodySequence:
		v, err := mapping.UnmarshalValueJSON(m.Body)
		if err != nil || v.Kind != mapping.KindList || v.Label != "" || len(v.List()) == 0 {
			break
		}
		seqs := make([][]any, 0, len(v.List()))
		for _, s := range v.List() {
			if s.Kind != mapping.KindList {
				break
			}
			n, f, err := enc.native(s, inBody)
			if err != nil || f > demoted {
				break
			}
			seqs = append(seqs, n.([]any))
		}
		if len(seqs) == len(v.List()) {
			msg.Sequence = seqs
			return false
		}
	case mapping.BodyMultiData:
		v, err := mapping.UnmarshalValueJSON(m.Body)
		if err != nil || v.Kind != mapping.KindList || v.Label != "" || len(v.List()) < 2 {
			break // one section would read back as BodyData
		}
		data := make([][]byte, 0, len(v.List()))
		for _, b := range v.List() {
			if b.Kind != mapping.KindBinary || b.Label != "" {
				break
			}
			data = append(data, bodyBytes(b.Bytes()))
		}
		if len(data) == len(v.List()) {
			msg.Data = data
			return false
		}
	}
	msg.Data = [][]byte{bodyBytes(m.Body)}
	return true
}

func bodyBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
