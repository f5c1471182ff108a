package migrate

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the package's tests a directory of their own for the
// source locks (lockSource: $XDG_RUNTIME_DIR, else the temporary
// directory). Every memq source has one identity, so two processes
// running these tests at once on a machine (a second checkout, -count in
// another terminal) took each other's lock, and a test failed with
// "another qbridge migrate on this machine reads this source (memq main;
// pid …)".
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qbridge-migrate-test-locks-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "a directory for the source locks:", err)
		os.Exit(1)
	}
	os.Setenv("XDG_RUNTIME_DIR", dir)
	// And for the dry runs' records of their samples (sampleLedger),
	// which stay out of the home directory.
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
