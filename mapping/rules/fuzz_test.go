package rules

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics on a template from a configuration; what
// it refuses is a SyntaxError inside the text, and what it accepts renders
// consistently through Execute, ExecuteEscaped, Literal and Parts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{group}", "x.{subject}.y", "{{lit.}}{group}.{subject}.{id}.{attr.n}.{attr.multi}.{attr.gone}.{attr.gone?}",
		"orders.{attr.tenant}.{group}", "{attr.}", "{attr.?}", "{}", "{nope}", "{a{b}", "}", "{", "{{", "}}", "{attr.a??}",
		"{source.address}/{source.protocol}", "{attr.x{y}",
	} {
		f.Add(s)
	}
	m := testMessage()
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset >= len(src) {
				t.Fatalf("Parse(%q): %v, want a SyntaxError at an offset in the text", src, err)
			}
			return
		}
		if tpl.String() != src {
			t.Fatalf("String() = %q, want %q", tpl.String(), src)
		}
		var want strings.Builder
		allLiteral := true
		for _, p := range tpl.Parts() {
			if p.Placeholder == "" {
				want.WriteString(p.Literal)
				continue
			}
			allLiteral = false
			want.WriteString("<" + p.Placeholder + ">")
		}
		got := tpl.ExecuteEscaped(m, func(p, _ string) string { return "<" + p + ">" })
		if got != want.String() {
			t.Fatalf("%q: ExecuteEscaped = %q, Parts say %q", src, got, want.String())
		}
		lit, ok := tpl.Literal()
		if ok != allLiteral {
			t.Fatalf("%q: Literal ok = %v, Parts say %v", src, ok, allLiteral)
		}
		if out, err := tpl.Execute(m); ok && (err != nil || out != lit) {
			t.Fatalf("%q: Execute = %q, %v; want the literal %q", src, out, err, lit)
		}
		if ok {
			// A literal template round-trips through its escaping.
			esc := strings.NewReplacer("{", "{{", "}", "}}").Replace(lit)
			again, err := Parse(esc)
			if err != nil {
				t.Fatalf("%q: the escaped literal %q does not parse: %v", src, esc, err)
			}
			if l, ok := again.Literal(); !ok || l != lit {
				t.Fatalf("%q: the escaped literal %q reads back as %q", src, esc, l)
			}
		}
	})
}
