package testenv

import (
	"os"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const set, unset = "QBRIDGE_TESTENV_SET", "QBRIDGE_TESTENV_UNSET"
	t.Setenv(set, "x")
	t.Setenv(unset, "")
	for _, tc := range []struct {
		name     string
		required string
		vars     []string
		want     bool
		line     string // what stderr must contain; "" = nothing
	}{
		{"all set", "", []string{set}, true, ""},
		{"all set, required", "1", []string{set}, true, ""},
		{"missing, required", "1", []string{set, unset}, false, "pkg: " + unset + " not set: the tests that need a broker skip (start it); " + RequiredVar + " is set, so this fails"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(RequiredVar, tc.required)
			got, stderr := capture(t, func() bool { return Check("pkg", "a broker", "start it", tc.vars...) })
			if got != tc.want {
				t.Errorf("Check = %v, want %v", got, tc.want)
			}
			if tc.line == "" && stderr != "" || !strings.Contains(stderr, tc.line) {
				t.Errorf("stderr %q, want %q", stderr, tc.line)
			}
		})
	}
}

// capture runs f with stderr redirected to a file and returns what it wrote.
func capture(t *testing.T, f func() bool) (bool, string) {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = tmp
	got := f()
	os.Stderr = old
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return got, string(b)
}
