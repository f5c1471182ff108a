package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

func testMessage() *mapping.Message {
	return &mapping.Message{
		ID:            "m-1",
		DedupID:       "d-1",
		CorrelationID: "c-1",
		GroupKey:      "g-1",
		Subject:       "orders.created",
		To:            "dest",
		ContentType:   "application/json",
		Attributes: []mapping.Attribute{
			{Name: "tenant", Value: mapping.String("acme")},
			{Name: "count", Value: mapping.Int32(42)},
			{Name: "blob", Value: mapping.Binary([]byte{1, 2, 3})},
		},
		Source: mapping.Source{Protocol: "sqs", Address: "q-orders"},
	}
}

func TestTemplateExecute(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"literal", "plain", "plain"},
		{"empty", "", ""},
		{"group", "{group}", "g-1"},
		{"id", "{id}", "m-1"},
		{"dedup", "{dedup_id}", "d-1"},
		{"correlation", "{correlation_id}", "c-1"},
		{"subject", "x.{subject}.y", "x.orders.created.y"},
		{"to", "{to}", "dest"},
		{"content type", "{content_type}", "application/json"},
		{"source", "{source.protocol}:{source.address}", "sqs:q-orders"},
		{"attr string", "t-{attr.tenant}", "t-acme"},
		{"attr typed", "{attr.count}", "42"},
		{"attr binary is base64", "{attr.blob}", "AQID"},
		{"optional present", "{attr.tenant?}", "acme"},
		{"optional missing", "[{attr.nope?}]", "[]"},
		{"escapes", "{{literal}} {{{id}}}", "{literal} {m-1}"},
		{"adjacent", "{id}{group}", "m-1g-1"},
		{"utf8", "ü-{id}-ß", "ü-m-1-ß"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.src, err)
			}
			got, err := tm.Execute(testMessage())
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if got != tt.want {
				t.Errorf("Execute(%q) = %q, want %q", tt.src, got, tt.want)
			}
			if tm.String() != tt.src {
				t.Errorf("String() = %q, want %q", tm.String(), tt.src)
			}
		})
	}
}

func TestTemplateEmptyFields(t *testing.T) {
	tm, err := Parse("{group}/{subject}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Execute(&mapping.Message{})
	if err != nil || got != "/" {
		t.Fatalf("got %q, %v; want \"/\", nil", got, err)
	}
}

func TestTemplateMissingAttribute(t *testing.T) {
	tm, err := Parse("{attr.tenant}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Execute(&mapping.Message{})
	var rej *mapping.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("err = %v, want a *mapping.RejectError", err)
	}
	if rej.Field != `attribute "tenant"` || !strings.Contains(rej.Reason, "missing") {
		t.Errorf("reject = %+v", rej)
	}
}

func TestTemplateSyntaxErrors(t *testing.T) {
	tests := []struct {
		src    string
		offset int
		msg    string
	}{
		{"{nope}", 0, "unknown placeholder {nope}"},
		{"ab{", 2, `unclosed "{"`},
		{"a}b", 1, `unmatched "}"`},
		{"x{}", 1, "empty placeholder"},
		{"{attr.}", 0, "names no attribute"},
		{"{attr.?}", 0, "names no attribute"},
		{"{a{b}", 0, `"{" inside a placeholder`},
		{"{{ok}} {Group}", 7, "unknown placeholder {Group}"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := Parse(tt.src)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) err = %v, want *SyntaxError", tt.src, err)
			}
			if se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("Parse(%q) = offset %d %q, want offset %d containing %q", tt.src, se.Offset, se.Msg, tt.offset, tt.msg)
			}
		})
	}
}

func BenchmarkTemplate(b *testing.B) {
	tm, err := Parse("orders.{attr.tenant}.{group}")
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tm.Execute(m); err != nil {
			b.Fatal(err)
		}
	}
}

// ExecuteEscaped passes each placeholder's value, never the literal text,
// through escape, and never rejects.
func TestExecuteEscaped(t *testing.T) {
	m := &mapping.Message{ID: "m.1", GroupKey: "g", Subject: "a.b"}
	m.SetAttr("multi", mapping.Strings("x", "y"))
	m.SetAttr("n", mapping.Int32(7))
	tpl, err := Parse("{{lit.}}{group}.{subject}.{id}.{attr.n}.{attr.multi}.{attr.gone}.{attr.gone?}")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	got := tpl.ExecuteEscaped(m, func(name, v string) string {
		names = append(names, name)
		return "<" + v + ">"
	})
	if want := "{lit.}<g>.<a.b>.<m.1>.<7>.<x,y>.<>.<>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if want := "group subject id attr.n attr.multi attr.gone attr.gone"; strings.Join(names, " ") != want {
		t.Errorf("placeholders %q, want %q", names, want)
	}
	parts := tpl.Parts()
	if len(parts) != 14 || parts[0] != (Part{Literal: "{lit.}"}) || parts[1] != (Part{Placeholder: "group"}) ||
		parts[2] != (Part{Literal: "."}) || parts[13] != (Part{Placeholder: "attr.gone"}) {
		t.Errorf("parts %+v", parts)
	}
}

func TestTemplateLiteral(t *testing.T) {
	for _, tc := range []struct {
		src, want string
		literal   bool
	}{
		{"orders", "orders", true},
		{"a{{b}}c", "a{b}c", true},
		{"", "", true},
		{"out.{group}", "", false},
		{"{attr.x}", "", false},
	} {
		tpl, err := Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := tpl.Literal(); got != tc.want || ok != tc.literal {
			t.Errorf("Literal(%q) = %q, %v; want %q, %v", tc.src, got, ok, tc.want, tc.literal)
		}
	}
}
