package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/qbridge/qbridge/bridge/monitor"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/logpace"
)

// serverHolds keeps the embedded servers of the running configuration
// started from the daemon's start to its end, whatever their pipelines
// wait for: a pipeline opens its sink before its source, so an embedded
// NATS source behind an unreachable SQS sink started its server only once
// SQS answered, and a sidecar's app, started as soon as qbridge had
// started, found nothing on its port. /startupz reports them.
type serverHolds struct {
	log   *slog.Logger
	mu    sync.Mutex
	held  []*serverHold // in the configuration's order
	retry backoff.Backoff
}

// serverHold is one server held; where, release and err are guarded by
// serverHolds.mu.
type serverHold struct {
	srv  config.Server
	stop chan struct{} // closed: give up starting it
	done chan struct{} // closed when the starting goroutine returned

	where   string // set once it listens
	release func()
	err     error // the last failure to start it
}

var errHoldStopped = errors.New("hold released")

func newServerHolds(log *slog.Logger) *serverHolds {
	return &serverHolds{log: log, retry: backoff.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}}
}

// sync releases the servers cfg does not start with the same settings
// and, if start, starts holding those it does that are not held yet. A
// reload releases before it applies (a server whose settings changed must
// stop before its new version can start) and holds after.
func (h *serverHolds) sync(cfg *config.Config, start bool) {
	want := map[string]config.Server{}
	servers := cfg.Servers()
	for _, s := range servers {
		want[s.Key] = s
	}
	h.mu.Lock()
	var keep, drop []*serverHold
	have := map[string]bool{}
	for _, sh := range h.held {
		if s, ok := want[sh.srv.Key]; ok && s.Settings == sh.srv.Settings {
			keep = append(keep, sh)
			have[sh.srv.Key] = true
		} else {
			drop = append(drop, sh)
		}
	}
	if start {
		for _, s := range servers {
			if !have[s.Key] {
				sh := &serverHold{srv: s, stop: make(chan struct{}), done: make(chan struct{})}
				keep = append(keep, sh)
				go h.hold(sh, h.retry)
			}
		}
	}
	h.held = keep
	h.mu.Unlock()
	h.drop(drop)
}

// hold starts the server, retrying until it listens or the hold is
// dropped: another process may still hold its store, or its port.
func (h *serverHolds) hold(sh *serverHold, retry backoff.Backoff) {
	defer close(sh.done)
	// A server that cannot start for good (its port taken) was logged on
	// every attempt, at most 5 s apart, beside the pipelines' own errors;
	// /startupz has the last error at any time.
	pace := logpace.New(1, time.Minute)
	for {
		where, release, err := sh.srv.Hold(h.log)
		h.mu.Lock()
		select {
		case <-sh.stop:
			h.mu.Unlock()
			if release != nil {
				release()
			}
			return
		default:
		}
		if err == nil {
			sh.where, sh.release, sh.err = where, release, nil
			h.mu.Unlock()
			return
		}
		sh.err = err
		h.mu.Unlock()
		delay := retry.Next()
		pace.Do(func(leftOut int64) {
			h.log.Error("cannot start the embedded server; retrying", "store_dir", sh.srv.Key, "error", err, "retry_in", delay, logpace.LeftOutKey, leftOut)
		})
		if backoff.Sleep(context.Background(), sh.stop, errHoldStopped, delay) != nil {
			return
		}
	}
}

// drop stops starting the servers and releases those that run.
func (h *serverHolds) drop(holds []*serverHold) {
	for _, sh := range holds {
		close(sh.stop)
	}
	for _, sh := range holds {
		<-sh.done
		h.mu.Lock()
		release := sh.release
		sh.release = nil
		h.mu.Unlock()
		if release != nil {
			release()
		}
	}
}

// close releases every server; the daemon calls it once its pipelines
// have stopped, so that a sidecar's app drains into the server first.
func (h *serverHolds) close() {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	h.drop(held)
}

// startup is /startupz's report of the servers: started once each
// listens.
func (h *serverHolds) startup() monitor.Startup {
	h.mu.Lock()
	defer h.mu.Unlock()
	var st monitor.Startup
	var errs []error
	for _, sh := range h.held {
		name := fmt.Sprintf("embedded server on store_dir %s (%s)", sh.srv.Key, sh.srv.Described)
		switch {
		case sh.where != "":
			st.Lines = append(st.Lines, name+": listening on "+sh.where)
		case sh.err != nil:
			errs = append(errs, fmt.Errorf("%s: not listening yet: last error: %w", name, sh.err))
		default:
			errs = append(errs, fmt.Errorf("%s: not listening yet: starting", name))
		}
	}
	st.Err = errors.Join(errs...)
	return st
}
