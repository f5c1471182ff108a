package servicebus

import (
	"container/heap"
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
// then. On close every held message is abandoned at once. One goroutine
// per holder serves every held message from a heap of their next actions
// (while a sink is down, thousands may be held).
type holder struct {
	renewEvery time.Duration
	log        *slog.Logger
	what       string // "servicebus source" for logs

	mu      sync.Mutex
	closed  bool
	running bool     // the goroutine is started (at the first hold)
	held    heldHeap // by next action
	wake    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

// heldMsg is one message the holder keeps locked.
type heldMsg struct {
	lock     lockRenewal
	ops      lockOps
	id       string
	done     func()
	deadline time.Time // abandon then
	at       time.Time // next action: renew, or abandon at deadline
	index    int
}

// schedule sets m's next action from now.
func (m *heldMsg) schedule(now time.Time) {
	m.at = m.lock.next(now)
	if !m.at.Before(m.deadline) {
		m.at = m.deadline
	}
}

// heldHeap orders held messages by their next action (container/heap).
type heldHeap []*heldMsg

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h heldHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *heldHeap) Push(x any) {
	m := x.(*heldMsg)
	m.index = len(*h)
	*h = append(*h, m)
}
func (h *heldHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return m
}

func newHolder(renewEvery time.Duration, log *slog.Logger, what string) *holder {
	return &holder{renewEvery: renewEvery, log: log, what: what, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// hold keeps ops' message locked for delay and abandons it then; done is
// called once the message is handed back (or its lock is lost). It returns
// false when the holder is closed (the caller abandons at once).
func (h *holder) hold(delay time.Duration, lockedUntil time.Time, ops lockOps, id string, done func()) bool {
	now := time.Now()
	m := &heldMsg{
		lock: lockRenewal{every: h.renewEvery, renewLock: ops.renew, lockedUntil: lockedUntil},
		ops:  ops, id: id, done: done, deadline: now.Add(delay),
	}
	m.schedule(now)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	heap.Push(&h.held, m)
	if !h.running {
		h.running = true
		h.wg.Add(1)
		go h.run()
	}
	if m.index == 0 { // sooner than what the goroutine waits for
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// run serves the held messages until the holder closes, then abandons
// those left.
func (h *holder) run() {
	defer h.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		h.mu.Lock()
		if h.closed {
			left := h.held
			h.held = nil
			h.mu.Unlock()
			h.abandonAll(left)
			return
		}
		var due *heldMsg
		wait := time.Duration(-1) // nothing held
		if len(h.held) > 0 {
			if wait = time.Until(h.held[0].at); wait <= 0 {
				due = heap.Pop(&h.held).(*heldMsg)
			}
		}
		h.mu.Unlock()
		if due != nil {
			h.act(due)
			continue
		}
		t.Stop()
		var timer <-chan time.Time
		if wait > 0 {
			t.Reset(wait)
			timer = t.C
		}
		select {
		case <-timer:
		case <-h.wake:
		case <-h.stop:
		}
	}
}

// act renews m's lock, or abandons m at its deadline.
func (h *holder) act(m *heldMsg) {
	now := time.Now()
	if !now.Before(m.deadline) {
		h.abandonAll([]*heldMsg{m})
		return
	}
	if err := m.lock.renew(context.Background()); err != nil {
		h.log.Warn(h.what+": renewing the lock of a message held for its Nack delay failed; it is redelivered when the lock expires",
			"message_id", m.id, "error", err)
		m.done()
		return
	}
	m.schedule(time.Now())
	h.mu.Lock()
	heap.Push(&h.held, m) // if closed meanwhile, run abandons it with the rest
	h.mu.Unlock()
}

// abandonAll hands ms back, within one settleTimeout for all of them.
func (h *holder) abandonAll(ms []*heldMsg) {
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, m := range ms {
		if err := m.ops.abandon(ctx); err != nil {
			h.log.Warn(h.what+": abandoning a message after its Nack delay failed; it is redelivered when its lock expires",
				"message_id", m.id, "error", err)
		}
		m.done()
	}
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
