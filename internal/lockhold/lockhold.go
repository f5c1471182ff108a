// Package lockhold keeps messages a broker has delivered from going back
// before their time: it renews their locks (Service Bus peek-lock, a
// session's lock) and emulates a Nack delay on brokers whose hand-back
// has none (Service Bus abandon, AMQP 1.0 release and modify), holding
// the message for the delay and handing it back then.
package lockhold

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/qbridge/qbridge/internal/ctxwait"
)

// ReleaseTimeout bounds the hand-backs and renewals a Holder makes on its
// own.
const ReleaseTimeout = 15 * time.Second

// Lock is what a Holder does to one held message.
type Lock interface {
	// Renew renews the message's lock and returns its new expiry (zero:
	// unknown). A Holder without renewals (renewEvery 0) never calls it.
	Renew(ctx context.Context) (time.Time, error)
	// Release hands the message back for redelivery.
	Release(ctx context.Context) error
}

// RenewAt is when to renew a lock that expires at lockedUntil: after
// every, but never later than half the remaining lock time.
func RenewAt(now, lockedUntil time.Time, every time.Duration) time.Time {
	next := now.Add(every)
	if !lockedUntil.IsZero() {
		if half := now.Add(lockedUntil.Sub(now) / 2); half.Before(next) {
			next = half
		}
	}
	return next
}

// Renewal is the keep-alive of one lock (a message's or a session's): when
// to renew it next, and the renewal.
type Renewal struct {
	Every       time.Duration
	RenewLock   func(context.Context) (time.Time, error)
	LockedUntil time.Time // zero: unknown
	// Expiry, when set, reads the lock's expiry as it is now: a session's
	// lock is renewed by its deliveries' Extend as well.
	Expiry func() time.Time
}

// next is when to renew the lock.
func (l *Renewal) next(now time.Time) time.Time {
	lu := l.LockedUntil
	if l.Expiry != nil {
		lu = l.Expiry()
	}
	return RenewAt(now, lu, l.Every)
}

// renew renews the lock, within ReleaseTimeout.
func (l *Renewal) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	lu, err := l.RenewLock(ctx)
	if err == nil {
		l.LockedUntil = lu
	}
	return err
}

// KeepLocked renews l's lock whenever it is due until wait returns false.
// wait blocks until due fires (true: renew now) or whatever the caller
// waits for happens (false). It returns the error of a failed renewal.
func KeepLocked(ctx context.Context, l *Renewal, wait func(due <-chan time.Time) bool) error {
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

// Holder emulates a Nack delay: the message is kept (its lock renewed,
// where it has one) for the delay and handed back then. On close every
// held message is handed back at once. One goroutine per Holder serves
// every held message from a heap of their next actions (while a sink is
// down, thousands may be held).
type Holder struct {
	renewEvery time.Duration // 0: the messages have no lock to renew
	log        *slog.Logger
	what       string // "servicebus source" for logs

	mu      sync.Mutex
	closed  bool
	running bool     // the goroutine is started (at the first hold)
	held    heldHeap // by next action
	seq     uint64   // holds so far: equal times go in the order held
	wake    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

// heldMsg is one message the Holder keeps.
type heldMsg struct {
	lock     Renewal
	ops      Lock
	id       string
	done     func()
	deadline time.Time // hand back then
	at       time.Time // next action: renew, or hand back at deadline
	seq      uint64
	index    int
}

// schedule sets m's next action from now.
func (m *heldMsg) schedule(now time.Time, renews bool) {
	m.at = m.deadline
	if renews {
		if next := m.lock.next(now); next.Before(m.deadline) {
			m.at = next
		}
	}
}

// heldHeap orders held messages by their next action, then by the order
// they were held: messages handed back together (a group's, in order) go
// back in that order (container/heap).
type heldHeap []*heldMsg

func (h heldHeap) Len() int { return len(h) }
func (h heldHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
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

// New returns a Holder that renews each held message's lock every
// renewEvery (0: the messages have no lock, nothing is renewed); what
// names the adapter in its logs.
func New(renewEvery time.Duration, log *slog.Logger, what string) *Holder {
	return &Holder{renewEvery: renewEvery, log: log, what: what, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Hold keeps lock's message for delay and hands it back then; done is
// called once the message is handed back (or its lock is lost). It returns
// false when the Holder is closed (the caller hands back at once).
func (h *Holder) Hold(delay time.Duration, lockedUntil time.Time, lock Lock, id string, done func()) bool {
	now := time.Now()
	m := &heldMsg{
		lock: Renewal{Every: h.renewEvery, RenewLock: lock.Renew, LockedUntil: lockedUntil},
		ops:  lock, id: id, done: done, deadline: now.Add(delay),
	}
	m.schedule(now, h.renewEvery > 0)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.seq++
	m.seq = h.seq
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

// Len is the number of messages held.
func (h *Holder) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// run serves the held messages until the Holder closes, then hands back
// those left.
func (h *Holder) run() {
	defer h.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		h.mu.Lock()
		if h.closed {
			left := h.held
			h.held = nil
			h.mu.Unlock()
			h.releaseAll(left)
			return
		}
		var due []*heldMsg
		wait := time.Duration(-1) // nothing held
		now := time.Now()
		for len(h.held) > 0 {
			if wait = h.held[0].at.Sub(now); wait > 0 {
				break
			}
			due = append(due, heap.Pop(&h.held).(*heldMsg))
		}
		h.mu.Unlock()
		if len(due) > 0 {
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

// act renews the locks of ms, or hands them back at their deadline, in
// the order they came due.
func (h *Holder) act(ms []*heldMsg) {
	var back []*heldMsg
	for _, m := range ms {
		if !time.Now().Before(m.deadline) {
			back = append(back, m)
			continue
		}
		h.releaseAll(back)
		back = back[:0]
		if err := m.lock.renew(context.Background()); err != nil {
			h.log.Warn(h.what+": renewing the lock of a message held for its Nack delay failed; it is redelivered when the lock expires",
				"message_id", m.id, "error", err)
			m.done()
			continue
		}
		m.schedule(time.Now(), true)
		h.mu.Lock()
		heap.Push(&h.held, m) // if closed meanwhile, run hands it back with the rest
		h.mu.Unlock()
	}
	h.releaseAll(back)
}

// releaseAll hands ms back in order, within one ReleaseTimeout for all of
// them.
func (h *Holder) releaseAll(ms []*heldMsg) {
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	for _, m := range ms {
		if err := m.ops.Release(ctx); err != nil {
			h.log.Warn(h.what+": handing back a message after its Nack delay failed; the broker redelivers it when its lock expires or its link ends",
				"message_id", m.id, "error", err)
		}
		m.done()
	}
}

// Close hands back every held message and waits (at most until ctx ends).
func (h *Holder) Close(ctx context.Context) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	_ = ctxwait.Group(ctx, &h.wg) // at the deadline the locks lapse instead
}
