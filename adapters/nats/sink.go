package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

// sink publishes to core NATS (publish, then one flush per Send as the
// confirmation that the server has the messages) or to JetStream (async
// publishes, then a wait for every PubAck of the Send call).
type sink struct {
	// connMu guards conn and js: a Send holds it shared for its whole
	// call, and a connection nats.go closed for good is replaced under it
	// held exclusively (redial).
	connMu sync.RWMutex
	conn   *conn
	js     jetstream.JetStream // nil for core
	set    *sinkSettings
	codec  codec
	log    *slog.Logger
	dups   duplicates
	// trusted is 1 + the reconnect count under which the stream last
	// stored a message with nothing failing since; 0 after a failure
	// (sendJS probes before it pipelines).
	trusted atomic.Uint64
	// streamMaxMsg is the named stream's max_msg_size (headers and data;
	// <= 0: none), read when the sink opens.
	streamMaxMsg int
}

func newSink(ctx context.Context, set *sinkSettings, cfg *SinkConfig, onDrop func(field, reason string), log *slog.Logger) (*sink, error) {
	s := &sink{set: set, log: log}
	c, js, err := s.connect(ctx, true)
	if err != nil {
		return nil, err
	}
	limit := int(c.nc.MaxPayload())
	if cfg.MaxMessageSize > 0 && cfg.MaxMessageSize < limit {
		limit = cfg.MaxMessageSize
	}
	if s.streamMaxMsg > 0 && s.streamMaxMsg < limit {
		// The stream would refuse a larger message only at its PubAck,
		// as "permanent": refused when it is encoded, it is too-large
		// (the encode policy applies), and it is never published.
		limit = s.streamMaxMsg
	}
	maxHeaders := 0
	if set.js != nil {
		maxHeaders = jetStreamMaxHeaders
	}
	s.conn, s.js = c, js
	s.codec = newCodec(set.groupHeader, mapping.Options{
		Policy: cfg.Policy, MaxMessageSize: limit, MaxHeaderSize: maxHeaders, CarrySource: cfg.CarrySource, OnDrop: onDrop,
		Envelope: cfg.Envelope,
	})
	return s, nil
}

// connect dials the sink's connection and, for JetStream, its context;
// at the first open it also makes sure of the stream.
func (s *sink) connect(ctx context.Context, first bool) (*conn, jetstream.JetStream, error) {
	cc := s.set.conn
	cc.NoReconnectBuffer = true
	c, err := dial(ctx, cc, s.log)
	if err != nil {
		return nil, nil, err
	}
	j := s.set.js
	if j == nil {
		return c, nil, nil
	}
	js, err := jetstream.New(c.nc,
		jetstream.WithPublishAsyncMaxPending(j.maxPending),
		jetstream.WithPublishAsyncTimeout(j.ackTimeout))
	if err != nil {
		c.close()
		return nil, nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	if first && j.stream != "" {
		st, err := ensureStream(ctx, js, j.stream, j.createStream, j.streamConfig(), s.log)
		if err != nil {
			c.close()
			return nil, nil, err
		}
		if info := st.CachedInfo(); info != nil {
			s.streamMaxMsg = int(info.Config.MaxMsgSize)
		}
	}
	return c, js, nil
}

// streamConfig is the stream a sink with create_stream makes.
func (j *jsSinkSettings) streamConfig() jetstream.StreamConfig {
	return withLimits(jetstream.StreamConfig{
		Name: j.stream, Subjects: j.streamSubjects, Storage: jetstream.FileStorage, Duplicates: j.duplicateWindow,
	}, j.limits)
}

// redial replaces a connection nats.go closed for good: it does so after a
// server's -ERR it does not know (such as "maximum control line
// exceeded") and after the same authorization error twice, and never
// reconnects such a connection itself, so every later message failed
// until a restart. What was published on the old connection and not
// confirmed failed with it and is sent again by the engine.
func (s *sink) redial(ctx context.Context) error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if !s.conn.nc.IsClosed() {
		return nil // another call redialed meanwhile
	}
	c, js, err := s.connect(ctx, false)
	if err != nil {
		return fmt.Errorf("nats: the connection was closed, and dialing again failed: %w", err)
	}
	s.conn.close() // releases an embedded server's reference
	s.conn, s.js = c, js
	s.trusted.Store(0) // a new connection: probe before pipelining
	s.log.Warn("nats sink: the connection had been closed; dialed again")
	return nil
}

// live holds the sink's connection for a call (connMu shared; the caller
// unlocks), dialing again first when nats.go closed it for good.
func (s *sink) live(ctx context.Context) error {
	s.connMu.RLock()
	if !s.conn.nc.IsClosed() {
		return nil
	}
	s.connMu.RUnlock()
	if err := s.redial(ctx); err != nil {
		return err
	}
	s.connMu.RLock()
	return nil
}

