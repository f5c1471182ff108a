// Package rules applies a pipeline's mapping adjustments to the normalized
// message between source and sink: rename, drop and set attributes, and
// derive the group key, dedup id, subject, to and content type from
// templates (see Template).
//
// Order of application, so that a rule never depends on another's result in
// a surprising way:
//
//  1. every template is rendered against the message as the source decoded
//     it (so {attr.tenant} may name an attribute that rule 3 drops);
//  2. rename, in the order given;
//  3. drop;
//  4. set;
//  5. the rendered templates are assigned to their fields.
package rules

import (
	"fmt"

	"github.com/qbridge/qbridge/mapping"
)

// Spec is the declarative form of the rules, as configured. It holds plain
// values only, so two Specs compare with reflect.DeepEqual.
type Spec struct {
	Rename []Rename
	Drop   []string
	Set    []Set
	// Templates for message fields; "" leaves the field as the source set it.
	GroupKey    string
	DedupID     string
	Subject     string
	To          string
	ContentType string
}

// Rename moves attribute From to To, replacing an existing To.
type Rename struct{ From, To string }

// Set sets attribute Name to Value, replacing an existing one. With a
// Template instead, the value is the template rendered for each message
// (say "{correlation_id}", to show a Service Bus CorrelationId to SQS
// consumers as a plain attribute), parsed as data type Type; a rendering
// that is empty sets nothing.
type Set struct {
	Name     string
	Value    mapping.Value
	Type     string // data type of a templated value ("String", "Number.int"...)
	Template string
}

// IsZero reports whether the spec changes nothing.
func (s *Spec) IsZero() bool {
	return len(s.Rename) == 0 && len(s.Drop) == 0 && len(s.Set) == 0 &&
		s.GroupKey == "" && s.DedupID == "" && s.Subject == "" && s.To == "" && s.ContentType == ""
}

// Rules is a compiled Spec. It is immutable and safe for concurrent use.
type Rules struct {
	rename []Rename
	drop   []string
	set    []Set
	tmpls  []*Template // per set rule: its template, or nil
	fields []fieldRule
}

type fieldRule struct {
	name string // config name, for errors
	tmpl *Template
	set  func(m *mapping.Message, v string)
}

// FieldError says which template of a Spec failed to compile.
type FieldError struct {
	Field string // "group_key", "dedup_id", "subject", "to", "content_type"
	Err   error  // a *SyntaxError
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Compile checks and compiles s. Errors are *FieldError for templates.
func Compile(s Spec) (*Rules, error) {
	r := &Rules{
		rename: append([]Rename(nil), s.Rename...),
		drop:   append([]string(nil), s.Drop...),
		set:    append([]Set(nil), s.Set...),
	}
	for _, rn := range s.Rename {
		if rn.From == "" || rn.To == "" {
			return nil, fmt.Errorf("rename %q to %q: both names must be non-empty", rn.From, rn.To)
		}
	}
	r.tmpls = make([]*Template, len(s.Set))
	for i, st := range s.Set {
		if st.Name == "" {
			return nil, fmt.Errorf("set: empty attribute name")
		}
		if st.Template != "" {
			if _, _, err := mapping.SplitDataType(st.Type); err != nil {
				return nil, fmt.Errorf("set %q: %w", st.Name, err)
			}
			t, err := Parse(st.Template)
			if err != nil {
				return nil, &FieldError{Field: fmt.Sprintf("set %q", st.Name), Err: err}
			}
			r.tmpls[i] = t
			continue
		}
		if !st.Value.IsValid() {
			return nil, fmt.Errorf("set %q: invalid value", st.Name)
		}
	}
	for _, f := range []struct {
		name, src string
		set       func(*mapping.Message, string)
	}{
		{"group_key", s.GroupKey, func(m *mapping.Message, v string) { m.GroupKey = v }},
		{"dedup_id", s.DedupID, func(m *mapping.Message, v string) { m.DedupID = v }},
		{"subject", s.Subject, func(m *mapping.Message, v string) { m.Subject = v }},
		{"to", s.To, func(m *mapping.Message, v string) { m.To = v }},
		{"content_type", s.ContentType, func(m *mapping.Message, v string) { m.ContentType = v }},
	} {
		if f.src == "" {
			continue
		}
		t, err := Parse(f.src)
		if err != nil {
			return nil, &FieldError{Field: f.name, Err: err}
		}
		r.fields = append(r.fields, fieldRule{name: f.name, tmpl: t, set: f.set})
	}
	return r, nil
}

// Apply changes m in place; m must not share its attribute array with a
// message still in use elsewhere (see mapping.Message.Clone). Errors are *mapping.RejectError (a template
// needed an attribute the message lacks), which the pipeline dead-letters.
// A nil *Rules changes nothing.
func (r *Rules) Apply(m *mapping.Message) error {
	if r == nil {
		return nil
	}
	// Render first: templates see the message as the source decoded it.
	var small [5]string
	vals := small[:len(r.fields)]
	for i, f := range r.fields {
		v, err := f.tmpl.Execute(m)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		vals[i] = v
	}
	var setVals []mapping.Value // templated set values; invalid: set nothing
	for i, t := range r.tmpls {
		if t == nil {
			continue
		}
		if setVals == nil {
			setVals = make([]mapping.Value, len(r.set))
		}
		text, err := t.Execute(m)
		if err != nil {
			return fmt.Errorf("set %q: %w", r.set[i].Name, err)
		}
		if text == "" {
			continue
		}
		v, err := mapping.ParseValue(r.set[i].Type, text)
		if err == nil {
			err = mapping.CheckText(r.set[i].Type, text)
		}
		if err != nil {
			return mapping.Rejectf("mapping", fmt.Sprintf("attribute %q", r.set[i].Name), "template %q rendered a value that is not a %s: %v", r.set[i].Template, r.set[i].Type, err)
		}
		setVals[i] = v
	}
	for _, rn := range r.rename {
		if v, ok := m.Attr(rn.From); ok {
			m.DeleteAttr(rn.From)
			m.SetAttr(rn.To, v)
		}
	}
	for _, name := range r.drop {
		m.DeleteAttr(name)
	}
	for i, st := range r.set {
		switch {
		case r.tmpls[i] == nil:
			m.SetAttr(st.Name, st.Value)
		case setVals[i].IsValid():
			m.SetAttr(st.Name, setVals[i])
		}
	}
	for i, f := range r.fields {
		// Empty sets nothing, as for set: "{attr.tenant?}" on a message
		// without tenant kept no group, the source's included (an SQS
		// FIFO group lost its order), and "{id}" on a message with only a
		// dedup id wiped that id.
		if vals[i] != "" {
			f.set(m, vals[i])
		}
	}
	return nil
}
