//go:build unix

package testenv

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/filelock"
)

// TestRabbitMQForRestartHoldsTheNode: the restart node is locked while the
// test that took it runs, and free once it has ended.
func TestRabbitMQForRestartHoldsTheNode(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	t.Setenv("QBRIDGE_AMQP_RESTART_URL", "amqp://guest:guest@127.0.0.1:1")
	t.Setenv("QBRIDGE_RABBITMQ_RESTART_ENV", env)
	lock := filepath.Join(dir, "restart-test.lock")
	t.Run("holder", func(t *testing.T) {
		r := RabbitMQForRestart(t)
		if r.URL != "amqp://guest:guest@127.0.0.1:1" || r.Env != env {
			t.Fatalf("got %+v", r)
		}
		_, err := filelock.TryLock(lock)
		if held := (*filelock.HeldError)(nil); !errors.As(err, &held) {
			t.Fatalf("lock while the test holds the node: %v, want a HeldError", err)
		}
	})
	release, err := filelock.TryLock(lock)
	if err != nil {
		t.Fatalf("after the holder ended: %v", err)
	}
	release()
}

// TestWaitLockTakesTurns: a waiter gets the lock once the holder lets go,
// not before.
func TestWaitLockTakesTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, err := filelock.TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	done := make(chan error, 1)
	go func() {
		rel, err := waitLock(path, time.Minute)
		if err == nil {
			if !released.Load() {
				err = errors.New("got the lock while it was held")
			}
			rel()
		}
		done <- err
	}()
	released.Store(true)
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWaitLockGivesUp: a lock held for longer than the wait is an error
// naming the holder.
func TestWaitLockGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, err := filelock.TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, err = waitLock(path, 200*time.Millisecond)
	var held *filelock.HeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "waited 200ms") {
		t.Fatalf("got %v, want a HeldError after waiting", err)
	}
}

// TestCtlReportsFailure: a failing rabbitmqctl (here: no env file) is an
// error holding the command and its output.
func TestCtlReportsFailure(t *testing.T) {
	env := filepath.Join(t.TempDir(), "missing-env")
	out, err := RabbitMQ{Env: env}.Ctl("status")
	if err == nil || !strings.Contains(err.Error(), "rabbitmqctl [status]") || !strings.Contains(err.Error(), env) {
		t.Fatalf("got %q, %v", out, err)
	}
}