func (s *sink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	if err := s.live(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer s.connMu.RUnlock()
	if s.js == nil {
		s.sendCore(ctx, msgs, errs)
		return errs
	}
	// Async publishes keep their message until the PubAck: one each.
	out := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		out[i], errs[i] = s.encode(nil, m)
	}
	s.sendJS(ctx, out, errs)
	return errs
}

// encode renders m's subject and encodes m, into sc when it is not nil.
func (s *sink) encode(sc *natsmap.Scratch, m *mapping.Message) (*nats.Msg, error) {
	subject := s.set.subject.render(m, s.set.groupToken)
	if len(subject) > maxSubjectBytes {
		// The server would answer "maximum control line exceeded" and
		// close the connection: every later message would fail with it.
		return nil, mapping.TooLargef("nats", "subject", "the subject is %d bytes, more than %d: nats-server refuses a protocol line over max_control_line (4 KiB by default) and closes the connection", len(subject), maxSubjectBytes)
	}
	nm, err := s.codec.encode(sc, m, subject)
	if err != nil {
		return nil, fmt.Errorf("nats: encode for %q: %w", subject, err)
	}
	return nm, nil
}

// maxSubjectBytes is the longest subject the sink publishes: nats-server's
// default max_control_line is 4096 bytes and bounds the whole HPUB line
// (subject, reply and two sizes); the server does not tell its own.
const maxSubjectBytes = 4000

// KeepsOrder reports that a call's messages reach the server in slice order
// (driver.OrderedSender): core publishes and JetStream async publishes go
// out on one connection in order, and the server stores them in that order.
func (s *sink) KeepsOrder() bool { return true }

// SignalsWritten reports that a core call says when its publishes are in
// the connection's buffer, before its flush waits for the server
// (driver.WriteSignaller): the next call's publishes go after them on the
// same connection, so the two flushes' round trips may overlap.
func (s *sink) SignalsWritten() bool { return s.js == nil }

// sendCore publishes and flushes: a successful flush means the server has
// read every message before it (not that anyone received them). A call
// publishes on one connection: a message published after a reconnect could
// be read while one published before it was lost with the old socket, and
// the flush on the new connection would confirm both.
//
// Each message is encoded into one scratch message right before its
// publish: PublishMsg copies it into the connection's buffer, so the next
// one reuses its header map instead of allocating its own.
func (s *sink) sendCore(ctx context.Context, msgs []*mapping.Message, errs []error) {
	gen := s.reconnects()
	sent := 0
	var sc natsmap.Scratch
	for i, m := range msgs {
		nm, err := s.encode(&sc, m)
		if err != nil {
			errs[i] = err
			continue
		}
		err = s.sameConn(gen)
		if err == nil {
			err = publishErr(s.conn.nc.PublishMsg(nm))
		}
		if err != nil {
			errs[i] = err
			if !driver.IsPermanent(err) {
				for j := i + 1; j < len(msgs); j++ {
					errs[j] = heldBack(err)
				}
				break
			}
			continue
		}
		sent++
	}
	driver.Written(ctx)
	if sent == 0 {
		return
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok { // FlushWithContext needs a deadline
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, DefaultAckTimeout)
		defer cancel()
	}
	err := s.conn.nc.FlushWithContext(fctx)
	if err != nil {
		err = fmt.Errorf("nats: flush: %w", err)
	} else {
		err = s.sameConn(gen)
	}
	if err != nil {
		for i := range errs {
			if errs[i] == nil { // published: the flush decides
				errs[i] = err
			}
		}
	}
}

// reconnects is the connection's reconnect count. nats.go raises it before
// the new connection carries anything, so a publish that sees the old count
// goes out on the old connection or fails.
func (s *sink) reconnects() uint64 { return s.conn.nc.Stats().Reconnects }

// errReconnected fails what a call would publish on a new connection.
var errReconnected = errors.New("nats: not published: the connection was re-established during the call")

func (s *sink) sameConn(gen uint64) error {
	if s.reconnects() != gen {
		return errReconnected
	}
	return nil
}

// sendJS publishes asynchronously in windows of max_pending and waits for
// each window's acks, mapping every PubAck or error back to its message.
//
// Pipelining trusts the stream to store a window's messages in order or
// refuse its tail: true while it is up, not always while it comes back (the
// chaos suite saw the first messages of a window fail and the later ones
// stored right after a sink outage). So after a (re)connect or a failed
// publish, the first message of a call goes alone and the rest follow its
// PubAck (probe); and a call publishes nothing on a connection that
// replaced the one it began on.
func (s *sink) sendJS(ctx context.Context, out []*nats.Msg, errs []error) {
	gen := s.reconnects()
	start := 0
	if s.trusted.Load() != gen+1 {
		var ok bool
		if start, ok = s.probe(ctx, out, errs, gen); !ok {
			return
		}
	}
	window := s.set.js.maxPending
	futures := make([]jetstream.PubAckFuture, 0, min(window, len(out)))
	idx := make([]int, 0, cap(futures))
	var failed error // the first transient failure: nothing after it is published
	for ; start < len(out) && failed == nil; start += window {
		end := min(start+window, len(out))
		futures, idx = futures[:0], idx[:0]
		for i := start; i < end; i++ {
			if out[i] == nil {
				continue
			}
			f, err := s.publishAsync(out[i], gen)
			if err != nil {
				errs[i] = err
				if !driver.IsPermanent(err) {
					failed = err
					holdBack(out[i+1:], errs[i+1:], failed)
					break
				}
				continue
			}
			futures = append(futures, f)
			idx = append(idx, i)
		}
		for k, f := range futures {
			err := waitAck(ctx, f, &s.dups)
			errs[idx[k]] = err
			if err != nil && failed == nil && !driver.IsPermanent(err) {
				failed = err
			}
		}
		if failed != nil {
			holdBack(out[end:], errs[end:], failed)
		}
	}
	if failed != nil {
		s.trusted.Store(0)
	}
}

