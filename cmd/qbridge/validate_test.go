package main

import (
	"os"
	"path/filepath"
	"regexp"
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

	// The variable is unset in the test process (t.Setenv then Unsetenv
	// restores whatever was there afterwards).
	t.Setenv("QBRIDGE_TEST_UNSET_SECRET", "")
	os.Unsetenv("QBRIDGE_TEST_UNSET_SECRET")
	withSecret := strings.Replace(goodConfig, `"nats://127.0.0.1:4222"`, `env("QBRIDGE_TEST_UNSET_SECRET")`, 1)
	secret := writeFile(t, dir, "secret.hcl.txt", withSecret)
	secretBad := writeFile(t, dir, "secretbad.hcl.txt", withSecret+"pipeline \"y\" {\n  source \"nats\" {\n    url = \"nats://x\"\n    subject = \"a\"\n  }\n  sink \"nats\" {\n    url = env(\"QBRIDGE_TEST_UNSET_SECRET\")\n    subject = \"b\"\n  }\n  retry { max = \"soon\" }\n}\n")

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"usage", nil, 2, nil, []string{"which configuration?"}},
		{"unset env is unknown", []string{secret}, 0, []string{secret + ": ok (1 pipeline; not set, so not checked: QBRIDGE_TEST_UNSET_SECRET)"}, nil},
		{"strict requires env", []string{"-strict", secret}, 1, nil, []string{`environment variable "QBRIDGE_TEST_UNSET_SECRET" is not set`}},
		{"unset env does not hide other errors", []string{secretBad}, 1, nil, []string{`Error: Invalid duration`}},
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

// Every example configuration validates with none of its variables set, as
// in a CI job without secrets; with -strict the same files name them.
func TestExampleConfigsValidateWithoutEnv(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	envRef := regexp.MustCompile(`env\("([A-Z0-9_]+)"\)`)
	var unset []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envRef.FindAllStringSubmatch(string(src), -1) {
			t.Setenv(m[1], "") // restored after the test
			os.Unsetenv(m[1])
			unset = append(unset, m[1])
		}
	}
	for _, f := range files {
		code, out, errOut := runCmd(t, "validate", f)
		if code != 0 || !strings.Contains(out, f+": ok") {
			t.Errorf("validate %s = %d\n%s%s", f, code, out, errOut)
		}
	}
	if len(unset) == 0 {
		return
	}
	code, _, errOut := runCmd(t, append([]string{"validate", "-strict"}, files...)...)
	if code != 1 || !strings.Contains(errOut, "is not set") {
		t.Errorf("validate -strict without the variables = %d, want 1 naming them\n%s", code, errOut)
	}
}

// Each example works as its header says: with only the variables its
// "export" lines set, "validate -strict" passes, and every variable its
// body reads is named in the header.
func TestExampleConfigHeaders(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	envRef := regexp.MustCompile(`env\("([A-Z0-9_]+)"`)
	export := regexp.MustCompile(`(?m)^#\s+export ([A-Z0-9_]+)=(.*)$`)
	bodies := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = string(b)
		for _, m := range envRef.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "HOME" { // the user's, not the example's
				continue
			}
			t.Setenv(m[1], "")
			os.Unsetenv(m[1])
		}
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src := bodies[f]
			header, body := src, ""
			if i := strings.Index(src, "\npipeline "); i >= 0 {
				header, body = src[:i], src[i:]
			}
			for _, m := range envRef.FindAllStringSubmatch(body, -1) {
				if m[1] != "HOME" && !strings.Contains(header, m[1]) {
					t.Errorf("reads %s, which its header does not name", m[1])
				}
				// One scheme: qbridge's variables start QBRIDGE_; only the
				// AWS SDK's region and the OS's HOME are read as they are.
				if !strings.HasPrefix(m[1], "QBRIDGE_") && m[1] != "AWS_REGION" && m[1] != "HOME" {
					t.Errorf("reads %s: name it QBRIDGE_%s", m[1], m[1])
				}
			}
			for _, m := range export.FindAllStringSubmatch(header, -1) {
				t.Setenv(m[1], strings.Trim(m[2], `'"`))
			}
			if code, out, errOut := runCmd(t, "validate", "-strict", f); code != 0 {
				t.Errorf("with the header's exports only, validate -strict = %d\n%s%s", code, out, errOut)
			}
		})
	}
}
