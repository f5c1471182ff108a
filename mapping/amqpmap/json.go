package amqpmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// The JSON rendering of an AMQP message: its sections, with every AMQP value
// in mapping's typed JSON ({"type":"int","value":42}). See the package doc.
type jsonMessage struct {
	Format                uint32          `json:"format,omitempty"`
	DeliveryTag           []byte          `json:"deliveryTag,omitempty"`
	Header                *jsonHeader     `json:"header,omitempty"`
	DeliveryAnnotations   []jsonEntry     `json:"deliveryAnnotations,omitempty"`
	MessageAnnotations    []jsonEntry     `json:"messageAnnotations,omitempty"`
	Properties            *jsonProperties `json:"properties,omitempty"`
	ApplicationProperties []jsonEntry     `json:"applicationProperties,omitempty"`
	Body                  *jsonBody       `json:"body,omitempty"`
	Footer                []jsonEntry     `json:"footer,omitempty"`
}

type jsonHeader struct {
	Durable       bool   `json:"durable,omitempty"`
	Priority      *uint8 `json:"priority,omitempty"` // 4 when absent
	TTL           uint32 `json:"ttl,omitempty"`      // milliseconds
	FirstAcquirer bool   `json:"firstAcquirer,omitempty"`
	DeliveryCount uint32 `json:"deliveryCount,omitempty"`
}

type jsonEntry struct {
	Key   string        `json:"key"`
	Value mapping.Value `json:"value"`
}

type jsonProperties struct {
	MessageID          *mapping.Value `json:"messageId,omitempty"`
	UserID             []byte         `json:"userId,omitempty"`
	To                 *string        `json:"to,omitempty"`
	Subject            *string        `json:"subject,omitempty"`
	ReplyTo            *string        `json:"replyTo,omitempty"`
	CorrelationID      *mapping.Value `json:"correlationId,omitempty"`
	ContentType        *string        `json:"contentType,omitempty"`
	ContentEncoding    *string        `json:"contentEncoding,omitempty"`
	AbsoluteExpiryTime *time.Time     `json:"absoluteExpiryTime,omitempty"`
	CreationTime       *time.Time     `json:"creationTime,omitempty"`
	GroupID            *string        `json:"groupId,omitempty"`
	GroupSequence      *uint32        `json:"groupSequence,omitempty"`
	ReplyToGroupID     *string        `json:"replyToGroupId,omitempty"`
}

type jsonBody struct {
	Data     *[][]byte          `json:"data,omitempty"`
	Value    *mapping.Value     `json:"value,omitempty"`
	Sequence *[][]mapping.Value `json:"sequence,omitempty"`
}

// ParseJSON parses the JSON rendering of an AMQP message and decodes it.
func ParseJSON(data []byte) (*mapping.Message, error) { return Plain.ParseJSON(data) }

// RenderJSON encodes m and renders the AMQP message as JSON.
func RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	return Plain.RenderJSON(m, opt)
}

// ParseJSON parses the JSON rendering of an AMQP message and decodes it
// with the dialect.
func (d *Dialect) ParseJSON(data []byte) (*mapping.Message, error) {
	msg, err := d.MessageFromJSON(data)
	if err != nil {
		return nil, err
	}
	return d.Decode(msg)
}

// RenderJSON encodes m with the dialect and renders the result as JSON.
func (d *Dialect) RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	msg, err := d.Encode(m, opt)
	if err != nil {
		return nil, err
	}
	return d.MessageJSON(msg)
}

