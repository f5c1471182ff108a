package sqs

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/ctxwait"
	"github.com/qbridge/qbridge/internal/logpace"
)

const (
	// handoverMargin: a prefetched message whose visibility ends within
	// this margin (or a tenth of the visibility timeout, if less) is not
	// handed to the engine (it is, or is about to be,
	// visible to other consumers again).
	handoverMargin = time.Second
	// attemptIDTTL: SQS honours a ReceiveRequestAttemptId for 5 minutes;
	// a retry later than this uses a new one.
	attemptIDTTL = 4 * time.Minute
	// defaultQueueVisibility is assumed when the queue's own visibility
	// timeout cannot be read.
	defaultQueueVisibility = 30 * time.Second
	maxPollBackoff         = 10 * time.Second
)

// Source receives from one SQS queue with long polling.
type Source struct {
	api            api
	queue          *queueInfo
	set            *sourceSettings
	visTimeout     time.Duration // of the messages received
	log            *slog.Logger
	undecodableLog *logpace.Pacer // the log line of an undecodable message

	deleter    *coalescer[string]
	visibility *coalescer[visItem]

	batches chan []*delivery
	errc    chan error
	recv    chan struct{} // one Receive at a time
	pending []*delivery   // handed out by Receive in order; guarded by recv

	cancel  context.CancelFunc
	pollers sync.WaitGroup
	closed  chan struct{}
	once    sync.Once

	// Quiesce (the end of a dry run): no poller starts another receive, a
	// receive in flight has quietGrace to answer before it is cut short,
	// and drained is closed once every poll loop has handed out its last
	// batch and stopped.
	quiet      atomic.Bool
	quietOnce  sync.Once
	quietPolls context.CancelFunc
	polling    sync.WaitGroup // the poll loops (pollers holds keepPrefetched too)
	drained    chan struct{}
	// releasedAt is when a message was last made visible at once (a
	// Release, a Nack without delay), in UnixNano: Close lets a receive in
	// flight since then return (closeGrace).
	releasedAt atomic.Int64

	trackMu sync.Mutex
	// tracked: received but not yet handed to the engine. keepPrefetched
	// extends these; the engine's lock heartbeat extends the rest.
	tracked map[*delivery]struct{}

	ready readyCache
	stats sourceStats
}

// sourceStats are counters a caller may read through Stats.
type sourceStats struct {
	received, corrupt, expired, pollErrors atomic.Uint64
}

// SourceStats is a snapshot of a Source's counters.
type SourceStats struct {
	Received   uint64 // messages received from SQS
	Corrupt    uint64 // messages that could not be decoded (see DecodeErrorer)
	Expired    uint64 // prefetched messages whose visibility ended before the engine took them
	PollErrors uint64 // failed ReceiveMessage calls
}

// Unordered reports that the queue's ungrouped messages have no order to
// keep (driver.Unordered): a standard queue delivers in any order, and a
// FIFO queue has no ungrouped messages.
func (s *Source) Unordered() bool { return true }

// Stats returns the source's counters.
func (s *Source) Stats() SourceStats {
	return SourceStats{s.stats.received.Load(), s.stats.corrupt.Load(), s.stats.expired.Load(), s.stats.pollErrors.Load()}
}

var (
	_ driver.Source       = (*Source)(nil)
	_ driver.ReadyChecker = (*Source)(nil)
)

// NewSource connects to the queue and starts the pollers.
func NewSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Source, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	client, err := newClient(ctx, &cfg.ConnConfig, log)
	if err != nil {
		return nil, err
	}
	return newSource(ctx, client, &cfg.ConnConfig, set, log)
}

