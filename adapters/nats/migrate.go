package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// What qbridge migrate needs from NATS (docs/adapter-nats.md, "Counting,
// browsing and dead-letter queues"). Only JetStream keeps messages: a core
// subject has nothing to count or browse.

var (
	_ driver.Source            = (*browseSource)(nil)
	_ driver.Browser           = (*browseSource)(nil)
	_ driver.DuplicateReporter = (*sink)(nil)
	_ driver.Sink              = (*drySink)(nil)
)

// CountSource asks the server for the durable consumer's backlog: NumPending
// (not yet delivered) is Ready, NumAckPending (delivered, not acknowledged)
// is InFlight. Before the consumer exists, the stream's messages on the
// consumer's filter subjects are all Ready.
func CountSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Backlog, error) {
	set, err := cfg.resolve()
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats source: %w", err)
	}
	if set.js == nil {
		return driver.Backlog{}, fmt.Errorf("nats: a core NATS subject keeps no messages to count: %w", errors.ErrUnsupported)
	}
	js, closeConn, err := countConn(ctx, set.conn, log)
	if err != nil {
		return driver.Backlog{}, err
	}
	defer closeConn()
	j := set.js
	// With its filter: a sink that writes another subject of the stream
	// does not feed the source.
	entity := "nats " + SourceIdentity(cfg)
	st, err := js.Stream(ctx, j.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Retrying cannot help; a migration, which never creates its
		// source's stream, fails at once on it.
		return driver.Backlog{}, driver.Permanent(fmt.Errorf("nats: stream %s does not exist: %w", j.stream, err))
	}
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats: stream %s: %w", j.stream, err)
	}
	// The durable consumer counts each message's deliveries, a hand-back's
	// included; a move's receives that wrote nothing are recorded under its
	// name (a dry run browses, and raises nothing).
	b := driver.Backlog{Ordered: true, Exact: true, Entity: entity, Created: st.CachedInfo().Created, ForgetsRecentAcks: set.conn.Embedded,
		ReceivesCounted: true, DeliveriesOf: entity + " consumer " + j.durable}
	cons, err := st.Consumer(ctx, j.durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		b.Ready, err = streamMsgs(ctx, st, j.filterSubjects)
		return b, err
	}
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats: consumer %s of stream %s: %w", j.durable, j.stream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats: consumer %s info: %w", j.durable, err)
	}
	b.Ready, b.InFlight = int64(info.NumPending), int64(info.NumAckPending)
	return b, nil
}

// CountSink counts the messages of the sink's stream: the one named in its
// jetstream block, or the stream that holds its subject.
func CountSink(ctx context.Context, cfg SinkConfig, log *slog.Logger) (driver.Backlog, error) {
	set, err := cfg.resolve()
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats sink: %w", err)
	}
	if set.js == nil {
		return driver.Backlog{}, fmt.Errorf("nats: a core NATS subject keeps no messages to count: %w", errors.ErrUnsupported)
	}
	stream := set.js.stream
	if stream == "" && strings.ContainsAny(cfg.Subject, "{}") {
		return driver.Backlog{}, fmt.Errorf("nats: the sink subject %q is a template: name its stream (jetstream { stream = ... }) to count it: %w", cfg.Subject, errors.ErrUnsupported)
	}
	js, closeConn, err := countConn(ctx, set.conn, log)
	if err != nil {
		return driver.Backlog{}, err
	}
	defer closeConn()
	if stream == "" {
		if stream, err = js.StreamNameBySubject(ctx, cfg.Subject); err != nil {
			return driver.Backlog{}, sinkStreamMissing(err, fmt.Errorf("nats: the stream that holds %q: %w", cfg.Subject, err))
		}
	}
	// The stream the server files the subject under: two sinks whose
	// blocks name no stream are one entity only if this is the same.
	entity := "nats " + streamIdentity(set.conn, stream)
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && set.js.createStream {
		// The sink creates it when it opens: it holds nothing before, and
		// it will have the limits the block gives it, with no consumer
		// (a migration into a stream made with stream_max_msgs 100 said
		// complete, exit 0, having dropped all but 100).
		c := set.js.streamConfig()
		b := driver.Backlog{Deduplicates: c.Duplicates > 0, Ordered: true, Exact: true, Entity: entity}
		b.Limits, b.KeepsAtMost, b.KeepsNone = streamLimits(c, 0)
		return b, nil
	}
	if err != nil {
		return driver.Backlog{}, sinkStreamMissing(err, fmt.Errorf("nats: stream %s: %w", stream, err))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return driver.Backlog{}, fmt.Errorf("nats: stream %s info: %w", stream, err)
	}
	if err := storesSubject(stream, info.Config.Subjects, cfg.Subject); err != nil {
		return driver.Backlog{}, err
	}
	// The stream drops a Nats-Msg-Id it stored within its duplicate
	// window; the sink sends the message's dedup key as one.
	b := driver.Backlog{Ready: int64(info.State.Msgs), Deduplicates: info.Config.Duplicates > 0, Ordered: true, Exact: true, Entity: entity}
	b.Limits, b.KeepsAtMost, b.KeepsNone = streamLimits(info.Config, info.State.Consumers)
	return b, nil
}

