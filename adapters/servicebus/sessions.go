package servicebus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/ctxwait"
	"github.com/qbridge/qbridge/internal/lockhold"
)

// sessionSource consumes a session-enabled queue or subscription: up to
// max_concurrent sessions at once, each accepted with accept-next-session
// and served by one worker that hands out one message at a time and waits
// for its settlement before receiving the next, so a session's messages
// are processed one by one, in order (a dry run's held sample excepted:
// Held). The worker renews the session lock for as long as it holds the
// session, and releases the session when it has had no message for
// idle_timeout.
type sessionSource struct {
	*amqpCommon
	feed[driver.Delivery]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	held     atomic.Int32 // sessions held now
	accepted atomic.Int64 // sessions accepted so far
	quiet    atomic.Bool  // Quiesce: no more sessions or messages
	// quieted ends with Quiesce (or Close): it cuts short the receives
	// the workers are waiting in.
	quieted context.Context
	quietly context.CancelFunc

	// handing counts the workers that may still hand out a message; once
	// the source is quiet and none is left, drained is closed (Quiesce's
	// answer), so a dry run knows when it has taken every leftover.
	mu          sync.Mutex
	handing     int
	drained     chan struct{}
	drainedOnce sync.Once
}

var (
	_ driver.Source       = (*sessionSource)(nil)
	_ driver.ReadyChecker = (*sessionSource)(nil)
)

func newSessionSource(c *amqpCommon) *sessionSource {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sessionSource{amqpCommon: c, feed: newFeed[driver.Delivery](), ctx: ctx, cancel: cancel, drained: make(chan struct{})}
	s.quieted, s.quietly = context.WithCancel(ctx)
	for i := 0; i < c.set.maxSessions; i++ {
		s.wg.Add(1)
		go s.worker()
	}
	c.log.Info("servicebus source: ready", "namespace", c.set.conn.description, "entity", c.set.entityPath,
		"sessions", c.set.maxSessions, "session_idle_timeout", c.set.sessionIdle, "decode_guard", c.set.guard)
	return s
}

// Receive returns the messages the workers have ready: it blocks for the
// first, then takes what is there without waiting.
func (s *sessionSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	return s.receive(ctx, s.closed, limit)
}

// Quiesce stops taking sessions and messages before the source closes: a
// worker releases its session once the message it handed out is settled
// and accepts no other. A message handed back then (a dry run's sample) is
// not received again on a session that is about to close, which would
// count a second delivery (Service Bus counts one when a closing session
// returns a locked message). A receive a worker is waiting in ends now:
// once a dry run's held messages are handed back it would take the first
// of them again, unseen, and the session's close would count that
// delivery too.
//
// A receive cut short leaves its credit on the link, and a message the
// broker sends on it then goes to the SDK's releaser, or, if the session
// closes first, comes back with one more delivery nobody saw. So a worker
// whose receive was cut short receives once more, briefly, and hands out
// what that brings. The channel returned is closed once no worker will
// hand out anything more.
func (s *sessionSource) Quiesce() <-chan struct{} {
	s.quiet.Store(true)
	s.quietly()
	s.mu.Lock()
	if s.handing == 0 {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
	s.mu.Unlock()
	return s.drained
}

// QuietSpell is how long the source may hand out nothing while messages
// wait in sessions it does not hold: a worker keeps an emptied session for
// idle_timeout before it takes the next. A migration that cannot count the
// entity waits at least this long before it takes it for drained.
func (s *sessionSource) QuietSpell() time.Duration { return s.set.sessionIdle + sessionTakeover }

// sessionTakeover covers a worker's accept of the next session and its
// first receive after it released one.
const sessionTakeover = 2 * time.Second

// startHanding and stopHanding bracket the part of serve that receives
// and hands out messages. A worker that starts after Quiesce checked the
// count sees quiet set and hands out nothing.
func (s *sessionSource) startHanding() {
	s.mu.Lock()
	s.handing++
	s.mu.Unlock()
}

func (s *sessionSource) stopHanding() {
	s.mu.Lock()
	s.handing--
	if s.handing == 0 && s.quiet.Load() {
		s.drainedOnce.Do(func() { close(s.drained) })
	}
	s.mu.Unlock()
}

// collectWait bounds the receive after one cut short by Quiesce: what its
// credit brings arrives within a round trip, and an empty session brings
// nothing, so this only delays the end of a dry run on such a session.
const collectWait = time.Second

func (s *sessionSource) worker() {
	defer s.wg.Done()
	bo := backoff.Backoff{Base: s.set.conn.backoff, Max: s.set.conn.backoffMax}
	for s.ctx.Err() == nil && !s.quiet.Load() {
		sr, err := s.accept()
		switch {
		case s.ctx.Err() != nil || (sr != nil && s.quiet.Load()):
			if sr != nil {
				s.closeSession(sr)
			}
			return
		case err == nil:
			bo.Reset()
			s.setErr(nil)
			s.serve(sr)
			continue
		case sdkCode(err) == azservicebus.CodeTimeout || errors.Is(err, context.DeadlineExceeded):
			bo.Reset() // no session has messages
			s.setErr(nil)
			continue
		}
		s.setErr(err)
		if ferr, ok := s.fatalErr(err); ok {
			s.fail(driver.Permanent(fmt.Errorf("servicebus source: %s: accept session: %w", s.set.entityPath, explain(ferr, true))))
			return
		}
		wait := bo.Next()
		s.log.Warn("servicebus source: accepting a session failed; retrying", "entity", s.set.entityPath, "error", err, "retry_in", wait.Round(time.Millisecond))
		if backoff.Sleep(s.ctx, nil, errClosed, wait) != nil {
			return
		}
	}
}

// accept takes the next session that has messages, waiting up to
// receive_wait (the broker answers com.microsoft:timeout when none frees).
func (s *sessionSource) accept() (*azservicebus.SessionReceiver, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.set.receiveWait)
	defer cancel()
	opts := &azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModePeekLock}
	if s.set.queue != "" {
		return s.client.AcceptNextSessionForQueue(ctx, s.set.queue, opts)
	}
	return s.client.AcceptNextSessionForSubscription(ctx, s.set.topic, s.set.subscription, opts)
}

