package sbrest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/qbridge/qbridge/mapping"
)

// encodeAttributes writes the user attributes as custom properties and
// records in env the data types the receiving side cannot infer.
func (e *encoded) encodeAttributes(attrs []mapping.Attribute, opt *mapping.Options, f form, env *mapping.Envelope) error {
	for _, a := range attrs {
		w, reason, tooLarge, err := e.checkAttribute(a, f)
		if err != nil {
			return mapping.Rejectf(Wire, attrField(a.Name), "%v", err)
		}
		if tooLarge && opt.Policy == mapping.Reject {
			// A size limit, like the envelope's and the message's.
			return mapping.TooLargef(Wire, attrField(a.Name), "%s", reason)
		}
		if reason != "" {
			if !validValue(a.Value) || !utf8.ValidString(a.Name) {
				// Nothing JSON can carry (the envelope is JSON): no reversible encoding.
				if opt.Policy == mapping.Drop {
					opt.Dropped(attrField(a.Name), reason)
					continue
				}
				return mapping.Rejectf(Wire, attrField(a.Name), "%s", reason)
			}
			carry, err := opt.Refuse(Wire, attrField(a.Name), reason, true)
			if err != nil {
				return err
			}
			if carry {
				env.Attrs = append(env.Attrs, a)
			}
			continue
		}
		e.props = append(e.props, prop{name: a.Name, v: w, user: true})
		if !sameType(a.Value, w.inferred) || !isCanonical(a.Name) {
			// Also for names net/http would re-case on receive: the
			// envelope keeps the exact spelling.
			env.SetType(a.Name, a.Value.DataType())
		}
		if a.Value.Kind == mapping.KindNumber {
			if _, same := mapping.NaturalNumber(a.Value); !same {
				env.SetText(a.Name, a.Value.Str())
			}
		}
	}
	slices.SortStableFunc(env.Attrs, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
	return nil
}

// checkAttribute returns the wire value of a, or the reason it cannot be a
// custom property as it is (for the policy) and whether that is its size,
// or an error for an invalid value.
func (e *encoded) checkAttribute(a mapping.Attribute, f form) (w wireValue, reason string, tooLarge bool, err error) {
	switch {
	case a.Name == "":
		return wireValue{}, "empty name", false, nil
	case !isToken(a.Name):
		return wireValue{}, "name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)", false, nil
	}
	if r := reservedReason(a.Name); r != "" {
		return wireValue{}, r, false, nil
	}
	for _, p := range e.props {
		if p.user && strings.EqualFold(p.name, a.Name) {
			return wireValue{}, "another attribute has this name up to case (HTTP header names are case-insensitive)", false, nil
		}
	}
	if !validValue(a.Value) {
		return wireValue{}, "value is not valid UTF-8", false, nil
	}
	w, err = formatValue(a.Value, true)
	if err != nil {
		return w, "", false, err
	}
	switch {
	case f == formHeader && w.quoted && !headerSafe(w.text):
		return w, reasonUnsafe, false, nil
	case w.dateLike:
		return w, reasonDateLike, false, nil
	case len(a.Name)+w.size() > MaxPropertySize:
		return w, fmt.Sprintf("%d bytes, more than Service Bus's %d per property", len(a.Name)+w.size(), MaxPropertySize), true, nil
	}
	return w, "", false, nil
}

func attrField(name string) string { return fmt.Sprintf("attribute %q", name) }

// checkText rejects system text that is not UTF-8: it travels as JSON
// (BrokerProperties, the envelope), which cannot carry it.
func checkText(m *mapping.Message) error {
	for _, f := range []struct{ name, v string }{
		{"MessageId", m.ID}, {"MessageId", m.DedupID}, {"CorrelationId", m.CorrelationID},
		{"ContentType", m.ContentType}, {"ContentEncoding", m.ContentEncoding}, {"Label", m.Subject},
		{"To", m.To}, {"ReplyTo", m.ReplyTo}, {"ReplyToSessionId", m.ReplyToGroup},
		{"SessionId", m.GroupKey}, {"PartitionKey", m.PartitionKey},
		{"ViaPartitionKey", m.ViaPartitionKey}, {"tracestate", m.Trace.State},
	} {
		if !utf8.ValidString(f.v) {
			return mapping.Rejectf(Wire, f.name, "not valid UTF-8")
		}
	}
	for _, a := range m.Annotations {
		if !utf8.ValidString(a.Name) || !validValue(a.Value) {
			return mapping.Rejectf(Wire, fmt.Sprintf("annotation %q", a.Name), "not valid UTF-8")
		}
	}
	return nil
}

// validValue reports whether every text inside v is valid UTF-8.
func validValue(v mapping.Value) bool {
	if !utf8.ValidString(v.Label) || !utf8.ValidString(v.Str()) {
		return false
	}
	for _, s := range v.Strings() {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, x := range v.List() { // also a Map's keys and values
		if !validValue(x) {
			return false
		}
	}
	return true
}
