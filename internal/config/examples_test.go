package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// The shipped examples load without a warning, with the values their
// headers export: a user's first try should not open on one (the local
// migration example warned that its lock heartbeat was close to its
// ack_wait, on every run).
func TestExampleConfigsLoadWithoutWarnings(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configurations: %v", err)
	}
	t.Setenv("HOME", t.TempDir()) // the embedded examples' store_dir
	export := regexp.MustCompile(`(?m)^#\s+export ([A-Z0-9_]+)=(.*)$`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range export.FindAllStringSubmatch(string(b), -1) {
				t.Setenv(m[1], strings.Trim(m[2], `'"`))
			}
			_, diags := NewLoader().Load(f)
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning {
					t.Errorf("warns: %s", DiagnosticString(d))
				}
			}
		})
	}
}
