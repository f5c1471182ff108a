package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/ctxwait"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// Sink sends to one SQS queue with SendMessageBatch. Messages of concurrent
// Send calls share batches: a batch goes out when it holds 10 entries, when
// the next entry would take its total size over max_message_size, or linger
// after its first entry was queued.
type Sink struct {
	api   api
	queue *queueInfo
	set   *sinkSettings
	enc   sqsmap.EncodeOptions
	log   *slog.Logger

	mu       sync.Mutex
	queued   []*entry       // waiting for a batch, in Send order
	inflight map[string]int // FIFO: entries of each group in batches being sent
	closed   bool
	wake     chan struct{} // the flusher has something to look at
	senders  chan struct{} // batch calls in flight
	flushing sync.WaitGroup
	done     chan struct{} // the flusher ended

	ready readyCache
	ids   *sentIDs // FIFO: the ids SQS answered, to tell its silent drops
}

var (
	_ driver.Sink                 = (*Sink)(nil)
	_ driver.ReadyChecker         = (*Sink)(nil)
	_ driver.DuplicateReporter    = (*Sink)(nil)
	_ driver.RunDuplicateReporter = (*Sink)(nil)
)

// Duplicates counts the sends a FIFO queue took for duplicates of messages
// it holds (sentIDs); 0 for a standard queue. Only those of messages this
// sink sent are seen: DuplicatesOfThisRun is the same count.
func (s *Sink) Duplicates() int64 { return s.ids.count() }

// DuplicatesOfThisRun implements driver.RunDuplicateReporter.
func (s *Sink) DuplicatesOfThisRun() int64 { return s.ids.count() }

// entry is one encoded message waiting for, or in, a batch.
type entry struct {
	call   *sendCall
	idx    int // in the call's messages
	out    *sqsmap.Outbound
	size   int
	group  string // FIFO only
	queued time.Time
}

// sendCall is one Send call's results.
type sendCall struct {
	mu        sync.Mutex
	errs      []error
	finished  []bool
	left      int
	done      chan struct{}
	abandoned bool                // the caller's ctx ended: send nothing more
	failed    map[string]struct{} // FIFO groups with a failed entry in this call
}

// finish records an entry's result; with FIFO, a failure blocks the later
// entries of its group in this call.
func (c *sendCall) finish(e *entry, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[e.idx] = err
	c.finished[e.idx] = true
	if err != nil && e.group != "" {
		if c.failed == nil {
			c.failed = map[string]struct{}{}
		}
		c.failed[e.group] = struct{}{}
	}
	c.left--
	if c.left == 0 {
		close(c.done)
	}
}

// blocked reports why e must not be sent: the call was abandoned, or an
// earlier entry of its group in this call failed.
func (c *sendCall) blocked(e *entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abandoned {
		return errAbandoned
	}
	if _, ok := c.failed[e.group]; ok && e.group != "" {
		// Not permanent: the message itself is fine, it must only not
		// overtake the failed one.
		return fmt.Errorf("sqs: not sent: an earlier message of group %q in this call failed", e.group)
	}
	return nil
}

var errAbandoned = fmt.Errorf("sqs: not sent: the send was cancelled")

// NewSink connects to the queue. onDrop (may be nil) is told about each
// item the Drop policy leaves out.
func NewSink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return nil, err
	}
	return newSink(ctx, client, &cfg, set, onDrop, log)
}

func newSink(ctx context.Context, client api, cfg *SinkConfig, set *sinkSettings, onDrop func(field, reason string), log *slog.Logger) (*Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q, err := resolveQueue(ctx, client, &cfg.ConnConfig)
	if q == nil {
		return nil, err
	}
	if err != nil {
		log.Warn("sqs: cannot read the queue's attributes; judging FIFO by the name and sending explicit dedup ids",
			"queue", q.url, "fifo", q.fifo, "error", err)
	}
	cbd := q.contentBasedDedup
	if cfg.ContentBasedDedup != nil {
		cbd = *cfg.ContentBasedDedup
	}
	local := *set
	local.maxMessageSize = sizeLimit(cfg.MaxMessageSize, set.maxMessageSize, q)
	set = &local
	s := &Sink{
		api: client, queue: q, set: set, log: log.With("queue", q.url),
		enc:      encodeOptions(cfg, set, q.fifo, cbd, onDrop),
		inflight: map[string]int{},
		wake:     make(chan struct{}, 1),
		senders:  make(chan struct{}, set.senders),
		done:     make(chan struct{}),
	}
	if q.fifo {
		s.ids = newSentIDs()
	}
	s.ready.check = func(ctx context.Context) error { return queueReady(ctx, s.api, s.queue.url) }
	go s.flusher()
	return s, nil
}

