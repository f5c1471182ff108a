package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/mapping"
)

// jsSource reads a JetStream stream through a durable pull consumer with
// explicit acks: at-least-once. Unsettled messages come back after AckWait.
type jsSource struct {
	conn  *conn
	js    jetstream.JetStream
	set   *sourceSettings
	codec codec
	log   *slog.Logger

	mu         sync.Mutex
	cons       jetstream.Consumer
	maxDeliver int // the consumer's effective MaxDeliver; <= 0 unlimited
	// recover is set when the consumer may hold messages that this source
	// does not: at start, after the consumer was set up again and after a
	// reconnect. Receive then fetches nothing new until they came back
	// (see recoverPending).
	recover    bool
	reconnects uint64 // conn.reconnects when last checked
	// held are fetched deliveries not yet handed to the engine, in stream
	// order: what recoverPending collected. Receive hands them out first.
	held []*jsDelivery

	// outstanding counts deliveries handed to the engine and not yet
	// settled: the part of the consumer's NumAckPending that is ours.
	outstanding atomic.Int64
	// abandoned is a waiting pull that Receive left when its context
	// ended; it runs on to its end on the server (see waitPull). Its
	// messages go to the next Receive, or are nacked by Close.
	abandoned *pull

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
}

// maxPullWait bounds how long one waiting pull request stays open on the
// server, and so how long a nack or Close may wait for one (see waitPull).
const maxPullWait = time.Second

// pull is a waiting pull request running to its end.
type pull struct {
	done chan struct{}
	out  []*jsDelivery
	err  error
}

func newJSSource(ctx context.Context, set *sourceSettings, log *slog.Logger) (*jsSource, error) {
	c, err := dial(ctx, set.conn, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	s := &jsSource{conn: c, js: js, set: set, codec: newCodec(set.groupHeader, mapping.Options{}), log: log}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.reconnects = c.reconnects.Load()
	if err := s.setup(ctx); err != nil {
		s.cancel()
		c.close()
		return nil, err
	}
	go s.keepHeld()
	return s, nil
}

// setup finds (or creates) the stream and binds to (or creates) the durable
// consumer. An existing consumer is bound as it is: its settings are owned
// by whoever created it, so differences are only logged.
func (s *jsSource) setup(ctx context.Context) error {
	j := s.set.js
	st, err := ensureStream(ctx, s.js, j.stream, j.createStream, jetstream.StreamConfig{
		Name: j.stream, Subjects: j.streamSubjects, Storage: jetstream.FileStorage,
	}, s.log)
	if err != nil {
		return err
	}
	want := jetstream.ConsumerConfig{
		Durable:       j.durable,
		Description:   "qbridge",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       j.ackWait,
		MaxDeliver:    j.maxDeliver,
		MaxAckPending: j.maxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if want.MaxDeliver == 0 {
		want.MaxDeliver = -1
	}
	switch len(j.filterSubjects) {
	case 0:
	case 1:
		want.FilterSubject = j.filterSubjects[0]
	default:
		want.FilterSubjects = j.filterSubjects
	}
	cons, err := st.Consumer(ctx, j.durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		if j.bind {
			return fmt.Errorf("nats: jetstream.durable %q does not exist on stream %q (bind = true never creates it)", j.durable, j.stream)
		}
		cons, err = st.CreateConsumer(ctx, want)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = st.Consumer(ctx, j.durable)
		}
		if err != nil {
			return fmt.Errorf("nats: create consumer %q on stream %q: %w", j.durable, j.stream, err)
		}
		s.log.Info("nats jetstream consumer created", "stream", j.stream, "durable", j.durable, "filter_subjects", j.filterSubjects)
	case err != nil:
		return fmt.Errorf("nats: consumer %q on stream %q: %w", j.durable, j.stream, err)
	default:
		if err := s.checkBound(cons.CachedInfo().Config, want); err != nil {
			return err
		}
		s.log.Info("nats jetstream consumer bound", "stream", j.stream, "durable", j.durable)
	}
	s.mu.Lock()
	s.cons = cons
	s.maxDeliver = cons.CachedInfo().Config.MaxDeliver
	s.recover = true
	s.mu.Unlock()
	return nil
}

// checkBound refuses a consumer this source cannot use and logs settings
// that differ from the configuration.
func (s *jsSource) checkBound(have, want jetstream.ConsumerConfig) error {
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		return fmt.Errorf("nats: consumer %q has ack policy %s; qbridge needs explicit acks", want.Durable, have.AckPolicy)
	}
	var diff []string
	if have.AckWait != want.AckWait {
		diff = append(diff, fmt.Sprintf("ack_wait %s (config %s)", have.AckWait, want.AckWait))
	}
	if have.MaxDeliver != want.MaxDeliver && !(have.MaxDeliver <= 0 && want.MaxDeliver <= 0) {
		diff = append(diff, fmt.Sprintf("max_deliver %d (config %d)", have.MaxDeliver, want.MaxDeliver))
	}
	if have.MaxAckPending != want.MaxAckPending {
		diff = append(diff, fmt.Sprintf("max_ack_pending %d (config %d)", have.MaxAckPending, want.MaxAckPending))
	}
	hf, wf := filters(have), filters(want)
	if len(wf) > 0 && !slices.Equal(hf, wf) {
		diff = append(diff, fmt.Sprintf("filter_subjects %v (config %v)", hf, wf))
	}
	if len(diff) > 0 {
		s.log.Warn("nats: the existing consumer differs from the configuration and is used as it is; delete it to apply the configuration",
			"durable", want.Durable, "differences", strings.Join(diff, "; "))
	}
	return nil
}

