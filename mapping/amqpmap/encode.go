package amqpmap

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// MaxTTL is the longest TTL the AMQP header can say: a uint of milliseconds
// (go-amqp silently wraps anything longer).
const MaxTTL = time.Duration(math.MaxUint32) * time.Millisecond

// Encode maps a model message onto an AMQP message: every field the dialect
// holds natively in its AMQP section, the rest in the carry envelope.
func (d *Dialect) Encode(m *mapping.Message, opt mapping.Options) (*amqp.Message, error) {
	msg, shed, err := d.EncodeShed(m, opt)
	if err == nil {
		opt.Shed(shed)
	}
	return msg, err
}

// EncodeShed is Encode without reporting what the envelope shed: it returns
// it, for a caller that checks further limits first (package sbmap).
func (d *Dialect) EncodeShed(m *mapping.Message, opt mapping.Options) (*amqp.Message, []string, error) {
	if m == nil {
		return nil, nil, mapping.Rejectf(d.Wire, "", "nil message")
	}
	opt = opt.Effective()
	held := opt.Hold() // the size check may still refuse the message
	wire, carry := m, mapping.Field(0)
	if d.Prepare != nil {
		var err error
		if wire, carry, err = d.Prepare(m, &opt); err != nil {
			return nil, nil, err
		}
	}
	native := d.Native &^ carry
	msg := &amqp.Message{}

	ttl, carryTTL, err := d.headerTTL(wire.TTL, &opt)
	if err != nil {
		return nil, nil, err
	}
	if carryTTL {
		native &^= mapping.FieldTTL // the exact TTL rides in the envelope
	}
	if err := d.encodeHeader(wire, ttl, msg); err != nil {
		return nil, nil, err
	}
	if err := d.encodeProperties(wire, msg, &native); err != nil {
		return nil, nil, err
	}
	if d.traceCollides(wire) {
		native &^= mapping.FieldTraceW3C // a user attribute holds the trace property name
	}

	env := mapping.NewEnvelope(m, native, &opt)
	if err := d.encodeAppProperties(wire, env, msg, &opt); err != nil {
		return nil, nil, err
	}
	if err := d.encodeAnnotations(wire, env, msg, &opt); err != nil {
		return nil, nil, err
	}
	if d.encodeBody(wire, msg) {
		carried(env).BodyType = wire.BodyType.String()
	}
	if d.Encoded != nil {
		if err := d.Encoded(wire, msg); err != nil {
			return nil, nil, err
		}
	}
	var shed []string
	if opt.Envelope == mapping.EnvelopeOff {
		shed = env.ShedAll(shed)
	}
	for {
		if err := d.writeEnvelope(env, msg); err != nil {
			return nil, nil, err
		}
		// The envelope gives way, member by member, before the message
		// goes over a limit; the message's own content is the policy's.
		if !d.over(msg, &opt) {
			break
		}
		name := env.ShedNext()
		if name == "" {
			break
		}
		shed = append(shed, name)
	}
	if opt.MaxMessageSize > 0 {
		if n := MessageSize(msg).Total; n > opt.MaxMessageSize {
			return nil, nil, mapping.TooLargef(d.Wire, "message", "encoded size %d bytes exceeds the limit of %d", n, opt.MaxMessageSize)
		}
	}
	held.Flush()
	return msg, shed, nil
}

// writeEnvelope puts env into its application property, or removes the
// property when env carries nothing.
func (d *Dialect) writeEnvelope(env *mapping.Envelope, msg *amqp.Message) error {
	if env.Empty() {
		delete(msg.ApplicationProperties, mapping.EnvelopeName)
		return nil
	}
	s, err := env.Marshal()
	if err != nil {
		return mapping.Rejectf(d.Wire, appProp(mapping.EnvelopeName), "%v", err)
	}
	if msg.ApplicationProperties == nil {
		msg.ApplicationProperties = make(map[string]any, 1)
	}
	msg.ApplicationProperties[mapping.EnvelopeName] = s
	return nil
}

// over reports whether msg exceeds a limit of the dialect (Over) or the
// size limit.
func (d *Dialect) over(msg *amqp.Message, opt *mapping.Options) bool {
	if d.Over != nil && d.Over(msg, opt) {
		return true
	}
	return opt.MaxMessageSize > 0 && MessageSize(msg).Total > opt.MaxMessageSize
}

func carried(env *mapping.Envelope) *mapping.CarriedFields {
	if env.Fields == nil {
		env.Fields = &mapping.CarriedFields{}
	}
	return env.Fields
}

