//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Supported: TryLock locks on this system.
const Supported = true

// TryLock takes an exclusive flock on path (created if missing) and writes
// the holder's pid and start time into it. It returns a *HeldError at once
// when another process holds it, and the error of opening the file when
// that fails. release drops the lock; it leaves the file, whose contents
// are only read when the lock is held by someone.
func TryLock(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		who, _ := io.ReadAll(io.LimitReader(f, 200))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(who))
			if holder == "" { // taken a moment ago: its holder has not written yet
				holder = "pid unknown"
			}
			return nil, &HeldError{Path: path, Holder: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))), 0)
	return func() { f.Close() }, nil // closing the file releases the lock
}