func filters(c jetstream.ConsumerConfig) []string {
	if c.FilterSubject != "" {
		return []string{c.FilterSubject}
	}
	f := slices.Clone(c.FilterSubjects)
	slices.Sort(f)
	return f
}

// ensureStream returns the stream, creating it when allowed.
func ensureStream(ctx context.Context, js jetstream.JetStream, name string, create bool, cfg jetstream.StreamConfig, log *slog.Logger) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, name)
	if err == nil {
		return st, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("nats: stream %q: %w", name, err)
	}
	if !create {
		return nil, fmt.Errorf("nats: jetstream.stream %q does not exist (set create_stream = true to create it)", name)
	}
	st, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = js.Stream(ctx, name) // created meanwhile by the other side
	}
	if err != nil {
		return nil, fmt.Errorf("nats: create stream %q: %w", name, err)
	}
	log.Info("nats jetstream stream created", "stream", name, "subjects", cfg.Subjects)
	return st, nil
}

func (s *jsSource) consumer() (jetstream.Consumer, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cons, s.maxDeliver
}

// Receive returns what the consumer has at once (one FetchNoWait); when it
// has nothing it waits up to fetch_wait for one message and then takes
// whatever else is there, so an idle source answers without delay and a
// busy one gets full batches in one round trip.
//
// Before it fetches anything new, it makes sure that the consumer's
// unacknowledged messages that are not ours (those of a killed process,
// or lost in a disconnect) came back first: see recoverPending.
func (s *jsSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	batch := min(max(limit, 1), s.set.js.fetchBatch)
	bo := backoff.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	failing := false
	for {
		if err := s.ctx.Err(); err != nil {
			return nil, errors.New("nats: source closed")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if out := s.takeHeld(batch); len(out) > 0 {
			return out, nil
		}
		cons, maxDeliver := s.consumer()
		if s.hasAbandoned() {
			// The pull a cancelled Receive left comes first: its
			// messages are the next ones.
			out, err := s.waitPull(ctx, cons, maxDeliver)
			if len(out) > 0 {
				return s.handOut(out), nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				s.log.Debug("nats jetstream pull failed", "error", err) // the next fetch retries
			}
			continue
		}
		var err error
		if s.needRecover() {
			if err = s.recoverPending(ctx, cons, maxDeliver); err == nil {
				s.mu.Lock()
				s.recover = false
				s.mu.Unlock()
				continue
			}
		} else {
			var out []*jsDelivery
			start := time.Now()
			out, err = s.fetch(cons, batch, false, maxDeliver)
			if len(out) == 0 && err == nil {
				out, err = s.waitPull(ctx, cons, maxDeliver)
				if ctx.Err() != nil && len(out) == 0 {
					return nil, ctx.Err()
				}
				if len(out) > 0 && batch > 1 {
					more, _ := s.fetch(cons, batch-1, false, maxDeliver) // an error shows on the next call
					out = append(out, more...)
				}
			}
			if err == nil && failing {
				s.log.Info("nats jetstream fetch recovered")
				failing = false
				bo.Reset()
			}
			if len(out) > 0 {
				return s.handOut(out), nil
			}
			if err == nil {
				// A pull the server ends at once without messages (a status
				// the client does not report as an error) must not spin.
				if time.Since(start) < 20*time.Millisecond {
					s.pause(ctx, 50*time.Millisecond)
				}
				continue
			}
		}
		if ctx.Err() != nil {
			// Whatever recoverPending collected is handed out: the
			// engine settles it in order (or the broker redelivers it).
			if out := s.takeHeld(batch); len(out) > 0 {
				return out, nil
			}
			return nil, ctx.Err()
		}
		if s.ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return nil, fmt.Errorf("nats: fetch: %w", err)
		}
		if consumerGone(ctx, cons, err) {
			s.log.Warn("nats jetstream consumer is gone; setting it up again", "durable", s.set.js.durable, "error", err)
			s.dropHeld()
			if err := s.setup(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if !failing {
			s.log.Warn("nats jetstream fetch failed; retrying", "error", err)
			failing = true
		}
		s.pause(ctx, bo.Next())
	}
}

// waitPull waits (up to fetch_wait, at most maxPullWait) for one message.
// The pull request is never abandoned on the server: a request whose
// client went away stays in the consumer's waiting list until it expires,
// and a message nacked meanwhile (the engine nacks what it holds when it
// stops) would be sent to it and lost until ack_wait, or put back at the
// end of the redelivery queue behind the later messages of its group. So
// when ctx ends first, waitPull returns at once but the pull runs on:
// Nack waits for its end, the next Receive takes its messages, and Close
// nacks them.
func (s *jsSource) waitPull(ctx context.Context, cons jetstream.Consumer, maxDeliver int) ([]*jsDelivery, error) {
	s.mu.Lock()
	p := s.abandoned
	s.abandoned = nil
	s.mu.Unlock()
	if p == nil {
		p = &pull{done: make(chan struct{})}
		go func() {
			defer close(p.done)
			p.out, p.err = s.fetch(cons, 1, true, maxDeliver)
		}()
	}
	select {
	case <-p.done:
		return p.out, p.err
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	s.mu.Lock()
	s.abandoned = p
	s.mu.Unlock()
	return nil, ctx.Err()
}

func (s *jsSource) hasAbandoned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned != nil
}

// waitAbandoned waits until the pull Receive left is over on the server,
// so that a nack does not hand the message to it.
func (s *jsSource) waitAbandoned(ctx context.Context) {
	s.mu.Lock()
	p := s.abandoned
	s.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

// needRecover reports whether recoverPending must run before the next
// fetch: after setup, or after a reconnect (messages in flight during the
// outage, and settlements that failed, come back only after ack_wait).
func (s *jsSource) needRecover() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.conn.reconnects.Load(); n != s.reconnects {
		s.reconnects = n
		s.recover = true
	}
	return s.recover
}

// handOut counts deliveries as the engine's until they are settled.
func (s *jsSource) handOut(ds []*jsDelivery) []driver.Delivery {
	out := make([]driver.Delivery, len(ds))
	for i, d := range ds {
		d.handed.Store(true)
		s.outstanding.Add(1)
		out[i] = d
	}
	return out
}

// takeHeld hands out up to n held deliveries, refreshing the ack timer of
// those held long enough that it could lapse before the engine's first
// lock extension.
func (s *jsSource) takeHeld(n int) []driver.Delivery {
	s.mu.Lock()
	k := min(n, len(s.held))
	ds := slices.Clone(s.held[:k])
	s.held = slices.Delete(s.held, 0, k)
	s.mu.Unlock()
	if k == 0 {
		return nil
	}
	for _, d := range ds {
		if time.Since(d.touched()) > s.keepEvery() {
			d.touch()
		}
	}
	return s.handOut(ds)
}

// dropHeld forgets held deliveries (their consumer is gone).
func (s *jsSource) dropHeld() {
	s.mu.Lock()
	s.held = nil
	s.mu.Unlock()
}

func (s *jsSource) keepEvery() time.Duration {
	return max(s.set.js.ackWait/3, 50*time.Millisecond)
}

// keepHeld keeps held deliveries locked (InProgress) until Receive hands
// them out, for as long as the source is open.
func (s *jsSource) keepHeld() {
	every := s.keepEvery()
	t := time.NewTicker(max(every/2, 25*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var due []*jsDelivery
		for _, d := range s.held {
			if time.Since(d.touched()) >= every {
				due = append(due, d)
			}
		}
		s.mu.Unlock()
		for _, d := range due {
			d.touch()
		}
	}
}

// recoverMargin is how long after ack_wait the server has surely queued
// the expired messages for redelivery (its timer, a busy consumer).
func recoverMargin(ackWait time.Duration) time.Duration {
	return min(500*time.Millisecond+ackWait/10, 10*time.Second)
}

// recoverPending runs before the first fetch of new messages when the
// consumer may have unacknowledged messages that are not ours: those a
// killed process had fetched, or ours lost in a disconnect. JetStream
// redelivers such a message only when its ack_wait lapses, but hands out
// new messages at once, so fetching as usual would let the later messages
// of a group overtake the earlier ones.
//
// JetStream serves a pull request from its redelivery queue first and from
// the stream after (consumer.getNextMsg), and queues expired messages in
// stream order. So recoverPending fetches nothing until the consumer's
// pending messages are all either ours or queued for redelivery: it takes
// what is queued (no-wait pulls), then waits, polling the consumer info,
// until every pending message is ours, or at most ack_wait + margin (by
// then every message whose holder is gone has lapsed), and takes what is
// queued again. What it took, old and new, is held and handed out sorted
// by stream sequence.
//
// With several processes on one durable consumer, the pending messages of
// the others are never ours: the wait ends at its bound. Per-group order
// across processes sharing a consumer is then only as strong as ack_wait.
func (s *jsSource) recoverPending(ctx context.Context, cons jetstream.Consumer, maxDeliver int) error {
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	missing := s.missing(info)
	if missing <= 0 {
		return nil
	}
	floor := info.Delivered.Stream // every pending message has a sequence <= floor
	ackWait := info.Config.AckWait
	bound := ackWait + recoverMargin(ackWait)
	deadline := time.Now().Add(bound)
	s.log.Info("nats jetstream consumer has unacknowledged messages that are not ours; fetching nothing new until they come back",
		"durable", s.set.js.durable, "ack_pending", info.NumAckPending, "not_ours", missing,
		"last_delivered_seq", floor, "wait_at_most", bound.Round(time.Millisecond))
	start := time.Now()
	defer func() {
		s.mu.Lock()
		slices.SortStableFunc(s.held, func(a, b *jsDelivery) int { return cmp.Compare(a.seq, b.seq) })
		n := len(s.held)
		s.mu.Unlock()
		s.log.Info("nats jetstream recovery done", "durable", s.set.js.durable, "took", time.Since(start).Round(time.Millisecond),
			"held", n, "not_ours_left", missing)
	}()
	if err := s.takeRedeliveries(cons, floor, missing, maxDeliver); err != nil {
		return err
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if missing = s.missing(info); missing <= 0 {
			return nil
		}
		if time.Now().After(deadline) {
			// Every message whose holder is gone has lapsed and is queued
			// now; what is still missing is another process's.
			if err := s.takeRedeliveries(cons, floor, missing, maxDeliver); err != nil {
				return err
			}
			if info, err := cons.Info(ctx); err == nil {
				missing = s.missing(info)
			}
			if missing > 0 {
				s.log.Warn("nats jetstream consumer still has unacknowledged messages of another consumer process after ack_wait; fetching again (per-group order across processes sharing one durable consumer is only as strong as ack_wait)",
					"durable", s.set.js.durable, "not_ours", missing)
			}
			return nil
		}
		s.pause(ctx, min(250*time.Millisecond, max(ackWait/20, 20*time.Millisecond)))
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
	}
}

// missing is how many of the consumer's pending messages are not ours
// (neither held nor with the engine).
func (s *jsSource) missing(info *jetstream.ConsumerInfo) int {
	s.mu.Lock()
	ours := len(s.held)
	s.mu.Unlock()
	return info.NumAckPending - ours - int(s.outstanding.Load())
}

// takeRedeliveries takes what the consumer has queued for redelivery
// (messages up to floor) into held, with no-wait pulls of at most missing
// messages, until a pull brings fewer or a new message (the queue is
// then empty). The new messages a pull brings are held too.
func (s *jsSource) takeRedeliveries(cons jetstream.Consumer, floor uint64, missing, maxDeliver int) error {
	for missing > 0 {
		n := min(missing, s.set.js.fetchBatch)
		ds, err := s.fetch(cons, n, false, maxDeliver)
		s.mu.Lock()
		s.held = append(s.held, ds...)
		s.mu.Unlock()
		if err != nil {
			return err
		}
		old := 0
		for _, d := range ds {
			if d.seq <= floor {
				old++
			}
		}
		if old < n {
			return nil
		}
		missing -= old
	}
	return nil
}

// pause waits d, or less when ctx ends or the source closes (the loop
// then sees it).
func (s *jsSource) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
}

// consumerGone tells whether a fetch failed because the consumer (or its
// stream) no longer exists: a pull to a deleted consumer gets "no responders".
func consumerGone(ctx context.Context, cons jetstream.Consumer, err error) bool {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrStreamNotFound) {
		return true
	}
	if !errors.Is(err, nats.ErrNoResponders) {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, ierr := cons.Info(ictx)
	return errors.Is(ierr, jetstream.ErrConsumerNotFound) || errors.Is(ierr, jetstream.ErrStreamNotFound)
}

// fetch runs one pull request for up to n messages to its end; wait
// says whether to wait (up to fetch_wait, at most maxPullWait) for them or
// take only what is there. It never cancels a pull on the client side
// (see waitPull): it returns when the server ended the request.
func (s *jsSource) fetch(cons jetstream.Consumer, n int, wait bool, maxDeliver int) ([]*jsDelivery, error) {
	var (
		mb  jetstream.MessageBatch
		err error
	)
	if wait {
		mb, err = cons.Fetch(n, jetstream.FetchMaxWait(min(s.set.js.fetchWait, maxPullWait)))
	} else {
		mb, err = cons.FetchNoWait(n)
	}
	if err != nil {
		return nil, err
	}
	var out []*jsDelivery
	for m := range mb.Messages() {
		if d := s.wrap(m, maxDeliver); d != nil {
			out = append(out, d)
		}
	}
	err = mb.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		err = nil // the pull's own expiry
	}
	return out, err
}

// wrap decodes m; natsmap fills the source facts (protocol, subject, stream
// sequence, stored time, delivery count) from the JetStream metadata. A
// message natsmap refuses still becomes a delivery, with what could be read
// and its DecodeError, so the engine dead-letters it.
func (s *jsSource) wrap(m jetstream.Msg, maxDeliver int) *jsDelivery {
	meta, err := m.Metadata()
	if err != nil {
		s.log.Error("nats: message without JetStream metadata; terminating it", "subject", m.Subject(), "error", err)
		_ = m.TermWithReason("qbridge: no JetStream metadata")
		return nil
	}
	raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	d := &jsDelivery{
		m: m, log: s.log, src: s, seq: meta.Sequence.Stream,
		last: maxDeliver > 0 && meta.NumDelivered >= uint64(maxDeliver), maxDeliver: maxDeliver,
	}
	d.touchedAt.Store(time.Now().UnixNano())
	d.msg, d.decodeErr = s.codec.decodeJS(raw, meta)
	if d.decodeErr != nil {
		s.log.Error("nats: received a message that cannot be decoded; it must be dead-lettered",
			"subject", m.Subject(), "stream_seq", meta.Sequence.Stream, "error", d.decodeErr)
		d.msg = s.codec.decodeRaw(raw, meta)
	}
	applySubjectGroup(d.msg, m.Subject(), s.set.groupToken)
	return d
}

// Close lets a pull that Receive left run to its end, and nacks what it
// brought and what recoverPending held, in stream order: the engine has
// nacked what it had before (it closes the source after its drain), so
// each group comes back in order.
func (s *jsSource) Close(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, maxPullWait+2*time.Second)
	s.waitAbandoned(wctx)
	cancel()
	s.mu.Lock()
	var left []*jsDelivery
	if p := s.abandoned; p != nil {
		select {
		case <-p.done:
			left = append(left, p.out...)
		default:
		}
		s.abandoned = nil
	}
	left = append(left, s.held...)
	s.held = nil
	s.mu.Unlock()
	slices.SortStableFunc(left, func(a, b *jsDelivery) int { return cmp.Compare(a.seq, b.seq) })
	for _, d := range left {
		if err := d.m.Nak(); err != nil {
			s.log.Warn("nats: nack of an unreceived message failed; it comes back after ack_wait", "error", err)
			break
		}
	}
	if len(left) > 0 {
		_ = s.conn.nc.FlushWithContext(ctx)
	}
	s.cancel()
	s.conn.close()
	return nil
}

