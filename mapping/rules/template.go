package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/qbridge/qbridge/mapping"
)

// Template is a compiled text template with {...} placeholders. HCL keeps
// ${...} for its own interpolation, so templates use single braces; "{{" and
// "}}" stand for literal braces.
//
// Placeholders:
//
//	{group}            Message.GroupKey
//	{id}               Message.ID
//	{dedup_id}         Message.DedupID
//	{correlation_id}   Message.CorrelationID
//	{subject}          Message.Subject
//	{to}               Message.To
//	{reply_to}         Message.ReplyTo
//	{content_type}     Message.ContentType
//	{source.address}   the queue, subject or entity the message was read from
//	{source.protocol}  "sqs", "servicebus", "amqp" or "nats"
//	{attr.NAME}        the text of attribute NAME (Value.Text)
//	{attr.NAME?}       the same, or "" when the message has no attribute NAME
//
// A field that is empty renders as "". A missing attribute is an error
// (a *mapping.RejectError, so the pipeline dead-letters the message) unless
// the placeholder ends in "?": a group key or subject silently built from a
// missing attribute would misroute or misorder the message.
type Template struct {
	src  string
	segs []segment
}

type segment struct {
	lit      string // literal text when field == fieldLiteral
	name     string // the placeholder as written, without braces and "?"
	field    field
	attr     string // attribute name for fieldAttr
	optional bool   // {attr.NAME?}
}

type field uint8

const (
	fieldLiteral field = iota
	fieldGroup
	fieldID
	fieldDedupID
	fieldCorrelationID
	fieldSubject
	fieldTo
	fieldReplyTo
	fieldContentType
	fieldSourceAddress
	fieldSourceProtocol
	fieldAttr
)

var fieldNames = map[string]field{
	"group":           fieldGroup,
	"id":              fieldID,
	"dedup_id":        fieldDedupID,
	"correlation_id":  fieldCorrelationID,
	"subject":         fieldSubject,
	"to":              fieldTo,
	"reply_to":        fieldReplyTo,
	"content_type":    fieldContentType,
	"source.address":  fieldSourceAddress,
	"source.protocol": fieldSourceProtocol,
}

// Placeholders lists the placeholder names a template accepts, for messages.
const Placeholders = "{group}, {id}, {dedup_id}, {correlation_id}, {subject}, {to}, {reply_to}, {content_type}, {source.address}, {source.protocol}, {attr.NAME} or {attr.NAME?}"

// SyntaxError reports a malformed template; Offset is the byte offset in the
// template text, so a caller can point at the exact character.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("at offset %d: %s", e.Offset, e.Msg) }

