package natsmap

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
)

// Wire is the wire name in RejectErrors.
const Wire = "nats"

// DefaultMaxMessageSize is nats-server's default max_payload (headers and
// data together).
const DefaultMaxMessageSize = 1 << 20

// EncodeOptions are the mapping options plus the group header.
type EncodeOptions struct {
	mapping.Options
	// GroupHeader is the header that carries GroupKey (DefaultGroupHeader
	// when empty).
	GroupHeader string
}

// Encode builds the NATS message for m on subject. Data refers to m.Body.
func Encode(m *mapping.Message, subject string, opt EncodeOptions) (*nats.Msg, error) {
	return EncodeScratch(nil, m, subject, opt)
}

// Scratch is what EncodeScratch reuses from one message to the next: the
// message, its header map and the backing array of its header values.
// The zero value is ready; one goroutine uses it at a time.
type Scratch struct {
	msg  nats.Msg
	h    nats.Header
	vals []string
}

// EncodeScratch is Encode into sc: the message it returns, and its headers,
// are valid until the next call with sc. It is for a publisher that hands
// each message to nats.go's synchronous Publish before encoding the next
// (Publish copies it into the connection's buffer): a message with headers
// then costs no header map of its own. With a nil sc it is Encode.
func EncodeScratch(sc *Scratch, m *mapping.Message, subject string, opt EncodeOptions) (*nats.Msg, error) {
	if r := subjectProblem(subject); r != "" {
		return nil, mapping.Rejectf(Wire, "subject", "%q: %s", subject, r)
	}
	return encode(m, subject, &opt, sc)
}

// subjectProblem says why a subject cannot be published to, or "". One
// pass over the bytes: it runs for every message a sink encodes.
func subjectProblem(s string) string {
	if s == "" {
		return "empty"
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			switch s[i] {
			case ' ', '\t', '\r', '\n':
				return "white space"
			}
			continue
		}
		switch tok := s[start:i]; {
		case tok == "":
			return "empty token"
		case tok == "*" || tok == ">":
			return "wildcards cannot be published to"
		}
		start = i + 1
	}
	return ""
}

// outMsg is the encoded message and the backing array of its one-value
// headers, allocated together: a message with a few headers (a group key,
// a content type, a trace) costs one allocation for both instead of two.
type outMsg struct {
	msg  nats.Msg
	vals [6]string
}

// userHeader is a header written for a user attribute (Drop may leave the
// largest out when the message is too large).
type userHeader struct {
	name string
	size int
}