// Ready reports the connection status.
func (s *jsSource) Ready(ctx context.Context) error { return s.conn.ready() }

// jsDelivery settles through JetStream acks.
type jsDelivery struct {
	m          jetstream.Msg
	msg        *mapping.Message
	decodeErr  error
	log        *slog.Logger
	last       bool // this is delivery MaxDeliver: a failure must not vanish
	maxDeliver int
	src        *jsSource
	seq        uint64 // stream sequence

	touchedAt atomic.Int64 // when it was delivered or last InProgress (unix ns), while held
	handed    atomic.Bool  // given to the engine: counted in src.outstanding
	settled   atomic.Bool  // Ack, Nack or DeadLetter was called
}

func (d *jsDelivery) touched() time.Time { return time.Unix(0, d.touchedAt.Load()) }

// touch restarts the ack timer of a held delivery.
func (d *jsDelivery) touch() {
	if err := d.m.InProgress(); err != nil {
		d.log.Warn("nats: in progress for a held message failed; it may be delivered again", "error", err)
	}
	d.touchedAt.Store(time.Now().UnixNano())
}

// settle marks the delivery settled: it no longer counts as the engine's.
func (d *jsDelivery) settle() {
	if d.settled.CompareAndSwap(false, true) && d.handed.Load() {
		d.src.outstanding.Add(-1)
	}
}