// MessageJSON renders an AMQP message as JSON.
func (d *Dialect) MessageJSON(msg *amqp.Message) ([]byte, error) {
	j := jsonMessage{Format: msg.Format, DeliveryTag: msg.DeliveryTag}
	if h := msg.Header; h != nil {
		j.Header = &jsonHeader{Durable: h.Durable, TTL: uint32(h.TTL / time.Millisecond),
			FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
		if h.Priority != 4 {
			p := h.Priority
			j.Header.Priority = &p
		}
	}
	var err error
	if j.DeliveryAnnotations, err = d.entriesJSON("delivery-annotations", msg.DeliveryAnnotations); err != nil {
		return nil, err
	}
	if j.MessageAnnotations, err = d.entriesJSON("message-annotations", msg.Annotations); err != nil {
		return nil, err
	}
	if j.Footer, err = d.entriesJSON("footer", msg.Footer); err != nil {
		return nil, err
	}
	if len(msg.ApplicationProperties) > 0 {
		j.ApplicationProperties = make([]jsonEntry, 0, len(msg.ApplicationProperties))
		for k, x := range msg.ApplicationProperties {
			v, err := value(x)
			if err != nil {
				return nil, mapping.Rejectf(d.Wire, appProp(k), "%v", err)
			}
			j.ApplicationProperties = append(j.ApplicationProperties, jsonEntry{k, v})
		}
		sortEntries(j.ApplicationProperties)
	}
	if p := msg.Properties; p != nil {
		jp := &jsonProperties{UserID: p.UserID, To: p.To, Subject: p.Subject, ReplyTo: p.ReplyTo,
			ContentType: p.ContentType, ContentEncoding: p.ContentEncoding, GroupID: p.GroupID,
			GroupSequence: p.GroupSequence, ReplyToGroupID: p.ReplyToGroupID,
			AbsoluteExpiryTime: utcPtr(p.AbsoluteExpiryTime), CreationTime: utcPtr(p.CreationTime)}
		if jp.MessageID, err = d.idJSON(p.MessageID, "properties.message-id"); err != nil {
			return nil, err
		}
		if jp.CorrelationID, err = d.idJSON(p.CorrelationID, "properties.correlation-id"); err != nil {
			return nil, err
		}
		j.Properties = jp
	}
	if j.Body, err = d.bodyJSON(msg); err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, mapping.Rejectf(d.Wire, "json", "%v", err)
	}
	return b, nil
}

func (d *Dialect) entriesJSON(section string, a amqp.Annotations) ([]jsonEntry, error) {
	if len(a) == 0 {
		return nil, nil
	}
	out := make([]jsonEntry, 0, len(a))
	for k, x := range a {
		name, ok := annotationKey(k)
		if !ok {
			return nil, mapping.Rejectf(d.Wire, section, "key %v of type %T: only symbol keys can be rendered", k, k)
		}
		v, err := value(x)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, fmt.Sprintf("%s %q", section, name), "%v", err)
		}
		out = append(out, jsonEntry{name, v})
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(e []jsonEntry) {
	slices.SortFunc(e, func(a, b jsonEntry) int { return strings.Compare(a.Key, b.Key) })
}

func (d *Dialect) idJSON(id any, field string) (*mapping.Value, error) {
	if id == nil {
		return nil, nil
	}
	v, err := value(id)
	if err != nil {
		return nil, mapping.Rejectf(d.Wire, field, "%v", err)
	}
	return &v, nil
}

func (d *Dialect) bodyJSON(msg *amqp.Message) (*jsonBody, error) {
	switch {
	case len(msg.Data) > 0:
		data := msg.Data
		return &jsonBody{Data: &data}, nil
	case msg.Value != nil:
		v, err := value(msg.Value)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, "body", "amqp-value: %v", err)
		}
		return &jsonBody{Value: &v}, nil
	case len(msg.Sequence) > 0:
		seqs := make([][]mapping.Value, len(msg.Sequence))
		for i, s := range msg.Sequence {
			l, err := listValue(s)
			if err != nil {
				return nil, mapping.Rejectf(d.Wire, "body", "amqp-sequence %d: %v", i, err)
			}
			seqs[i] = l.List()
			if seqs[i] == nil {
				seqs[i] = []mapping.Value{}
			}
		}
		return &jsonBody{Sequence: &seqs}, nil
	}
	return nil, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// MessageFromJSON parses the JSON rendering of an AMQP message. Unknown