// sessionLock serializes the renewals of one session's lock (the SDK's
// SessionReceiver does not guard its lock time).
type sessionLock struct {
	mu sync.Mutex
	sr *azservicebus.SessionReceiver
}

func (l *sessionLock) renew(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.sr.RenewSessionLock(ctx, nil)
	return l.sr.LockedUntil(), err
}

func (l *sessionLock) lockedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sr.LockedUntil()
}

// serve hands out the session's messages one at a time until the session
// is idle, its lock is lost, or the source closes.
func (s *sessionSource) serve(sr *azservicebus.SessionReceiver) {
	id := sr.SessionID()
	s.held.Add(1)
	s.accepted.Add(1)
	defer s.held.Add(-1)
	defer s.closeSession(sr)
	lock := &sessionLock{sr: sr}
	sctx, scancel := context.WithCancel(s.ctx)
	defer scancel()
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		s.renewSession(sctx, scancel, lock, id)
	}()
	defer func() { scancel(); <-renewDone }()
	s.log.Debug("servicebus source: session accepted", "entity", s.set.entityPath, "session_id", id, "locked_until", lock.lockedUntil())
	// A dry run's held messages are handed back through this session's
	// link: it is let go only once they are (or the source closes).
	var held []*delivery
	defer func() {
		for _, d := range held {
			select {
			case <-d.done:
			case <-sctx.Done():
				return
			}
		}
	}()
	s.startHanding()
	defer s.stopHanding() // before the wait for the held messages above
	for !s.quiet.Load() {
		rctx, cancel := context.WithTimeout(sctx, s.set.sessionIdle)
		stop := context.AfterFunc(s.quieted, cancel)
		msgs, err := receiveSession(rctx, sr)
		cutShort := !stop()
		cancel()
		if sctx.Err() != nil {
			return
		}
		if len(msgs) == 0 && cutShort {
			cctx, ccancel := context.WithTimeout(sctx, min(collectWait, s.set.sessionIdle))
			msgs, _ = receiveSession(cctx, sr)
			ccancel()
			if len(msgs) > 0 {
				s.log.Debug("servicebus source: took what a receive cut short by Quiesce brought", "entity", s.set.entityPath, "session_id", id, "messages", len(msgs))
			}
		}
		if len(msgs) == 0 && s.quiet.Load() {
			return
		}
		if len(msgs) == 0 {
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				s.log.Debug("servicebus source: releasing an idle session", "entity", s.set.entityPath, "session_id", id)
				return
			}
			s.setErr(err)
			s.undecodableErr(err)
			s.log.Warn("servicebus source: receiving from a session failed; releasing it", "entity", s.set.entityPath, "session_id", id, "error", err)
			return
		}
		for _, rm := range msgs {
			d, dd := s.wrapSession(sr, rm, lock)
			if dd == nil {
				continue // undecodable, settled
			}
			select {
			case s.out <- dd:
			case <-sctx.Done():
				return
			}
			select {
			case <-d.done:
			case <-d.held:
				held = append(held, d)
			case <-sctx.Done():
				return
			}
		}
	}
}

func (s *sessionSource) wrapSession(sr *azservicebus.SessionReceiver, rm *azservicebus.ReceivedMessage, lock *sessionLock) (*delivery, driver.Delivery) {
	dd := s.wrap(sr, rm, lock.renew)
	var d *delivery
	switch x := dd.(type) {
	case dlDelivery:
		d = x.delivery
	case *delivery:
		d = x
	default:
		return nil, nil
	}
	d.held, d.quiet = make(chan struct{}), &s.quiet
	return d, dd
}

// receiveSession takes one message (a panic in the SDK becomes an error).
func receiveSession(ctx context.Context, sr *azservicebus.SessionReceiver) (msgs []*azservicebus.ReceivedMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			msgs, err = nil, fmt.Errorf("the Service Bus SDK panicked reading a message: %v", r)
		}
	}()
	return sr.ReceiveMessages(ctx, 1, nil)
}

// renewSession keeps the session lock until ctx ends; a failed renewal
// ends the session (cancel).
func (s *sessionSource) renewSession(ctx context.Context, cancel context.CancelFunc, lock *sessionLock, id string) {
	l := &lockhold.Renewal{Every: s.set.lockRenewal, RenewLock: lock.renew, Expiry: lock.lockedUntil}
	err := lockhold.KeepLocked(ctx, l, func(due <-chan time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-due:
			return true
		}
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("servicebus source: renewing a session lock failed; releasing the session", "entity", s.set.entityPath, "session_id", id, "error", err)
		cancel()
	}
}

func (s *sessionSource) closeSession(sr *azservicebus.SessionReceiver) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := sr.Close(ctx); err != nil && s.ctx.Err() == nil {
		s.log.Debug("servicebus source: closing a session receiver", "entity", s.set.entityPath, "error", err)
	}
}

// Close releases the sessions (their unsettled messages come back when
// the session is accepted again) and closes the connection.
func (s *sessionSource) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		s.hold.Close(ctx)
		_ = ctxwait.Group(ctx, &s.wg) // the client's Close below ends what is left
		err = s.client.Close(ctx)
	})
	return err
}
