package adaptercfg

import (
	"errors"
	"fmt"
)

// FieldError is a configuration error about one field, named by its HCL
// path: "address", "jetstream.ack_wait", "filter_subjects[0]". The
// configuration loader finds the field's source range from Path (with
// errors.As), so a diagnostic points at the value, not only at the block.
type FieldError struct {
	// Path is the field's path in the adapter's block: attribute and block
	// names joined with ".", an index in brackets where the value is a list.
	Path string
	// Label is how the message names the field(s) when that is not Path
	// ("tls.cert_file and tls.key_file", `filter "sel"`); empty means Path.
	Label string
	Err   error
}

func (e *FieldError) Error() string {
	label := e.Label
	if label == "" {
		label = e.Path
	}
	return label + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Errorf returns a FieldError for path with a formatted message (%w works).
func Errorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// Wrap returns err as a FieldError for path (nil stays nil).
func Wrap(path string, err error) error {
	if err == nil {
		return nil
	}
	return &FieldError{Path: path, Err: err}
}

// Fields returns a FieldError whose message names several fields (label)
// and that points at the first of them (path).
func Fields(path, label, format string, args ...any) error {
	return &FieldError{Path: path, Label: label, Err: fmt.Errorf(format, args...)}
}

// PathOf returns the path of the field err is about, and whether it names
// one. The outermost FieldError wins: it names the field in the block the
// error is reported for.
func PathOf(err error) (string, bool) {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return "", false
	}
	return fe.Path, true
}
