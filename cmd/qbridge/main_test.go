package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// runCmd runs qbridge with args and returns the exit code and the output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), args, stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no args", nil, 2, "", "Commands:"},
		{"help", []string{"help"}, 0, "validate", ""},
		{"help lists every command", []string{"-h"}, 0, "run        run the bridge daemon", ""},
		{"help command", []string{"help", "validate"}, 0, "", "usage: qbridge validate"},
		{"unknown", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"version", []string{"version"}, 0, "adapters: amqp, memtest, memtest2, nats, servicebus, sqs", ""},
		{"--version", []string{"--version"}, 0, "qbridge ", ""},
		{"version with args", []string{"version", "x"}, 2, "", "usage: qbridge version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("qbridge %v = %d\nstdout: %s\nstderr: %s\nwant %d, stdout containing %q, stderr containing %q",
					tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// Every command's help exits 0 and shows an example (translate's usage is
// its own; see the report of issue 12).
func TestHelpEverywhere(t *testing.T) {
	for name := range commands {
		for _, flag := range []string{"-h", "--help"} {
			t.Run(name+flag, func(t *testing.T) {
				code, _, errOut := runCmd(t, name, flag)
				if code != 0 {
					t.Errorf("qbridge %s %s = %d, want 0\n%s", name, flag, code, errOut)
				}
				if name != "translate" && name != "memtest" && !strings.Contains(errOut, "Example:") {
					t.Errorf("qbridge %s %s: no example in the help:\n%s", name, flag, errOut)
				}
			})
		}
	}
}

// Flags may follow the arguments: "validate FILE -strict" checked FILE
// without -strict, said "ok", then failed on a file named "-strict".
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		strict     bool
		positional []string
	}{
		{[]string{"a.hcl"}, false, []string{"a.hcl"}},
		{[]string{"-strict", "a.hcl"}, true, []string{"a.hcl"}},
		{[]string{"a.hcl", "-strict"}, true, []string{"a.hcl"}},
		{[]string{"a.hcl", "-strict", "b.hcl"}, true, []string{"a.hcl", "b.hcl"}},
		{[]string{"a.hcl", "--", "-strict"}, false, []string{"a.hcl", "-strict"}},
		{[]string{"-", "-strict"}, true, []string{"-"}},
		// "--" as a flag's value is not the end of the flags.
		{[]string{"-name", "--", "a.hcl", "-strict"}, true, []string{"a.hcl"}},
		{nil, false, nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		strict := fs.Bool("strict", false, "")
		fs.String("name", "", "")
		if err := parseArgs(fs, tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if *strict != tc.strict || !slices.Equal(fs.Args(), tc.positional) {
			t.Errorf("%q: strict %v, arguments %q; want %v, %q", tc.args, *strict, fs.Args(), tc.strict, tc.positional)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseArgs(fs, []string{"a.hcl", "-nope"}); err == nil {
		t.Error("an unknown flag after the argument: no error")
	}
}
