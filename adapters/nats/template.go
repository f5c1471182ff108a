package nats

import (
	"fmt"
	"strings"

	"github.com/qbridge/qbridge/mapping"
)

// subjectTemplate is a compiled sink subject: literal text and placeholders
// {group}, {id}, {subject} and {attr.NAME}, spelled as in mapping/rules'
// templates. It is not rules.Template because a subject needs each
// placeholder escaped on its own. A placeholder's value becomes
// one subject token ({subject} may span several), with characters a token
// cannot hold ('.', '*', '>', white space) replaced by '_'; an empty value
// becomes the default token, so a rendered subject never has an empty token.
type subjectTemplate struct {
	raw   string
	parts []tplPart // nil when the template has no placeholder
}

type tplKind uint8

const (
	tplLiteral tplKind = iota
	tplGroup
	tplID
	tplSubject
	tplAttr
)

type tplPart struct {
	kind tplKind
	text string // the literal, or the attribute name
}

func compileSubject(raw string) (*subjectTemplate, error) {
	t := &subjectTemplate{raw: raw}
	var parts []tplPart
	var skeleton strings.Builder // placeholders replaced by "x", to validate the literal parts
	rest := raw
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if cl := strings.IndexByte(rest, '}'); cl >= 0 && (open < 0 || cl < open) {
			return nil, fmt.Errorf("%q: '}' without '{'", raw)
		}
		if open < 0 {
			parts = append(parts, tplPart{kind: tplLiteral, text: rest})
			skeleton.WriteString(rest)
			break
		}
		if open > 0 {
			parts = append(parts, tplPart{kind: tplLiteral, text: rest[:open]})
			skeleton.WriteString(rest[:open])
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%q: unclosed '{'", raw)
		}
		name := rest[open+1 : open+end]
		p, err := placeholder(name)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", raw, err)
		}
		parts = append(parts, p)
		skeleton.WriteString("x")
		rest = rest[open+end+1:]
	}
	if err := checkSubject("subject", skeleton.String(), false); err != nil {
		return nil, fmt.Errorf("%q is not a subject to publish to (empty token, white space or wildcard)", raw)
	}
	for _, p := range parts {
		if p.kind != tplLiteral {
			t.parts = parts
			break
		}
	}
	return t, nil
}

func placeholder(name string) (tplPart, error) {
	switch {
	case name == "group":
		return tplPart{kind: tplGroup}, nil
	case name == "id":
		return tplPart{kind: tplID}, nil
	case name == "subject":
		return tplPart{kind: tplSubject}, nil
	case strings.HasPrefix(name, "attr."):
		// {attr.NAME?} (mapping/rules' "may be missing") is accepted too: a
		// missing attribute is always the default token here.
		attr := strings.TrimSuffix(name[len("attr."):], "?")
		if attr == "" {
			break
		}
		return tplPart{kind: tplAttr, text: attr}, nil
	}
	return tplPart{}, fmt.Errorf("unknown placeholder {%s}: want {group}, {id}, {subject} or {attr.NAME}", name)
}

// render returns the subject for m; def replaces empty values.
func (t *subjectTemplate) render(m *mapping.Message, def string) string {
	if t.parts == nil {
		return t.raw
	}
	var b strings.Builder
	b.Grow(len(t.raw) + 16)
	for _, p := range t.parts {
		switch p.kind {
		case tplLiteral:
			b.WriteString(p.text)
		case tplGroup:
			writeToken(&b, m.GroupKey, def)
		case tplID:
			writeToken(&b, m.ID, def)
		case tplAttr:
			var s string
			if v, ok := m.Attr(p.text); ok {
				s, _ = v.Text() // a value without text renders as the default token
				if v.Kind == mapping.KindStrings {
					s = strings.Join(v.Strings(), ",")
				}
			}
			writeToken(&b, s, def)
		case tplSubject:
			if m.Subject == "" {
				b.WriteString(def)
				continue
			}
			for i, tok := range strings.Split(m.Subject, ".") {
				if i > 0 {
					b.WriteByte('.')
				}
				writeToken(&b, tok, def)
			}
		}
	}
	return b.String()
}

// writeToken writes s as a single valid token.
func writeToken(b *strings.Builder, s, def string) {
	if s == "" {
		b.WriteString(def)
		return
	}
	if validToken(s) {
		b.WriteString(s)
		return
	}
	for _, r := range s {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n', '\f', '\v':
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '*', '>', ' ', '\t', '\r', '\n', '\f', '\v':
			return false
		}
	}
	return true
}

// streamSubject is the subject filter that covers every subject the template
// can render: each token holding a placeholder becomes '*', and a {subject}
// in the last token becomes '>'. ok is false when {subject} stands before
// the last token (no single filter covers it).
func (t *subjectTemplate) streamSubject() (string, bool) {
	if t.parts == nil {
		return t.raw, true
	}
	var tokens []string
	var cur strings.Builder
	wild, multi := false, false
	flush := func() {
		switch {
		case multi:
			tokens = append(tokens, ">")
		case wild:
			tokens = append(tokens, "*")
		default:
			tokens = append(tokens, cur.String())
		}
		cur.Reset()
		wild, multi = false, false
	}
	for _, p := range t.parts {
		if p.kind != tplLiteral {
			wild = true
			multi = multi || p.kind == tplSubject
			continue
		}
		segs := strings.Split(p.text, ".")
		for i, seg := range segs {
			if i > 0 {
				flush()
			}
			cur.WriteString(seg)
		}
	}
	flush()
	for i, tok := range tokens {
		if tok == ">" && i != len(tokens)-1 {
			return "", false
		}
	}
	return strings.Join(tokens, "."), true
}

// subjectToken returns the n-th (1-based) token of subject.
func subjectToken(subject string, n int) (string, bool) {
	for i := 1; ; i++ {
		dot := strings.IndexByte(subject, '.')
		if i == n {
			if dot >= 0 {
				return subject[:dot], true
			}
			return subject, true
		}
		if dot < 0 {
			return "", false
		}
		subject = subject[dot+1:]
	}
}
