// Package filelock gives one process on a machine a file at a time: an
// exclusive lock that is never waited for, on a file that names its holder.
// The operating system drops the lock when the holder exits, however it
// exits, so a crashed holder never leaves it taken.
package filelock

import "fmt"

// HeldError is TryLock's error when another process holds the lock.
type HeldError struct {
	Path   string
	Holder string // what the holder wrote: "pid N since T", or "pid unknown"
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked by another process (%s)", e.Path, e.Holder)
}