// Parse compiles a template once; Execute then runs without parsing.
func Parse(src string) (*Template, error) {
	t := &Template{src: src}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.segs = append(t.segs, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, &SyntaxError{Offset: i, Msg: `unmatched "}" (write "}}" for a literal brace)`}
		case c == '{':
			end := strings.IndexByte(src[i+1:], '}')
			if end < 0 {
				return nil, &SyntaxError{Offset: i, Msg: `unclosed "{" (write "{{" for a literal brace)`}
			}
			name := src[i+1 : i+1+end]
			seg, err := parsePlaceholder(name)
			if err != nil {
				return nil, &SyntaxError{Offset: i, Msg: err.Error()}
			}
			flush()
			t.segs = append(t.segs, seg)
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

func parsePlaceholder(name string) (segment, error) {
	if f, ok := fieldNames[name]; ok {
		return segment{field: f, name: name}, nil
	}
	if attr, ok := strings.CutPrefix(name, "attr."); ok {
		seg := segment{field: fieldAttr, attr: attr, name: name}
		if a, ok := strings.CutSuffix(attr, "?"); ok {
			seg.attr, seg.optional, seg.name = a, true, "attr."+a
		}
		if seg.attr == "" {
			return segment{}, errors.New(`placeholder "{` + name + `}" names no attribute: want {attr.NAME}`)
		}
		if strings.ContainsAny(seg.attr, "{") {
			return segment{}, errors.New(`"{" inside a placeholder`)
		}
		return seg, nil
	}
	if name == "" {
		return segment{}, errors.New(`empty placeholder "{}": want one of ` + Placeholders)
	}
	if strings.ContainsAny(name, "{") {
		return segment{}, errors.New(`"{" inside a placeholder (write "{{" for a literal brace)`)
	}
	return segment{}, fmt.Errorf("unknown placeholder {%s}: want one of %s", name, Placeholders)
}

// String returns the template's source text.
func (t *Template) String() string { return t.src }

// Execute renders the template for m. A single-placeholder template costs no
// allocation beyond what the field itself holds.
func (t *Template) Execute(m *mapping.Message) (string, error) {
	if len(t.segs) == 1 {
		return t.segs[0].render(m)
	}
	var b strings.Builder
	b.Grow(len(t.src) + 32)
	for i := range t.segs {
		s, err := t.segs[i].render(m)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// Literal returns the template's text when it has no placeholder (the
// "{{" escapes undone), and whether it has none: such a template renders
// the same for every message.
func (t *Template) Literal() (string, bool) {
	var b strings.Builder
	for i := range t.segs {
		if t.segs[i].field != fieldLiteral {
			return "", false
		}
		b.WriteString(t.segs[i].lit)
	}
	return b.String(), true
}

// Part is one piece of a template: literal text, or a placeholder.
type Part struct {
	Literal     string // the text, when Placeholder is ""
	Placeholder string // as written, without braces and "?": "group", "attr.NAME"
}

// Parts returns the template's pieces in order, so that a caller can tell
// what a rendering may hold where (a NATS sink derives a stream's subject
// filter from them).
func (t *Template) Parts() []Part {
	out := make([]Part, len(t.segs))
	for i, s := range t.segs {
		if s.field == fieldLiteral {
			out[i].Literal = s.lit
		} else {
			out[i].Placeholder = s.name
		}
	}
	return out
}

// ExecuteEscaped renders the template for m passing each placeholder's value
// through escape (placeholder named as in Part) before writing it; literal
// text is written as is. It is for targets whose syntax each value must
// fit on its own, such as a NATS subject token, so it never rejects: a
// missing attribute, or one without text, is passed as "" (escape chooses
// what stands for it), and a list of strings as its items joined by ",".
func (t *Template) ExecuteEscaped(m *mapping.Message, escape func(placeholder, value string) string) string {
	var b strings.Builder
	b.Grow(len(t.src) + 16)
	for i := range t.segs {
		s := &t.segs[i]
		if s.field == fieldLiteral {
			b.WriteString(s.lit)
			continue
		}
		var v string
		if s.field == fieldAttr {
			if a, ok := m.Attr(s.attr); ok {
				if a.Kind == mapping.KindStrings {
					v = strings.Join(a.Strings(), ",")
				} else {
					v, _ = a.Text() // no text: ""
				}
			}
		} else {
			v, _ = s.render(m) // only attributes fail
		}
		b.WriteString(escape(s.name, v))
	}
	return b.String()
}

func (s *segment) render(m *mapping.Message) (string, error) {
	switch s.field {
	case fieldLiteral:
		return s.lit, nil
	case fieldGroup:
		return m.GroupKey, nil
	case fieldID:
		return m.ID, nil
	case fieldDedupID:
		return m.DedupID, nil
	case fieldCorrelationID:
		return m.CorrelationID, nil
	case fieldSubject:
		return m.Subject, nil
	case fieldTo:
		return m.To, nil
	case fieldReplyTo:
		return m.ReplyTo, nil
	case fieldContentType:
		return m.ContentType, nil
	case fieldSourceAddress:
		return m.Source.Address, nil
	case fieldSourceProtocol:
		return m.Source.Protocol, nil
	case fieldAttr:
		v, ok := m.Attr(s.attr)
		if !ok {
			if s.optional {
				return "", nil
			}
			return "", mapping.Rejectf("mapping", fmt.Sprintf("attribute %q", s.attr), "missing (the template needs it; write {attr.%s?} to allow an empty value)", s.attr)
		}
		txt, err := v.Text()
		if err != nil {
			return "", mapping.Rejectf("mapping", fmt.Sprintf("attribute %q", s.attr), "cannot render as text: %v", err)
		}
		return txt, nil
	}
	return "", fmt.Errorf("template: bad segment %d", s.field)
}
