package sbrest

import (
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/qbridge/qbridge/mapping"
)

// Wire is the wire name in RejectErrors.
const Wire = "servicebus-https"

const (
	// BatchContentType is the Content-Type of a batch send.
	BatchContentType = "application/vnd.microsoft.servicebus.json"
	// DefaultMaxMessageSize is the Standard tier's limit (Premium takes 1 MB
	// over HTTPS: set Options.MaxMessageSize).
	DefaultMaxMessageSize = 262144
	// MaxPropertySize and MaxHeaderSize are Service Bus's limits on one
	// property and on all properties (system and user) together.
	MaxPropertySize = 32 * 1024
	MaxHeaderSize   = 64 * 1024
	// MaxIDLength bounds MessageId, SessionId, PartitionKey and ReplyToSessionId.
	MaxIDLength = 128
)

// Request is a single-message send: set Header on the POST to
// {entity}/messages and send Body as it is.
type Request struct {
	Header http.Header
	Body   []byte
}

// form is where the properties go: HTTP headers (single send or receive) or
// a batch element's JSON.
type form uint8

const (
	formHeader form = iota
	formBatch
)

// prop is one custom property as written.
type prop struct {
	name string
	v    wireValue
	user bool // a user attribute (the ones Drop may leave out for size)
}

func (p prop) size() int { return len(p.name) + p.v.size() }

// encoded is a message laid out for the wire, before rendering.
type encoded struct {
	bp          brokerOut
	contentType string // the Content-Type header (header form)
	props       []prop // sorted by name
	body        []byte
	bodyText    string // batch form
	bpJSON      []byte // the rendered BrokerProperties
	headerBytes int
}

// Encode lays m out as a single-message send.
func Encode(m *mapping.Message, opt mapping.Options) (*Request, error) {
	held := opt.Hold()
	e, err := encodeMessage(m, &opt, formHeader)
	if err != nil {
		return nil, err
	}
	held.Flush()
	// One backing array for the values and one string for the quoted
	// texts: a header map costs a few allocations, not one per property.
	h := make(http.Header, len(e.props)+2)
	vals := make([]string, 0, len(e.props)+2)
	add := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if e.contentType != "" {
		add(hdrContentType, e.contentType)
	}
	n := len(e.bpJSON)
	for _, p := range e.props {
		n += p.v.size()
	}
	buf := make([]byte, 0, n)
	buf = append(buf, e.bpJSON...)
	ends := make([]int, len(e.props))
	for i, p := range e.props {
		if p.v.quoted {
			buf = append(buf, '"')
			buf = append(buf, p.v.text...)
			buf = append(buf, '"')
		} else {
			buf = append(buf, p.v.text...)
		}
		ends[i] = len(buf)
	}
	all := string(buf)
	if len(e.bpJSON) > 2 { // not "{}"
		add(hdrBrokerProps, all[:len(e.bpJSON)])
	}
	start := len(e.bpJSON)
	for i, p := range e.props {
		// Custom property names are written as given (not canonicalized):
		// they are the application property names AMQP receivers see.
		add(p.name, all[start:ends[i]])
		start = ends[i]
	}
	return &Request{Header: h, Body: e.body}, nil
}

