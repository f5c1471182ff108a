package adaptercfg

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestFieldError(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		text     string
		path     string // "" = names no field
		unwrapTo error
	}{
		{"errorf", Errorf("jetstream.ack_wait", "%q is not a duration", "soon"), `jetstream.ack_wait: "soon" is not a duration`, "jetstream.ack_wait", nil},
		{"wrap keeps the cause", Wrap("store_dir", fs.ErrNotExist), "store_dir: file does not exist", "store_dir", fs.ErrNotExist},
		{"errorf %w keeps the cause", Errorf("tls.ca_file", "%w", fs.ErrPermission), "tls.ca_file: permission denied", "tls.ca_file", fs.ErrPermission},
		{"several fields, first located", Fields("queue", "queue and topic", "set one"), "queue and topic: set one", "queue", nil},
		{"outermost wins", Fields("filter", `filter "f"`, "%w", Errorf("descriptor", "bad")), `filter "f": descriptor: bad`, "filter", nil},
		{"wrapped by the adapter", fmt.Errorf("nats source: %w", Errorf("subject", "required")), "nats source: subject: required", "subject", nil},
		{"plain error", errors.New("subject: required"), "subject: required", "", nil},
		{"index", Errorf(fmt.Sprintf("attribute_names[%d]", 2), "unknown"), "attribute_names[2]: unknown", "attribute_names[2]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.text {
				t.Errorf("Error() = %q, want %q", got, tc.text)
			}
			path, ok := PathOf(tc.err)
			if path != tc.path || ok != (tc.path != "") {
				t.Errorf("PathOf = %q, %v; want %q", path, ok, tc.path)
			}
			if tc.unwrapTo != nil && !errors.Is(tc.err, tc.unwrapTo) {
				t.Errorf("%v does not unwrap to %v", tc.err, tc.unwrapTo)
			}
		})
	}
	if Wrap("x", nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

func TestDurationFieldError(t *testing.T) {
	for _, tc := range []struct{ s, text string }{
		{"soon", `ack_wait: "soon" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m"`},
		{"-1s", `ack_wait: must be positive, not "-1s"`},
		{"0s", `ack_wait: must be positive, not "0s"`},
	} {
		_, err := PositiveDuration("ack_wait", tc.s, 0)
		if err == nil || err.Error() != tc.text {
			t.Errorf("%s: %v, want %q", tc.s, err, tc.text)
		}
		if p, ok := PathOf(err); p != "ack_wait" || !ok {
			t.Errorf("%s: path %q", tc.s, p)
		}
	}
}
