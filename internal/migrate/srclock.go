package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qbridge/qbridge/internal/filelock"
)

// lockSource takes a lock, on this machine, on reading the source named by
// identity, and returns what releases it. Two migrations reading one queue
// at once (started twice by mistake) split its groups between them: on a
// broker that does not pin a group to one consumer (RabbitMQ) that breaks
// their order, and both runs said "complete" and "verified". The lock is
// a file lock in $XDG_RUNTIME_DIR or the temporary directory; where none
// can be made (a read-only file system), the job goes on without it. It
// cannot see a migration on another machine.
func lockSource(identity string) (release func(), err error) {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(identity))
	return tryLock(filepath.Join(dir, "qbridge-migrate-"+hex.EncodeToString(sum[:8])+".lock"), func(holder string) error {
		return fmt.Errorf("another qbridge migrate on this machine reads this source (%s; %s): two readers of one queue split its groups between them, which breaks their order where the broker does not give a group to one consumer (RabbitMQ); wait for it to end, or end it",
			identity, holder)
	})
}

// tryLock takes the file lock at path for a migration: held (by another
// process) is the error it fails with, naming the holder; where no lock
// can be made (a read-only file system) the job goes on without it.
func tryLock(path string, held func(holder string) error) (release func(), err error) {
	release, err = filelock.TryLock(path)
	var h *filelock.HeldError
	switch {
	case errors.As(err, &h):
		return nil, held(h.Holder)
	case err != nil:
		return func() {}, nil
	}
	return release, nil
}
