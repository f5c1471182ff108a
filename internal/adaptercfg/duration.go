package adaptercfg

import (
	"fmt"
	"time"
)

// DurationError says why a duration setting was refused. The HCL loader
// and the adapters' FieldErrors word it alike.
type DurationError struct {
	Text string // the setting as written
	// Want is what its sign must be ("positive", "zero or positive"), or
	// "" when Text is not a duration at all.
	Want string
}

const durationSyntax = `want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`

func (e *DurationError) Error() string {
	if e.Want == "" {
		return fmt.Sprintf("%q is not a duration: %s", e.Text, durationSyntax)
	}
	return fmt.Sprintf("must be %s, not %q", e.Want, e.Text)
}

// For words the error as a sentence about the setting named name, for a
// diagnostic that names no field of its own.
func (e *DurationError) For(name string) string {
	if e.Want == "" {
		return fmt.Sprintf("%q for %q is not a duration: %s", e.Text, name, durationSyntax)
	}
	return fmt.Sprintf("%q must be %s, not %q", name, e.Want, e.Text)
}

// ParseDuration parses a Go duration ("500ms", "30s", "5m"), refusing a
// negative one (no setting of ours means "in the past"), and zero unless
// allowZero. The error is a *DurationError.
func ParseDuration(s string, allowZero bool) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, &DurationError{Text: s}
	case d < 0 && allowZero:
		return 0, &DurationError{Text: s, Want: "zero or positive"}
	case d < 0, d == 0 && !allowZero:
		return 0, &DurationError{Text: s, Want: "positive"}
	}
	return d, nil
}

// Duration parses the duration field named field; an empty string gives def.
// Negative durations are refused.
func Duration(field, s string, def time.Duration) (time.Duration, error) {
	return duration(field, s, def, true)
}

// PositiveDuration is Duration that also refuses zero when the field is set.
func PositiveDuration(field, s string, def time.Duration) (time.Duration, error) {
	return duration(field, s, def, false)
}

func duration(field, s string, def time.Duration, allowZero bool) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := ParseDuration(s, allowZero)
	return d, Wrap(field, err)
}
