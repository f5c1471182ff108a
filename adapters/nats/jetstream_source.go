package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
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

	ctx    context.Context // cancelled by Close, to interrupt a pending fetch
	cancel context.CancelFunc
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
	if err := s.setup(ctx); err != nil {
		s.cancel()
		c.close()
		return nil, err
	}
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
func (s *jsSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	batch := min(max(limit, 1), s.set.js.fetchBatch)
	backoff := 100 * time.Millisecond
	failing := false
	for {
		if err := s.ctx.Err(); err != nil {
			return nil, errors.New("nats: source closed")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cons, maxDeliver := s.consumer()
		start := time.Now()
		out, err := s.fetch(ctx, cons, batch, false, maxDeliver)
		if len(out) == 0 && err == nil {
			out, err = s.fetch(ctx, cons, 1, true, maxDeliver)
			if len(out) > 0 && batch > 1 {
				more, _ := s.fetch(ctx, cons, batch-1, false, maxDeliver) // an error shows on the next call
				out = append(out, more...)
			}
		}
		if err == nil && failing {
			s.log.Info("nats jetstream fetch recovered")
			failing, backoff = false, 100*time.Millisecond
		}
		if len(out) > 0 {
			return out, nil
		}
		if err == nil {
			// A pull the server ends at once without messages (a status
			// the client does not report as an error) must not spin.
			if time.Since(start) < 20*time.Millisecond {
				s.pause(ctx, 50*time.Millisecond)
			}
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if s.ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return nil, fmt.Errorf("nats: fetch: %w", err)
		}
		if consumerGone(ctx, cons, err) {
			s.log.Warn("nats jetstream consumer is gone; setting it up again", "durable", s.set.js.durable, "error", err)
			if err := s.setup(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if !failing {
			s.log.Warn("nats jetstream fetch failed; retrying", "error", err)
			failing = true
		}
		s.pause(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
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

// fetch pulls up to n messages; wait says whether to wait up to fetch_wait
// for them or take only what is there.
func (s *jsSource) fetch(ctx context.Context, cons jetstream.Consumer, n int, wait bool, maxDeliver int) ([]driver.Delivery, error) {
	var (
		mb  jetstream.MessageBatch
		err error
	)
	if wait {
		fctx, cancel := context.WithTimeout(ctx, s.set.js.fetchWait)
		defer cancel()
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		mb, err = cons.Fetch(n, jetstream.FetchContext(fctx))
	} else {
		mb, err = cons.FetchNoWait(n)
	}
	if err != nil {
		return nil, err
	}
	var out []driver.Delivery
	for m := range mb.Messages() {
		if d := s.wrap(m, maxDeliver); d != nil {
			out = append(out, d)
		}
	}
	err = mb.Error()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nil // fetch_wait elapsed before the server's own timeout
	}
	if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
		err = errors.New("source closed")
	}
	return out, err
}

// wrap decodes m; natsmap fills the source facts (protocol, subject, stream
// sequence, stored time, delivery count) from the JetStream metadata. A
// message natsmap refuses still becomes a delivery, with what could be read
// and its DecodeError, so the engine dead-letters it.
func (s *jsSource) wrap(m jetstream.Msg, maxDeliver int) driver.Delivery {
	meta, err := m.Metadata()
	if err != nil {
		s.log.Error("nats: message without JetStream metadata; terminating it", "subject", m.Subject(), "error", err)
		_ = m.TermWithReason("qbridge: no JetStream metadata")
		return nil
	}
	raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	d := &jsDelivery{
		m: m, log: s.log,
		last: maxDeliver > 0 && meta.NumDelivered >= uint64(maxDeliver), maxDeliver: maxDeliver,
	}
	d.msg, d.decodeErr = s.codec.decodeJS(raw, meta)
	if d.decodeErr != nil {
		s.log.Error("nats: received a message that cannot be decoded; it must be dead-lettered",
			"subject", m.Subject(), "stream_seq", meta.Sequence.Stream, "error", d.decodeErr)
		d.msg = s.codec.decodeRaw(raw, meta)
	}
	applySubjectGroup(d.msg, m.Subject(), s.set.groupToken)
	return d
}

func (s *jsSource) Close(ctx context.Context) error {
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
}

func (d *jsDelivery) Message() *mapping.Message { return d.msg }

// DecodeError is why natsmap refused the message, or nil.
func (d *jsDelivery) DecodeError() error { return d.decodeErr }

// Ack is a double ack: it returns once the server confirmed it, so an acked
// message is not redelivered.
func (d *jsDelivery) Ack(ctx context.Context) error {
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
	if d.last {
		d.log.Warn("nats: message failed on its last delivery (max_deliver); terminating it",
			"subject", d.msg.Source.Address, "stream_seq", d.msg.Source.SequenceNumber, "deliveries", d.msg.Source.DeliveryCount)
		return d.term(fmt.Sprintf("qbridge: max_deliver (%d) reached", d.maxDeliver))
	}
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
