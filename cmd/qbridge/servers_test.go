package main

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/testlog"
)

// A server that cannot start for good is retried on, and logged once a
// minute, not on every attempt (every 5 s at most, beside the pipelines'
// own errors).
func TestServerHoldRetriesQuietly(t *testing.T) {
	var logs testlog.Buffer
	h := newServerHolds(slog.New(slog.NewTextHandler(&logs, nil)))
	var attempts atomic.Int32
	enough := make(chan struct{})
	sh := &serverHold{stop: make(chan struct{}), done: make(chan struct{}), srv: config.Server{Key: "/store",
		Hold: func(*slog.Logger) (string, func(), error) {
			if attempts.Add(1) == 20 {
				close(enough)
			}
			return "", nil, errors.New("port 4222 is taken")
		}}}
	go h.hold(sh, backoff.Backoff{Base: time.Microsecond, Max: time.Microsecond})
	<-enough
	h.drop([]*serverHold{sh})
	if n := strings.Count(logs.String(), "cannot start the embedded server"); n != 1 {
		t.Errorf("%d attempts logged %d lines, want 1:\n%s", attempts.Load(), n, logs.String())
	}
	h.mu.Lock()
	last := sh.err
	h.mu.Unlock()
	if last == nil || !strings.Contains(last.Error(), "taken") {
		t.Errorf("the hold's last error = %v, want it kept for /startupz", last)
	}
}
