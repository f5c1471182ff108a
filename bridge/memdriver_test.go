package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// memQueue is an in-memory broker queue: deliveries wait in order until
// received, and the queue checks the delivery contract (settled once, no
// Extend after settlement).
type memQueue struct {
	t testing.TB

	mu             sync.Mutex
	pending        []*memDelivery
	signal         chan struct{}
	outstanding    int // received, not settled
	maxOutstanding int
	all            []*memDelivery
	redeliver      bool // a nacked message goes back to the queue
	noNative       bool // deliveries do not implement driver.DeadLetterer
	recycle        bool // deliveries implement driver.Recycler (recyclingDelivery)

	receiveErr func(calls int) error // fails Receive when it returns non-nil
	calls      int
	hangClose  bool // the source's Close waits for its context to end
}

func newQueue(t testing.TB) *memQueue {
	return &memQueue{t: t, signal: make(chan struct{})}
}

// push enqueues messages in order.
func (q *memQueue) push(msgs ...*mapping.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		d := &memDelivery{q: q, msg: m}
		q.pending = append(q.pending, d)
		q.all = append(q.all, d)
	}
	close(q.signal)
	q.signal = make(chan struct{})
}

func (q *memQueue) receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	if q.receiveErr != nil {
		if err := q.receiveErr(q.calls); err != nil {
			return nil, err
		}
	}
	for len(q.pending) == 0 {
		ch := q.signal
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			q.mu.Lock()
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
	n := min(limit, len(q.pending))
	out := make([]driver.Delivery, n)
	for i, d := range q.pending[:n] {
		d.received.Add(1)
		switch {
		case q.noNative:
			out[i] = plainDelivery{d}
		case q.recycle:
			out[i] = recyclingDelivery{d}
		default:
			out[i] = d
		}
	}
	q.pending = q.pending[n:]
	q.outstanding += n
	q.maxOutstanding = max(q.maxOutstanding, q.outstanding)
	return out, nil
}

func (q *memQueue) settled(d *memDelivery, requeue bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.outstanding--
	if requeue && q.redeliver {
		d.settledOnce.Store(false)
		q.pending = append(q.pending, d)
		close(q.signal)
		q.signal = make(chan struct{})
	}
}

func (q *memQueue) stats() (outstanding, maxOutstanding int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.outstanding, q.maxOutstanding
}

// receiveCalls is how many times Receive was called.
func (q *memQueue) receiveCalls() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls
}

func (q *memQueue) pendingLen() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *memQueue) deliveries() []*memDelivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*memDelivery(nil), q.all...)
}

// count sums a counter over all deliveries.
func (q *memQueue) count(f func(d *memDelivery) int64) int64 {
	var n int64
	for _, d := range q.deliveries() {
		n += f(d)
	}
	return n
}

type memDelivery struct {
	q   *memQueue
	msg *mapping.Message

	received    atomic.Int64
	acks        atomic.Int64
	nacks       atomic.Int64
	releases    atomic.Int64
	recycles    atomic.Int64
	deadLetters atomic.Int64
	extends     atomic.Int64
	settledOnce atomic.Bool
	ackErr      error
	decodeErr   error

	mu        sync.Mutex
	nackDelay time.Duration
	dlReason  string
	dlDesc    string
}

func (d *memDelivery) Message() *mapping.Message { return d.msg }
func (d *memDelivery) DecodeError() error        { return d.decodeErr }

func (d *memDelivery) settle(op string) {
	if !d.settledOnce.CompareAndSwap(false, true) {
		d.q.t.Errorf("delivery %s: %s after it was settled", d.msg.ID, op)
	}
}

func (d *memDelivery) Ack(ctx context.Context) error {
	d.settle("Ack")
	d.acks.Add(1)
	d.q.settled(d, false)
	return d.ackErr
}

func (d *memDelivery) Nack(ctx context.Context, delay time.Duration) error {
	d.settle("Nack")
	d.nacks.Add(1)
	d.mu.Lock()
	d.nackDelay = delay
	d.mu.Unlock()
	d.q.settled(d, true)
	return nil
}

// Release is a hand-back that costs no delivery attempt (driver.Releaser).
func (d *memDelivery) Release(ctx context.Context) error {
	d.settle("Release")
	d.releases.Add(1)
	d.q.settled(d, true)
	return nil
}

