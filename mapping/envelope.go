package mapping

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// EnvelopeName is the one attribute (SQS message attribute, AMQP and Service
// Bus application property, NATS header) in which a wire form carries what it
// cannot hold natively. It is present only when something needs carrying; a
// user attribute of this name is refused.
const EnvelopeName = "qbridge.envelope"

// RefusedEnvelopeAttr carries, on the dead-letter copy of a message whose
// carry envelope could not be read, that envelope's text as it came (the
// dead-letter sink writes a carry envelope of its own).
const RefusedEnvelopeAttr = "qbridge-refused-envelope"

// EnvelopeDataType is the SQS data type of the envelope attribute.
const EnvelopeDataType = "String.qbridge-envelope"

// Field names one model field, for saying which fields a wire form holds
// natively (see NewEnvelope).
type Field uint32

const (
	FieldID Field = 1 << iota
	FieldCorrelationID
	FieldContentType
	FieldContentEncoding
	FieldSubject
	FieldTo
	FieldReplyTo
	FieldReplyToGroup
	FieldGroupKey
	FieldGroupSequence
	FieldPartitionKey
	FieldViaPartitionKey
	FieldDedupID
	FieldUserID
	FieldTTL
	FieldScheduledAt
	FieldCreationTime
	FieldAbsoluteExpiry
	FieldDurable
	FieldPriority
	FieldFirstAcquirer
	FieldAnnotations
	FieldBodyType
	// FieldTraceXRay: the wire form holds an X-Ray header (ids, Sampled,
	// extra fields); FieldTraceW3C: a traceparent/tracestate pair. A trace
	// that the form cannot hold entirely is carried entirely.
	FieldTraceXRay
	FieldTraceW3C
	// FieldIDKinds: the form types message-id and correlation-id natively.
	FieldIDKinds
)

// Envelope is the carry envelope: what a wire form cannot hold natively,
// serialized as JSON into the EnvelopeName attribute. Decoders apply it on
// top of what they decoded natively, so the round trip X -> Y -> X is
// lossless for every pair of wire forms.
type Envelope struct {
	V int `json:"v"`
	// Types maps an attribute name to its data type where the wire form
	// cannot say it natively (e.g. Number.float over AMQP, where the value
	// travels as a double).
	Types map[string]string `json:"types,omitempty"`
	// Texts maps an attribute name to its exact text where the wire form
	// holds the value in its natural type and that type's rendering differs
	// (an SQS Number.float "3.50" travels as the double 3.5).
	Texts map[string]string `json:"text,omitempty"`
	// Attrs are attributes moved here under the Encode policy.
	Attrs []Attribute `json:"attrs,omitempty"`
	// BodyEncoding is BodyEncodingBase64 or BodyEncodingEmpty when the body
	// was changed to fit (see DecodeBody).
	BodyEncoding string `json:"body,omitempty"`
	// Fields holds the model fields that the wire form cannot hold.
	Fields *CarriedFields `json:"m,omitempty"`

	// encoded names the Types entries that undo an Encode-policy encoding
	// (SetEncodedType): like Attrs, the message's content, never shed.
	encoded map[string]bool
}

// CarriedFields is the JSON form of the message fields an envelope carries.
type CarriedFields struct {
	ID              string      `json:"id,omitempty"`
	IDKind          string      `json:"idKind,omitempty"`
	CorrelationID   string      `json:"correlationId,omitempty"`
	CorrelationKind string      `json:"correlationKind,omitempty"`
	ContentType     string      `json:"contentType,omitempty"`
	ContentEncoding string      `json:"contentEncoding,omitempty"`
	Subject         string      `json:"subject,omitempty"`
	To              string      `json:"to,omitempty"`
	ReplyTo         string      `json:"replyTo,omitempty"`
	ReplyToGroup    string      `json:"replyToGroup,omitempty"`
	GroupKey        *string     `json:"groupKey,omitempty"`
	GroupSequence   uint32      `json:"groupSequence,omitempty"`
	PartitionKey    string      `json:"partitionKey,omitempty"`
	ViaPartitionKey string      `json:"viaPartitionKey,omitempty"`
	DedupID         string      `json:"dedupId,omitempty"`
	UserID          []byte      `json:"userId,omitempty"`
	TTL             int64       `json:"ttlNanos,omitempty"`
	ScheduledAt     *time.Time  `json:"scheduledAt,omitempty"`
	CreationTime    *time.Time  `json:"creationTime,omitempty"`
	AbsoluteExpiry  *time.Time  `json:"absoluteExpiry,omitempty"`
	Durable         bool        `json:"durable,omitempty"`
	Priority        *uint8      `json:"priority,omitempty"`
	FirstAcquirer   bool        `json:"firstAcquirer,omitempty"`
	Annotations     []Attribute `json:"annotations,omitempty"`
	BodyType        string      `json:"bodyType,omitempty"`
	Trace           *traceJSON  `json:"trace,omitempty"`
	Source          *sourceJSON `json:"source,omitempty"`
}