// storesSubject refuses a sink whose named stream does not store its
// subject: every publish would go unanswered, and a migration stalled for
// a minute and a half before it failed (its dry run said complete). A
// template is not checked: what it renders is known per message.
func storesSubject(stream string, subjects []string, subject string) error {
	if strings.ContainsAny(subject, "{}") {
		return nil
	}
	for _, f := range subjects {
		if server.SubjectMatchesFilter(subject, f) {
			return nil
		}
	}
	return driver.Permanent(fmt.Errorf("nats: stream %s does not store the sink subject %q (its subjects: %s): no stream would answer a publish there; name the stream that stores it, or add the subject to %s",
		stream, subject, strings.Join(subjects, ", "), stream))
}

// streamLimits describes what makes a stream drop stored messages while
// it accepts every publish: its limits under discard old (the default),
// and interest retention, which keeps a message only for the consumers
// there are (with none, nothing). Under discard new a full stream refuses
// the publish, which the engine sees.
func streamLimits(c jetstream.StreamConfig, consumers int) (limits string, keepsAtMost int64, keepsNone bool) {
	var parts []string
	if c.Discard == jetstream.DiscardOld {
		if c.MaxMsgs > 0 {
			parts = append(parts, fmt.Sprintf("max_msgs %d", c.MaxMsgs))
			keepsAtMost = c.MaxMsgs
		}
		if c.MaxBytes > 0 {
			parts = append(parts, fmt.Sprintf("max_bytes %d", c.MaxBytes))
		}
		if c.MaxMsgsPerSubject > 0 {
			parts = append(parts, fmt.Sprintf("max_msgs_per_subject %d", c.MaxMsgsPerSubject))
		}
	}
	if c.MaxAge > 0 {
		parts = append(parts, fmt.Sprintf("max_age %s", c.MaxAge))
	}
	if len(parts) > 0 && c.Discard == jetstream.DiscardOld {
		parts = append(parts, "discard old")
	}
	if c.Retention == jetstream.InterestPolicy && consumers == 0 {
		parts = append(parts, "interest retention with no consumer: a message is kept only for the consumers there are")
		keepsNone = true
	}
	return strings.Join(parts, ", "), keepsAtMost, keepsNone
}

// sinkStreamMissing marks wrapped as permanent when err says that no
// stream exists (or captures the subject): publishing would fail until
// -connect-timeout, and a migration says so at once.
func sinkStreamMissing(err, wrapped error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return driver.Permanent(fmt.Errorf("%w (no stream stores what the sink publishes: create it, or set jetstream { create_stream = true })", wrapped))
	}
	return wrapped
}

func countConn(ctx context.Context, cc connConfig, log *slog.Logger) (jetstream.JetStream, func(), error) {
	if log == nil {
		log = slog.Default()
	}
	c, err := dialAt(ctx, cc, log.With("adapter", "nats", "role", "count"), slog.LevelDebug)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.close()
		return nil, nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	return js, c.close, nil
}