func newSource(ctx context.Context, client api, conn *ConnConfig, set *sourceSettings, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q, err := resolveQueue(ctx, client, conn)
	if q == nil {
		return nil, err
	}
	if err != nil {
		log.Warn("sqs: cannot read the queue's attributes; judging FIFO by the name", "queue", q.url, "fifo", q.fifo, "error", err)
	}
	s := &Source{
		api: client, queue: q, set: set, log: log.With("queue", q.url),
		undecodableLog: logpace.PerMessage(),
		batches:        make(chan []*delivery),
		errc:           make(chan error, 1),
		recv:           make(chan struct{}, 1),
		closed:         make(chan struct{}),
		drained:        make(chan struct{}),
		tracked:        map[*delivery]struct{}{},
	}
	s.visTimeout = set.visibility
	if !set.hasVisibility {
		s.visTimeout = q.visibility
	}
	s.ready.check = s.checkReady
	s.deleter = newCoalescer(set.linger, s.deleteBatch)
	s.visibility = newCoalescer(set.linger, s.visibilityBatch)
	pctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	qctx, qcancel := context.WithCancel(pctx)
	s.quietPolls = qcancel
	for range set.pollers {
		s.pollers.Add(1)
		s.polling.Add(1)
		go s.poll(pctx, qctx)
	}
	if set.heartbeat > 0 {
		s.log.Warn("sqs: heartbeat is deprecated and ignored: the pipeline's lock block (extend_every, extend_by) extends the messages the engine holds, and the source keeps its prefetched ones invisible itself")
	}
	if s.visTimeout > 0 {
		s.pollers.Add(1)
		go s.keepPrefetched(pctx)
	}
	return s, nil
}

// Receive returns at least one and at most limit received deliveries, in the
// order SQS returned them.
func (s *Source) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	limit = min(max(limit, 1), 1<<16)
	select {
	case s.recv <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, errClosed
	}
	defer func() { <-s.recv }()
	for {
		s.dropExpired(time.Now())
		if len(s.pending) > 0 {
			break
		}
		select {
		case b := <-s.batches:
			s.pending = b
		case err := <-s.errc:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closed:
			return nil, errClosed
		}
	}
	// Top up from batches other pollers already hold. With FIFO this keeps
	// order: a group in flight in one batch is in no other.
	for len(s.pending) < limit {
		select {
		case b := <-s.batches:
			s.pending = append(s.pending, b...)
			continue
		default:
		}
		break
	}
	s.dropExpired(time.Now())
	n := min(limit, len(s.pending))
	out := make([]driver.Delivery, n)
	for i := range n {
		out[i] = s.pending[i]
		s.untrack(s.pending[i]) // the engine's lock heartbeat extends it from now on
	}
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
	return out, nil
}

// dropExpired leaves out pending deliveries whose visibility has ended:
// SQS hands them out again, so the engine must not process them.
func (s *Source) dropExpired(now time.Time) {
	keep := s.pending[:0]
	for _, d := range s.pending {
		if d.expired(now) && d.settled.CompareAndSwap(false, true) {
			s.untrack(d)
			s.stats.expired.Add(1)
			s.log.Warn("sqs: a prefetched message became visible again before the engine took it; raise visibility_timeout or lower pollers",
				"message_id", d.id)
			continue
		}
		keep = append(keep, d)
	}
	clear(s.pending[len(keep):])
	s.pending = keep
}