type traceJSON struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId,omitempty"`
	Flags   byte   `json:"flags,omitempty"`
	State   string `json:"state,omitempty"`
	XS      string `json:"xraySampled,omitempty"`
	XE      string `json:"xrayExtra,omitempty"`
}

type sourceJSON struct {
	Protocol         string     `json:"protocol,omitempty"`
	MessageID        string     `json:"messageId,omitempty"`
	EnqueuedTime     *time.Time `json:"enqueuedTime,omitempty"`
	SequenceNumber   string     `json:"sequenceNumber,omitempty"`
	DeliveryCount    int        `json:"deliveryCount,omitempty"`
	EnqueuedSequence int64      `json:"enqueuedSequence,omitempty"`
	LockedUntil      *time.Time `json:"lockedUntil,omitempty"`
	ExpiresAt        *time.Time `json:"expiresAt,omitempty"`
	State            int        `json:"state,omitempty"`
	PartitionID      *int       `json:"partitionId,omitempty"`
	DeadLetterSource string     `json:"deadLetterSource,omitempty"`
	DeadLetterReason string     `json:"deadLetterReason,omitempty"`
	DeadLetterDesc   string     `json:"deadLetterDescription,omitempty"`
	Address          string     `json:"address,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	c := t // only a set time escapes to the heap
	return &c
}

// NewEnvelope returns an envelope carrying the fields of m that are not in
// native. The codec adds Types, Attrs and BodyEncoding as it encodes, then
// writes the envelope if it is not Empty.
func NewEnvelope(m *Message, native Field, opt *Options) *Envelope {
	c := carriedFields(m, native, opt)
	e := &Envelope{V: 1}
	if !c.isZero() {
		// A copy, so that c stays on the stack when nothing is carried
		// (the common case: one allocation of ~370 bytes per message less).
		e.Fields = new(CarriedFields)
		*e.Fields = c
	}
	return e
}

// NewEnvelopeIfAny is NewEnvelope for an encoder with nothing of its own to
// add (no attribute types, no body encoding): nil when m carries nothing,
// so a plain message costs no allocation for it. The read and shed methods
// of Envelope take nil as empty.
func NewEnvelopeIfAny(m *Message, native Field, opt *Options) *Envelope {
	c := carriedFields(m, native, opt)
	if c.isZero() {
		return nil
	}
	f := new(CarriedFields)
	*f = c
	return &Envelope{V: 1, Fields: f}
}

// carriedFields are the fields of m that are not in native.
func carriedFields(m *Message, native Field, opt *Options) CarriedFields {
	c := CarriedFields{}
	has := func(f Field) bool { return native&f != 0 }
	// An id the source broker assigned (SQS MessageId) is a read-only fact,
	// not a property of the message: only CarrySource keeps it.
	if !has(FieldID) && (m.ID != m.Source.MessageID || m.ID == "") {
		c.ID = m.ID
	}
	if !has(FieldIDKinds) {
		c.IDKind = kindName(m.IDKind)
		c.CorrelationKind = kindName(m.CorrelationKind)
	}
	if !has(FieldCorrelationID) {
		c.CorrelationID = m.CorrelationID
	}
	if !has(FieldContentType) {
		c.ContentType = m.ContentType
	}
	if !has(FieldContentEncoding) {
		c.ContentEncoding = m.ContentEncoding
	}
	if !has(FieldSubject) {
		c.Subject = m.Subject
	}
	if !has(FieldTo) {
		c.To = m.To
	}
	if !has(FieldReplyTo) {
		c.ReplyTo = m.ReplyTo
	}
	if !has(FieldReplyToGroup) {
		c.ReplyToGroup = m.ReplyToGroup
	}
	if !has(FieldGroupKey) && m.GroupKey != "" {
		g := m.GroupKey
		c.GroupKey = &g
	}
	if !has(FieldGroupSequence) {
		c.GroupSequence = m.GroupSequence
	}
	if !has(FieldPartitionKey) {
		c.PartitionKey = m.PartitionKey
	}
	if !has(FieldViaPartitionKey) {
		c.ViaPartitionKey = m.ViaPartitionKey
	}
	if !has(FieldDedupID) {
		c.DedupID = m.DedupID
	}
	if !has(FieldUserID) {
		c.UserID = m.UserID
	}
	if !has(FieldTTL) {
		c.TTL = int64(m.TTL)
	}
	if !has(FieldScheduledAt) {
		c.ScheduledAt = timePtr(m.ScheduledAt)
	}
	if !has(FieldCreationTime) {
		c.CreationTime = timePtr(m.CreationTime)
	}
	if !has(FieldAbsoluteExpiry) {
		c.AbsoluteExpiry = timePtr(m.AbsoluteExpiry)
	}
	if !has(FieldDurable) {
		c.Durable = m.Durable
	}
	if !has(FieldPriority) {
		c.Priority = m.Priority
	}
	if !has(FieldFirstAcquirer) {
		c.FirstAcquirer = m.FirstAcquirer
	}
	if !has(FieldAnnotations) {
		c.Annotations = m.Annotations
	}
	if !has(FieldBodyType) && m.BodyType != BodyData {
		c.BodyType = m.BodyType.String()
	}
	if !m.Trace.IsZero() && !traceFits(m.Trace, native) {
		c.Trace = &traceJSON{
			TraceID: hex.EncodeToString(m.Trace.TraceID[:]),
			Flags:   m.Trace.Flags,
			State:   m.Trace.State,
			XE:      m.Trace.XRayExtra,
		}
		if m.Trace.SpanID != [8]byte{} {
			c.Trace.SpanID = hex.EncodeToString(m.Trace.SpanID[:])
		}
		if m.Trace.XRaySampled != 0 {
			c.Trace.XS = string(m.Trace.XRaySampled)
		}
	}
	if opt != nil && opt.CarrySource {
		s := m.Source
		c.Source = &sourceJSON{
			Protocol: s.Protocol, MessageID: s.MessageID, EnqueuedTime: timePtr(s.EnqueuedTime),
			SequenceNumber: s.SequenceNumber, DeliveryCount: s.DeliveryCount,
			EnqueuedSequence: s.EnqueuedSequence, LockedUntil: timePtr(s.LockedUntil),
			ExpiresAt: timePtr(s.ExpiresAt), State: s.State,
			DeadLetterSource: s.DeadLetterSource, DeadLetterReason: s.DeadLetterReason,
			DeadLetterDesc: s.DeadLetterDesc, Address: s.Address,
		}
		if s.PartitionID >= 0 && s.Protocol == "servicebus" {
			p := s.PartitionID
			c.Source.PartitionID = &p
		}
	}
	return c
}

// isZero reports whether c carries nothing. Written out field by field
// (reflection cost a tenth of an encode); TestCarriedFieldsIsZero checks it
// against reflect for every field.
func (c *CarriedFields) isZero() bool {
	return c.ID == "" && c.IDKind == "" && c.CorrelationID == "" && c.CorrelationKind == "" &&
		c.ContentType == "" && c.ContentEncoding == "" && c.Subject == "" && c.To == "" &&
		c.ReplyTo == "" && c.ReplyToGroup == "" && c.GroupKey == nil && c.GroupSequence == 0 &&
		c.PartitionKey == "" && c.ViaPartitionKey == "" && c.DedupID == "" && c.UserID == nil &&
		c.TTL == 0 && c.ScheduledAt == nil && c.CreationTime == nil && c.AbsoluteExpiry == nil &&
		!c.Durable && c.Priority == nil && !c.FirstAcquirer && c.Annotations == nil &&
		c.BodyType == "" && c.Trace == nil && c.Source == nil
}

func kindName(k Kind) string {
	if k == KindInvalid || k == KindString {
		return ""
	}
	return k.String()
}

// traceFits reports whether the wire form can hold t entirely.
func traceFits(t Trace, native Field) bool {
	if native&FieldTraceW3C != 0 {
		return t.SpanID != [8]byte{} && t.XRaySampled == 0 && t.XRayExtra == ""
	}
	if native&FieldTraceXRay != 0 {
		return t.Flags&^1 == 0 && t.State == ""
	}
	return false
}

// Empty reports whether the envelope carries nothing.
func (e *Envelope) Empty() bool {
	return e == nil || len(e.Types) == 0 && len(e.Texts) == 0 && len(e.Attrs) == 0 && e.BodyEncoding == "" && e.Fields == nil
}

// SetText records the exact text of attribute name, whose value travels in
// a natural type that renders differently.
func (e *Envelope) SetText(name, text string) {
	if e.Texts == nil {
		e.Texts = make(map[string]string)
	}
	e.Texts[name] = text
}

// Forget removes what the envelope records about attribute name (its type
// and exact text): for an attribute an encoder left out after all.
func (e *Envelope) Forget(name string) {
	e.DeleteType(name)
	delete(e.Texts, name)
}

// SetType records that attribute name has data type dt.
func (e *Envelope) SetType(name, dt string) {
	if e.Types == nil {
		e.Types = make(map[string]string)
	}
	e.Types[name] = dt
}

// SetEncodedType records the data type of attribute name whose value the
// Encode policy sent in another wire type (an SQS String that is not valid
// XML text as Binary): without the record the encoding cannot be undone,
// so it is never shed (Essential).
func (e *Envelope) SetEncodedType(name, dt string) {
	e.SetType(name, dt)
	if e.encoded == nil {
		e.encoded = make(map[string]bool)
	}
	e.encoded[name] = true
}

// DeleteType removes attribute name's type record.
func (e *Envelope) DeleteType(name string) {
	delete(e.Types, name)
	delete(e.encoded, name)
}

// Marshal renders the envelope as compact JSON. JSON would replace invalid
// UTF-8 with U+FFFD, silently; such a message is refused instead.
func (e *Envelope) Marshal() (string, error) {
	if path := e.invalidUTF8(); path != "" {
		return "", fmt.Errorf("carry envelope: %s is not valid UTF-8", path)
	}
	var buf [256]byte
	if b, ok := appendEnvelopeFast(buf[:0], e); ok {
		return string(b), nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("carry envelope: %w", err)
	}
	return string(b), nil
}

// invalidUTF8 names the first string of the envelope that is not valid
// UTF-8, or returns "". Written out field by field: it runs on every
// encode that carries something.
func (e *Envelope) invalidUTF8() string {
	for name, dt := range e.Types {
		if !utf8.ValidString(name) || !utf8.ValidString(dt) {
			return "types[" + name + "]"
		}
	}
	for name, t := range e.Texts {
		if !utf8.ValidString(name) || !utf8.ValidString(t) {
			return "text[" + name + "]"
		}
	}
	if p := invalidAttrs("attrs", e.Attrs); p != "" {
		return p
	}
	c := e.Fields
	if c == nil {
		return ""
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", c.ID}, {"correlationId", c.CorrelationID}, {"contentType", c.ContentType},
		{"contentEncoding", c.ContentEncoding}, {"subject", c.Subject}, {"to", c.To},
		{"replyTo", c.ReplyTo}, {"replyToGroup", c.ReplyToGroup}, {"partitionKey", c.PartitionKey},
		{"viaPartitionKey", c.ViaPartitionKey}, {"dedupId", c.DedupID},
	} {
		if !utf8.ValidString(f.v) {
			return f.name
		}
	}
	if c.GroupKey != nil && !utf8.ValidString(*c.GroupKey) {
		return "groupKey"
	}
	if t := c.Trace; t != nil && (!utf8.ValidString(t.State) || !utf8.ValidString(t.XE)) {
		return "trace"
	}
	if s := c.Source; s != nil {
		for _, v := range [...]string{s.MessageID, s.SequenceNumber, s.DeadLetterSource, s.DeadLetterReason, s.DeadLetterDesc, s.Address} {
			if !utf8.ValidString(v) {
				return "source"
			}
		}
	}
	return invalidAttrs("annotations", c.Annotations)
}

func invalidAttrs(field string, attrs []Attribute) string {
	for i, a := range attrs {
		if !utf8.ValidString(a.Name) || !a.Value.ValidUTF8() {
			return fmt.Sprintf("%s[%d] %q", field, i, a.Name)
		}
	}
	return ""
}

// ValidUTF8 reports whether every string of v (its label, text, strings and
// those of its elements) is valid UTF-8; binary payloads are base64 in JSON
// and always fine.
func (v Value) ValidUTF8() bool {
	if !utf8.ValidString(v.Label) || !utf8.ValidString(v.s) {
		return false
	}
	for _, s := range v.ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, e := range v.vs {
		if !e.ValidUTF8() {
			return false
		}
	}
	return true
}

// ParseEnvelope parses the JSON of an envelope attribute. Its errors do not
// repeat the attribute's name: the codecs' refusals carry it as the field.
func ParseEnvelope(s string) (*Envelope, error) {
	var e Envelope
	if !parseEnvelopeFast(s, &e) {
		e = Envelope{}
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("not an envelope's JSON: %w", err)
		}
	}
	if e.V != 1 {
		return nil, fmt.Errorf("unsupported envelope version %d", e.V)
	}
	return &e, nil
}

// Apply writes the carried fields and attributes into m, over what the codec
// decoded natively. Types are not applied here: the codec uses them while
// decoding attribute values (see TypeOf).
func (e *Envelope) Apply(m *Message) error {
	if err := e.applyTexts(m); err != nil {
		return err
	}
	if len(e.Attrs) > 0 {
		// Appended, not merged: a message may carry two attributes of one
		// name (SQS refuses the second, so it rode here).
		m.Attributes = append(m.Attributes, e.Attrs...)
		sortAttributes(m.Attributes)
	}
	c := e.Fields
	if c == nil {
		return nil
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&m.ID, c.ID)
	set(&m.CorrelationID, c.CorrelationID)
	for _, k := range []struct {
		dst  *Kind
		name string
	}{{&m.IDKind, c.IDKind}, {&m.CorrelationKind, c.CorrelationKind}} {
		if k.name != "" {
			kind, ok := KindByName(k.name)
			if !ok {
				return fmt.Errorf("%s: unknown id kind %q", EnvelopeName, k.name)
			}
			*k.dst = kind
		}
	}
	set(&m.ContentType, c.ContentType)
	set(&m.ContentEncoding, c.ContentEncoding)
	set(&m.Subject, c.Subject)
	set(&m.To, c.To)
	set(&m.ReplyTo, c.ReplyTo)
	set(&m.ReplyToGroup, c.ReplyToGroup)
	if c.GroupKey != nil {
		m.GroupKey = *c.GroupKey
	}
	if c.GroupSequence != 0 {
		m.GroupSequence = c.GroupSequence
	}
	set(&m.PartitionKey, c.PartitionKey)
	set(&m.ViaPartitionKey, c.ViaPartitionKey)
	set(&m.DedupID, c.DedupID)
	if c.UserID != nil {
		m.UserID = c.UserID
	}
	if c.TTL != 0 {
		m.TTL = time.Duration(c.TTL)
	}
	for _, t := range []struct {
		dst *time.Time
		v   *time.Time
	}{{&m.ScheduledAt, c.ScheduledAt}, {&m.CreationTime, c.CreationTime}, {&m.AbsoluteExpiry, c.AbsoluteExpiry}} {
		if t.v != nil {
			*t.dst = t.v.UTC()
		}
	}
	m.Durable = m.Durable || c.Durable
	if c.Priority != nil {
		m.Priority = c.Priority
	}
	m.FirstAcquirer = m.FirstAcquirer || c.FirstAcquirer
	for _, a := range c.Annotations {
		setAttr(&m.Annotations, a)
	}
	if c.BodyType != "" {
		bt, ok := BodyTypeByName(c.BodyType)
		if !ok {
			return fmt.Errorf("%s: unknown body type %q", EnvelopeName, c.BodyType)
		}
		m.BodyType = bt
	}
	if c.Trace != nil {
		var t Trace
		if err := decodeLowerHex(t.TraceID[:], c.Trace.TraceID); err != nil {
			return fmt.Errorf("%s: trace id: %w", EnvelopeName, err)
		}
		if c.Trace.SpanID != "" {
			if err := decodeLowerHex(t.SpanID[:], c.Trace.SpanID); err != nil {
				return fmt.Errorf("%s: span id: %w", EnvelopeName, err)
			}
		}
		t.Flags, t.State, t.XRayExtra = c.Trace.Flags, c.Trace.State, c.Trace.XE
		if len(c.Trace.XS) == 1 {
			t.XRaySampled = c.Trace.XS[0]
		}
		m.Trace = t
	}
	if s := c.Source; s != nil {
		src := &m.Source
		if src.Protocol == "" || s.Protocol != "" {
			// The carried facts describe the original source; keep them.
			set(&src.Protocol, s.Protocol)
			set(&src.MessageID, s.MessageID)
			if s.EnqueuedTime != nil {
				src.EnqueuedTime = s.EnqueuedTime.UTC()
			}
			set(&src.SequenceNumber, s.SequenceNumber)
			if s.DeliveryCount != 0 {
				src.DeliveryCount = s.DeliveryCount
			}
			if s.EnqueuedSequence != 0 {
				src.EnqueuedSequence = s.EnqueuedSequence
			}
			if s.LockedUntil != nil {
				src.LockedUntil = s.LockedUntil.UTC()
			}
			if s.ExpiresAt != nil {
				src.ExpiresAt = s.ExpiresAt.UTC()
			}
			if s.State != 0 {
				src.State = s.State
			}
			if s.PartitionID != nil {
				src.PartitionID = *s.PartitionID
			}
			set(&src.DeadLetterSource, s.DeadLetterSource)
			set(&src.DeadLetterReason, s.DeadLetterReason)
			set(&src.DeadLetterDesc, s.DeadLetterDesc)
			set(&src.Address, s.Address)
		}
	}
	return nil
}

// applyTexts puts back the exact text of attributes that travelled in their
// natural type: the value is rebuilt from its data type and the text.
func (e *Envelope) applyTexts(m *Message) error {
	for name, text := range e.Texts {
		for i := range m.Attributes {
			a := &m.Attributes[i]
			if a.Name != name {
				continue
			}
			// A text that does not fit the value's type is stale (the
			// value was changed after the envelope was written): the
			// value is kept as delivered.
			if v, err := ParseValue(a.Value.DataType(), text); err == nil && sameNatural(v, a.Value) {
				a.Value = v
			}
			break
		}
	}
	return nil
}

// sameNatural reports whether exact, the value rebuilt from its exact text,
// is what got was sent as: a text is applied only to the value it belongs
// to, not to one an application changed on the way.
func sameNatural(exact, got Value) bool {
	n, _ := NaturalNumber(exact)
	t1, err1 := n.Text()
	t2, err2 := got.Text()
	return err1 == nil && err2 == nil && t1 == t2
}

// TypeOf returns the data type the envelope records for an attribute.
func (e *Envelope) TypeOf(name string) (string, bool) {
	if e == nil {
		return "", false
	}
	dt, ok := e.Types[name]
	return dt, ok
}

// The body encodings an envelope records (Envelope.BodyEncoding). Every
// decoder knows both, whichever encoder wrote them.
const (
	// BodyEncodingBase64: the body was base64-encoded for a target whose
	// body must be text.
	BodyEncodingBase64 = "base64"
	// BodyEncodingEmpty: the body was empty and a placeholder was sent for a
	// target that requires a body (SQS).
	BodyEncodingEmpty = "empty"
)

// EncodeBodyBase64 is the body convention of the Encode policy for targets
// whose body must be text; DecodeBody undoes it.
func EncodeBodyBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// DecodeBody returns the body as it was before the encoding e records:
// body itself when none (or e is nil), its base64 decoding, or an empty
// body for the placeholder. A decoder wraps the error in its RejectError
// on the field "body".
func (e *Envelope) DecodeBody(body []byte) ([]byte, error) {
	if e == nil {
		return body, nil
	}
	switch e.BodyEncoding {
	case "":
		return body, nil
	case BodyEncodingBase64:
		b, err := base64.StdEncoding.DecodeString(string(body))
		if err != nil {
			return nil, fmt.Errorf("%s: body marked base64 is not base64: %w", EnvelopeName, err)
		}
		return b, nil
	case BodyEncodingEmpty:
		return nil, nil
	}
	return nil, fmt.Errorf("%s: unknown body encoding %q: want %q or %q", EnvelopeName, e.BodyEncoding, BodyEncodingBase64, BodyEncodingEmpty)
}