func (d *memDelivery) Extend(ctx context.Context, by time.Duration) error {
	if d.settledOnce.Load() {
		d.q.t.Errorf("delivery %s: Extend after settlement", d.msg.ID)
	}
	d.extends.Add(1)
	return nil
}

func (d *memDelivery) DeadLetter(ctx context.Context, reason, desc string) error {
	d.settle("DeadLetter")
	d.deadLetters.Add(1)
	d.mu.Lock()
	d.dlReason, d.dlDesc = reason, desc
	d.mu.Unlock()
	d.q.settled(d, false)
	return nil
}

// recyclingDelivery is a delivery whose adapter reuses it
// (driver.Recycler). Recycle checks that the engine is done with it: acked
// and settled, once. It then scribbles over the message, as a reuse would,
// so a later use of it shows (a send of the id "recycled", or a race).
type recyclingDelivery struct{ *memDelivery }

func (r recyclingDelivery) Recycle() {
	d := r.memDelivery
	if d.recycles.Add(1) != 1 {
		d.q.t.Errorf("delivery %s recycled twice", d.msg.ID)
	}
	if d.acks.Load() != 1 || d.nacks.Load()+d.releases.Load()+d.deadLetters.Load() != 0 {
		d.q.t.Errorf("delivery %s recycled after %d acks, %d nacks, %d releases, %d dead letters: only an acked one may be",
			d.msg.ID, d.acks.Load(), d.nacks.Load(), d.releases.Load(), d.deadLetters.Load())
	}
	*d.msg = mapping.Message{ID: "recycled", GroupKey: "recycled"}
}

// plainDelivery hides DeadLetter (a broker without a native DLQ).
type plainDelivery struct{ d *memDelivery }

func (p plainDelivery) Message() *mapping.Message { return p.d.Message() }
func (p plainDelivery) Ack(ctx context.Context) error {
	return p.d.Ack(ctx)
}
func (p plainDelivery) Nack(ctx context.Context, delay time.Duration) error {
	return p.d.Nack(ctx, delay)
}
func (p plainDelivery) Extend(ctx context.Context, by time.Duration) error {
	return p.d.Extend(ctx, by)
}

// memSource is a driver.Source over a memQueue.
type memSource struct {
	q      *memQueue
	closed atomic.Bool
}

func (s *memSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if s.closed.Load() {
		return nil, errors.New("source closed")
	}
	return s.q.receive(ctx, max)
}

