package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// The first signal cancels (its cause names the signal), the second exits
// at once with 128 + its number, without restoring the signal's default
// disposition: a process that inherited SIGINT ignored (nohup, the
// background of a script) got the ignore back, and the second Ctrl-C did
// nothing. A command that takes the second signal ("qbridge run") gets it
// instead.
func TestSignalWatcher(t *testing.T) {
	for _, c := range []struct {
		name          string
		first, second os.Signal
		taken         bool
		wantExit      int // 0: none
	}{
		{name: "second SIGINT exits", first: os.Interrupt, second: syscall.SIGINT, wantExit: 130},
		{name: "second SIGTERM exits", first: syscall.SIGTERM, second: syscall.SIGTERM, wantExit: 143},
		{name: "taken by the command", first: os.Interrupt, second: syscall.SIGTERM, taken: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			exited := make(chan int, 1)
			w := &signalWatcher{cancel: cancel, exit: func(code int) { exited <- code }}
			ctx = withSignalWatcher(ctx, w)
			var second <-chan os.Signal
			if c.taken {
				second = takeSecondSignal(ctx)
			}
			sigs := make(chan os.Signal, 2)
			done := make(chan struct{})
			go func() { w.watch(sigs); close(done) }()
			sigs <- c.first
			<-ctx.Done()
			if sig, ok := errors.AsType[stopSignal](context.Cause(ctx)); !ok || sig.Signal != c.first {
				t.Errorf("cause %v, want the signal %v", context.Cause(ctx), c.first)
			}
			select {
			case code := <-exited:
				t.Fatalf("exited (%d) on the first signal", code)
			default:
			}
			sigs <- c.second
			select {
			case <-done:
			case <-time.After(time.Minute): // a hang guard only
				t.Fatal("the second signal did nothing")
			}
			select {
			case code := <-exited:
				if code != c.wantExit {
					t.Errorf("exit code %d, want %d", code, c.wantExit)
				}
			default:
				if c.wantExit != 0 {
					t.Errorf("no exit, want %d", c.wantExit)
				}
			}
			if c.taken {
				if s := <-second; s != c.second {
					t.Errorf("the command got %v, want %v", s, c.second)
				}
			}
		})
	}
}
