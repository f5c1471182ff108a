package migrate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
)

// For a source whose broker cannot count (driver.Pinger: an AMQP 1.0
// broker, a core NATS subject), nothing received for -idle is the only
// sign of a drained queue, and a broker that stalls with the connection
// open gives that sign too: a move "completed" with most of the queue left
// behind. liveness pings the broker once a second, so the job takes idle
// for drained only while the broker answered throughout, and counts a
// broker that stopped answering as not ready (-connect-timeout).
const (
	pingEvery   = time.Second
	pingTimeout = 2 * time.Second
)

type liveness struct {
	every time.Duration // how often to ping
	off   bool          // the source's broker counts: no pings

	mu     sync.Mutex
	pinger driver.Pinger // the open source's, or nil
	since  time.Time     // every ping since answered; zero after a failure
	lastOK time.Time
	err    error // the last ping's failure, nil once one answers
}

// use makes src's the broker to ping (the engine reopens sources).
func (l *liveness) use(src driver.Source) {
	p, _ := src.(driver.Pinger)
	if l.off {
		p = nil
	}
	l.mu.Lock()
	l.pinger = p
	l.mu.Unlock()
}

// run pings until ctx ends.
func (l *liveness) run(ctx context.Context) {
	if l.off {
		return
	}
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.mu.Lock()
		p := l.pinger
		l.mu.Unlock()
		if p != nil {
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := p.Ping(pctx)
			cancel()
			if err != nil {
				err = fmt.Errorf("the source's broker did not answer a ping within %s: %w", pingTimeout, err)
			}
			if ctx.Err() != nil {
				return
			}
			l.record(time.Now(), err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

func (l *liveness) record(now time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
	if err != nil {
		l.since = time.Time{}
		return
	}
	if l.since.IsZero() {
		l.since = now
	}
	l.lastOK = now
}

// answeredFor reports whether the broker answered every ping of the last
// d, the last one lately; true for a source that cannot be pinged.
func (l *liveness) answeredFor(now time.Time, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pinger == nil {
		return true
	}
	return l.err == nil && !l.since.IsZero() && now.Sub(l.since) >= d && now.Sub(l.lastOK) <= l.every+pingTimeout
}

// failure is the last ping's failure, or nil.
func (l *liveness) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
