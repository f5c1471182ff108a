package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// sampleLedger remembers, across runs, the deliveries that dry runs made
// of a source whose every receive counts (driver.Backlog.ReceivesCounted:
// SQS, and Service Bus where a dry run receives: sessions, HTTPS). A dry run there reads its sample and hands it back, and each
// message comes to the move with its receive count raised: the move took
// that for an interrupted run's delivery and said "up to N of the
// messages may be there twice" after the dry run a user is advised to do
// first (an audit). The ledger keeps, per message, the count up to which
// every receive was a dry run's, or a move's that never sent it: what a
// move stopped early (an interrupt, -timeout) released unsent, and what
// its source had received ahead and not handed out, go back recorded too
// (a clean interrupt's resume said "up to 40 of the messages may be there
// twice" of messages written once). A move's delivery whose earlier
// receives are all so explained is no sign of an earlier write. Anything
// else (a consumer, a retry cut short by a stop, a killed move, a dry run
// killed before it saved) leaves the count higher than the ledger
// explains, and the note stands.
//
// The file is in $XDG_STATE_HOME/qbridge/migrate (else
// ~/.local/state/qbridge/migrate), named by a hash of the broker's name
// for the entity; the source lock (lockSource) keeps one job at a time
// on it. Where it cannot be read or written the job goes on without it:
// the note is then only more cautious.
type sampleLedger struct {
	path string
	// dry is what earlier dry runs recorded: key → the receive count up
	// to which every receive was a dry run's.
	dry map[string]int
	// now is this dry run's additions (guarded by tracker.mu).
	now map[string]int
}

// ledgerFile is the ledger's on-disk form.
type ledgerFile struct {
	Version int    `json:"version"`
	Entity  string `json:"entity"`
	SavedAt string `json:"saved_at"`
	// Receives maps a hash of each message's stable key (stuckKey) to
	// the count up to which its receives were dry runs'.
	Receives map[string]int `json:"receives"`
}

// ledgerMaxAge is the longest SQS keeps a message (MessageRetentionPeriod
// at most 14 days): an older ledger describes no message still there.
const ledgerMaxAge = 14 * 24 * time.Hour

// ledgerMaxEntries bounds the file (about 40 bytes an entry): past it, a
// dry run keeps only its own entries.
const ledgerMaxEntries = 1_000_000

// ledgerDir is where ledgers are kept, or "" where there is no home.
func ledgerDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "qbridge", "migrate")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "qbridge", "migrate")
}

// openLedger reads the ledger of entity (the broker's name for the
// source, driver.Backlog.Entity); a missing, unreadable or stale one is
// empty.
func openLedger(entity string) *sampleLedger {
	dir := ledgerDir()
	if dir == "" || entity == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(entity))
	l := &sampleLedger{
		path: filepath.Join(dir, "samples-"+hex.EncodeToString(sum[:8])+".json"),
		dry:  map[string]int{},
		now:  map[string]int{},
	}
	b, err := os.ReadFile(l.path)
	if err != nil {
		return l
	}
	var f ledgerFile
	if json.Unmarshal(b, &f) != nil || f.Version != 1 || f.Entity != entity {
		return l
	}
	if at, err := time.Parse(time.RFC3339, f.SavedAt); err != nil || time.Since(at) > ledgerMaxAge {
		return l
	}
	if f.Receives != nil {
		l.dry = f.Receives
	}
	return l
}

// ledgerKey is what the ledger keeps of a message's stable key: a hash,
// so that the file holds no message ids or body digests.
func ledgerKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// sampled records a dry run's receive of the message at count (its
// delivery count, this receive included): explained when it is the first
// receive, or when every earlier one was a dry run's. tracker.mu is held.
func (l *sampleLedger) sampled(key string, count int) {
	if l == nil || count < 1 {
		return
	}
	k := ledgerKey(key)
	if count == 1 || l.through(k) == count-1 {
		l.now[k] = count
	}
}

func (l *sampleLedger) through(k string) int {
	if n, ok := l.now[k]; ok {
		return n
	}
	return l.dry[k]
}

// explains says that a delivery at count had no receive before it but dry
// runs'. tracker.mu is held.
func (l *sampleLedger) explains(key string, count int) bool {
	return l != nil && count > 1 && l.dry[ledgerKey(key)] == count-1
}

// save writes what this dry run recorded, with what earlier ones did.
func (l *sampleLedger) save(entity string) error {
	if l == nil || len(l.now) == 0 {
		return nil
	}
	all := l.now
	if len(l.dry)+len(l.now) <= ledgerMaxEntries {
		all = make(map[string]int, len(l.dry)+len(l.now))
		for k, n := range l.dry {
			all[k] = n
		}
		for k, n := range l.now {
			all[k] = n
		}
	}
	b, err := json.Marshal(ledgerFile{Version: 1, Entity: entity, SavedAt: time.Now().UTC().Format(time.RFC3339), Receives: all})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("the dry run's record of its sample: %w", err)
	}
	if err := writeAtomic(l.path, b); err != nil {
		return fmt.Errorf("the dry run's record of its sample: %w", err)
	}
	return nil
}

// remove deletes the ledger once a move has emptied its source: what it
// describes is gone.
func (l *sampleLedger) remove() error {
	if l == nil {
		return nil
	}
	if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the dry runs' record of their samples %s: %w", l.path, err)
	}
	return nil
}