// fields are errors naming the field.
func (d *Dialect) MessageFromJSON(data []byte) (*amqp.Message, error) {
	var j jsonMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, mapping.Rejectf(d.Wire, "json", "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, mapping.Rejectf(d.Wire, "json", "trailing data after the message")
	}
	msg := &amqp.Message{Format: j.Format, DeliveryTag: j.DeliveryTag}
	if h := j.Header; h != nil {
		msg.Header = &amqp.MessageHeader{Durable: h.Durable, Priority: 4,
			TTL: time.Duration(h.TTL) * time.Millisecond, FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
		if h.Priority != nil {
			msg.Header.Priority = *h.Priority
		}
	}
	var err error
	if msg.DeliveryAnnotations, err = d.annotationsFromJSON("deliveryAnnotations", j.DeliveryAnnotations); err != nil {
		return nil, err
	}
	if msg.Annotations, err = d.annotationsFromJSON("messageAnnotations", j.MessageAnnotations); err != nil {
		return nil, err
	}
	if msg.Footer, err = d.annotationsFromJSON("footer", j.Footer); err != nil {
		return nil, err
	}
	strict := valueEncoder{strict: true}
	if j.ApplicationProperties != nil {
		msg.ApplicationProperties = make(map[string]any, len(j.ApplicationProperties))
		for _, e := range j.ApplicationProperties {
			field := fmt.Sprintf("applicationProperties %q", e.Key)
			if _, dup := msg.ApplicationProperties[e.Key]; dup {
				return nil, mapping.Rejectf(d.Wire, field, "duplicate key")
			}
			n, _, err := strict.native(e.Value, inAnnotation)
			if err != nil {
				return nil, mapping.Rejectf(d.Wire, field, "%v", err)
			}
			msg.ApplicationProperties[e.Key] = n
		}
	}
	if p := j.Properties; p != nil {
		mp := &amqp.MessageProperties{UserID: p.UserID, To: p.To, Subject: p.Subject, ReplyTo: p.ReplyTo,
			ContentType: p.ContentType, ContentEncoding: p.ContentEncoding,
			AbsoluteExpiryTime: p.AbsoluteExpiryTime, CreationTime: p.CreationTime, GroupID: p.GroupID,
			GroupSequence: p.GroupSequence, ReplyToGroupID: p.ReplyToGroupID}
		if mp.MessageID, err = d.idFromJSON(p.MessageID, "properties.messageId"); err != nil {
			return nil, err
		}
		if mp.CorrelationID, err = d.idFromJSON(p.CorrelationID, "properties.correlationId"); err != nil {
			return nil, err
		}
		msg.Properties = mp
	}
	if err := d.bodyFromJSON(j.Body, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func (d *Dialect) annotationsFromJSON(section string, entries []jsonEntry) (amqp.Annotations, error) {
	if entries == nil {
		return nil, nil
	}
	strict := valueEncoder{strict: true}
	a := make(amqp.Annotations, len(entries))
	for _, e := range entries {
		field := fmt.Sprintf("%s %q", section, e.Key)
		if _, dup := a[e.Key]; dup {
			return nil, mapping.Rejectf(d.Wire, field, "duplicate key")
		}
		n, _, err := strict.native(e.Value, inAnnotation)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, field, "%v", err)
		}
		a[e.Key] = n
	}
	return a, nil
}

func (d *Dialect) idFromJSON(v *mapping.Value, field string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch v.Kind {
	case mapping.KindString, mapping.KindUint64, mapping.KindUUID, mapping.KindBinary:
		if v.Label == "" {
			n, _, err := valueEncoder{strict: true}.native(*v, inAnnotation)
			if err != nil {
				return nil, mapping.Rejectf(d.Wire, field, "%v", err)
			}
			return n, nil
		}
	}
	return nil, mapping.Rejectf(d.Wire, field, "must be a string, ulong, uuid or binary, not %s", v.DataType())
}

func (d *Dialect) bodyFromJSON(b *jsonBody, msg *amqp.Message) error {
	if b == nil {
		return nil
	}
	n := 0
	for _, present := range []bool{b.Data != nil, b.Value != nil, b.Sequence != nil} {
		if present {
			n++
		}
	}
	if n != 1 {
		return mapping.Rejectf(d.Wire, "body", "want exactly one of data, value or sequence")
	}
	strict := valueEncoder{strict: true}
	switch {
	case b.Data != nil:
		msg.Data = *b.Data
		if len(msg.Data) == 0 {
			return mapping.Rejectf(d.Wire, "body.data", "no data section")
		}
	case b.Value != nil:
		if b.Value.Kind == mapping.KindNull {
			msg.Value = amqp.Null{}
			return nil
		}
		v, _, err := strict.native(*b.Value, inBody)
		if err != nil {
			return mapping.Rejectf(d.Wire, "body.value", "%v", err)
		}
		msg.Value = v
	case b.Sequence != nil:
		if len(*b.Sequence) == 0 {
			return mapping.Rejectf(d.Wire, "body.sequence", "no sequence section")
		}
		for i, s := range *b.Sequence {
			v, _, err := strict.native(mapping.List(s...), inBody)
			if err != nil {
				return mapping.Rejectf(d.Wire, fmt.Sprintf("body.sequence[%d]", i), "%v", err)
			}
			msg.Sequence = append(msg.Sequence, v.([]any))
		}
	}
	return nil
}
