//go:build unix

package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockSource takes a lock, on this machine, on reading the source named by
// identity, and returns what releases it. Two migrations reading one queue
// at once (started twice by mistake) split its groups between them: on a
// broker that does not pin a group to one consumer (RabbitMQ) that breaks
// their order, and both runs said "complete" and "verified". The lock is
// an flock on a file in $XDG_RUNTIME_DIR or the temporary directory; where
// none can be made (a read-only file system), the job goes on without it.
// It cannot see a migration on another machine.
func lockSource(identity string) (release func(), err error) {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(identity))
	f, err := os.OpenFile(filepath.Join(dir, "qbridge-migrate-"+hex.EncodeToString(sum[:8])+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}, nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		who, _ := io.ReadAll(io.LimitReader(f, 200))
		f.Close()
		return nil, fmt.Errorf("another qbridge migrate on this machine reads this source (%s; %s): two readers of one queue split its groups between them, which breaks their order where the broker does not give a group to one consumer (RabbitMQ); wait for it to end, or end it",
			identity, strings.TrimSpace(string(who)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))), 0)
	return func() { f.Close() }, nil // closing releases the lock
}
