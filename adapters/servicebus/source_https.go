package servicebus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/ctxwait"
	"github.com/qbridge/qbridge/internal/lockhold"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbmap"
	"github.com/qbridge/qbridge/mapping/sbrest"
)

// httpsSource peek-locks messages over the REST API: max_messages workers
// each long-poll POST {entity}/messages/head?timeout=N and hand the
// message over, renewing its lock while it waits to be taken.
type httpsSource struct {
	set  *sourceSettings
	log  *slog.Logger
	c    *restClient
	hold *lockhold.Holder

	feed[*httpsDelivery]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}
	lastErr   atomic.Pointer[errBox]
}

var (
	_ driver.Source       = (*httpsSource)(nil)
	_ driver.ReadyChecker = (*httpsSource)(nil)
)

func newHTTPSSource(set *sourceSettings, log *slog.Logger, cred azcore.TokenCredential) *httpsSource {
	ctx, cancel := context.WithCancel(context.Background())
	s := &httpsSource{set: set, log: log, c: newRESTClient(set.conn, cred), hold: lockhold.New(set.lockRenewal, log, "servicebus source"),
		feed: newFeed[*httpsDelivery](), ctx: ctx, cancel: cancel, closed: make(chan struct{})}
	for i := 0; i < set.maxMessages; i++ {
		s.wg.Add(1)
		go s.worker()
	}
	log.Info("servicebus source: ready", "namespace", set.conn.description, "entity", set.restPath,
		"receivers", set.maxMessages, "receive_wait", set.receiveWait)
	return s
}

// Receive returns the messages the workers have ready: it blocks for the
// first, then takes what is there without waiting.
func (s *httpsSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	return s.receive(ctx, s.closed, limit)
}

func (s *httpsSource) worker() {
	defer s.wg.Done()
	bo := backoff.Backoff{Base: s.set.conn.backoff, Max: s.set.conn.backoffMax}
	for s.ctx.Err() == nil {
		d, err := s.peekLock(s.ctx)
		if s.ctx.Err() != nil {
			if d != nil {
				s.unlock(d)
			}
			return
		}
		if err != nil {
			s.lastErr.Store(&errBox{err})
			if restFatal(err) {
				// Permanent, as over AMQP: a migration fails at once
				// (a key that does not sign, a missing claim).
				s.fail(driver.Permanent(fmt.Errorf("servicebus source: %s: %w", s.set.restPath, err)))
				return
			}
			wait := bo.Next()
			s.log.Warn("servicebus source: peek-lock failed; retrying", "entity", s.set.restPath, "error", err, "retry_in", wait.Round(time.Millisecond))
			if backoff.Sleep(s.ctx, nil, errClosed, wait) != nil {
				return
			}
			continue
		}
		bo.Reset()
		s.lastErr.Store(nil)
		if d != nil && !s.handOver(d) {
			s.unlock(d)
			return
		}
	}
}

// handOver waits for Receive to take d, renewing its lock meanwhile.
func (s *httpsSource) handOver(d *httpsDelivery) bool {
	sent := false
	l := &lockhold.Renewal{Every: s.set.lockRenewal, RenewLock: d.renewLock, LockedUntil: d.m.Source.LockedUntil}
	err := lockhold.KeepLocked(s.ctx, l, func(due <-chan time.Time) bool {
		select {
		case s.out <- d:
			sent = true
			return false
		case <-s.ctx.Done():
			return false
		case <-due:
			return true
		}
	})
	if err != nil {
		s.log.Warn("servicebus source: renewing the lock of a message waiting to be taken failed; dropping it (it is delivered again)", "entity", s.set.restPath, "error", err)
		return true // nothing to unlock
	}
	return sent
}

func (s *httpsSource) unlock(d *httpsDelivery) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	_ = d.abandonNow(ctx)
}

// peekLock takes one message; nil, nil when none came within receive_wait.
func (s *httpsSource) peekLock(ctx context.Context) (*httpsDelivery, error) {
	u := s.c.base + "/" + escapePath(s.set.restPath) + "/messages/head?timeout=" + timeoutParam(s.set.receiveWait)
	ctx, cancel := context.WithTimeout(ctx, s.set.receiveWait+30*time.Second)
	defer cancel()
	resp, body, err := s.c.do(ctx, "peek-lock", http.MethodPost, u, s.set.restPath, nil, nil, http.StatusCreated, http.StatusNoContent)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	lock, ok, err := sbrest.LockLocation(resp.Header)
	if !ok || err != nil {
		return nil, fmt.Errorf("servicebus-https: peek-lock: a 201 response without a usable Location (%v); the message is delivered again when its lock expires", err)
	}
	lockURL, err := s.c.lockURL(lock.URL)
	if err != nil {
		return nil, err
	}
	d := &httpsDelivery{src: s, lockURL: lockURL}
	m, derr := sbrest.Decode(resp.Header, body)
	if derr != nil {
		s.log.Error("servicebus source: cannot decode a received message; it must be dead-lettered",
			"entity", s.set.restPath, "lock_token", lock.LockToken, "error", derr)
		m, d.err = restWithoutEnvelope(resp.Header, body), derr
		if m == nil {
			m = rawRESTModel(resp.Header, body, lock)
		}
	}
	m.Source.Address = s.set.entityPath
	d.m = m
	return d, nil
}

