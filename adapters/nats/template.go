package nats

import (
	"fmt"
	"strings"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

// subjectTemplate is a compiled sink subject: a mapping/rules template
// rendered with each placeholder's value escaped on its own. A value
// becomes one subject token ({subject} may span several), with characters
// a token cannot hold ('.', '*', '>', white space) replaced by '_'; an
// empty value (a missing attribute too) becomes the default token, so a
// rendered subject never has an empty token.
type subjectTemplate struct {
	raw string
	tpl *rules.Template // nil when the template has no placeholder
}

func compileSubject(raw string) (*subjectTemplate, error) {
	tpl, err := rules.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	t := &subjectTemplate{raw: raw}
	// placeholders replaced by "x", to validate the literal parts
	skeleton := tpl.ExecuteEscaped(&mapping.Message{}, func(string, string) string { return "x" })
	if err := checkSubject("subject", skeleton, false); err != nil {
		return nil, fmt.Errorf("%q is not a subject to publish to (empty token, white space or wildcard)", raw)
	}
	if lit, ok := tpl.Literal(); ok {
		t.raw = lit // "{{" and "}}" stand for braces
	} else {
		t.tpl = tpl
	}
	return t, nil
}

// render returns the subject for m; def replaces empty values.
func (t *subjectTemplate) render(m *mapping.Message, def string) string {
	if t.tpl == nil {
		return t.raw
	}
	return t.tpl.ExecuteEscaped(m, func(name, v string) string {
		if name != "subject" || v == "" {
			return subjectTokenOf(v, def)
		}
		// {subject} keeps its dots: each of its tokens is escaped alone.
		var b strings.Builder
		for i, tok := range strings.Split(v, ".") {
			if i > 0 {
				b.WriteByte('.')
			}
			writeToken(&b, tok, def)
		}
		return b.String()
	})
}

// subjectTokenOf returns s as a single valid token.
func subjectTokenOf(s, def string) string {
	if s == "" {
		return def
	}
	if validToken(s) {
		return s
	}
	var b strings.Builder
	writeToken(&b, s, def)
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
	if t.tpl == nil {
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
	for _, p := range t.tpl.Parts() {
		if p.Placeholder != "" {
			wild = true
			multi = multi || p.Placeholder == "subject"
			continue
		}
		segs := strings.Split(p.Literal, ".")
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
