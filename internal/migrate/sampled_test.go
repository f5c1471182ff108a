package migrate

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// A ledger that does not describe this entity's messages now explains
// nothing: another entity's, one older than SQS keeps a message, one of
// another version, a file that is not one.
func TestLedgerIgnoresWhatItCannotTrust(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	const entity = "arn:aws:sqs:eu-west-1:1:orders"
	write := func(t *testing.T, body []byte) {
		t.Helper()
		l := openLedger(entity)
		if err := os.MkdirAll(ledgerDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.path, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := func(f ledgerFile) []byte {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now().UTC().Format(time.RFC3339)
	k := ledgerKey("id\x00m1")
	for _, tc := range []struct {
		name     string
		body     []byte
		explains bool
	}{
		{"this entity's, fresh", file(ledgerFile{Version: 1, Entity: entity, SavedAt: now, Receives: map[string]int{k: 1}}), true},
		{"another entity's", file(ledgerFile{Version: 1, Entity: "arn:aws:sqs:eu-west-1:1:other", SavedAt: now, Receives: map[string]int{k: 1}}), false},
		{"older than a message is kept", file(ledgerFile{Version: 1, Entity: entity, SavedAt: time.Now().Add(-15 * 24 * time.Hour).UTC().Format(time.RFC3339), Receives: map[string]int{k: 1}}), false},
		{"another version", file(ledgerFile{Version: 2, Entity: entity, SavedAt: now, Receives: map[string]int{k: 1}}), false},
		{"not a ledger", []byte("{not json"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(t, tc.body)
			l := openLedger(entity)
			if got := l.explains("id\x00m1", 2); got != tc.explains {
				t.Errorf("explains a second receive: %v, want %v", got, tc.explains)
			}
			if l.explains("id\x00m1", 3) {
				t.Error("explains a third receive after one dry run")
			}
		})
	}
}

// What a dry run saves is read back by the next run, with what earlier
// dry runs saved; a move that drained the source removes it.
func TestLedgerRoundTrip(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	const entity = "arn:aws:sqs:eu-west-1:1:orders"
	first := openLedger(entity)
	first.sampled("a", 1)
	first.sampled("b", 3) // delivered twice before, by no dry run: not explained
	if err := first.save(entity); err != nil {
		t.Fatal(err)
	}
	second := openLedger(entity)
	second.sampled("a", 2) // the second dry run
	second.sampled("c", 1)
	if err := second.save(entity); err != nil {
		t.Fatal(err)
	}
	move := openLedger(entity)
	for _, tc := range []struct {
		key   string
		count int
		want  bool
	}{
		{"a", 3, true}, {"a", 2, false}, {"a", 4, false},
		{"b", 4, false}, {"c", 2, true}, {"d", 2, false}, {"c", 1, false},
	} {
		if got := move.explains(tc.key, tc.count); got != tc.want {
			t.Errorf("explains(%q, %d) = %v, want %v", tc.key, tc.count, got, tc.want)
		}
	}
	if err := move.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(move.path); !os.IsNotExist(err) {
		t.Errorf("the ledger is still there after the move: %v", err)
	}
}