// encodeMessage applies every rule of the wire form; f says whether the
// properties become headers or batch JSON. A batch element's size is the
// caller's to check: its callers hold the policy's reports until the
// message is known to fit (mapping.HeldReports).
func encodeMessage(m *mapping.Message, opt *mapping.Options, f form) (*encoded, error) {
	eff := opt.Effective()
	opt = &eff
	if err := checkText(m); err != nil {
		return nil, err
	}
	e := &encoded{}
	mm := *m // dropped fields are cleared here, so the envelope does not carry them
	native := mapping.FieldCorrelationID | mapping.FieldSubject | mapping.FieldTo |
		mapping.FieldReplyTo | mapping.FieldReplyToGroup | mapping.FieldGroupKey | mapping.FieldPartitionKey

	// MessageId is the dedup key; the message id travels in the envelope
	// when they differ, the dedup id always (Service Bus has no separate one).
	if m.DedupID == "" {
		native |= mapping.FieldID
	}
	idNative := true
	if id := m.DedupKey(); len(id) > MaxIDLength {
		carry, err := opt.Refuse(Wire, "MessageId", fmt.Sprintf("%d bytes, more than %d", len(id), MaxIDLength), true)
		if err != nil {
			return nil, err
		}
		idNative = false
		if carry {
			native &^= mapping.FieldID
		} else {
			mm.ID, mm.DedupID = "", ""
		}
	}
	for _, l := range []struct {
		field string
		v     *string
		bit   mapping.Field
	}{
		{"SessionId", &mm.GroupKey, mapping.FieldGroupKey},
		{"PartitionKey", &mm.PartitionKey, mapping.FieldPartitionKey},
		{"ReplyToSessionId", &mm.ReplyToGroup, mapping.FieldReplyToGroup},
	} {
		if len(*l.v) <= MaxIDLength {
			continue
		}
		carry, err := opt.Refuse(Wire, l.field, fmt.Sprintf("%d bytes, more than %d", len(*l.v), MaxIDLength), true)
		if err != nil {
			return nil, err
		}
		if carry {
			native &^= l.bit
		} else {
			*l.v = ""
		}
	}
	has := func(b mapping.Field) bool { return native&b != 0 }
	if idNative {
		e.bp.MessageID = mm.DedupKey()
		if e.bp.MessageID == "" {
			// No id of its own: one from the source's name for it, as
			// sbmap does (duplicate detection and resumes).
			e.bp.MessageID = mapping.IDFromSourceKey(mm.SourceKey())
		}
	}
	if has(mapping.FieldGroupKey) {
		e.bp.SessionID = mm.GroupKey
	}
	if has(mapping.FieldPartitionKey) {
		e.bp.PartitionKey = mm.PartitionKey
	}
	if e.bp.SessionID != "" && e.bp.PartitionKey != "" && e.bp.SessionID != e.bp.PartitionKey {
		carry, err := opt.Refuse(Wire, "PartitionKey", "differs from SessionId; Service Bus requires them equal", true)
		if err != nil {
			return nil, err
		}
		if carry {
			native &^= mapping.FieldPartitionKey
			e.bp.PartitionKey = e.bp.SessionID
		} else {
			mm.PartitionKey, e.bp.PartitionKey = "", ""
		}
	}
	e.bp.CorrelationID = mm.CorrelationID
	e.bp.Label = mm.Subject
	e.bp.To = mm.To
	e.bp.ReplyTo = mm.ReplyTo
	if has(mapping.FieldReplyToGroup) {
		e.bp.ReplyToSessionID = mm.ReplyToGroup
	}

	if err := encodeContentType(e, &mm, opt, f, &native); err != nil {
		return nil, err
	}
	encodeTimes(e, &mm, &native)
	e.encodeTrace(&mm, f, &native)

	env := mapping.NewEnvelope(&mm, native, opt)
	if err := e.encodeAttributes(m.Attributes, opt, f, env); err != nil {
		return nil, err
	}
	if err := e.encodeBody(m.Body, opt, f, env); err != nil {
		return nil, err
	}
	var shed []string
	if opt.Envelope == mapping.EnvelopeOff {
		shed = env.ShedAll(shed)
	}
	for {
		if err := e.fitHeaders(opt, f, env, &shed); err != nil {
			return nil, err
		}
		max := maxSize(opt)
		n := e.size(f, max)
		if n <= max {
			break
		}
		if name := env.ShedNext(); name != "" {
			// The envelope gives way before the message goes over.
			shed = append(shed, name)
			e.unfit()
			continue
		}
		if f == formHeader {
			return nil, mapping.TooLargef(Wire, "message", "%d bytes with properties, more than the limit of %d", n, max)
		}
		break // the batch element's size is the caller's to judge
	}
	opt.Shed(shed)
	return e, nil
}

