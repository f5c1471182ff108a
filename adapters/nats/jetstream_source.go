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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
)

// jsSource reads a JetStream stream through a durable pull consumer with
// explicit acks: at-least-once. Unsettled messages come back after AckWait.
type jsSource struct {
	conn           *conn
	js             jetstream.JetStream
	set            *sourceSettings
	codec          codec
	log            *slog.Logger
	undecodableLog *logpace.Pacer // the log line of an undecodable message

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

	// outstanding holds the stream sequences handed to the engine and not
	// yet settled (with how many deliveries of each: a message the server
	// redelivered while the engine still held it is there twice), the
	// part of the consumer's NumAckPending that is ours. By sequence, not
	// by delivery: the server counts a message once however often it
	// delivered it, and counting deliveries would end a recovery while a
	// message that is not ours is still out.
	outstanding map[uint64]int
	// gone are the stream sequences the engine lately acked or
	// terminated: a copy of one that arrives is no longer pending on the
	// server, and is dropped (see settled).
	gone seqSet
	// delayed are the messages handed back with a delay that has not run
	// out, by stream sequence: Close makes them due at once (see
	// dueNowAtClose). A delivery of one removes it.
	delayed map[uint64]delayedNak
	// abandoned is a waiting pull that Receive left when its context
	// ended; it runs on to its end on the server (see waitPull). Its
	// messages go to the next Receive, or are nacked by Close.
	abandoned *pull

	// Pinned mode (see jetstream_pinned.go): the consumer has a priority
	// group with the pinned-client policy, so the server lets one client
	// receive at a time. group is the priority group every pull names, ""
	// when the consumer has none; pinID is the pin the server gave this
	// source ("" while it stands by); lastPending is the consumer's
	// NumPending as of the last message fetched. Under mu.
	stream      jetstream.Stream
	group       string
	pinID       string
	lastPending uint64

	// delivered counts the messages pulls brought, pulls the pull requests
	// under way and pullStarts those ever started: watchShared compares
	// them with the consumer info to tell another client's deliveries and
	// waiting pulls from ours. shared is set while it sees one.
	delivered  atomic.Uint64
	pulls      atomic.Int32
	pullStarts atomic.Uint64
	shared     atomic.Pointer[sharedErr]

	// lastNak is the last NAK sent and not yet confirmed, nakNow the last
	// NAK at once not confirmed before a pull, ackedReply the reply
	// subject of a message whose ack was confirmed: confirmNaks.
	lastNak    atomic.Pointer[string]
	nakNow     atomic.Pointer[string]
	ackedReply atomic.Pointer[string]

	// quiet is set by Quiesce: Receive pulls no more and hands out what is
	// left; drained is closed once the pull a cancelled Receive left is
	// over.
	quiet     atomic.Bool
	quietOnce sync.Once
	drained   chan struct{}

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
}

// MaxUnsettled is the consumer's max_ack_pending (driver.UnsettledBound):
// past it the server delivers nothing, and a pull it cannot serve stays
// open on the server.
func (s *jsSource) MaxUnsettled() int { return s.set.js.maxAckPending }

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
	s := &jsSource{conn: c, js: js, set: set, codec: newCodec(set.groupHeader, mapping.Options{}), log: log, undecodableLog: logpace.PerMessage()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.reconnects = c.reconnects.Load()
	if err := s.setup(ctx); err != nil {
		s.cancel()
		c.close()
		return nil, err
	}
	go s.keepHeld()
	go s.watchShared()
	return s, nil
}

// setup finds (or creates) the stream and binds to (or creates) the durable
// consumer. An existing consumer is bound as it is: its settings are owned
// by whoever created it, so differences are only logged.
func (s *jsSource) setup(ctx context.Context) error {
	j := s.set.js
	st, err := ensureStream(ctx, s.js, j.stream, j.createStream && !j.noCreate, j.streamConfig(), s.log)
	if err != nil {
		if j.noCreate && errors.Is(err, jetstream.ErrStreamNotFound) {
			return driver.Permanent(fmt.Errorf("nats: jetstream.stream %q does not exist, and a migration does not create its source's stream (create_stream is for qbridge run): check its name: %w", j.stream, jetstream.ErrStreamNotFound))
		}
		return err
	}
	if err := s.checkPartitions(st.CachedInfo().Config); err != nil {
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
	if j.pinned {
		want.PriorityPolicy = jetstream.PriorityPolicyPinned
		want.PriorityGroups = []string{j.priorityGroup}
		want.PinnedTTL = j.pinTimeout
	}
	switch len(j.filterSubjects) {
	case 0:
	case 1:
		want.FilterSubject = j.filterSubjects[0]
	default:
		want.FilterSubjects = j.filterSubjects
	}
	cons, err := st.Consumer(ctx, j.durable)
	created := false
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
		created = true
		s.log.Info("nats jetstream consumer created", "stream", j.stream, "durable", j.durable, "filter_subjects", j.filterSubjects)
	case err != nil:
		return fmt.Errorf("nats: consumer %q on stream %q: %w", j.durable, j.stream, err)
	default:
		if err := s.checkBound(cons.CachedInfo().Config, want); err != nil {
			return err
		}
		s.log.Info("nats jetstream consumer bound", "stream", j.stream, "durable", j.durable)
	}
	group, err := s.pinMode(cons.CachedInfo().Config, created)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cons = cons
	s.stream = st
	s.maxDeliver = cons.CachedInfo().Config.MaxDeliver
	s.recover = true
	s.group, s.pinID, s.lastPending = group, "", 0
	s.mu.Unlock()
	// A consumer made again numbers its deliveries anew: an old ack
	// subject could name one of its pending messages (confirmNaks).
	s.ackedReply.Store(nil)
	s.lastNak.Store(nil)
	s.nakNow.Store(nil)
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
		if s.set.js.noCreate {
			return filterMismatch(want.Durable, hf, wf)
		}
		diff = append(diff, fmt.Sprintf("filter_subjects %v (config %v)", hf, wf))
	}
	if have.PriorityPolicy == jetstream.PriorityPolicyPinned && want.PriorityPolicy == jetstream.PriorityPolicyPinned &&
		have.PinnedTTL != want.PinnedTTL {
		diff = append(diff, fmt.Sprintf("pin_timeout %s (config %s)", have.PinnedTTL, want.PinnedTTL))
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
	return sortedFilters(c.FilterSubjects)
}