func encode(m *mapping.Message, subject string, opt *EncodeOptions, sc *Scratch) (*nats.Msg, error) {
	gh := opt.GroupHeader
	if gh == "" {
		gh = DefaultGroupHeader
	}
	if !ValidHeaderName(gh) {
		return nil, fmt.Errorf("natsmap: group header %q is not a valid header name", gh)
	}
	opt.Options = opt.Options.Effective()
	o := &opt.Options
	held := o.Hold() // fit may still refuse the message
	// native also marks the fields the policy dropped: the envelope leaves
	// out what is native, so a dropped field is not carried either (and m,
	// the caller's message, is neither changed nor copied).
	native := mapping.FieldDedupID | mapping.FieldContentType | mapping.FieldGroupKey
	var home mapping.Field
	// The header map and one backing array for the one-value headers are
	// made with the first header: a message costs a few allocations, not one
	// per header, and one with no header none for them.
	var h nats.Header
	var one []string
	var out *outMsg
	makeHeader := func() {
		if h == nil && sc != nil {
			if sc.h == nil {
				sc.h = make(nats.Header, len(m.Attributes)+4)
			}
			clear(sc.h)
			h, one = sc.h, sc.vals[:0]
			return
		}
		if h == nil {
			h = make(nats.Header, len(m.Attributes)+4)
			out = new(outMsg)
			if n := len(m.Attributes) + 5; n > len(out.vals) {
				one = make([]string, 0, n)
			} else {
				one = out.vals[:0:len(out.vals)]
			}
		}
	}
	set := func(k, v string) {
		makeHeader()
		one = append(one, v)
		h[k] = one[len(one)-1 : len(one) : len(one)]
	}

	// Nats-Msg-Id is the dedup key. When a dedup id equals the id, the
	// envelope says so: a Nats-Msg-Id equal to the carried id alone means
	// "the id, no dedup id" (see Decode).
	if m.DedupID != "" && m.DedupID == m.ID {
		native &^= mapping.FieldDedupID
	}
	// A message without an id gets no made-up one here, unlike on Service
	// Bus: the stream would keep every id for its duplicate window (at
	// 40,000 msg/s and the default 2 minutes, millions of entries in the
	// server's memory). -new-dedup-ids gives each message a stable one
	// for a migration's resume.
	if key := m.DedupKey(); key != "" {
		if r := valueProblem(key); r != "" {
			carry, err := o.Refuse(Wire, nats.MsgIdHdr, r, true)
			if err != nil {
				return nil, err
			}
			if carry {
				native &^= mapping.FieldDedupID
			} else {
				native |= mapping.FieldDedupID
			}
		} else {
			set(nats.MsgIdHdr, key)
			if m.DedupID == "" {
				// The id's native home: the envelope is not written for
				// it alone (it then decodes as the dedup id).
				home |= mapping.FieldID
			}
		}
	}
	for _, f := range [...]struct {
		header, field, v string
		bit              mapping.Field
	}{
		{hdrContentType, "ContentType", m.ContentType, mapping.FieldContentType},
		{gh, "GroupKey", m.GroupKey, mapping.FieldGroupKey},
	} {
		if f.v == "" {
			continue
		}
		if r := valueProblem(f.v); r != "" {
			carry, err := o.Refuse(Wire, f.field, r, true)
			if err != nil {
				return nil, err
			}
			if carry {
				native &^= f.bit
			}
			continue
		}
		set(f.header, f.v)
	}
	if tp := m.Trace.Traceparent(); tp != "" {
		set(hdrTraceparent, tp)
		if st := m.Trace.State; valueProblem(st) == "" {
			if st != "" {
				set(hdrTracestate, st)
			}
			native |= mapping.FieldTraceW3C
		}
	}

	var env *mapping.Envelope
	var users []userHeader
	if len(m.Attributes) > 0 {
		env = mapping.NewEnvelope(m, native, o)
		makeHeader() // encodeAttributes writes to h itself
		var err error
		var buf [16]userHeader // on the stack for most messages
		if users, err = encodeAttributes(buf[:0], m.Attributes, h, set, gh, o, env); err != nil {
			return nil, err
		}
	} else {
		env = mapping.NewEnvelopeIfAny(m, native, o) // nil for a plain message
	}
	var msg *nats.Msg
	switch {
	case sc != nil:
		msg = &sc.msg
	case out != nil:
		msg = &out.msg
	default:
		msg = new(nats.Msg)
	}
	*msg = nats.Msg{Subject: subject, Header: h, Data: m.Body}
	env.DropIfOnly(home)
	setEnvelope := func(v string) {
		set(mapping.EnvelopeName, v)
		msg.Header = h // made by set when the message had no header
	}
	if err := fit(msg, users, o, env, setEnvelope); err != nil {
		return nil, err
	}
	held.Flush()
	if sc != nil && cap(one) > cap(sc.vals) {
		sc.vals = one[:0] // grown for this message: kept for the next
	}
	return msg, nil
}

func attrField(name string) string { return fmt.Sprintf("attribute %q", name) }