// size is the message's size as Service Bus counts it: properties and body
// for a single send; a batch element's JSON (computed only when it may be
// near the limit: JSON escapes at most six bytes per byte of text).
func (e *encoded) size(f form, max int) int {
	if f == formHeader {
		return e.headerBytes + len(e.body)
	}
	if bound := 2*e.headerBytes + 6*len(e.bodyText) + 256; bound <= max {
		return bound
	}
	return len(appendElement(nil, e))
}

func encodeContentType(e *encoded, mm *mapping.Message, opt *mapping.Options, f form, native *mapping.Field) error {
	ct := mm.ContentType
	switch {
	case ct == "":
		*native |= mapping.FieldContentType
	case f == formBatch:
		// Not in the documented batch properties: written as a broker
		// property in case the broker honours it, carried to be sure.
		e.bp.ContentType = ct
	case headerSafe(ct):
		*native |= mapping.FieldContentType
		e.contentType = ct
	default:
		carry, err := opt.Refuse(Wire, "ContentType", reasonUnsafe, true)
		if err != nil {
			return err
		}
		if !carry {
			mm.ContentType = ""
		}
	}
	return nil
}

// encodeTimes writes TimeToLive (seconds with 100 ns precision) and
// ScheduledEnqueueTimeUtc (whole seconds); what they cannot say exactly
// goes to the envelope.
func encodeTimes(e *encoded, mm *mapping.Message, native *mapping.Field) {
	switch d := mm.TTL; {
	case d == 0:
		*native |= mapping.FieldTTL
	case d > 0:
		e.bp.TTLTicks = max(int64(d/100), 1)
		if d%100 == 0 {
			*native |= mapping.FieldTTL
		}
	}
	t := mm.ScheduledAt.UTC()
	if mm.ScheduledAt.IsZero() {
		*native |= mapping.FieldScheduledAt
	} else if y := t.Year(); y >= 1 && y <= 9999 {
		e.bp.Scheduled = t.Truncate(time.Second)
		if t.Nanosecond() == 0 {
			*native |= mapping.FieldScheduledAt
		}
	}
}

// encodeTrace writes the Diagnostic-Id and tracestate custom properties.
func (e *encoded) encodeTrace(mm *mapping.Message, f form, native *mapping.Field) {
	tp := mm.Trace.Traceparent()
	if tp == "" {
		return // no trace, or none W3C can express: the envelope carries it
	}
	e.props = append(e.props, prop{name: nameDiagnosticID, v: wireValue{text: tp, quoted: true, inferred: dtString}})
	st := mm.Trace.State
	if f == formHeader && !headerSafe(st) {
		return
	}
	if st != "" {
		e.props = append(e.props, prop{name: nameTraceState, v: wireValue{text: st, quoted: true, inferred: dtString}})
	}
	*native |= mapping.FieldTraceW3C
}

// encodeBody sets the body: raw for a single send; a JSON string in a batch,
// base64 under the Encode policy when it is not UTF-8.
func (e *encoded) encodeBody(body []byte, opt *mapping.Options, f form, env *mapping.Envelope) error {
	if f == formHeader {
		e.body = body
		return nil
	}
	if utf8.Valid(body) {
		e.bodyText = string(body)
		return nil
	}
	if opt.Policy != mapping.Encode {
		return mapping.Rejectf(Wire, "body", "not valid UTF-8: a batch Body is a JSON string (the Encode policy sends it base64)")
	}
	opt.Encoded("body", "not valid UTF-8: a batch Body is a JSON string; sent base64")
	e.bodyText = mapping.EncodeBodyBase64(body)
	env.BodyEncoding = mapping.BodyEncodingBase64
	return nil
}