// headerTTL returns the TTL to write in the header and whether the envelope
// must carry the exact one. The header holds whole milliseconds (rounded up,
// so that a message never expires early; the exact TTL is carried) up to
// MaxTTL. Above MaxTTL the policy applies: Reject; Drop leaves the TTL out;
// Encode writes MaxTTL and carries the exact TTL.
func (d *Dialect) headerTTL(ttl time.Duration, opt *mapping.Options) (time.Duration, bool, error) {
	switch {
	case ttl < 0:
		return 0, false, mapping.Rejectf(d.Wire, "header.ttl", "negative TTL %v", ttl)
	case ttl > MaxTTL:
		reason := "TTL " + ttl.String() + " exceeds the AMQP maximum of 4294967295 ms (about 49.7 days)"
		carry, err := opt.Refuse(d.Wire, "header.ttl", reason, true)
		if err != nil || !carry {
			return 0, false, err
		}
		return MaxTTL, true, nil
	}
	if r := ttl % time.Millisecond; r != 0 {
		return ttl + time.Millisecond - r, true, nil
	}
	return ttl, false, nil
}

func (d *Dialect) encodeHeader(m *mapping.Message, ttl time.Duration, msg *amqp.Message) error {
	h := amqp.MessageHeader{Priority: 4}
	if d.Native&mapping.FieldDurable != 0 {
		h.Durable = m.Durable
	}
	if d.Native&mapping.FieldPriority != 0 && m.Priority != nil {
		h.Priority = *m.Priority
	}
	if d.Native&mapping.FieldTTL != 0 {
		h.TTL = ttl
	}
	if d.Native&mapping.FieldFirstAcquirer != 0 {
		h.FirstAcquirer = m.FirstAcquirer
	}
	if h != (amqp.MessageHeader{Priority: 4}) {
		msg.Header = &h
	}
	return nil
}

func (d *Dialect) encodeProperties(m *mapping.Message, msg *amqp.Message, native *mapping.Field) error {
	var p amqp.MessageProperties
	set := false
	typedIDs := d.Native&mapping.FieldIDKinds != 0
	if d.Native&mapping.FieldID != 0 && m.ID != "" {
		id, err := d.encodeID(m.ID, m.IDKind, typedIDs, "properties.message-id")
		if err != nil {
			return err
		}
		p.MessageID, set = id, true
	}
	if d.Native&mapping.FieldCorrelationID != 0 && m.CorrelationID != "" {
		id, err := d.encodeID(m.CorrelationID, m.CorrelationKind, typedIDs, "properties.correlation-id")
		if err != nil {
			return err
		}
		p.CorrelationID, set = id, true
	}
	if d.Native&mapping.FieldUserID != 0 && len(m.UserID) > 0 {
		p.UserID, set = m.UserID, true
	}
	// One allocation holds every string field the properties point to.
	strs := new([7]string)
	for i, s := range [...]struct {
		f    mapping.Field
		v    string
		name string
		dst  **string
	}{
		{mapping.FieldTo, m.To, "to", &p.To},
		{mapping.FieldSubject, m.Subject, "subject", &p.Subject},
		{mapping.FieldReplyTo, m.ReplyTo, "reply-to", &p.ReplyTo},
		{mapping.FieldContentType, m.ContentType, "content-type", &p.ContentType},
		{mapping.FieldContentEncoding, m.ContentEncoding, "content-encoding", &p.ContentEncoding},
		{mapping.FieldGroupKey, m.GroupKey, "group-id", &p.GroupID},
		{mapping.FieldReplyToGroup, m.ReplyToGroup, "reply-to-group-id", &p.ReplyToGroupID},
	} {
		if d.Native&s.f == 0 || s.v == "" {
			continue
		}
		if !utf8.ValidString(s.v) {
			return mapping.Rejectf(d.Wire, "properties."+s.name, "not valid UTF-8")
		}
		strs[i] = s.v
		*s.dst, set = &strs[i], true
	}
	// Timestamps hold milliseconds; a finer instant rides in the envelope too.
	times := new([2]time.Time)
	for i, s := range [...]struct {
		f   mapping.Field
		t   time.Time
		dst **time.Time
	}{
		{mapping.FieldAbsoluteExpiry, m.AbsoluteExpiry, &p.AbsoluteExpiryTime},
		{mapping.FieldCreationTime, m.CreationTime, &p.CreationTime},
	} {
		if d.Native&s.f == 0 || s.t.IsZero() {
			continue
		}
		times[i] = s.t.UTC()
		if s.t.Nanosecond()%int(time.Millisecond) != 0 {
			*native &^= s.f
		}
		*s.dst, set = &times[i], true
	}
	if d.Native&mapping.FieldGroupSequence != 0 && m.GroupSequence != 0 {
		gs := m.GroupSequence
		p.GroupSequence, set = &gs, true
	}
	if set {
		msg.Properties = &p
	}
	return nil
}

