//go:build unix

package filelock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTryLock: a second holder is refused at once and told who holds the
// lock, in this process (flock locks belong to the open file) and in
// another one; release lets the next one in.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(path)
	var held *HeldError
	if !errors.As(err, &held) || !strings.HasPrefix(held.Holder, "pid ") || held.Path != path {
		t.Fatalf("second lock: %v, want a HeldError naming the holder", err)
	}
	if os.Getenv("FILELOCK_CHILD") == "" {
		// Another process sees it too.
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildLock$")
		cmd.Env = append(os.Environ(), "FILELOCK_CHILD="+path)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
	}
	release()
	again, err := TryLock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

// TestChildLock runs in the child process of TestTryLock: the lock its
// parent holds must be refused here.
func TestChildLock(t *testing.T) {
	path := os.Getenv("FILELOCK_CHILD")
	if path == "" {
		t.Skip("run by TestTryLock")
	}
	_, err := TryLock(path)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("lock held by the parent: %v, want a HeldError", err)
	}
}

func TestTryLockUnwritable(t *testing.T) {
	if _, err := TryLock(filepath.Join(t.TempDir(), "missing", "x.lock")); err == nil {
		t.Fatal("a lock in a missing directory was taken")
	}
}
