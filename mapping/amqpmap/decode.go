package amqpmap

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// Decode maps a received AMQP message into the model. Delivery annotations
// (hop-by-hop) and the footer (hashes and signatures over the bare message,
// void once the message is re-encoded) are not part of the model; a
// dialect's Decoded hook may read them.
func (d *Dialect) Decode(msg *amqp.Message) (*mapping.Message, error) {
	if msg == nil {
		return nil, mapping.Rejectf(d.Wire, "", "nil message")
	}
	m := &mapping.Message{}
	m.Source.Protocol = d.Protocol
	m.Source.PartitionID = -1
	m.Source.DeliveryCount = 1
	if h := msg.Header; h != nil {
		m.Durable = h.Durable
		if h.Priority != 4 {
			p := h.Priority
			m.Priority = &p
		}
		m.TTL = h.TTL
		m.FirstAcquirer = h.FirstAcquirer
		m.Source.DeliveryCount = int(h.DeliveryCount) + 1
	}
	if err := d.decodeProperties(msg.Properties, m); err != nil {
		return nil, err
	}
	env, err := d.envelope(msg.ApplicationProperties)
	if err != nil {
		return nil, err
	}
	if err := d.decodeAppProperties(msg.ApplicationProperties, env, m); err != nil {
		return nil, err
	}
	if err := d.decodeAnnotations(msg.Annotations, m); err != nil {
		return nil, err
	}
	if err := d.decodeBody(msg, m); err != nil {
		return nil, err
	}
	if d.Decoded != nil {
		if err := d.Decoded(msg, m, env); err != nil {
			return nil, err
		}
	}
	if env != nil {
		if err := d.applyEnvelope(env, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *Dialect) decodeProperties(p *amqp.MessageProperties, m *mapping.Message) error {
	if p == nil {
		return nil
	}
	var err error
	if m.ID, m.IDKind, err = d.decodeID(p.MessageID, "properties.message-id"); err != nil {
		return err
	}
	if m.CorrelationID, m.CorrelationKind, err = d.decodeID(p.CorrelationID, "properties.correlation-id"); err != nil {
		return err
	}
	m.UserID = p.UserID
	m.To = deref(p.To)
	m.Subject = deref(p.Subject)
	m.ReplyTo = deref(p.ReplyTo)
	m.ContentType = deref(p.ContentType)
	m.ContentEncoding = deref(p.ContentEncoding)
	if p.AbsoluteExpiryTime != nil {
		m.AbsoluteExpiry = p.AbsoluteExpiryTime.UTC()
	}
	if p.CreationTime != nil {
		m.CreationTime = p.CreationTime.UTC()
	}
	m.GroupKey = deref(p.GroupID)
	if p.GroupSequence != nil {
		m.GroupSequence = *p.GroupSequence
	}
	m.ReplyToGroup = deref(p.ReplyToGroupID)
	return nil
}

// decodeID maps a message-id or correlation-id: string, ulong (decimal
// text), uuid (canonical text) or binary (base64).
func (d *Dialect) decodeID(id any, field string) (string, mapping.Kind, error) {
	switch id := id.(type) {
	case nil:
		return "", mapping.KindInvalid, nil
	case string:
		return id, mapping.KindInvalid, nil
	case uint64:
		return strconv.FormatUint(id, 10), mapping.KindUint64, nil
	case amqp.UUID:
		return mapping.UUIDString(id), mapping.KindUUID, nil
	case []byte:
		return base64.StdEncoding.EncodeToString(id), mapping.KindBinary, nil
	}
	return "", 0, mapping.Rejectf(d.Wire, field, "must be a string, ulong, uuid or binary, not %T", id)
}

// envelope finds and parses the carry envelope.
func (d *Dialect) envelope(props map[string]any) (*mapping.Envelope, error) {
	raw, ok := props[mapping.EnvelopeName]
	if !ok {
		return nil, nil
	}
	s, ok := raw.(string)
	if !ok {
		return nil, mapping.Rejectf(d.Wire, appProp(mapping.EnvelopeName), "malformed envelope: a %T, not a string", raw)
	}
	env, err := mapping.ParseEnvelope(s)
	if err != nil {
		return nil, mapping.Rejectf(d.Wire, appProp(mapping.EnvelopeName), "malformed envelope: %v", err)
	}
	return env, nil
}

func (d *Dialect) decodeAppProperties(props map[string]any, env *mapping.Envelope, m *mapping.Message) error {
	if len(props) == 0 {
		return nil
	}
	// The trace: the traceparent property, unless the envelope types it as
	// a user attribute of that name.
	traceKeys := 0
	if tp, ok := props[d.TraceProperty].(string); ok && !typed(env, d.TraceProperty) && d.ParseTrace != nil {
		if t, err := d.ParseTrace(tp); err == nil {
			m.Trace = t
			traceKeys = 1
			if ts, ok := props[TraceStateProperty].(string); ok && !typed(env, TraceStateProperty) {
				m.Trace.State = ts
				traceKeys = 2
			}
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		if k == mapping.EnvelopeName {
			continue
		}
		if traceKeys > 0 && k == d.TraceProperty || traceKeys > 1 && k == TraceStateProperty {
			continue
		}
		names = append(names, k)
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	m.Attributes = make([]mapping.Attribute, 0, len(names))
	for _, name := range names {
		v, err := value(props[name])
		if err != nil {
			return mapping.Rejectf(d.Wire, appProp(name), "%v", err)
		}
		if dt, ok := env.TypeOf(name); ok {
			if _, _, err := mapping.SplitDataType(dt); err != nil {
				return mapping.Rejectf(d.Wire, appProp(name), "envelope type %q: %v", dt, err)
			}
			// A recorded type that does not fit the delivered value is
			// stale (an application changed the property and sent the
			// message on): the value is kept as delivered, never refused.
			if rv, err := retype(dt, v); err == nil {
				v = rv
			} else {
				env.Forget(name)
			}
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: name, Value: v})
	}
	return nil
}

func typed(env *mapping.Envelope, name string) bool {
	_, ok := env.TypeOf(name)
	return ok
}

// retype rebuilds a value of recorded data type dt from whatever native
// value the broker delivered (a REST-sent Int32 arrives as a long, say).
func retype(dt string, v mapping.Value) (mapping.Value, error) {
	if v.Kind == mapping.KindBinary && strings.HasPrefix(dt, mapping.BaseBinary) {
		return mapping.ParseBinary(dt, v.Bytes())
	}
	t, err := v.Text()
	if err != nil {
		return mapping.Value{}, err
	}
	return mapping.ParseValue(dt, t)
}

func (d *Dialect) decodeAnnotations(ann amqp.Annotations, m *mapping.Message) error {
	if len(ann) == 0 {
		return nil
	}
	m.Annotations = make([]mapping.Attribute, 0, len(ann))
	for k, x := range ann {
		name, ok := annotationKey(k)
		if !ok {
			return mapping.Rejectf(d.Wire, "message-annotations", "key %v of type %T: only symbol keys are supported", k, k)
		}
		v, err := value(x)
		if err != nil {
			return mapping.Rejectf(d.Wire, annotation(name), "%v", err)
		}
		m.Annotations = append(m.Annotations, mapping.Attribute{Name: name, Value: v})
	}
	sortAttrs(m.Annotations)
	return nil
}

func annotationKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case amqp.Symbol:
		return string(k), true
	}
	return "", false
}

// applyEnvelope applies the carried fields and keeps the model canonical:
// attributes sorted by name, and an annotation carried in the envelope
// (because its native form loses its type) replacing the native one.
func (d *Dialect) applyEnvelope(env *mapping.Envelope, m *mapping.Message) error {
	native := len(m.Annotations)
	if err := env.Apply(m); err != nil {
		return mapping.Rejectf(d.Wire, appProp(mapping.EnvelopeName), "malformed envelope: %v", err)
	}
	b, err := env.DecodeBody(m.Body)
	if err != nil {
		return mapping.Rejectf(d.Wire, "body", "%v", err)
	}
	m.Body = b
	if len(env.Attrs) > 0 {
		sortAttrs(m.Attributes)
	}
	if len(m.Annotations) > native {
		carried := m.Annotations[native:]
		kept := m.Annotations[:0:0]
		for _, a := range m.Annotations[:native] {
			if !slices.ContainsFunc(carried, func(c mapping.Attribute) bool { return c.Name == a.Name }) {
				kept = append(kept, a)
			}
		}
		m.Annotations = append(kept, carried...)
		sortAttrs(m.Annotations)
	}
	return nil
}

func sortAttrs(a []mapping.Attribute) {
	slices.SortStableFunc(a, func(x, y mapping.Attribute) int { return strings.Compare(x.Name, y.Name) })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func appProp(name string) string    { return fmt.Sprintf("application-properties %q", name) }
func annotation(name string) string { return fmt.Sprintf("message-annotations %q", name) }
