package servicebus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/qbridge/qbridge/internal/ctxwait"
)

// settleTimeout bounds a settlement or renewal the adapter makes on its own.
const settleTimeout = 15 * time.Second

// lockOps are the lock operations of one peek-locked message.
type lockOps interface {
	// renew renews the lock and returns the new expiry (zero: unknown).
	renew(ctx context.Context) (time.Time, error)
	// abandon hands the message back for redelivery.
	abandon(ctx context.Context) error
}

// lockRenewal is the keep-alive of one lock (a message's or a session's):
// when to renew it next, and the renewal.
type lockRenewal struct {
	every       time.Duration
	renewLock   func(context.Context) (time.Time, error)
	lockedUntil time.Time // zero: unknown
	// expiry, when set, reads the lock's expiry as it is now: a session's
	// lock is renewed by its deliveries' Extend as well.
	expiry func() time.Time
}

// next is when to renew the lock.
func (l *lockRenewal) next(now time.Time) time.Time {
	lu := l.lockedUntil
	if l.expiry != nil {
		lu = l.expiry()
	}
	return renewAt(now, lu, l.every)
}

// renew renews the lock, within settleTimeout.
func (l *lockRenewal) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	lu, err := l.renewLock(ctx)
	if err == nil {
		l.lockedUntil = lu
	}
	return err
}

// keepLocked renews l's lock whenever it is due until wait returns false.
// wait blocks until due fires (true: renew now) or whatever the caller
// waits for happens (false). It returns the error of a failed renewal.
func keepLocked(ctx context.Context, l *lockRenewal, wait func(due <-chan time.Time) bool) error {
	for {
		now := time.Now()
		t := time.NewTimer(l.next(now).Sub(now))
		more := wait(t.C)
		t.Stop()
		if !more {
			return nil
		}
		if err := l.renew(ctx); err != nil {
			return err
		}
	}
}

// holder emulates a Nack delay: Service Bus has no abandon delay, so the
// message is kept locked (its lock renewed) for the delay and abandoned
// then. On close every held message is abandoned at once.
type holder struct {
	renewEvery time.Duration
	log        *slog.Logger
	what       string // "servicebus source" for logs

	mu     sync.Mutex
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newHolder(renewEvery time.Duration, log *slog.Logger, what string) *holder {
	return &holder{renewEvery: renewEvery, log: log, what: what, stop: make(chan struct{})}
}

// renewAt is when to renew a lock that expires at lockedUntil: after
// renewEvery, but never later than half the remaining lock time.
func renewAt(now, lockedUntil time.Time, every time.Duration) time.Time {
	next := now.Add(every)
	if !lockedUntil.IsZero() {
		if half := now.Add(lockedUntil.Sub(now) / 2); half.Before(next) {
			next = half
		}
	}
	return next
}

// hold keeps ops' message locked for delay and abandons it then; done is
// called once the message is handed back (or its lock is lost). It returns
// false when the holder is closed (the caller abandons at once).
func (h *holder) hold(delay time.Duration, lockedUntil time.Time, ops lockOps, id string, done func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer done()
		end := time.NewTimer(delay)
		defer end.Stop()
		l := &lockRenewal{every: h.renewEvery, renewLock: ops.renew, lockedUntil: lockedUntil}
		err := keepLocked(context.Background(), l, func(due <-chan time.Time) bool {
			select {
			case <-due:
				return true
			case <-end.C:
			case <-h.stop:
			}
			return false
		})
		if err != nil {
			h.log.Warn(h.what+": renewing the lock of a message held for its Nack delay failed; it is redelivered when the lock expires",
				"message_id", id, "error", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		defer cancel()
		if err := ops.abandon(ctx); err != nil {
			h.log.Warn(h.what+": abandoning a message after its Nack delay failed; it is redelivered when its lock expires",
				"message_id", id, "error", err)
		}
	}()
	return true
}

// close abandons every held message and waits (at most until ctx ends).
func (h *holder) close(ctx context.Context) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	_ = ctxwait.Group(ctx, &h.wg) // at the deadline the locks lapse instead
}
