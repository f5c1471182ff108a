//go:build !unix

package filelock

// Supported: TryLock does not lock on this system.
const Supported = false

// TryLock takes no lock where flock is not available: every caller gets it.
func TryLock(string) (release func(), err error) { return func() {}, nil }
