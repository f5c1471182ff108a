package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseCondition: a -where flag never panics the parser; what it
// accepts splits the text at its first operator, and what it refuses names
// the flag.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{"{attr.tenant}==acme", "{group}==a", "{group}!=", "{group}", "{nope}==x",
		"{subject}==orders.x", "a!==b", "{attr.t}==a!=b", "==", "!=", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCondition(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "-where ") {
				t.Fatalf("ParseCondition(%q): %v, want an error naming -where", s, err)
			}
			return
		}
		op := "=="
		if c.Negate {
			op = "!="
		}
		tpl := c.Template.String()
		if tpl+op+c.Value != s || strings.Contains(tpl, "==") || strings.Contains(tpl, "!=") {
			t.Fatalf("ParseCondition(%q) = %q %s %q: not split at the first operator", s, tpl, op, c.Value)
		}
	})
}

// FuzzOpenState: a -state file's contents never panic openState; a file
// it accepts is a version-1 state file that a save can extend and that
// reads back.
func FuzzOpenState(f *testing.F) {
	for _, s := range []string{
		`{"version": 1, "mode": "copy", "pipelines": []}`, `{"version": 1}`, "pipeline {}", "",
		`{"version": 1, "checkpoints": {}}`, `{"version": 2, "checkpoints": {}}`, `{"version": 1, "checkpoints": null}`,
		`{"version":1,"checkpoints":{"p":{"after":7,"written_up_to":12,"updated_at":"2024-01-02T03:04:05Z","source":"sqs:q","filters":"-where {group}==a","scheduled":[{"id":"x","at":"2024-01-02T03:04:05Z"}]}}}`,
		`{"version":1,"checkpoints":{"p":{"after":18446744073709551615}}}`,
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "state.json")
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openState(path)
		if err != nil {
			return
		}
		if s.data.Version != 1 || s.data.Jobs == nil {
			t.Fatalf("accepted %q as version %d, jobs %v", content, s.data.Version, s.data.Jobs)
		}
		for job := range s.data.Jobs {
			_, _ = s.rewritable(job), s.scheduled(job)
		}
		after := s.after("fuzz") + 1
		if after == 0 { // at the top: save never moves it back
			after--
		}
		if err := s.save("fuzz", after, 0); err != nil {
			t.Fatalf("save: %v", err)
		}
		s.close()
		again, err := openState(path)
		if err != nil {
			t.Fatalf("after a save of %q: %v", content, err)
		}
		defer again.close()
		if again.after("fuzz") != after || len(again.data.Jobs) != len(s.data.Jobs) {
			t.Fatalf("after a save of %q: after %d of %d jobs, want %d of %d", content, again.after("fuzz"), len(again.data.Jobs), after, len(s.data.Jobs))
		}
	})
}