// probe publishes the call's messages one at a time until one is stored,
// and returns where pipelining may go on; false when a transient failure
// ended the call (the rest held back).
func (s *sink) probe(ctx context.Context, out []*nats.Msg, errs []error, gen uint64) (int, bool) {
	for i, nm := range out {
		if nm == nil {
			continue
		}
		f, err := s.publishAsync(nm, gen)
		if err == nil {
			err = waitAck(ctx, f, &s.dups)
		}
		errs[i] = err
		switch {
		case err == nil:
			s.trusted.Store(gen + 1)
			return i + 1, true
		case !driver.IsPermanent(err):
			s.trusted.Store(0)
			holdBack(out[i+1:], errs[i+1:], err)
			return len(out), false
		}
	}
	return len(out), true
}

func (s *sink) publishAsync(nm *nats.Msg, gen uint64) (jetstream.PubAckFuture, error) {
	if err := s.sameConn(gen); err != nil {
		return nil, err
	}
	f, err := s.js.PublishMsgAsync(nm)
	return f, publishErr(err)
}

// heldBack is the error of a message not published because an earlier one
// of the call failed (it is retried after it, in order).
func heldBack(cause error) error {
	return fmt.Errorf("nats: not published: an earlier message of the call failed: %w", cause)
}

// holdBack fails the messages of a call after a transient failure without
// publishing them: a message published after a failed one can be stored
// before it, and the engine's resend of the failed one (followed by its
// group's later messages) cannot undo that order. Duplicates of what is
// stored are deduplicated; an order broken at the sink is not.
func holdBack(out []*nats.Msg, errs []error, cause error) {
	for i, nm := range out {
		if nm != nil {
			errs[i] = heldBack(cause)
			out[i] = nil
		}
	}
}

func waitAck(ctx context.Context, f jetstream.PubAckFuture, dups *duplicates) error {
	select {
	case ack := <-f.Ok():
		// A duplicate (same Nats-Msg-Id within the window) is stored once:
		// success, counted.
		if ack != nil && ack.Duplicate {
			dups.n.Add(1)
		}
		return nil
	case err := <-f.Err():
		return publishErr(err)
	case <-ctx.Done():
		select { // an ack may have raced the cancellation
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return publishErr(err)
		default:
			return fmt.Errorf("nats: waiting for publish ack: %w", ctx.Err())
		}
	}
}

// jetStreamMaxHeaders is the most header bytes a stream stores: nats-server
// refuses more (JSStreamHeaderExceedsMaximumErr, "header size exceeds
// maximum allowed of 64k", checked against math.MaxUint16 in stream.go)
// whatever max_payload allows. Without this bound the sink retried such a
// message for ever, holding its group (an SQS message takes 256 KiB of
// attributes).
const jetStreamMaxHeaders = math.MaxUint16

// errCodeHeaderTooLarge is that refusal's JetStream error code.
const errCodeHeaderTooLarge jetstream.ErrorCode = 10097

// publishErr marks the errors that retrying cannot fix as permanent.
func publishErr(err error) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("nats: publish: %w", err)
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		// With no reconnect buffer (conn.go), this is how nats.go refuses
		// a publish while the connection is down.
		return fmt.Errorf("nats: publish: the connection is down, reconnecting: %w", err)
	}
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) ||
		errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrBadHeaderMsg) {
		return driver.Permanent(wrapped)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeHeaderTooLarge {
		return driver.Permanent(fmt.Errorf("%w: %w", mapping.TooLargef("nats", "headers", "more than the stream stores (%d bytes)", jetStreamMaxHeaders), wrapped))
	}
	if s := strings.ToLower(err.Error()); strings.Contains(s, "maximum payload exceeded") ||
		strings.Contains(s, "message size exceeds") {
		return driver.Permanent(wrapped)
	}
	return wrapped
}

func (s *sink) Close(ctx context.Context) error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.conn.close()
	return nil
}

// Ready reports the connection status; a connection closed for good is
// dialed again here too, so that an idle sink recovers and says so.
func (s *sink) Ready(ctx context.Context) error {
	if err := s.live(ctx); err != nil {
		return err
	}
	defer s.connMu.RUnlock()
	return s.conn.ready()
}
