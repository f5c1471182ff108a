package sbrest

import (
	"cmp"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"

	"github.com/qbridge/qbridge/mapping"
)

// entry is one custom property as received, its value inferred.
type entry struct {
	name  string // as received
	canon string // canonical MIME form, for matching special names
	v     mapping.Value
}

// Decode builds a message from a peek-lock or receive-and-delete response
// (or any request carrying the single-message form): body, headers and the
// BrokerProperties header. The message's Body refers to body.
//
// The lock URL for settling (complete, unlock, renew) is the Location
// header: see ParseLocation. Source.LockToken is set from BrokerProperties.
func Decode(h http.Header, body []byte) (*mapping.Message, error) {
	m := newMessage()
	m.Body = body
	var bp, ct, date, loc string
	entries := make([]entry, 0, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		ck := textproto.CanonicalMIMEHeaderKey(k)
		switch ck {
		case hdrBrokerProps, hdrContentType, hdrDate, hdrLocation:
		default:
			if !special(ck) && reservedReason(ck) != "" {
				continue // HTTP's own header, not a property
			}
		}
		if len(vs) > 1 {
			return nil, mapping.Rejectf(Wire, fmt.Sprintf("header %q", k), "repeated (%d values)", len(vs))
		}
		switch ck {
		case hdrBrokerProps:
			bp = vs[0]
		case hdrContentType:
			ct = vs[0]
		case hdrDate:
			date = vs[0]
		case hdrLocation:
			loc = vs[0]
		default:
			v, err := InferHeader(vs[0])
			if err != nil {
				return nil, mapping.Rejectf(Wire, fmt.Sprintf("header %q", k), "%v", err)
			}
			entries = append(entries, entry{name: k, canon: ck, v: v})
		}
	}
	info, err := decodeBrokerProperties(bp, m)
	if err != nil {
		return nil, err
	}
	m.ContentType = ct
	if ct == "" {
		m.ContentType = info.contentType
	}
	if !info.hasEnqueued && date != "" {
		// EnqueuedTimeUtc is the response's Date header (docs/wire-servicebus.md §7).
		if t, err := parseDate(date); err == nil {
			m.Source.EnqueuedTime = t
		}
	}
	if m.Source.LockToken == "" && loc != "" {
		if l, err := ParseLocation(loc); err == nil {
			m.Source.LockToken = l.LockToken
		}
	}
	if err := finishDecode(m, entries); err != nil {
		return nil, err
	}
	return m, nil
}

func newMessage() *mapping.Message {
	return &mapping.Message{Source: mapping.Source{Protocol: "servicebus", PartitionID: -1}}
}

// special reports whether a reserved name is one the decoder reads.
func special(canon string) bool {
	switch canon {
	case hdrDiagnosticID, hdrTraceState, hdrEnvelope, hdrDLReason, hdrDLDescription:
		return true
	}
	return false
}

// finishDecode turns the custom properties into trace, envelope, source
// facts and attributes, then applies the envelope.
func finishDecode(m *mapping.Message, entries []entry) error {
	slices.SortFunc(entries, func(x, y entry) int { return cmp.Or(cmp.Compare(x.canon, y.canon), cmp.Compare(x.name, y.name)) })
	for i := 1; i < len(entries); i++ {
		if entries[i].canon == entries[i-1].canon {
			return mapping.Rejectf(Wire, fmt.Sprintf("property %q", entries[i].name), "given twice (names are case-insensitive)")
		}
	}
	var env *mapping.Envelope
	var diag, state *entry
	attrs := entries[:0:0]
	for i := range entries {
		e := &entries[i]
		switch e.canon {
		case hdrEnvelope:
			if e.v.Kind != mapping.KindString {
				return mapping.Rejectf(Wire, mapping.EnvelopeName, "not a string")
			}
			var err error
			if env, err = mapping.ParseEnvelope(e.v.Str()); err != nil {
				return mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
			}
		case hdrDiagnosticID:
			diag = e
		case hdrTraceState:
			state = e
		case hdrDLReason:
			m.Source.DeadLetterReason, _ = e.v.Text()
		case hdrDLDescription:
			m.Source.DeadLetterDesc, _ = e.v.Text()
		default:
			attrs = append(attrs, *e)
		}
	}
	// A trace that does not parse stays what it was: an application property.
	if diag != nil {
		t, err := mapping.ParseDiagnosticID(diag.v.Str())
		if diag.v.Kind == mapping.KindString && err == nil {
			m.Trace = t
			if state != nil {
				m.Trace.State, _ = state.v.Text()
				state = nil
			}
		} else {
			attrs = append(attrs, *diag)
		}
	}
	if state != nil {
		attrs = append(attrs, *state)
	}
	names := typeNames(env)
	m.Attributes = make([]mapping.Attribute, 0, len(attrs)+len(envAttrs(env)))
	for _, e := range attrs {
		name := e.name
		dt, ok := env.TypeOf(name)
		if !ok {
			if orig, found := names[e.canon]; found {
				name, dt, ok = orig, env.Types[orig], true
			}
		}
		v, err := rebuild(e.v, dt, ok)
		if err != nil {
			return mapping.Rejectf(Wire, fmt.Sprintf("property %q", name), "type %s: %v", dt, err)
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: name, Value: v})
	}
	if m.TTL > 0 && !m.Source.EnqueuedTime.IsZero() {
		m.Source.ExpiresAt = m.Source.EnqueuedTime.Add(m.TTL)
	}
	if mapping.IsMadeUpID(m.ID) { // an encoder's (IDFromSourceKey): no id of its own
		m.ID = ""
	}
	if env == nil {
		sortAttributes(m.Attributes)
		return nil
	}
	// MessageId was the dedup id of a message without an id of its own.
	if c := env.Fields; c != nil && c.ID == "" && c.DedupID != "" && c.DedupID == m.ID {
		m.ID = ""
	}
	if err := env.Apply(m); err != nil {
		return mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
	}
	b, err := env.DecodeBody(m.Body)
	if err != nil {
		return mapping.Rejectf(Wire, "body", "%v", err)
	}
	m.Body = b
	sortAttributes(m.Attributes)
	return nil
}

func envAttrs(env *mapping.Envelope) []mapping.Attribute {
	if env == nil {
		return nil
	}
	return env.Attrs
}

// typeNames maps the canonical form of each name the envelope types to the
// name itself, so a property whose name net/http re-cased gets its exact
// spelling back. Among names equal up to case, the smallest wins.
func typeNames(env *mapping.Envelope) map[string]string {
	if env == nil || len(env.Types) == 0 {
		return nil
	}
	names := make(map[string]string, len(env.Types))
	for n := range env.Types {
		c := textproto.CanonicalMIMEHeaderKey(n)
		if old, ok := names[c]; !ok || n < old {
			names[c] = n
		}
	}
	return names
}

func sortAttributes(a []mapping.Attribute) {
	slices.SortStableFunc(a, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
}
