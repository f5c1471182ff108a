package adaptercfg

import (
	"errors"
	"testing"
	"time"
)

// TestParseDuration: the one duration parser, and its two wordings (a
// FieldError's, the HCL diagnostic's) of each refusal.
func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		s             string
		allowZero     bool
		want          time.Duration
		err, sentence string
	}{
		{"500ms", false, 500 * time.Millisecond, "", ""},
		{"0s", true, 0, "", ""},
		{"0s", false, 0, `must be positive, not "0s"`, `"wait" must be positive, not "0s"`},
		{"-1s", true, 0, `must be zero or positive, not "-1s"`, `"wait" must be zero or positive, not "-1s"`},
		{"-1s", false, 0, `must be positive, not "-1s"`, `"wait" must be positive, not "-1s"`},
		{"30x", true, 0,
			`"30x" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`,
			`"30x" for "wait" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`},
		{"", true, 0, `"" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`,
			`"" for "wait" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`},
	} {
		d, err := ParseDuration(tc.s, tc.allowZero)
		if tc.err == "" {
			if err != nil || d != tc.want {
				t.Errorf("%q: %v, %v; want %v", tc.s, d, err, tc.want)
			}
			continue
		}
		var de *DurationError
		if !errors.As(err, &de) || err.Error() != tc.err || de.For("wait") != tc.sentence {
			t.Errorf("%q (allowZero %v): %v; want %q / %q", tc.s, tc.allowZero, err, tc.err, tc.sentence)
		}
	}
}