// poll is one long-polling loop. Its receives end with qctx (Quiesce, or
// ctx); the hand-out of what they brought ends with ctx.
func (s *Source) poll(ctx, qctx context.Context) {
	defer s.pollers.Done()
	defer s.polling.Done()
	var attemptID string
	var attemptAt time.Time
	failures := 0
	// after the n-th failure in a row: from 200 ms, at most maxPollBackoff
	bo := backoff.Backoff{Base: 200 * time.Millisecond, Max: maxPollBackoff}
	for qctx.Err() == nil && !s.closing() && !s.quiet.Load() {
		in := s.receiveInput()
		if s.queue.fifo {
			// A retry after a failed call reuses the attempt id, so SQS
			// returns the same messages and keeps the group order (docs/wire-sqs.md §4).
			if attemptID == "" || time.Since(attemptAt) > attemptIDTTL {
				attemptID, attemptAt = newAttemptID(), time.Now()
			}
			in.ReceiveRequestAttemptId = aws.String(attemptID)
		}
		out, err := s.api.ReceiveMessage(qctx, in)
		if err != nil {
			if qctx.Err() != nil {
				return
			}
			s.stats.pollErrors.Add(1)
			failures++
			if retryable(err) {
				s.log.Warn("sqs: ReceiveMessage failed; retrying", "attempt_id", attemptID, "failures", failures, "error", err)
			} else {
				attemptID = ""
				s.log.Error("sqs: ReceiveMessage failed", "error", err)
				select {
				case s.errc <- fmt.Errorf("sqs: receive from %s: %w", s.queue.url, err):
				default:
				}
			}
			if backoff.Sleep(qctx, nil, nil, bo.Next()) != nil {
				return
			}
			continue
		}
		attemptID, failures = "", 0
		bo.Reset()
		if len(out.Messages) == 0 {
			if s.set.waitTime == 0 {
				// short polling: do not spin on an empty queue
				if backoff.Sleep(qctx, nil, nil, 100*time.Millisecond) != nil {
					return
				}
			}
			continue
		}
		now := time.Now()
		batch := make([]*delivery, len(out.Messages))
		for i, m := range out.Messages {
			batch[i] = s.newDelivery(m, now)
			s.track(batch[i])
		}
		s.stats.received.Add(uint64(len(batch)))
		select {
		case s.batches <- batch:
			continue
		case <-s.closed:
		case <-ctx.Done():
		}
		// Closing: nobody takes the batch, and its release gets a little
		// time of its own (ctx may be over).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		s.release(rctx, batch)
		cancel()
		return
	}
}

func (s *Source) receiveInput() *awssqs.ReceiveMessageInput {
	in := &awssqs.ReceiveMessageInput{
		QueueUrl:              aws.String(s.queue.url),
		MaxNumberOfMessages:   int32(s.set.maxMessages),
		WaitTimeSeconds:       int32(s.set.waitTime / time.Second),
		MessageAttributeNames: s.set.messageAttrs,
	}
	in.MessageSystemAttributeNames = make([]types.MessageSystemAttributeName, len(s.set.systemAttrs))
	// Also the deprecated AttributeNames: some SQS-compatible services
	// know only that one; AWS takes both.
	in.AttributeNames = make([]types.QueueAttributeName, len(s.set.systemAttrs))
	for i, n := range s.set.systemAttrs {
		in.MessageSystemAttributeNames[i] = types.MessageSystemAttributeName(n)
		in.AttributeNames[i] = types.QueueAttributeName(n)
	}
	if s.set.hasVisibility {
		in.VisibilityTimeout = visibilitySeconds(s.set.visibility)
	}
	return in
}

// newAttemptID returns a fresh ReceiveRequestAttemptId (32 hex digits).
func newAttemptID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Source) track(d *delivery) {
	s.trackMu.Lock()
	s.tracked[d] = struct{}{}
	s.trackMu.Unlock()
}

func (s *Source) untrack(d *delivery) {
	s.trackMu.Lock()
	delete(s.tracked, d)
	s.trackMu.Unlock()
}

// keepPrefetched extends, by the visibility timeout, the deliveries received
// but not yet handed to the engine, so that a busy engine does not make them
// expire (dropExpired) while they wait. The engine never sees these, so its
// lock heartbeat cannot extend them.
func (s *Source) keepPrefetched(ctx context.Context) {
	defer s.pollers.Done()
	// Three beats per visibility timeout: a failed extension leaves two
	// more before the message expires.
	every := s.visTimeout / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.extendPrefetched(ctx, time.Now(), every)
	}
}

// extendPrefetched extends the tracked deliveries not extended (or received)
// within the last age.
func (s *Source) extendPrefetched(ctx context.Context, now time.Time, age time.Duration) {
	due := now.Add(s.visTimeout - age).UnixNano()
	s.trackMu.Lock()
	var ds []*delivery
	for d := range s.tracked {
		if d.deadline.Load() <= due {
			ds = append(ds, d)
		}
	}
	s.trackMu.Unlock()
	secs := visibilitySeconds(s.visTimeout)
	for len(ds) > 0 {
		chunk := ds[:min(maxBatch, len(ds))]
		ds = ds[len(chunk):]
		items := make([]visItem, len(chunk))
		for i, d := range chunk {
			items[i] = visItem{d.handle, secs}
		}
		for i, err := range s.visibilityBatch(ctx, items) {
			if err == nil {
				chunk[i].deadline.Store(now.Add(s.visTimeout).UnixNano())
			} else if !chunk[i].settled.Load() && ctx.Err() == nil {
				s.log.Warn("sqs: could not extend a prefetched message; it may expire before the engine takes it", "message_id", chunk[i].id, "error", err)
			}
		}
	}
}