// streamMsgs counts a stream's messages, on the given subjects when set.
func streamMsgs(ctx context.Context, st jetstream.Stream, subjects []string) (int64, error) {
	if len(subjects) == 0 {
		return int64(st.CachedInfo().State.Msgs), nil // just fetched by js.Stream
	}
	stream := st.CachedInfo().Config.Name
	var n int64
	for _, f := range subjects {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(f))
		if err != nil {
			return 0, fmt.Errorf("nats: stream %s info on %s: %w", stream, f, err)
		}
		for _, c := range info.State.Subjects {
			n += int64(c)
		}
	}
	return n, nil
}

// ForMigration returns cfg changed so that its source never creates its
// stream: a migration reads what exists (with create_stream = true a
// mistyped stream name completed "empty" and left a new stream behind).
func ForMigration(cfg SourceConfig) SourceConfig {
	cfg.migrating = true
	return cfg
}

// Browse returns cfg changed so that its source reads the stream without
// acknowledging anything, after stream sequence after: an ordered consumer
// the server forgets when it is closed. Core NATS cannot be browsed.
func Browse(cfg SourceConfig, after uint64) (SourceConfig, error) {
	if cfg.JetStream == nil {
		return cfg, fmt.Errorf("nats: a core NATS subject keeps no messages to read again: %w", driver.ErrCannotBrowse)
	}
	js := *cfg.JetStream
	cfg.JetStream = &js
	cfg.browse, cfg.browseAfter = true, after
	return cfg, nil
}

// browseSource reads a stream with an ordered consumer: no acks, nothing
// changes on the server, and every message carries its stream sequence.
type browseSource struct {
	conn  *conn
	cons  jetstream.Consumer
	set   *sourceSettings
	codec codec
	log   *slog.Logger
	end   uint64 // the stream's last sequence when browsing began
	wait  time.Duration

	mu      sync.Mutex
	last    uint64
	atEnd   bool // the last batch reached the end: drained once it is handed over
	drained bool
}

func newBrowseSource(ctx context.Context, set *sourceSettings, after uint64, log *slog.Logger) (*browseSource, error) {
	c, err := dial(ctx, set.conn, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	j := set.js
	st, err := js.Stream(ctx, j.stream)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: stream %s: %w", j.stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: stream %s info: %w", j.stream, err)
	}
	if after > info.State.LastSeq {
		// Sequences only grow (a purge or an expiry keeps the last one),
		// so the checkpoint is of a stream deleted and made again: a copy
		// from it copied nothing and said complete.
		c.close()
		return nil, driver.Permanent(fmt.Errorf("nats: the copy's checkpoint, sequence %d, is past the end of stream %s (last sequence %d): the stream was deleted and made again since; remove the pipeline's entry from the -state file, or use another one, to copy it from its start",
			after, j.stream, info.State.LastSeq))
	}
	subjects := j.filterSubjects
	// A durable that exists decides what the pipeline reads: browse the
	// same, from where it stands. Everything up to its ack floor is
	// acknowledged (gone to the sink of an earlier run): a dry run that
	// read from the stream's start counted it again. A copy resuming
	// from its own checkpoint (after > 0) keeps that.
	if dc, err := js.Consumer(ctx, j.stream, j.durable); err == nil {
		if ci, err := dc.Info(ctx); err == nil {
			f := filters(ci.Config)
			if want := sortedFilters(j.filterSubjects); len(want) > 0 && !slices.Equal(f, want) {
				// As the move refuses it: the dry run said what the
				// durable's filter gives, a copy copied it.
				c.close()
				return nil, filterMismatch(j.durable, f, want)
			}
			if len(f) > 0 {
				subjects = f
			}
			if after == 0 && ci.AckFloor.Stream > 0 {
				after = ci.AckFloor.Stream
				log.Info("nats jetstream browsing from the durable's ack floor", "durable", j.durable, "ack_floor", after)
			}
		}
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := st.OrderedConsumer(ctx, occ)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: ordered consumer on %s: %w", j.stream, err)
	}
	s := &browseSource{
		conn: c, cons: cons, set: set, codec: newCodec(set.groupHeader, mapping.Options{}), log: log,
		end: info.State.LastSeq, wait: min(j.fetchWait, time.Second), last: after,
	}
	s.drained = s.end <= after
	log.Info("nats jetstream browsing", "stream", j.stream, "after", after, "last_seq", s.end, "filter_subjects", subjects)
	return s, nil
}

