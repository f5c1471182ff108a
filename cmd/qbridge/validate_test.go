package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodConfig = `pipeline "orders" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in.>"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out.{group}"
  }
}
`

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.hcl", goodConfig)
	bad := writeFile(t, dir, "bad.hcl", strings.Replace(goodConfig, "subject = \"in.>\"", "subject = \"in.>\"\n    connect_timeout = 5", 1)+
		"pipeline \"x\" {\n  source \"sqs\" { queue_name = \"q\" }\n  sink \"servicebus\" {}\n  retry { max = \"soon\" }\n}\n")

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"usage", nil, 2, nil, []string{"usage: qbridge validate"}},
		{"ok", []string{good}, 0, []string{good + ": ok (1 pipeline)"}, nil},
		{"errors with positions and snippets", []string{bad}, 1, nil, []string{
			"Error: Invalid servicebus sink configuration",
			"  on " + bad + ":14:3, in pipeline \"x\":",
			"    14:   sink \"servicebus\" {}",
			"          ^^^^^^^^^^^^^^^^^",
			"connection_string: required",
			"Error: Invalid duration",
			"  on " + bad + ":15:17, in pipeline \"x\":",
			`"soon" for "max" is not a duration`,
		}},
		{"each argument on its own", []string{good, bad, good}, 1, []string{good + ": ok"}, []string{"Error:"}},
		{"directory", []string{dir}, 1, nil, []string{"Error:"}},
		{"missing file", []string{filepath.Join(dir, "nope.hcl")}, 1, nil, []string{"Error: Cannot read configuration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, append([]string{"validate"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