// encodeOptions is how a sink with cfg encodes for a queue: shared by the
// sink and the dry-run sink, so both reach the same verdicts.
func encodeOptions(cfg *SinkConfig, set *sinkSettings, fifo, contentBasedDedup bool, onDrop func(field, reason string)) sqsmap.EncodeOptions {
	return sqsmap.EncodeOptions{
		Options: mapping.Options{
			Policy: cfg.Policy, MaxMessageSize: set.maxMessageSize, CarrySource: cfg.CarrySource, OnDrop: onDrop,
			Envelope: cfg.Envelope,
		},
		FIFO: fifo, DefaultGroup: set.defaultGroup, ContentBasedDedup: contentBasedDedup,
	}
}

// Send sends msgs and returns one error per message: nil once SQS stored it,
// driver.Permanent for a message SQS (or the codec) refuses, a plain error
// for one worth retrying. With FIFO, messages of one group keep their order:
// when one fails, the later ones of its group in this call fail too.
func (s *Sink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	call := &sendCall{errs: make([]error, len(msgs)), finished: make([]bool, len(msgs)), done: make(chan struct{})}
	if err := ctx.Err(); err != nil {
		for i := range call.errs {
			call.errs[i] = fmt.Errorf("sqs: send: %w", err)
		}
		return call.errs
	}
	entries := make([]*entry, 0, len(msgs))
	now := time.Now()
	var failedGroups map[string]bool
	for i, m := range msgs {
		out, err := sqsmap.Encode(m, s.enc)
		// key: the model's group, for the failures within this call;
		// group: the MessageGroupId sent, for the order across batches.
		key, group := "", ""
		if s.queue.fifo {
			key = s.set.defaultGroup
			if m != nil && m.GroupKey != "" {
				key = m.GroupKey
			}
			if out != nil {
				group = out.GroupID
			}
		}
		if err == nil && failedGroups[key] {
			call.errs[i] = fmt.Errorf("sqs: not sent: an earlier message of group %q in this call failed", key)
			continue
		}
		if err != nil {
			// sqsmap names the field and limit; a position in the
			// call would read as a message id (and lands in the dead
			// letter's description).
			call.errs[i] = err
			if s.queue.fifo {
				if failedGroups == nil {
					failedGroups = map[string]bool{}
				}
				failedGroups[key] = true
			}
			continue
		}
		entries = append(entries, &entry{call: call, idx: i, out: out, size: out.Size(), group: group, queued: now})
	}
	if len(entries) == 0 {
		return call.errs
	}
	call.left = len(entries)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, e := range entries {
			call.errs[e.idx] = errClosed
		}
		return call.errs
	}
	s.queued = append(s.queued, entries...)
	s.mu.Unlock()
	s.signal()

	select {
	case <-call.done:
	case <-ctx.Done():
		call.mu.Lock()
		call.abandoned = true
		for _, e := range entries {
			if !call.finished[e.idx] {
				// Unknown outcome: it may still be stored (at least once).
				call.errs[e.idx] = fmt.Errorf("sqs: send: %w", ctx.Err())
			}
		}
		errs := append([]error(nil), call.errs...)
		call.mu.Unlock()
		return errs
	}
	return call.errs
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// flusher cuts batches off the queue and starts their calls.
func (s *Sink) flusher() {
	defer close(s.done)
	var timer *time.Timer
	var timerC <-chan time.Time
	for {
		s.mu.Lock()
		ready, wait := s.batchReadyLocked(time.Now())
		closed, empty := s.closed, len(s.queued) == 0
		s.mu.Unlock()
		if closed && empty {
			return
		}
		if ready {
			// A sender slot first, so a cut batch never waits for one.
			s.senders <- struct{}{}
			s.mu.Lock()
			batch := s.cutLocked()
			s.mu.Unlock()
			if len(batch) == 0 {
				<-s.senders
				s.waitWake(nil) // everything left waits for groups in flight
				continue
			}
			s.flushing.Add(1)
			go s.sendBatch(batch)
			continue
		}
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		if wait > 0 {
			timer = time.NewTimer(wait)
			timerC = timer.C
		}
		s.waitWake(timerC)
	}
}

