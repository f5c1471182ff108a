package amqp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/amqpguard"
	"github.com/qbridge/qbridge/internal/lockhold"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// rlink is one connection with its session and receiver link. The source
// never repairs a link in place: any failure drops the whole connection
// (which returns its unsettled deliveries to the broker) and dials again.
type rlink struct {
	*dialed
	sess    *amqp.Session
	rcv     *amqp.Receiver
	credit  int
	since   time.Time
	modSent atomic.Bool // a Modify went out on this link
	peers   *peerSettlements
	credits *linkCredit
}

type source struct {
	set            sourceSettings
	log            *slog.Logger
	undecodableLog *logpace.Pacer // the log line of an undecodable message
	poison         *amqpguard.Log
	pol            *settlePolicy
	hold           *lockhold.Holder // Nack delays (see delivery.Nack)
	stop           chan struct{}    // closed by Close

	connMu sync.Mutex // one connect at a time

	rd *redialer

	mu           sync.Mutex
	cur          *rlink
	closed       bool
	headFailures int // consecutive go-amqp decode failures (decode_guard = off)

	guardFull    atomic.Bool // escalated from scan to full
	creditWarned atomic.Bool
	orderTold    atomic.Bool  // what replicas do to group order was logged (see order.go)
	undecodable  atomic.Int64 // messages handed over as undecodable (driver.DecodeErrorer)
	reconnects   atomic.Int64
	peerSettled  atomic.Int64 // dispositions the broker sent on its own (OnDeliveryStateChanged)
	redeliv      redeliveries // this source's hand-backs by message-id (DeliveryCount)
}

