package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The first signal cancels, the second exits at once with 128 + its
// number, without restoring the signal's default disposition: a process
// that inherited SIGINT ignored (nohup, the background of a script) got
// the ignore back, and the second Ctrl-C did nothing.
func TestSecondSignalExits(t *testing.T) {
	defer func(v bool) { ownSignals.Store(v) }(ownSignals.Load())
	ownSignals.Store(false) // a "run" test in this process took them
	sigs := make(chan os.Signal, 2)
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	go watchSignals(sigs, func() { close(cancelled) }, func(code int) { exited <- code })
	sigs <- os.Interrupt
	<-cancelled
	select {
	case code := <-exited:
		t.Fatalf("exited (%d) on the first signal", code)
	default:
	}
	sigs <- syscall.SIGINT
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit code %d, want 130", code)
		}
	case <-time.After(time.Minute): // a hang guard only
		t.Fatal("the second signal did not exit")
	}
}

// A command that takes its signals itself ("qbridge run") is left to handle
// the second one.
func TestSecondSignalLeftToTheCommand(t *testing.T) {
	defer func(v bool) { ownSignals.Store(v) }(ownSignals.Load())
	ownSignals.Store(true)
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	go func() {
		watchSignals(sigs, func() {}, func(code int) { t.Errorf("exited %d", code) })
		close(done)
	}()
	sigs <- os.Interrupt
	sigs <- syscall.SIGTERM
	<-done
}
