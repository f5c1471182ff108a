package mapping

import (
	"errors"
	"slices"
	"testing"
)

// TestRefuse: the one policy decision every codec calls, with what it
// reports through OnDrop.
func TestRefuse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   Policy
		canCarry bool
		carry    bool
		err      string
		reported []string
	}{
		{"reject", Reject, true, false, `amqp: attribute "x": too long`, nil},
		{"drop", Drop, true, false, "", []string{`attribute "x"`, "too long"}},
		{"drop, not carriable", Drop, false, false, "", []string{`attribute "x"`, "too long"}},
		{"encode", Encode, true, true, "", []string{`attribute "x"`, "encoded: too long"}},
		{"encode, not carriable", Encode, false, false, `amqp: attribute "x": too long`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []string
			o := &Options{Policy: tc.policy, OnDrop: func(field, reason string) { reported = append(reported, field, reason) }}
			carry, err := o.Refuse("amqp", `attribute "x"`, "too long", tc.canCarry)
			if carry != tc.carry {
				t.Errorf("carry = %v, want %v", carry, tc.carry)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.err != "":
				var r *RejectError
				if !errors.As(err, &r) || err.Error() != tc.err {
					t.Errorf("err = %v, want the RejectError %q", err, tc.err)
				}
			}
			if !slices.Equal(reported, tc.reported) {
				t.Errorf("reported %q, want %q", reported, tc.reported)
			}
		})
	}
}
