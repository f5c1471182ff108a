package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/lru"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// sconn is the sink's connection, session and sender links by address.
type sconn struct {
	*dialed
	sess  *amqp.Session
	links *lru.Cache[string, *sendLink] // at most max_links, beyond those in use
	// closing: the sink closes the connection, whose close cleans up the
	// links (RabbitMQ 3.x's need not be detached one by one).
	closing atomic.Bool
}

type sendLink struct {
	addr string
	snd  *amqp.Sender
}

type sink struct {
	set  sinkSettings
	log  *slog.Logger
	stop chan struct{}

	connMu sync.Mutex // one connect at a time

	rd *redialer

	mu     sync.Mutex
	conn   *sconn
	closed bool

	// bg: the closes of lost connections, which Close waits for.
	bg sync.WaitGroup

	connects atomic.Int64 // connections made (for logs and tests)
	// redialing: a reconnect that Ready started runs (one at a time).
	redialing atomic.Bool
}

func newSink(ctx context.Context, set sinkSettings, log *slog.Logger) (*sink, error) {
	s := &sink{set: set, log: log, stop: make(chan struct{})}
	s.rd = newRedialer(&s.set.conn, s.stop)
	c, err := s.connection(ctx)
	if err != nil {
		return nil, err
	}
	if set.isStatic {
		// attach now: a refused address fails the start, not every message
		_, release, err := c.sender(ctx, set.static, set.targetDur)
		if err != nil {
			s.Close(ctx)
			err = fmt.Errorf("amqp sink: %s: attach %q: %w", c.endpoint, set.static, err)
			if errors.Is(err, errNoQueue) || addressRefused(err, set.static) || refusedWith(err, amqp.ErrCondPreconditionFailed) {
				// Retrying cannot help until someone declares the queue or
				// mends the address (a durable queue addressed as a
				// non-durable /queue/ one: precondition-failed): a
				// migration fails at once, where it retried until
				// -connect-timeout (the daemon's open retries).
				err = driver.Permanent(err)
			}
			return nil, err
		}
		release()
	}
	return s, nil
}