// quietGrace is how long a receive in flight at Quiesce has to answer:
// one with messages answers within a round trip, one on an empty queue
// would wait out its long poll.
const quietGrace = time.Second

// Quiesce stops receiving before a dry run hands its sample back and
// closes the source: a receive after the hand-back would take the sample
// again, and what the pollers hold when the source closes would go back
// with its receive count raised and not seen, which the move after the
// dry run took for an interrupted run's deliveries. The channel returned
// is closed once the pollers have stopped and handed out what they hold
// (Receive takes it).
func (s *Source) Quiesce() <-chan struct{} {
	s.quietOnce.Do(func() {
		s.quiet.Store(true)
		time.AfterFunc(quietGrace, s.quietPolls)
		go func() {
			s.polling.Wait()
			close(s.drained)
		}()
	})
	return s.drained
}

// closeGrace bounds how long Close waits for a receive in flight after a
// hand-back: it answers within a round trip once the messages are visible.
const closeGrace = 3 * time.Second

// closing reports whether Close has begun.
func (s *Source) closing() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// releaseTimeout bounds the release of prefetched messages; one not
// released comes back after its visibility timeout anyway.
const releaseTimeout = 5 * time.Second

// release makes deliveries that the engine never got visible again at once,
// until ctx ends.
func (s *Source) release(ctx context.Context, ds []*delivery) {
	var items []visItem
	for _, d := range ds {
		if d.settled.CompareAndSwap(false, true) {
			s.untrack(d)
			items = append(items, visItem{d.handle, 0})
		}
	}
	for len(items) > 0 {
		chunk := items[:min(maxBatch, len(items))]
		items = items[len(chunk):]
		for _, err := range s.visibilityBatch(ctx, chunk) {
			if err != nil {
				s.log.Debug("sqs: could not release a prefetched message; it comes back after its visibility timeout", "error", err)
			}
		}
	}
}

// Close stops the pollers, makes prefetched messages visible again, sends
// the pending acks and visibility changes and waits for them (until ctx
// ends). Deliveries settled after Close fail; their messages come back.
func (s *Source) Close(ctx context.Context) error {
	s.once.Do(func() {
		close(s.closed) // no poller starts another receive
		s.ready.close()
		if time.Since(time.Unix(0, s.releasedAt.Load())) < s.set.waitTime+closeGrace {
			// A long poll in flight may be answering with the messages
			// just handed back (the shutdown's hand-back comes before
			// Close): cancelled, its answer would be lost and they would
			// stay invisible for their visibility timeout (the next run
			// waited that long for each group's head). It returns at once
			// with them, or with nothing at the end of its wait.
			gctx, cancel := context.WithTimeout(ctx, closeGrace)
			_ = ctxwait.Group(gctx, &s.pollers)
			cancel()
		}
		s.cancel()
	})
	if err := ctxwait.Group(ctx, &s.pollers); err != nil {
		return err
	}
	// Receive cannot run any more: take what it did not hand out.
	select {
	case s.recv <- struct{}{}:
		rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
		s.release(rctx, s.pending)
		cancel()
		s.pending = nil
		<-s.recv
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.deleter.close(ctx); err != nil {
		return err
	}
	return s.visibility.close(ctx)
}

// Ready reports whether the queue answers (GetQueueAttributes, cached).
func (s *Source) Ready(ctx context.Context) error { return s.ready.get(ctx) }

func (s *Source) checkReady(ctx context.Context) error {
	return queueReady(ctx, s.api, s.queue.url)
}

// String names the source in logs.
func (s *Source) String() string {
	return "sqs source " + s.queue.url + " (fifo=" + strconv.FormatBool(s.queue.fifo) + ")"
}
