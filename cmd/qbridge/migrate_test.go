package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestMigrateUsage(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.hcl", goodConfig)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help exits 0 with an example", []string{"-h"}, 0, "qbridge migrate -dry-run"},
		{"no configuration", nil, 2, "usage: qbridge migrate"},
		{"dry run and copy", []string{"-dry-run", "-copy", good}, 2, "exclude each other"},
		{"filter on a move", []string{"-where", "{group}==a", good}, 2, "use -copy with the filter"},
		{"bad filter", []string{"-copy", "-where", "{group}", good}, 2, "TEMPLATE==VALUE"},
		{"bad time", []string{"-copy", "-since", "yesterday", good}, 2, "RFC 3339"},
		{"state without copy", []string{"-state", "s.json", good}, 2, "-state keeps copy mode's checkpoints"},
		{"unknown pipeline", []string{"-yes", "-pipeline", "nope", good}, 2, `-pipeline "nope": the configuration has orders`},
		{"bad progress", []string{"-progress", "fancy", good}, 2, "-progress"},
		{"bad scheduled", []string{"-scheduled", "later", good}, 2, "leave or wait"},
		{"move needs -yes without a terminal", []string{good}, 2, "pass -yes to confirm"},
		{"configuration errors", []string{"-yes", writeFile(t, dir, "bad.hcl", "pipeline \"x\" {}\n")}, 1, "nothing was migrated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), append([]string{"migrate"}, tt.args...), stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, errb.String())
			}
		})
	}
}