func (d *jsDelivery) Message() *mapping.Message { return d.msg }

// DecodeError is why natsmap refused the message, or nil.
func (d *jsDelivery) DecodeError() error { return d.decodeErr }

// Ack is a double ack: it returns once the server confirmed it, so an acked
// message is not redelivered.
func (d *jsDelivery) Ack(ctx context.Context) error {
	defer d.settle()
	if err := d.m.DoubleAck(ctx); err != nil {
		return fmt.Errorf("nats: ack: %w", err)
	}
	return nil
}

// Nack asks for redelivery after delay (NakWithDelay). On the consumer's last
// allowed delivery (max_deliver) the server would never redeliver, so the
// message is terminated instead: a dead-letter with a reason, never a
// silent loss.
func (d *jsDelivery) Nack(ctx context.Context, delay time.Duration) error {
	defer d.settle()
	if d.last {
		d.log.Warn("nats: message failed on its last delivery (max_deliver); terminating it",
			"subject", d.msg.Source.Address, "stream_seq", d.msg.Source.SequenceNumber, "deliveries", d.msg.Source.DeliveryCount)
		return d.term(fmt.Sprintf("qbridge: max_deliver (%d) reached", d.maxDeliver))
	}
	// A pull that Receive left may still be open on the server: it would
	// take the message.
	d.src.waitAbandoned(ctx)
	var err error
	if delay > 0 {
		err = d.m.NakWithDelay(delay)
	} else {
		err = d.m.Nak()
	}
	if err != nil {
		return fmt.Errorf("nats: nak: %w", err)
	}
	return nil
}

// Extend sends InProgress, which restarts the consumer's full AckWait
// (whatever d is): to hold a message longer than ack_wait, call it again.
func (d *jsDelivery) Extend(ctx context.Context, _ time.Duration) error {
	if err := d.m.InProgress(); err != nil {
		return fmt.Errorf("nats: in progress: %w", err)
	}
	return nil
}

// DeadLetter terminates the message (no further redelivery); the reason is
// in the server's MSG_TERMINATED advisory.
func (d *jsDelivery) DeadLetter(ctx context.Context, reason, description string) error {
	defer d.settle()
	return d.term(termReason(reason, description))
}

func (d *jsDelivery) term(reason string) error {
	if err := d.m.TermWithReason(reason); err != nil {
		return fmt.Errorf("nats: term: %w", err)
	}
	return nil
}

// termReason joins reason and description on one bounded line.
func termReason(reason, description string) string {
	s := reason
	if description != "" {
		if s != "" {
			s += ": "
		}
		s += description
	}
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	const maxLen = 1024
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	return s
}