// encodeID writes a message-id or correlation-id as its AMQP type (typed) or
// as a string.
func (d *Dialect) encodeID(id string, kind mapping.Kind, typed bool, field string) (any, error) {
	if !typed {
		kind = mapping.KindString
	}
	switch kind {
	case mapping.KindInvalid, mapping.KindString:
		if !utf8.ValidString(id) {
			return nil, mapping.Rejectf(d.Wire, field, "not valid UTF-8")
		}
		return id, nil
	case mapping.KindUint64:
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, field, "ulong id %q: %v", id, err)
		}
		return n, nil
	case mapping.KindUUID:
		u, err := mapping.ParseUUID(id)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, field, "%v", err)
		}
		return amqp.UUID(u), nil
	case mapping.KindBinary:
		b, err := base64.StdEncoding.DecodeString(id)
		if err != nil {
			return nil, mapping.Rejectf(d.Wire, field, "binary id is not base64: %v", err)
		}
		return b, nil
	}
	return nil, mapping.Rejectf(d.Wire, field, "id kind %s: want string, ulong, uuid or binary", kind)
}

// traceCollides reports whether the trace cannot take its properties because
// user attributes have those names.
func (d *Dialect) traceCollides(m *mapping.Message) bool {
	if m.Trace.IsZero() {
		return false
	}
	for _, a := range m.Attributes {
		if a.Name == d.TraceProperty || a.Name == TraceStateProperty {
			return true
		}
	}
	return false
}

func (d *Dialect) encodeAppProperties(m *mapping.Message, env *mapping.Envelope, msg *amqp.Message, opt *mapping.Options) error {
	props := make(map[string]any, len(m.Attributes)+3)
	enc := d.encoder()
	for _, a := range m.Attributes {
		var reason string
		canCarry := true
		_, dup := props[a.Name]
		switch {
		case a.Name == mapping.EnvelopeName:
			reason = "the name is reserved for the carry envelope"
		case dup:
			reason = "duplicate name"
		case !utf8.ValidString(a.Name):
			reason, canCarry = "name is not valid UTF-8", false
		}
		var n any
		var f fidelity
		if reason == "" {
			var err error
			if n, f, err = enc.native(a.Value, inProperty); err != nil {
				reason, canCarry = err.Error(), !errors.Is(err, errInvalidUTF8)
			}
		}
		if reason != "" {
			carry, err := opt.Refuse(d.Wire, appProp(a.Name), reason, canCarry)
			if err != nil {
				return err
			}
			if carry {
				env.Attrs = append(env.Attrs, a)
			}
			continue
		}
		if f != exact || d.reserved(a.Name) {
			env.SetType(a.Name, a.Value.DataType())
		}
		if a.Value.Kind == mapping.KindNumber {
			if _, same := mapping.NaturalNumber(a.Value); !same {
				env.SetText(a.Name, a.Value.Str())
			}
		}
		props[a.Name] = n
	}
	if !d.traceCollides(m) {
		if tp := m.Trace.Traceparent(); tp != "" && d.TraceProperty != "" {
			props[d.TraceProperty] = tp
			if m.Trace.State != "" {
				props[TraceStateProperty] = m.Trace.State
			}
		}
	}
	if len(props) > 0 {
		msg.ApplicationProperties = props
	}
	return nil
}

// encodeAnnotations writes the message annotations. One whose native form
// does not decode back to the same value (a symbol, a kind go-amqp cannot
// encode, a labelled value) is written as well as it can be and also
// carried exactly in the envelope; the decoder prefers the carried one.
func (d *Dialect) encodeAnnotations(m *mapping.Message, env *mapping.Envelope, msg *amqp.Message, opt *mapping.Options) error {
	if d.Native&mapping.FieldAnnotations == 0 || len(m.Annotations) == 0 {
		return nil
	}
	ann := make(amqp.Annotations, len(m.Annotations))
	enc := d.encoder()
	for _, a := range m.Annotations {
		field := func() string { return annotation(a.Name) }
		if _, dup := ann[a.Name]; dup {
			// Not carried: a carried annotation replaces the native one.
			if _, err := opt.Refuse(d.Wire, field(), "duplicate name", false); err != nil {
				return err
			}
			continue
		}
		if !utf8.ValidString(a.Name) {
			return mapping.Rejectf(d.Wire, field(), "name is not valid UTF-8")
		}
		n, f, err := enc.native(a.Value, inAnnotation)
		switch {
		case errors.Is(err, errNotNative):
			n, f, err = enc.text(a.Value)
			if err != nil {
				return mapping.Rejectf(d.Wire, field(), "%v", err)
			}
		case err != nil:
			return mapping.Rejectf(d.Wire, field(), "%v", err)
		}
		ann[a.Name] = n
		if f != exact {
			carried(env).Annotations = append(carried(env).Annotations, a)
		}
	}
	msg.Annotations = ann
	return nil
}