func (s *browseSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The batch that reached the end was handed over before this call (the
	// engine took it in): only now is the source drained. Saying so while
	// that batch was on its way let a copy stop without it.
	s.mu.Lock()
	if s.atEnd {
		s.drained = true
	}
	s.mu.Unlock()
	batch, err := s.cons.Fetch(max, jetstream.FetchMaxWait(s.wait))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("nats: browse fetch: %w", err)
	}
	var out []driver.Delivery
	for m := range batch.Messages() {
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
		d := &browseDelivery{}
		d.msg, d.decodeErr = s.codec.decodeJS(raw, meta)
		if d.decodeErr != nil {
			d.msg = s.codec.decodeRaw(raw, meta)
		}
		applySubjectGroup(d.msg, m.Subject(), s.set.groupToken)
		out = append(out, d)
		s.mu.Lock()
		s.last = meta.Sequence.Stream
		if s.last >= s.end || meta.NumPending == 0 {
			s.atEnd = true
		}
		s.mu.Unlock()
	}
	if len(out) == 0 {
		if ferr := batch.Error(); ferr != nil && !errors.Is(ferr, nats.ErrTimeout) && ctx.Err() == nil {
			return nil, fmt.Errorf("nats: browse fetch: %w", ferr)
		}
		// Nothing within the wait is not the end: a loaded server or an
		// ordered consumer that is being reset answers late (a copy
		// stopped with 64 messages still coming). The consumer says
		// whether anything is left for its filter.
		if ctx.Err() == nil {
			if info, err := s.cons.Info(ctx); err == nil && info.NumPending == 0 {
				s.mu.Lock()
				s.drained = true
				s.mu.Unlock()
			}
		}
	}
	return out, ctx.Err()
}

// Drained reports whether the stream was read to where it ended when
// browsing began (or nothing more came).
func (s *browseSource) Drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drained
}

func (s *browseSource) Close(context.Context) error {
	s.conn.close()
	return nil
}

func (s *browseSource) Ready(context.Context) error { return s.conn.ready() }

// browseDelivery settles nothing: the message stays in the stream.
type browseDelivery struct {
	msg       *mapping.Message
	decodeErr error
}

func (d *browseDelivery) Message() *mapping.Message                        { return d.msg }
func (d *browseDelivery) DecodeError() error                               { return d.decodeErr }
func (d *browseDelivery) Ack(context.Context) error                        { return nil }
func (d *browseDelivery) Nack(context.Context, time.Duration) error        { return nil }
func (d *browseDelivery) Extend(context.Context, time.Duration) error      { return nil }
func (d *browseDelivery) DeadLetter(context.Context, string, string) error { return nil }

// NewDrySink encodes every message exactly as the sink would (subject
// template, headers, size limit, policy) and publishes nothing.
func NewDrySink(_ context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	// Without a connection the server's max_payload is unknown: the
	// server's default (1 MiB) unless the mapping block sets a limit.
	limit := 1 << 20
	if cfg.MaxMessageSize > 0 {
		limit = cfg.MaxMessageSize
	}
	return &drySink{set: set, codec: newCodec(set.groupHeader, mapping.Options{
		Policy: cfg.Policy, MaxMessageSize: limit, CarrySource: cfg.CarrySource, OnDrop: onDrop,
		Envelope: cfg.Envelope,
	})}, nil
}

type drySink struct {
	set   *sinkSettings
	codec codec
}

func (s *drySink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		subject := s.set.subject.render(m, s.set.groupToken)
		if _, err := s.codec.encode(nil, m, subject); err != nil {
			errs[i] = fmt.Errorf("nats: encode for %q: %w", subject, err)
		}
	}
	return errs
}

func (s *drySink) Close(context.Context) error { return nil }

// duplicates counts the publishes JetStream acknowledged as duplicates
// (same Nats-Msg-Id within the stream's duplicate window): stored once.
type duplicates struct{ n atomic.Int64 }

// Duplicates implements driver.DuplicateReporter.
func (s *sink) Duplicates() int64 { return s.dups.n.Load() }
