package rules

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

func mustValue(t *testing.T, dt, text string) mapping.Value {
	t.Helper()
	v, err := mapping.ParseValue(dt, text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestApply(t *testing.T) {
	int42 := mustValue(t, "Number.int", "42")
	tests := []struct {
		name  string
		spec  Spec
		check func(t *testing.T, m *mapping.Message)
	}{
		{
			name: "zero spec changes nothing",
			spec: Spec{},
			check: func(t *testing.T, m *mapping.Message) {
				if !reflect.DeepEqual(m, testMessage()) {
					t.Errorf("message changed: %+v", m)
				}
			},
		},
		{
			name: "rename moves and replaces",
			spec: Spec{Rename: []Rename{{From: "tenant", To: "count"}, {From: "absent", To: "x"}}},
			check: func(t *testing.T, m *mapping.Message) {
				if _, ok := m.Attr("tenant"); ok {
					t.Error("tenant still present")
				}
				if v, _ := m.Attr("count"); !v.Equal(mapping.String("acme")) {
					t.Errorf("count = %#v", v)
				}
				if _, ok := m.Attr("x"); ok {
					t.Error("rename of a missing attribute created one")
				}
				if len(m.Attributes) != 2 {
					t.Errorf("attributes = %v", m.Attributes)
				}
			},
		},
		{
			// An audit: "{attr.region?}" on a message without region
			// removed the source's group (an SQS FIFO group lost its
			// order), and "{reply_to}" empty wiped the dedup id.
			name: "a field template that renders empty sets nothing",
			spec: Spec{GroupKey: "{attr.region?}", DedupID: "{reply_to}"},
			check: func(t *testing.T, m *mapping.Message) {
				if m.GroupKey != "g-1" || m.DedupID != "d-1" {
					t.Errorf("group %q, dedup id %q; want the source's g-1 and d-1", m.GroupKey, m.DedupID)
				}
			},
		},
		{
			name: "drop",
			spec: Spec{Drop: []string{"blob", "absent"}},
			check: func(t *testing.T, m *mapping.Message) {
				if _, ok := m.Attr("blob"); ok || len(m.Attributes) != 2 {
					t.Errorf("attributes = %v", m.Attributes)
				}
			},
		},
		{
			name: "set typed value replaces and appends",
			spec: Spec{Set: []Set{{Name: "tenant", Value: int42}, {Name: "new", Value: mapping.String("v")}}},
			check: func(t *testing.T, m *mapping.Message) {
				if v, _ := m.Attr("tenant"); !v.Equal(int42) || v.DataType() != "Number.int" {
					t.Errorf("tenant = %#v", v)
				}
				if v, _ := m.Attr("new"); !v.Equal(mapping.String("v")) {
					t.Errorf("new = %#v", v)
				}
			},
		},
		{
			name: "templates see the message before attribute rules",
			spec: Spec{
				Drop:     []string{"tenant"},
				GroupKey: "{attr.tenant}",
				Subject:  "orders.{group}",
			},
			check: func(t *testing.T, m *mapping.Message) {
				if m.GroupKey != "acme" {
					t.Errorf("GroupKey = %q", m.GroupKey)
				}
				// {group} is the incoming group key, not the new one.
				if m.Subject != "orders.g-1" {
					t.Errorf("Subject = %q", m.Subject)
				}
				if _, ok := m.Attr("tenant"); ok {
					t.Error("tenant not dropped")
				}
			},
		},
		{
			name: "all fields",
			spec: Spec{GroupKey: "{subject}", DedupID: "{id}", Subject: "s", To: "{source.address}", ContentType: "text/plain"},
			check: func(t *testing.T, m *mapping.Message) {
				got := [5]string{m.GroupKey, m.DedupID, m.Subject, m.To, m.ContentType}
				want := [5]string{"orders.created", "m-1", "s", "q-orders", "text/plain"}
				if got != want {
					t.Errorf("fields = %q, want %q", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Compile(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			m := testMessage()
			if err := r.Apply(m); err != nil {
				t.Fatal(err)
			}
			tt.check(t, m)
		})
	}
}

func TestApplyMissingAttributeRejects(t *testing.T) {
	r, err := Compile(Spec{GroupKey: "{attr.region}", Drop: []string{"tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	err = r.Apply(m)
	if !mapping.IsReject(err) || !strings.HasPrefix(err.Error(), "group_key: ") {
		t.Fatalf("err = %v, want a reject naming group_key", err)
	}
	// Nothing is applied when a template fails.
	if _, ok := m.Attr("tenant"); !ok || m.GroupKey != "g-1" {
		t.Errorf("message changed on error: %+v", m)
	}
}

func TestNilRules(t *testing.T) {
	var r *Rules
	if err := r.Apply(testMessage()); err != nil {
		t.Fatal(err)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string
		msg   string
	}{
		{"bad group key", Spec{GroupKey: "{nope}"}, "group_key", "unknown placeholder"},
		{"bad subject", Spec{Subject: "a{"}, "subject", "unclosed"},
		{"empty rename", Spec{Rename: []Rename{{From: "a"}}}, "", "non-empty"},
		{"empty set name", Spec{Set: []Set{{Value: mapping.String("x")}}}, "", "empty attribute name"},
		{"invalid set value", Spec{Set: []Set{{Name: "x"}}}, "", "invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want containing %q", err, tt.msg)
			}
			var fe *FieldError
			if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
				t.Errorf("err = %#v, want *FieldError for %s", err, tt.field)
			}
		})
	}
}

func TestSpecIsZero(t *testing.T) {
	if !(&Spec{}).IsZero() {
		t.Error("zero spec not IsZero")
	}
	if (&Spec{To: "x"}).IsZero() {
		t.Error("spec with To IsZero")
	}
}

// TestSetTemplate: a set rule with a template exposes a message field as a
// plain attribute (a Service Bus CorrelationId, ContentType or Subject to
// SQS consumers); an empty rendering sets nothing; a rendering that is not
// of the type rejects the message.
func TestSetTemplate(t *testing.T) {
	r, err := Compile(Spec{Set: []Set{
		{Name: "CorrelationId", Type: "String", Template: "{correlation_id}"},
		{Name: "ContentType", Type: "String", Template: "{content_type}"},
		{Name: "Subject", Type: "String", Template: "{subject}"},
		{Name: "ReplyTo", Type: "String", Template: "{reply_to}"},
		{Name: "n", Type: "Number.int", Template: "{attr.count?}"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := &mapping.Message{CorrelationID: "c-1", Subject: "orders.new", ReplyTo: "back",
		Attributes: []mapping.Attribute{{Name: "count", Value: mapping.String("7")}}}
	if err := r.Apply(m); err != nil {
		t.Fatal(err)
	}
	want := []mapping.Attribute{
		{Name: "count", Value: mapping.String("7")},
		{Name: "CorrelationId", Value: mapping.String("c-1")},
		{Name: "Subject", Value: mapping.String("orders.new")},
		{Name: "ReplyTo", Value: mapping.String("back")},
		{Name: "n", Value: mapping.Int32(7)},
	}
	if !reflect.DeepEqual(m.Attributes, want) {
		t.Errorf("attributes %v\nwant %v", m.Attributes, want)
	}
	bad := &mapping.Message{Attributes: []mapping.Attribute{{Name: "count", Value: mapping.String("seven")}}}
	if err := r.Apply(bad); !mapping.IsReject(err) {
		t.Errorf("a count that is not a number: %v", err)
	}
	// The rendering must be a value of the type's label, not only of its
	// base (a String.bool "maybe" was set as it was).
	typed, err := Compile(Spec{Set: []Set{{Name: "ok", Type: "String.bool", Template: "{attr.src}"}}})
	if err != nil {
		t.Fatal(err)
	}
	for text, valid := range map[string]bool{"true": true, "maybe": false, "1": false} {
		m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "src", Value: mapping.String(text)}}}
		if err := typed.Apply(m); (err == nil) != valid || (err != nil && !mapping.IsReject(err)) {
			t.Errorf("String.bool rendered %q: %v", text, err)
		}
	}
	if _, err := Compile(Spec{Set: []Set{{Name: "x", Type: "Strng", Template: "{id}"}}}); err == nil {
		t.Error("bad type: no error")
	}
	if _, err := Compile(Spec{Set: []Set{{Name: "x", Type: "String", Template: "{nope}"}}}); err == nil {
		t.Error("bad template: no error")
	}
}