func (s *memSource) Close(ctx context.Context) error {
	s.closed.Store(true)
	if s.q.hangClose {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// sourceOpener opens memSources on q and counts the opens.
type sourceOpener struct {
	q       *memQueue
	opens   atomic.Int64
	failN   int64 // the first failN opens fail
	mu      sync.Mutex
	sources []*memSource
}

func (o *sourceOpener) open(ctx context.Context) (driver.Source, error) {
	if n := o.opens.Add(1); n <= o.failN {
		return nil, fmt.Errorf("open %d refused", n)
	}
	s := &memSource{q: o.q}
	o.mu.Lock()
	o.sources = append(o.sources, s)
	o.mu.Unlock()
	return s, nil
}

func (o *sourceOpener) allClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.sources {
		if !s.closed.Load() {
			return false
		}
	}
	return true
}

// memSink records what it confirmed and checks the per-group limit.
type memSink struct {
	t        testing.TB
	perGroup int  // most messages of one group in flight; 0: no check
	ordered  bool // KeepsOrder: the engine may pipeline a group in one call
	// writes: SignalsWritten. Send puts its messages on the wire
	// (wireByGroup: what a consumer gets, failed confirmations included)
	// and calls driver.Written before it waits and decides their results,
	// so the engine may start a group's next call meanwhile.
	writes bool

	// fail decides a message's result on its n-th attempt (from 1).
	fail  func(m *mapping.Message, attempt int) error
	delay func(m *mapping.Message) time.Duration
	gate  chan struct{} // if not nil, Send waits for it to be closed

	mu          sync.Mutex
	attempts    map[string]int
	confirmed   []*mapping.Message
	byGroup     map[string][]string
	inFlight    map[string]int
	maxInGroup  int
	batchSizes  []int
	sameGroupIn bool // a batch held two messages of one group
	wireByGroup map[string][]string
	callsOut    map[string]int // calls holding a group's messages (writes)
	overlapped  bool           // two calls of one group were out at once
	closed      bool
	onDrop      func(field, reason string)
	hangClose   bool // Close waits for its context to end
}

func newSink(t testing.TB) *memSink {
	return &memSink{t: t, attempts: map[string]int{}, byGroup: map[string][]string{}, inFlight: map[string]int{},
		wireByGroup: map[string][]string{}, callsOut: map[string]int{}}
}

func (s *memSink) open(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
	s.mu.Lock()
	s.onDrop = onDrop
	s.mu.Unlock()
	return s, nil
}

func (s *memSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	s.mu.Lock()
	s.batchSizes = append(s.batchSizes, len(msgs))
	seen := map[string]bool{}
	attempt := make([]int, len(msgs))
	for i, m := range msgs {
		if m.GroupKey != "" {
			if seen[m.GroupKey] {
				s.sameGroupIn = true
			}
			seen[m.GroupKey] = true
			s.inFlight[m.GroupKey]++
			s.maxInGroup = max(s.maxInGroup, s.inFlight[m.GroupKey])
		}
		s.attempts[m.ID]++
		attempt[i] = s.attempts[m.ID]
	}
	groups := map[string]bool{} // ungrouped ones too
	for _, m := range msgs {
		s.wireByGroup[m.GroupKey] = append(s.wireByGroup[m.GroupKey], m.ID)
		groups[m.GroupKey] = true
	}
	for g := range groups {
		if s.callsOut[g]++; s.callsOut[g] > 1 {
			s.overlapped = true
		}
	}
	defer func() {
		s.mu.Lock()
		for g := range groups {
			s.callsOut[g]--
		}
		s.mu.Unlock()
	}()
	gate := s.gate
	s.mu.Unlock()
	if s.writes {
		driver.Written(ctx)
	}

	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	var d time.Duration
	if s.delay != nil {
		for _, m := range msgs {
			d = max(d, s.delay(m))
		}
	}
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range msgs {
		if m.GroupKey != "" {
			s.inFlight[m.GroupKey]--
		}
		switch {
		case ctx.Err() != nil:
			errs[i] = ctx.Err()
		case s.fail != nil:
			errs[i] = s.fail(m, attempt[i])
		}
		if errs[i] == nil {
			s.confirmed = append(s.confirmed, m)
			s.byGroup[m.GroupKey] = append(s.byGroup[m.GroupKey], m.ID)
		}
	}
	return errs
}

func (s *memSink) KeepsOrder() bool { return s.ordered }

func (s *memSink) SignalsWritten() bool { return s.writes }

// wireIDs is what a consumer of group g got, in order (writes).
func (s *memSink) wireIDs(g string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.wireByGroup[g])
}

func (s *memSink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.hangClose {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *memSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.confirmed)
}

// batches returns the sizes of the Send calls so far.
func (s *memSink) batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batchSizes...)
}

func (s *memSink) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *memSink) groupIDs(g string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.byGroup[g]...)
}

// msg builds a test message; its ID is "<group>/<seq>".
func msg(group string, seq int) *mapping.Message {
	return &mapping.Message{
		ID:       fmt.Sprintf("%s/%d", group, seq),
		GroupKey: group,
		Body:     []byte("body"),
		Source:   mapping.Source{EnqueuedTime: time.Now(), DeliveryCount: 1},
	}
}

// fastOptions are small limits and short delays for tests.
func fastOptions() Options {
	o := DefaultOptions()
	o.Retry.Backoff = Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 2}
	o.Restart = Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}
	o.ShutdownTimeout = 5 * time.Second
	return o
}

// harness runs one pipeline for a test.
type harness struct {
	t      testing.TB
	q      *memQueue
	src    *sourceOpener
	sink   *memSink
	p      *Pipeline
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, cfg Config, q *memQueue, sink *memSink) *harness {
	t.Helper()
	h := &harness{t: t, q: q, src: &sourceOpener{q: q}, sink: sink, done: make(chan error, 1)}
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.Source == nil {
		cfg.Source = h.src.open
	}
	cfg.Sink = sink.open
	cfg.SourceKind, cfg.SinkKind = "mem", "mem"
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- p.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels the pipeline and waits for Run to return.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(20 * time.Second):
		h.t.Fatal("pipeline did not stop")
		return nil
	}
}

var quietLog = slog.New(slog.DiscardHandler)

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