// encodeAttributes writes each attribute as a header with its Text() (a
// Strings value as several values), appends it to users, and records in env
// the types a plain header does not say.
func encodeAttributes(users []userHeader, attrs []mapping.Attribute, h nats.Header, set func(k, v string), gh string, o *mapping.Options, env *mapping.Envelope) ([]userHeader, error) {
	for _, a := range attrs {
		text, multi, typed, reason, err := attributeHeader(a, h, gh)
		if err != nil {
			return nil, mapping.Rejectf(Wire, attrField(a.Name), "%v", err)
		}
		if reason != "" {
			if !a.Value.ValidUTF8() || !utf8.ValidString(a.Name) {
				// The envelope is JSON: nothing carries invalid UTF-8.
				if o.Policy == mapping.Drop {
					o.Dropped(attrField(a.Name), reason)
					continue
				}
				return nil, mapping.Rejectf(Wire, attrField(a.Name), "%s", reason)
			}
			carry, err := o.Refuse(Wire, attrField(a.Name), reason, true)
			if err != nil {
				return nil, err
			}
			if carry {
				env.Attrs = append(env.Attrs, a)
			}
			continue
		}
		size := len(a.Name) + len(text) + 4
		if multi != nil {
			h[a.Name] = multi
			size = 0
			for _, v := range multi {
				size += len(a.Name) + len(v) + 4
			}
		} else {
			set(a.Name, text)
		}
		if typed {
			env.SetType(a.Name, a.Value.DataType())
		}
		users = append(users, userHeader{a.Name, size})
	}
	slices.SortStableFunc(env.Attrs, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
	return users, nil
}

// attributeHeader returns the header value of a (several values in multi
// for a Strings value) and whether its type must be recorded, or the reason
// it cannot be a header (for the policy).
func attributeHeader(a mapping.Attribute, h nats.Header, gh string) (text string, multi []string, typed bool, reason string, err error) {
	if !ValidHeaderName(a.Name) {
		return "", nil, false, `name is not a NATS header name (printable ASCII without white space and "():;,/<=>?@[\]{})`, nil
	}
	if r := reservedReason(a.Name, gh); r != "" {
		return "", nil, false, r, nil
	}
	if h[a.Name] != nil {
		return "", nil, false, "another attribute has this name", nil
	}
	v := a.Value
	if v.Kind == mapping.KindStrings && v.Label == "" && len(v.Strings()) >= 2 {
		ok := true
		for _, s := range v.Strings() {
			ok = ok && valueProblem(s) == ""
		}
		if ok { // the natural form: one header, several values
			return "", slices.Clone(v.Strings()), false, "", nil
		}
		// Otherwise its JSON text in one value, typed (below).
	}
	t, err := v.Text()
	if errors.Is(err, mapping.ErrTextNotUTF8) || !utf8.ValidString(v.Label) {
		return "", nil, false, "not valid UTF-8", nil // for the policy, as a plain string's
	}
	if err != nil {
		return "", nil, false, "", err
	}
	typed = v.Kind != mapping.KindString || v.Label != ""
	problem := lineProblem
	if typed {
		problem = valueProblem // its type goes in the envelope, JSON
	}
	if r := problem(t); r != "" {
		return "", nil, false, r, nil
	}
	return t, nil, typed, "", nil
}

// fit writes the envelope header and enforces the size limit; Drop leaves
// out the largest user attributes until the message fits.
func fit(msg *nats.Msg, users []userHeader, o *mapping.Options, env *mapping.Envelope, setEnvelope func(string)) error {
	limit := o.MaxMessageSize
	if limit <= 0 {
		limit = DefaultMaxMessageSize
	}
	var shed []string
	if o.Envelope == mapping.EnvelopeOff {
		shed = env.ShedAll(shed)
	}
	for {
		delete(msg.Header, mapping.EnvelopeName)
		if !env.Empty() {
			s, err := env.Marshal()
			if err != nil {
				return mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
			}
			if strings.IndexByte(s, 0x7f) >= 0 {
				// JSON leaves DEL unescaped; a header value here holds no
				// control character (valueProblem), the envelope's neither.
				s = strings.ReplaceAll(s, "\x7f", `\u007f`)
			}
			setEnvelope(s)
		}
		h := headerSize(msg.Header)
		n := h + len(msg.Data)
		headersFit := o.MaxHeaderSize <= 0 || h <= o.MaxHeaderSize
		if n <= limit && headersFit {
			o.Shed(shed)
			return nil
		}
		if name := env.ShedNext(); name != "" {
			// The envelope gives way before any attribute of the message.
			shed = append(shed, name)
			continue
		}
		if o.Policy != mapping.Drop || len(users) == 0 {
			if !headersFit {
				return mapping.TooLargef(Wire, "headers", "%d bytes of headers, more than the limit of %d", h, o.MaxHeaderSize)
			}
			return mapping.TooLargef(Wire, "message", "%d bytes with headers, more than the limit of %d", n, limit)
		}
		i := 0
		for j := range users {
			if users[j].size > users[i].size {
				i = j
			}
		}
		why := fmt.Sprintf("message larger than %d bytes", limit)
		if !headersFit {
			why = fmt.Sprintf("headers larger than %d bytes", o.MaxHeaderSize)
		}
		o.Dropped(attrField(users[i].name), why)
		delete(msg.Header, users[i].name)
		env.Forget(users[i].name)
		users = slices.Delete(users, i, i+1)
	}
}