func sortedFilters(f []string) []string {
	f = slices.Clone(f)
	slices.Sort(f)
	return f
}

// filterMismatch refuses, for a migration, a durable whose filter subjects
// are not the configuration's: a migration through it would move, copy or
// count other messages than those the configuration names, and say
// complete.
func filterMismatch(durable string, have, want []string) error {
	filtered, fix := fmt.Sprintf("filters %v", have), fmt.Sprintf("set filter_subjects to %v", have)
	if len(have) == 0 {
		filtered, fix = "has no filter (the whole stream)", "leave filter_subjects out"
	}
	return driver.Permanent(fmt.Errorf("nats: the existing consumer %q %s, and the configuration asks for %v: a migration through it would move other messages than those it names; delete the consumer, name another durable, or %s",
		durable, filtered, want, fix))
}

// streamConfig is the stream a source with create_stream makes.
func (j *jsSourceSettings) streamConfig() jetstream.StreamConfig {
	scfg := withLimits(jetstream.StreamConfig{Name: j.stream, Subjects: j.streamSubjects, Storage: jetstream.FileStorage}, j.limits)
	if j.transform != nil {
		scfg.SubjectTransform = &jetstream.SubjectTransformConfig{Source: j.transform.source, Destination: j.transform.destination}
	}
	return scfg
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
		return nil, fmt.Errorf("nats: jetstream.stream %q does not exist (set create_stream = true to create it): %w", name, jetstream.ErrStreamNotFound)
	}
	st, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = js.Stream(ctx, name) // created meanwhile by the other side
	}
	if err != nil {
		return nil, fmt.Errorf("nats: create stream %q: %w", name, err)
	}
	log.Info("nats jetstream stream created", "stream", name, "subjects", cfg.Subjects,
		"retention", cfg.Retention.String(), "max_msgs", cfg.MaxMsgs, "max_bytes", cfg.MaxBytes, "max_age", cfg.MaxAge, "discard", cfg.Discard.String())
	return st, nil
}

func (s *jsSource) consumer() (jetstream.Consumer, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cons, s.maxDeliver
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
	due := s.dueNowAtCloseLocked(left)
	s.mu.Unlock()
	s.nackInOrder(ctx, left, due)
	s.confirmNaks(ctx) // the engine's before them too
	s.releasePin(ctx)
	s.cancel()
	s.conn.close()
	return nil
}

// nackInOrder hands back, in stream order, deliveries the engine never had
// and the messages due (see dueNowAtCloseLocked), all due at once.
func (s *jsSource) nackInOrder(ctx context.Context, left []*jsDelivery, due []delayedNak) {
	slices.SortStableFunc(left, func(a, b *jsDelivery) int { return cmp.Compare(a.seq, b.seq) })
	for len(left) > 0 || len(due) > 0 {
		var err error
		if len(due) == 0 || len(left) > 0 && left[0].seq < due[0].seq {
			err = s.nak(left[0].m, left[0].seq, 0)
			left = left[1:]
		} else {
			err = s.nakDueNow(due[0].reply)
			due = due[1:]
		}
		if err != nil {
			s.log.Warn("nats: handing back a message at close failed; the rest come back after ack_wait or their delay", "error", err)
			break
		}
	}
}

// Ready reports the connection status.
func (s *jsSource) Ready(ctx context.Context) error { return s.conn.ready() }

// Warnings reports another client seen on a consumer without a pinned
// priority group (see watchShared); /readyz lists it.
func (s *jsSource) Warnings() []string {
	if e := s.shared.Load(); e != nil {
		return []string{e.Error()}
	}
	return nil
}