// Send pipelines msgs (a transfer each, then waits for every outcome) and
// returns one error per message: nil once the broker accepted it.
func (s *sink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	ctx, cancel := context.WithTimeout(ctx, s.set.sendTimeout)
	defer cancel()
	c, err := s.connection(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	type inFlight struct {
		i       int
		link    *sendLink
		receipt amqp.SendReceipt
	}
	pending := make([]inFlight, 0, len(msgs))
	// The links in use stay attached until every outcome is in, whichever
	// other Send's attach pushes them out of the cache meanwhile. Each
	// address is acquired once a call (a fixed one: once), not once a
	// message.
	var releases []func()
	var inUse map[string]*sendLink
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	for i, m := range msgs {
		addr, err := s.address(m)
		if err != nil {
			errs[i] = err
			continue
		}
		sl, ok := inUse[addr]
		if !ok {
			var release func()
			sl, release, err = c.sender(ctx, addr, s.set.targetDur)
			if err == nil {
				releases = append(releases, release)
				if inUse == nil {
					inUse = make(map[string]*sendLink, 1)
				}
				inUse[addr] = sl
			}
		}
		if err != nil {
			errs[i] = s.failed(c, nil, addr, fmt.Errorf("attach: %w", err))
			if !s.set.isStatic && (addressRefused(err, addr) || errors.Is(err, errNoQueue)) {
				// The address this message's template rendered is one the
				// broker will not take (a "/" in the value makes
				// /queue/x/../../exchange/amq.topic): retried, it held the
				// message for ever and tore the session down each time.
				// A fixed address that the broker refuses is the
				// operator's to mend: that one stays transient.
				errs[i] = driver.Permanent(fmt.Errorf("amqp sink: the broker refuses the address %q that the address template renders for this message: %w", addr, errs[i]))
			}
			continue
		}
		msg, err := s.encode(m, sl.snd)
		if err != nil {
			errs[i] = driver.Permanent(err)
			continue
		}
		r, err := sl.snd.SendWithReceipt(ctx, msg, nil)
		if err != nil {
			errs[i] = s.sendErr(ctx, c, sl, err)
			if le := (*amqp.LinkError)(nil); errors.As(err, &le) {
				delete(inUse, addr) // dropped: the next message attaches anew, as before
			}
			continue
		}
		pending = append(pending, inFlight{i: i, link: sl, receipt: r})
	}
	for _, p := range pending {
		state, err := p.receipt.Wait(ctx)
		if err != nil {
			errs[p.i] = s.sendErr(ctx, c, p.link, err)
			continue
		}
		errs[p.i] = outcome(p.link.addr, state)
	}
	s.rd.reset()
	return errs
}

func (s *sink) address(m *mapping.Message) (string, error) {
	if s.set.isStatic {
		return s.set.static, nil
	}
	addr, err := s.set.address.Execute(m)
	if err != nil {
		return "", err // a *mapping.RejectError: permanent
	}
	if addr == "" {
		return "", driver.Permanent(fmt.Errorf("amqp sink: address template %q renders an empty address for this message", s.set.address))
	}
	return addr, nil
}

// encode maps m with the sink's options, within the smaller of
// max_message_size and the sender link's max-message-size.
func (s *sink) encode(m *mapping.Message, snd *amqp.Sender) (*amqp.Message, error) {
	return encodeFor(&s.set, m, snd.MaxMessageSize())
}

// encodeFor encodes m as a sink with set does for a link whose
// max-message-size is linkMax (0: none). A max_message_size above the
// link's does not replace it: go-amqp refuses what is over the link's
// limit, and the envelope must be shed for that limit first.
func encodeFor(set *sinkSettings, m *mapping.Message, linkMax uint64) (*amqp.Message, error) {
	opt := set.opt
	if n := linkMax; n > 0 && n <= math.MaxInt32 && (opt.MaxMessageSize == 0 || int(n) < opt.MaxMessageSize) {
		opt.MaxMessageSize = int(n)
	}
	if set.durable && !m.Durable {
		c := *m // shallow: Encode only reads
		c.Durable = true
		m = &c
	}
	return amqpmap.Encode(m, opt)
}

// outcome maps the broker's settlement of a transfer.
func outcome(addr string, state amqp.DeliveryState) error {
	switch st := state.(type) {
	case *amqp.StateAccepted:
		return nil
	case *amqp.StateRejected:
		if st.Error != nil {
			return driver.Permanent(fmt.Errorf("amqp sink: %s rejected the message: %w", addr, st.Error))
		}
		return driver.Permanent(fmt.Errorf("amqp sink: %s rejected the message (no error given)", addr))
	case *amqp.StateReleased:
		return fmt.Errorf("amqp sink: %s released the message (not taken; retry)", addr)
	case *amqp.StateModified:
		return fmt.Errorf("amqp sink: %s settled the message as modified (delivery-failed %v, undeliverable-here %v; retry)",
			addr, st.DeliveryFailed, st.UndeliverableHere)
	case nil:
		// settled without an outcome: not a confirmation, so at-least-once
		// says retry
		return fmt.Errorf("amqp sink: %s settled the message without an outcome; retrying", addr)
	}
	return fmt.Errorf("amqp sink: %s answered with non-terminal state %T; retrying", addr, state)
}

// sendErr classifies a failed transfer or wait.
func (s *sink) sendErr(ctx context.Context, c *sconn, sl *sendLink, err error) error {
	var ae *amqp.Error
	var le *amqp.LinkError
	var se *amqp.SessionError
	var ce *amqp.ConnError
	switch {
	case errors.As(err, &le), errors.As(err, &se), errors.As(err, &ce):
		return s.failed(c, sl, sl.addr, err)
	case ctx.Err() != nil:
		return fmt.Errorf("amqp sink: %s: no outcome within send_timeout %s (the message may have arrived): %w", sl.addr, s.set.sendTimeout, err)
	case errors.As(err, &ae) && ae.Condition == amqp.ErrCondMessageSizeExceeded:
		// Reason too-large, as the encoder's own limit says.
		return driver.Permanent(fmt.Errorf("amqp sink: %s: %w: %w", sl.addr,
			mapping.TooLargef("amqp", "message", "the broker refused the message as too large (the sink's max_message_size is %d, 0: the link's limit; set it to the broker's limit to refuse such messages before sending)", s.set.maxMsgSize), err))
	case errors.As(err, &ae) && ae.Condition == amqp.ErrCondTransferLimitExceeded:
		return fmt.Errorf("amqp sink: %s: no link credit: %w", sl.addr, err)
	}
	// go-amqp's marshaller refusing a value: retrying cannot help
	return driver.Permanent(fmt.Errorf("amqp sink: %s: %w", sl.addr, err))
}

// addressRefused reports whether the attach to addr failed because the
// broker refused that address (amqp:invalid-field: RabbitMQ's
// invalid_destination; amqp:not-found), not because the link, session or
// connection was lost. A detach of the link is this attach's answer.
// RabbitMQ 3.x ends the whole session instead, which also fails the other
// links being attached on it meanwhile: its error counts for addr only
// where its description names addr (RabbitMQ's names the destination, the
// address without its first segment: "/x" of "/queue/x").
func addressRefused(err error, addr string) bool {
	refusal := func(e *amqp.Error) bool {
		return e != nil && (e.Condition == amqp.ErrCondInvalidField || e.Condition == amqp.ErrCondNotFound)
	}
	var le *amqp.LinkError
	if errors.As(err, &le) {
		return refusal(le.RemoteErr)
	}
	var se *amqp.SessionError
	if !errors.As(err, &se) || !refusal(se.RemoteErr) {
		return false
	}
	desc := se.RemoteErr.Description
	if strings.Contains(desc, addr) {
		return true
	}
	if i := strings.IndexByte(addr[min(1, len(addr)):], '/'); i >= 0 {
		return strings.Contains(desc, addr[i+1:])
	}
	return false
}

// failed drops the broken link (or the whole connection when the session or
// connection ended) and returns a transient error.
func (s *sink) failed(c *sconn, sl *sendLink, addr string, err error) error {
	var le *amqp.LinkError
	if sl != nil && errors.As(err, &le) {
		c.drop(sl)
	} else if connGone(c, err) {
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
			s.rd.failed(err)
			// Close (s.closed is false while s.conn is c) waits for this.
			s.bg.Go(func() {
				closeConn(context.Background(), c.conn, s.set.conn.closeTimeout)
				_ = c.links.Close(context.Background()) // dead links: closed at once, once the Sends using them are done
			})
			s.log.Warn("amqp sink: connection lost; reconnecting on the next send", "endpoint", c.endpoint, "error", err)
		}
		s.mu.Unlock()
	}
	return fmt.Errorf("amqp sink: %s: %w", addr, err)
}