func (s *Sink) waitWake(timerC <-chan time.Time) {
	select {
	case <-s.wake:
	case <-timerC:
	}
}

// batchReadyLocked says whether a batch should be cut now, and otherwise how
// long to wait for more entries (0: until woken).
func (s *Sink) batchReadyLocked(now time.Time) (bool, time.Duration) {
	if len(s.queued) == 0 {
		return false, 0
	}
	if s.closed || len(s.queued) >= maxBatch {
		return true, 0
	}
	size := 0
	for _, e := range s.queued {
		size += e.size
	}
	if size >= s.set.maxMessageSize {
		return true, 0
	}
	wait := s.queued[0].queued.Add(s.set.linger).Sub(now)
	if wait <= 0 {
		return true, 0
	}
	return false, wait
}

// cutLocked takes the next batch off the queue: entries in queue order, at
// most 10 and max_message_size in total. With FIFO, an entry whose group has
// entries in flight, or an earlier entry left behind, waits, so a group's
// entries are never in two batches in flight at once.
func (s *Sink) cutLocked() []*entry {
	var batch []*entry
	size := 0
	rest := s.queued[:0]
	var held map[string]bool
	for _, e := range s.queued {
		if err := e.call.blocked(e); err != nil {
			e.call.finish(e, err)
			continue
		}
		fifo := e.group != ""
		if fifo && (held[e.group] || s.inflight[e.group] > 0) {
			rest = append(rest, e)
			continue
		}
		if len(batch) == maxBatch || (len(batch) > 0 && size+e.size > s.set.maxMessageSize) {
			rest = append(rest, e)
			if fifo {
				if held == nil {
					held = map[string]bool{}
				}
				held[e.group] = true
			}
			continue
		}
		batch = append(batch, e)
		size += e.size
	}
	clear(s.queued[len(rest):])
	s.queued = rest
	for _, e := range batch {
		if e.group != "" {
			s.inflight[e.group]++
		}
	}
	return batch
}

// sendBatch sends one batch and records each entry's result.
func (s *Sink) sendBatch(batch []*entry) {
	defer s.flushing.Done()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	errs := s.sendEntries(ctx, batch)
	cancel()
	if s.queue.fifo {
		s.checkOrder(batch, errs)
	}
	// Results first: a failure must block the group's later entries before
	// the group counts as no longer in flight.
	for i, e := range batch {
		e.call.finish(e, errs[i])
	}
	s.mu.Lock()
	for _, e := range batch {
		if e.group != "" {
			if s.inflight[e.group]--; s.inflight[e.group] == 0 {
				delete(s.inflight, e.group)
			}
		}
	}
	s.mu.Unlock()
	<-s.senders
	s.signal()
}

// checkOrder logs a FIFO group whose later entry was stored although an
// earlier one of the same batch failed: SQS does not undo it, and the
// engine's retry of the failed one lands after it.
func (s *Sink) checkOrder(batch []*entry, errs []error) {
	failed := map[string]int{}
	for i, e := range batch {
		if errs[i] != nil {
			if _, ok := failed[e.group]; !ok {
				failed[e.group] = i
			}
		} else if _, ok := failed[e.group]; ok {
			s.log.Warn("sqs: FIFO order broken within one batch: a later message of the group was stored after an earlier one failed",
				"group", e.group, "error", errs[failed[e.group]])
		}
	}
}

// Close sends what is queued, waits for the batches in flight (until ctx
// ends) and refuses further sends.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ready.close()
	s.signal()
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return ctxwait.Group(ctx, &s.flushing)
}

// Ready reports whether the queue answers (GetQueueAttributes, cached).
func (s *Sink) Ready(ctx context.Context) error { return s.ready.get(ctx) }