func newSource(ctx context.Context, set sourceSettings, log *slog.Logger) (*source, error) {
	s := &source{
		set:            set,
		log:            log,
		poison:         amqpguard.NewLog(),
		undecodableLog: logpace.PerMessage(),
		pol:            &settlePolicy{mode: set.nack, rejectCond: set.rejectCond, log: log},
		hold:           lockhold.New(0, log, "amqp source"),
		stop:           make(chan struct{}),
	}
	s.rd = newRedialer(&s.set.conn, s.stop)
	if _, err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Receive returns the next deliveries, reconnecting (with backoff) as long
// as ctx lasts.
func (s *source) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	for {
		l, err := s.current(ctx)
		if err != nil {
			return nil, err
		}
		msg, err := l.rcv.Receive(ctx, nil)
		if err != nil {
			// A link that died as ctx ended is still dead: drop it now, so
			// its connection (and the unsettled delivery it pins on the
			// broker) does not outlive it until the next Receive.
			if ctx.Err() == nil || linkDead(err) {
				s.linkFailed(l, err)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		out := make([]driver.Delivery, 0, min(max, l.credit))
		if d := s.deliver(l, msg); d != nil {
			out = append(out, d)
		}
		taken := 1
		for len(out) < max {
			msg := l.rcv.Prefetched()
			if msg == nil {
				break
			}
			taken++
			if d := s.deliver(l, msg); d != nil {
				out = append(out, d)
			}
		}
		l.credits.received(taken)
		// What the broker settled while it waited in the link is not
		// handed over: its credit comes back now.
		for range taken - len(out) {
			l.credits.settled()
		}
		if len(out) > 0 {
			s.rd.reset()
			s.mu.Lock()
			s.headFailures = 0
			s.mu.Unlock()
			return out, nil
		}
	}
}

// RawMessageContentType is the content type of the message an undecodable
// delivery carries (driver.DecodeErrorer): its body is the AMQP encoding of
// the received message, every section as it came on the wire.
const RawMessageContentType = "application/vnd.qbridge.amqp-message"

// deliver decodes msg. A message that cannot be decoded (a guard stub, or
// one amqpmap refuses) comes back as a delivery whose DecodeError says why,
// for the engine to dead-letter.
func (s *source) deliver(l *rlink, msg *amqp.Message) driver.Delivery {
	if info, ok := s.poison.Match(msg.Annotations); ok {
		return s.undecodableDelivery(l, msg, info.Raw, info.Size, errors.New(info.Reason))
	}
	m, err := amqpmap.Decode(msg)
	if err != nil {
		// go-amqp decoded it: its re-encoding holds every section.
		raw, merr := msg.MarshalBinary()
		if merr != nil {
			raw = nil
		}
		return s.undecodableDelivery(l, msg, raw, len(raw), err)
	}
	m.Source.Address = s.set.address
	m.Source.DeliveryCount = s.redeliv.deliveryCount(m.ID, m.Source.DeliveryCount)
	return s.track(l, &delivery{st: l.rcv, msg: msg, m: m, pol: s.pol, modSent: &l.modSent, hold: s.hold, credits: l.credits, redeliv: &s.redeliv})
}

// track registers d with its link's peer settlements; nil when the broker
// settled it while it waited in the prefetch queue (it is the broker's
// again: handing it over would only make the engine settle it in vain).
func (s *source) track(l *rlink, d *delivery) driver.Delivery {
	if l.peers == nil {
		return d
	}
	if st, gone := l.peers.track(d); gone {
		s.log.Info("amqp source: dropped a prefetched delivery the broker settled on its own", "address", s.set.address,
			"state", stateName(st), "delivery_tag", hex.EncodeToString(d.msg.DeliveryTag))
		return nil
	}
	return d
}

// undecodableDelivery returns the delivery of a message that cannot be
// decoded: its Message has the raw AMQP bytes as body
// (RawMessageContentType), what the header and properties tell (ids,
// group, delivery count) and the source facts; DecodeError is cause.
func (s *source) undecodableDelivery(l *rlink, msg *amqp.Message, raw []byte, size int, cause error) driver.Delivery {
	n := s.undecodable.Add(1)
	// The guard's stub keeps the header and properties when they decode.
	m, err := amqpmap.Decode(&amqp.Message{Header: msg.Header, Properties: msg.Properties})
	if err != nil {
		m, err = amqpmap.Decode(&amqp.Message{Header: msg.Header})
	}
	if err != nil || m == nil { // cannot happen: a header alone always maps
		m = &mapping.Message{Source: mapping.Source{Protocol: "amqp", PartitionID: -1, DeliveryCount: 1}}
	}
	m.Body, m.BodyType, m.ContentType, m.ContentEncoding = raw, mapping.BodyData, RawMessageContentType, ""
	m.Source.Address = s.set.address
	if raw == nil && size > 0 {
		cause = fmt.Errorf("%w (its %d bytes were not kept)", cause, size)
	}
	args := []any{"address", s.set.address, "reason", cause.Error(), "delivery_tag", hex.EncodeToString(msg.DeliveryTag),
		"undecodable_total", n}
	if m.ID != "" {
		args = append(args, "message_id", m.ID)
	}
	if msg.Header != nil {
		args = append(args, "delivery_count", m.Source.DeliveryCount)
	}
	if size > 0 {
		args = append(args, "size", size)
	}
	s.undecodableLog.Do(func(leftOut int64) {
		s.log.Warn("amqp source: a message cannot be decoded; handed to the pipeline to dead-letter (reason corrupt)", append(args, logpace.LeftOutKey, leftOut)...)
	})
	m.Source.DeliveryCount = s.redeliv.deliveryCount(m.ID, m.Source.DeliveryCount)
	return s.track(l, &delivery{st: l.rcv, msg: msg, m: m, pol: s.pol, modSent: &l.modSent, hold: s.hold, credits: l.credits, redeliv: &s.redeliv, decodeErr: cause})
}

// current returns the live link, connecting with backoff while ctx lasts.
func (s *source) current(ctx context.Context) (*rlink, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if l := s.cur; l != nil {
			s.mu.Unlock()
			return l, nil
		}
		s.mu.Unlock()
		if err := s.rd.wait(ctx); err != nil {
			return nil, err
		}
		l, err := s.connect(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errClosed) {
			return nil, err
		}
		d := s.rd.failed(err)
		s.log.Warn("amqp source: connect failed; retrying", "error", err, "retry_in", d.Round(time.Millisecond))
	}
}

func (s *source) connect(ctx context.Context) (*rlink, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	if s.cur != nil {
		l := s.cur
		s.mu.Unlock()
		return l, nil
	}
	s.mu.Unlock()

	var wrap func(net.Conn) net.Conn
	mode := s.set.guard
	if mode == guardScan && s.guardFull.Load() {
		mode = guardFull
	}
	if mode != guardOff {
		wrap = func(c net.Conn) net.Conn {
			// The receiver link sets no max-message-size: a kept payload is
			// as large as the broker sends (the guard holds it whole anyway).
			return amqpguard.Wrap(c, amqpguard.Options{Full: mode == guardFull, Log: s.poison, KeepRaw: true})
		}
	}
	var tap *attachTap
	if s.set.browse {
		// Learn what the broker grants in its attach (see attachTap),
		// reading what the guard passes on.
		inner := wrap
		wrap = func(c net.Conn) net.Conn {
			if inner != nil {
				c = inner(c)
			}
			tap = newAttachTap(c)
			return tap
		}
	}
	d, err := s.rd.dial(ctx, wrap)
	if err != nil {
		return nil, fmt.Errorf("amqp source: connect: %w", err)
	}
	l, err := s.attach(ctx, d)
	if err == nil && s.set.browse {
		err = checkCopyGranted(tap, l, d)
	}
	if err == nil {
		err = l.credits.issue(l.credit)
	}
	if err != nil {
		closeConn(context.Background(), d.conn, s.set.conn.closeTimeout)
		return nil, fmt.Errorf("amqp source: %s: attach %q: %w", d.endpoint, s.set.address, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.shutdown(context.Background(), l)
		return nil, errClosed
	}
	s.cur = l
	s.mu.Unlock()
	s.log.Info("amqp source: connected", "endpoint", d.endpoint, "broker", d.product, "address", s.set.address,
		"credit", l.credit, "nack", s.nackDesc(), "decode_guard", mode.String(), "filters", strings.Join(s.set.filterDesc, ", "))
	return l, nil
}

func (s *source) nackDesc() string {
	if s.pol.mode == nackAuto {
		if s.pol.useModify() {
			return "auto (modify)"
		}
		return "auto (release)"
	}
	return s.pol.mode.String()
}

func (s *source) attach(ctx context.Context, d *dialed) (*rlink, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.conn.connectTimeout)
	defer cancel()
	sess, err := d.conn.NewSession(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin session: %w", err)
	}
	credit := s.set.credit
	if d.rabbit3 {
		if credit == 0 {
			credit = RabbitMQ3Credit
		} else if credit > 1 && s.creditWarned.CompareAndSwap(false, true) {
			s.log.Warn("amqp source: RabbitMQ 3.x stalls a receiver with credit > 1 on a backlog; consider credit = 1",
				"broker", d.product, "credit", credit)
		}
		s.pol.refuse("RabbitMQ 3.x ends the session on Modify", "broker", d.product)
	}
	if err := s.checkOrder(d); err != nil {
		return nil, err
	}
	if credit == 0 {
		credit = DefaultCredit
	}
	peers := newPeerSettlements()
	opts := &amqp.ReceiverOptions{
		OnDeliveryStateChanged: s.onPeerSettled(peers),
		// The source issues the credit (linkCredit): a message held for a
		// Nack's delay gives its credit back, as a settled one does.
		Credit:              -1,
		Name:                s.set.linkName,
		Filters:             s.set.filters,
		SourceCapabilities:  s.set.capabilities,
		SourceExpiryPolicy:  s.set.expiry,
		SourceExpiryTimeout: s.set.expiryTO,
	}
	if s.set.durable {
		opts.SourceDurability = amqp.DurabilityUnsettledState
	}
	if s.set.browse {
		if err := browsable(d); err != nil {
			return nil, err
		}
		// A copy needs no settlement: the broker may send it settled. No
		// credit until the attach reply shows the copy was granted
		// (connect issues it): a broker that moves would consume.
		opts.SourceDistributionMode = amqp.SourceDistributionModeCopy
		opts.RequestedSenderSettleMode = &senderSettled
	}
	addr := s.attachAddress(d)
	rcv, err := sess.NewReceiver(ctx, addr, opts)
	if err != nil {
		if addr != s.set.address && isNotFound(err) {
			return nil, driver.Permanent(fmt.Errorf("queue %s does not exist, and a migration does not create its source (attached as %s, which RabbitMQ does not declare): check the address: %w", s.set.address, addr, err))
		}
		return nil, sacAttachHint(err, s.set.address)
	}
	// A broker leaves out of its attach reply the filters it does not
	// apply (AMQP 1.0 §3.5.8); receiving would then bypass the filter.
	for _, key := range s.set.filterKeys {
		if rcv.LinkSourceFilterValue(key) == nil {
			return nil, fmt.Errorf("the broker does not apply filter %q (missing from its attach reply): refusing to receive unfiltered messages", key)
		}
	}
	return &rlink{dialed: d, sess: sess, rcv: rcv, credit: credit, since: time.Now(), peers: peers,
		credits: &linkCredit{rcv: rcv, log: s.log}}, nil
}

// linkFailed drops l (if still current), explains why, and schedules the
// reconnect.
func (s *source) linkFailed(l *rlink, err error) {
	s.mu.Lock()
	if s.cur != l {
		s.mu.Unlock()
		return
	}
	s.cur = nil
	if time.Since(l.since) > s.set.conn.backoffMax {
		s.rd.reset() // a long-lived link: reconnect at once
	}
	wait := s.rd.failed(err)
	closed := s.closed
	undecodable, isUndecodable := localDecodeFailure(err)
	if isUndecodable {
		s.headFailures++
	}
	head := s.headFailures
	s.mu.Unlock()
	if closed {
		return
	}
	n := s.reconnects.Add(1)
	switch {
	case s.pol.linkEnded(l.modSent.Load(), err):
	case isUndecodable && s.set.guard == guardScan:
		if !s.guardFull.Swap(true) {
			s.log.Warn("amqp source: go-amqp failed to decode a message the decode guard's scan let through; the guard now runs the full decoder on every message, so the next delivery of it is rejected",
				"address", s.set.address, "type", undecodable, "error", err)
		}
	case isUndecodable:
		s.log.Error("amqp source: go-amqp cannot decode the message at the head of the link and closed the link; the broker redelivers it (decode_guard = off: only the broker's delivery limit or dead-lettering removes it)",
			"address", s.set.address, "type", undecodable, "consecutive", head, "error", err, "retry_in", wait.Round(time.Millisecond))
	default:
		s.log.Warn("amqp source: link lost; reconnecting", "endpoint", l.endpoint, "address", s.set.address,
			"error", err, "retry_in", wait.Round(time.Millisecond), "reconnects", n)
	}
	go closeConn(context.Background(), l.conn, s.set.conn.closeTimeout)
}

// linkDead reports whether err is the receiver's link or connection ending
// rather than the caller's context.
func linkDead(err error) bool {
	var le *amqp.LinkError
	var ce *amqp.ConnError
	var se *amqp.SessionError
	return errors.As(err, &le) || errors.As(err, &ce) || errors.As(err, &se)
}

// localDecodeFailure reports whether err is go-amqp closing the receiver
// because it could not decode a message (amqp:internal-error raised
// locally, not sent by the peer), and the undecodable type when known.
func localDecodeFailure(err error) (string, bool) {
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr != nil {
		return "", false
	}
	if t, ok := amqpmap.UndecodableType(err); ok {
		return t, true
	}
	if strings.HasPrefix(err.Error(), string(amqp.ErrCondInternalError)+": ") {
		return "", true
	}
	return "", false
}

// Ready reports whether the source holds a live connection.
func (s *source) Ready(context.Context) error {
	s.mu.Lock()
	l, closed := s.cur, s.closed
	s.mu.Unlock()
	lastErr := s.rd.err()
	switch {
	case closed:
		return errClosed
	case l == nil && lastErr != nil:
		return fmt.Errorf("amqp source: not connected: %w", lastErr)
	case l == nil:
		return errors.New("amqp source: not connected")
	}
	select {
	case <-l.conn.Done():
		return fmt.Errorf("amqp source: connection lost: %w", l.conn.Err())
	default:
		return nil
	}
}

// Ping begins and ends a session on the source's connection: two round
// trips that a broker answers only while it serves the connection (a
// stalled broker keeps it open and silent). For qbridge migrate
// (driver.Pinger): an AMQP 1.0 broker cannot count a queue.
func (s *source) Ping(ctx context.Context) error {
	s.mu.Lock()
	l := s.cur
	s.mu.Unlock()
	if l == nil {
		return errors.New("amqp source: not connected")
	}
	sess, err := l.conn.NewSession(ctx, nil)
	if err != nil {
		return fmt.Errorf("amqp source: ping (begin a session): %w", err)
	}
	if err := sess.Close(ctx); err != nil {
		return fmt.Errorf("amqp source: ping (end a session): %w", err)
	}
	return nil
}

// Close stops receiving. Unsettled deliveries go back to the broker with
// the connection.
func (s *source) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	l := s.cur
	s.cur = nil
	s.mu.Unlock()
	// Messages held for a Nack's delay go back while the link is up,
	// with the outcome Nack chose.
	s.hold.Close(ctx)
	if l != nil {
		s.shutdown(ctx, l)
	}
	return nil
}

// shutdown detaches the link with a short deadline and closes the
// connection. The detach is skipped on RabbitMQ 3.x, which never answers it
// (rabbitmq-server#2594, go-amqp#310), and for durable links, whose closing
// detach would delete the durable subscription.
func (s *source) shutdown(ctx context.Context, l *rlink) {
	if !l.rabbit3 && !s.set.durable {
		cctx, cancel := context.WithTimeout(ctx, s.set.conn.closeTimeout)
		_ = l.rcv.Close(cctx)
		cancel()
	}
	closeConn(ctx, l.conn, s.set.conn.closeTimeout+time.Second)
}
