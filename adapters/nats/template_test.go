package nats

import (
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

func TestSubjectTemplateRender(t *testing.T) {
	m := &mapping.Message{ID: "m-1", GroupKey: "g1", Subject: "created.v2"}
	m.SetAttr("tenant", mapping.String("acme"))
	m.SetAttr("n", mapping.Int32(42))
	m.SetAttr("bad", mapping.String("a.b c*>"))
	m.SetAttr("multi", mapping.Strings("x", "y"))
	empty := &mapping.Message{}
	tests := []struct {
		tmpl string
		m    *mapping.Message
		want string
	}{
		{"orders", m, "orders"},
		{"orders.{group}", m, "orders.g1"},
		{"orders.{group}", empty, "orders.DEF"},
		{"orders.g-{group}.x", m, "orders.g-g1.x"},
		{"orders.g-{group}.x", empty, "orders.g-DEF.x"},
		{"{attr.tenant}.{id}", m, "acme.m-1"},
		{"{attr.tenant}.{id}", empty, "DEF.DEF"},
		{"t.{attr.n}", m, "t.42"},
		{"t.{attr.bad}", m, "t.a_b_c__"},
		{"t.{attr.multi}", m, "t.x,y"},
		{"t.{attr.tenant?}", empty, "t.DEF"},
		{"ev.{subject}", m, "ev.created.v2"},
		{"ev.{subject}", &mapping.Message{Subject: "a..b *"}, "ev.a.DEF.b__"},
		{"ev.{subject}", empty, "ev.DEF"},
		{"{group}{id}", m, "g1m-1"},
	}
	for _, tt := range tests {
		tpl, err := compileSubject(tt.tmpl)
		if err != nil {
			t.Fatalf("%q: %v", tt.tmpl, err)
		}
		got := tpl.render(tt.m, "DEF")
		if got != tt.want {
			t.Errorf("%q: render = %q, want %q", tt.tmpl, got, tt.want)
		}
		if err := checkSubject("x", got, false); err != nil {
			t.Errorf("%q rendered an invalid subject %q: %v", tt.tmpl, got, err)
		}
	}
}

func TestSubjectTemplateCompileErrors(t *testing.T) {
	for _, tmpl := range []string{
		"", "orders.{group", "orders.group}", "orders.{nope}", "orders.{attr.}", "orders..{group}",
		"orders.*", "orders.>", "orders.{group}.", ".{group}", "a b.{group}", "{group}*",
	} {
		if _, err := compileSubject(tmpl); err == nil {
			t.Errorf("%q compiled", tmpl)
		}
	}
}

func TestSubjectTemplateStreamSubject(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		{"orders", "orders"},
		{"orders.{group}", "orders.*"},
		{"orders.g-{group}.{id}", "orders.*.*"},
		{"ev.{subject}", "ev.>"},
		{"ev.x{subject}", "ev.>"},
		{"{attr.a}.fixed", "*.fixed"},
		{"ev.{subject}.tail", ""},
	}
	for _, tt := range tests {
		tpl, err := compileSubject(tt.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tpl.streamSubject()
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%q: streamSubject = %q, %v; want %q", tt.tmpl, got, ok, tt.want)
		}
	}
}

func TestSubjectToken(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
		ok   bool
	}{
		{"orders.g1.x", 1, "orders", true},
		{"orders.g1.x", 2, "g1", true},
		{"orders.g1.x", 3, "x", true},
		{"orders.g1.x", 4, "", false},
		{"orders", 1, "orders", true},
		{"orders", 2, "", false},
	}
	for _, tt := range tests {
		got, ok := subjectToken(tt.s, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("subjectToken(%q, %d) = %q, %v", tt.s, tt.n, got, ok)
		}
	}
}

func BenchmarkSubjectTemplate(b *testing.B) {
	tpl, _ := compileSubject("orders.{attr.tenant}.{group}")
	m := &mapping.Message{GroupKey: "g-17"}
	m.SetAttr("tenant", mapping.String("acme"))
	b.ReportAllocs()
	for b.Loop() {
		if s := tpl.render(m, "_"); !strings.HasPrefix(s, "orders.") {
			b.Fatal(s)
		}
	}
}