// connGone: the session or connection ended (a link error alone leaves
// the connection usable).
func connGone(c *sconn, err error) bool {
	var se *amqp.SessionError
	var ce *amqp.ConnError
	if errors.As(err, &se) || errors.As(err, &ce) {
		return true
	}
	select {
	case <-c.conn.Done():
		return true
	default:
		return false
	}
}

// connection returns the live connection or dials (one pass over the URLs,
// after the backoff of earlier failures).
func (s *sink) connection(ctx context.Context) (*sconn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	if c := s.conn; c != nil && alive(c.conn) {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	if err := s.rd.wait(ctx); err != nil {
		return nil, fmt.Errorf("amqp sink: waiting to reconnect: %w", err)
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	if c := s.conn; c != nil && alive(c.conn) {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	d, err := s.rd.dial(ctx, nil)
	var sess *amqp.Session
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, s.set.conn.connectTimeout)
		sess, err = d.conn.NewSession(sctx, nil)
		cancel()
		if err != nil {
			closeConn(ctx, d.conn, s.set.conn.closeTimeout)
			err = fmt.Errorf("%s: begin session: %w", d.endpoint, err)
		}
	}
	if err != nil {
		s.rd.failed(err)
		return nil, fmt.Errorf("amqp sink: connect: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeConn(context.Background(), d.conn, s.set.conn.closeTimeout)
		return nil, errClosed
	}
	defer s.mu.Unlock()
	sc := &sconn{dialed: d, sess: sess}
	sc.links = lru.New[string](s.set.maxLinks, func(ctx context.Context, sl *sendLink) error {
		sc.closeLink(ctx, sl.snd, s.set.conn.closeTimeout)
		return nil
	})
	s.conn = sc
	s.log.Info("amqp sink: connected", "endpoint", d.endpoint, "broker", d.product, "connections", s.connects.Add(1))
	if d.rabbit3 && !s.set.targetDur && strings.HasPrefix(s.set.address.String(), "/queue/") {
		s.log.Warn("amqp sink: RabbitMQ 3.x declares a missing /queue/ queue non-durable when target_durable is false: a broker restart deletes it with every message in it; set target_durable = true, or send to a durable queue declared beforehand as /amq/queue/NAME",
			"address", s.set.address.String())
	}
	return s.conn, nil
}

func alive(c *amqp.Conn) bool {
	select {
	case <-c.Done():
		return false
	default:
		return true
	}
}

// sender returns the link to addr, attaching it, and the func that
// releases it once the caller has every outcome of its transfers. The
// attach, a broker round trip, holds up neither the sends to cached
// addresses nor other attaches, and concurrent sends to a new address
// attach it once. Beyond max_links the cache detaches the least recently
// used link that no Send is using (at its last release if all are in use).
func (c *sconn) sender(ctx context.Context, addr string, targetDurable bool) (*sendLink, func(), error) {
	return c.links.Acquire(ctx, addr, func() (*sendLink, error) {
		var opts *amqp.SenderOptions
		if targetDurable {
			opts = &amqp.SenderOptions{TargetDurability: amqp.DurabilityUnsettledState}
		}
		if c.rabbit3 && strings.HasPrefix(addr, "/amq/queue/") {
			if err := c.queueExists(ctx, addr); err != nil {
				return nil, err
			}
		}
		snd, err := c.sess.NewSender(ctx, addr, opts)
		if err != nil {
			return nil, err
		}
		return &sendLink{addr: addr, snd: snd}, nil
	})
}

// errNoQueue: a RabbitMQ 3.x queue addressed as /amq/queue/NAME does not
// exist.
var errNoQueue = errors.New("the queue does not exist")

// queueExists checks that the queue behind a RabbitMQ 3.x /amq/queue/NAME
// address exists. RabbitMQ 3.x attaches a sender to a missing one and
// accepts every transfer, which it then drops, unroutable: each message
// counted as sent was lost (an audit's migration said complete). A
// receiver's attach is refused (amqp:not-found), and that refusal ends its
// session, so the probe has its own: a receiver without credit, which
// takes nothing, and a session end, which RabbitMQ 3.x answers at once
// (a link detach it does not).
func (c *sconn) queueExists(ctx context.Context, addr string) error {
	sess, err := c.conn.NewSession(ctx, nil)
	if err != nil {
		return nil // the sender's attach fails on the same connection, and says why
	}
	_, err = sess.NewReceiver(ctx, addr, &amqp.ReceiverOptions{Credit: -1})
	cctx, cancel := context.WithTimeout(ctx, probeCloseTimeout)
	defer cancel()
	_ = sess.Close(cctx)
	// Only a missing queue is refused. Any other answer is left to the
	// sender's attach: a user allowed to write to the queue but not to
	// read it, or an exclusive queue of another connection, refuses the
	// receiver and takes what is sent; a connection that ended fails the
	// sender too. Not the probe's session error itself: the sink would
	// take it for its own session's end, and drop the connection.
	if ae := (*amqp.Error)(nil); errors.As(err, &ae) && ae.Condition == amqp.ErrCondNotFound {
		return fmt.Errorf("%w: RabbitMQ 3.x would accept and drop every message sent to %s; declare the queue, or send to /queue/NAME, which it declares (%s)", errNoQueue, addr, ae.Description)
	}
	return nil
}

// probeCloseTimeout bounds the end of queueExists's session.
const probeCloseTimeout = 5 * time.Second

func (c *sconn) drop(sl *sendLink) { c.links.Remove(sl.addr, sl) }

// closeLink detaches a sender within timeout and ctx (the links cache's
// close). A link evicted while the connection stays is detached on RabbitMQ
// 3.x too: it does detach the link, only its reply is wrong (the close then
// waits out its deadline, in the cache's goroutine). Once the sink closes
// the connection (closing), RabbitMQ 3.x's are skipped: it never answers,
// and the connection's close cleans up.
func (c *sconn) closeLink(ctx context.Context, snd *amqp.Sender, timeout time.Duration) {
	if c.rabbit3 && c.closing.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_ = snd.Close(ctx)
}

// Ready reports whether the sink is connected. It never waits for the
// broker: /readyz and /metrics call it, and waiting out the reconnect
// backoff and a dial there left both without an answer for seconds during
// an outage. A sink that is not connected reconnects in the background
// (an idle sink would otherwise wait for its next send).
func (s *sink) Ready(context.Context) error {
	s.mu.Lock()
	c, closed := s.conn, s.closed
	s.mu.Unlock()
	lastErr := s.rd.err()
	switch {
	case closed:
		return errClosed
	case c != nil && alive(c.conn):
		return nil
	}
	if s.redialing.CompareAndSwap(false, true) {
		go func() {
			defer s.redialing.Store(false)
			// Bounded by the backoff and the dial's own timeout; Close
			// (s.stop) ends the wait for the backoff.
			ctx, cancel := context.WithTimeout(context.Background(), s.set.conn.backoffMax+2*s.set.conn.connectTimeout)
			defer cancel()
			_, _ = s.connection(ctx)
		}()
	}
	if lastErr != nil {
		return fmt.Errorf("amqp sink: not connected: %w", lastErr)
	}
	return errors.New("amqp sink: not connected; reconnecting")
}

// Close detaches the senders with a short deadline and closes the
// connection, and waits for the closes of lost connections. Every Send has
// returned its outcomes, so nothing is pending.
func (s *sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	defer s.bg.Wait()
	if c == nil {
		return nil
	}
	c.closing.Store(true)
	_ = c.links.Close(ctx) // waits for the detaches, evictions' included
	closeConn(ctx, c.conn, s.set.conn.closeTimeout+time.Second)
	return nil
}