// restWithoutEnvelope decodes a refused message without its carry
// envelope (the usual culprit), for the dead-letter copy: its properties
// are kept, and the envelope header's text travels on as
// mapping.RefusedEnvelopeAttr. Nil when the message has no envelope or is
// refused without it too.
func restWithoutEnvelope(h http.Header, body []byte) *mapping.Message {
	name := http.CanonicalHeaderKey(mapping.EnvelopeName)
	env, ok := h[name]
	if !ok || len(env) == 0 {
		return nil
	}
	bare := h.Clone()
	bare.Del(name)
	m, err := sbrest.Decode(bare, body)
	if err != nil {
		return nil
	}
	text := env[0]
	if u, err := strconv.Unquote(text); err == nil {
		text = u // a string property's header is JSON-quoted
	}
	m.SetAttr(mapping.RefusedEnvelopeAttr, mapping.String(text))
	return m
}

// rawRESTModel keeps what can be read of a message sbrest refuses: the
// body and the ids of BrokerProperties.
func rawRESTModel(h http.Header, body []byte, lock sbrest.Lock) *mapping.Message {
	m := &mapping.Message{Body: body, ContentType: h.Get("Content-Type"), Source: mapping.Source{
		Protocol: sbmap.Wire, PartitionID: -1, LockToken: lock.LockToken}}
	var bp struct {
		MessageId      string
		SessionId      string
		SequenceNumber json.Number
		DeliveryCount  int
	}
	if json.Unmarshal([]byte(h.Get("BrokerProperties")), &bp) == nil {
		m.ID, m.GroupKey, m.Source.SequenceNumber, m.Source.DeliveryCount = bp.MessageId, bp.SessionId, bp.SequenceNumber.String(), bp.DeliveryCount
	}
	return m
}

// Ready reports the last peek-lock failure, if the last one failed.
func (s *httpsSource) Ready(context.Context) error {
	select {
	case <-s.closed:
		return errClosed
	default:
	}
	if b := s.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// Close stops the workers (a message being handed over is unlocked) and
// abandons the messages held for a Nack delay.
func (s *httpsSource) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		s.hold.Close(ctx)
		_ = ctxwait.Group(ctx, &s.wg) // past the deadline a worker's lock lapses
		s.c.http.CloseIdleConnections()
	})
	return nil
}

// httpsDelivery is one peek-locked message. It settles through its lock
// URL: DELETE completes, PUT unlocks (abandons), POST renews. The REST API
// cannot dead-letter, so it is no driver.DeadLetterer: the engine uses its
// dead-letter sink.
type httpsDelivery struct {
	src     *httpsSource
	lockURL string
	m       *mapping.Message
	err     error
	settled atomic.Bool
}

var (
	_ driver.Delivery      = (*httpsDelivery)(nil)
	_ driver.DecodeErrorer = (*httpsDelivery)(nil)
)

func (d *httpsDelivery) Message() *mapping.Message { return d.m }
func (d *httpsDelivery) DecodeError() error        { return d.err }

func (d *httpsDelivery) lockOp(ctx context.Context, op, method string) error {
	_, _, err := d.src.c.do(ctx, op, method, d.lockURL, d.src.set.restPath, nil, nil, http.StatusOK, http.StatusNoContent)
	return restSettleErr(op, err)
}

// Ack completes (deletes) the message.
func (d *httpsDelivery) Ack(ctx context.Context) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	return d.lockOp(ctx, "complete", http.MethodDelete)
}

// Nack unlocks the message; a delay keeps it locked that long first.
func (d *httpsDelivery) Nack(ctx context.Context, delay time.Duration) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	delay = min(delay, d.src.set.maxNackDelay)
	if delay > 0 && d.src.hold.Hold(delay, d.m.Source.LockedUntil, restLock{d}, d.m.ID, func() {}) {
		return nil
	}
	return d.abandonNow(ctx)
}

func (d *httpsDelivery) abandonNow(ctx context.Context) error {
	return d.lockOp(ctx, "unlock", http.MethodPut)
}

// Extend renews the lock (by the entity's lock duration).
func (d *httpsDelivery) Extend(ctx context.Context, _ time.Duration) error {
	if d.settled.Load() {
		return nil
	}
	_, err := d.renewLock(ctx)
	return err
}

func (d *httpsDelivery) renewLock(ctx context.Context) (time.Time, error) {
	return time.Time{}, d.lockOp(ctx, "renew lock", http.MethodPost)
}

type restLock struct{ d *httpsDelivery }

func (l restLock) Renew(ctx context.Context) (time.Time, error) { return l.d.renewLock(ctx) }
func (l restLock) Release(ctx context.Context) error            { return l.d.abandonNow(ctx) }
