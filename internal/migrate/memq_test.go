package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// memq is an in-memory broker registered as adapter kinds for these tests:
// "memq" has every migration hook, "memqplain" none (it cannot count,
// browse or dry-run... except a dry sink, which every test kind needs to be
// a sink in a dry run, so it keeps that). Brokers are per test: the queue
// name is prefixed by the test's broker id.
type memBroker struct {
	mu      sync.Mutex
	changed chan struct{}
	queues  map[string]*memQueue
	// failOpen makes sources fail to open, for the connect timeout.
	failOpen bool
	// hangOpen, when not nil, makes sources wait for it (or their
	// context) to open: an attempt that does not return.
	hangOpen chan struct{}
	// refuseBrowse makes browsing sources fail to open as a broker that
	// does not grant a copy link does.
	refuseBrowse bool
	// nackLinger, when set, makes each Nack wait as a batching client's
	// call does (SQS: until ten are waiting, or a linger has passed), and
	// nackPeak records the most Nacks waiting at once.
	nackLinger            time.Duration
	nackWaiting, nackPeak atomic.Int64
	// sinkLimit > 0: the sinks take that many messages in all, then fail
	// (a transient error) until it is set to 0; sinkFailed, if not nil, is
	// closed at the first failure.
	sinkLimit  int
	sinkTaken  int
	sinkFailed chan struct{}
	dedup      map[string]bool // the dedup ids a Dedup sink kept
	// breakBrowse makes the next browsing Receive fail (a lost
	// connection); reopened, if not nil, is closed when a source opens
	// after that.
	breakBrowse bool
	reopened    chan struct{}
	// missing makes source counts answer as a broker whose queue does not
	// exist (a permanent error).
	missing bool
	// failCounts: the next failCounts source counts fail with a transient
	// error, and the later ones answer.
	failCounts int
	// goneOnOpen makes sources fail to open with a permanent error (a
	// queue that does not exist, found only on attach).
	goneOnOpen bool
	// openedForMigration records that a source opened with the
	// ForMigration hook's change.
	openedForMigration bool
	// brokerDeadLetters > 0: the next receive first moves that many
	// messages to the dead-letter queue, as a broker does at its maximum
	// delivery count.
	brokerDeadLetters int
	// notReady is what the sources' Ready says (a broker gone while the
	// source stays open and its client reconnects).
	notReady error
	// stalled: the broker neither delivers nor answers pings, with the
	// connection open (a process stopped, a network that drops packets).
	stalled bool
	// sinkCountErr, if set, is what the sink counts answer.
	sinkCountErr error
	// onSinkCount, if set, is called with the number of each sink count
	// (1 for the first), before it answers.
	onSinkCount func(n int)
	sinkCounts  int
	// vanish > 0: the next receive first removes that many messages, as
	// another consumer (or expiry) would.
	vanish int
	// growAfter > 0: once the sinks have written that many, grow is put
	// at the source queue growInto, as producers still sending would.
	growAfter int
	growInto  string
	grow      []*mapping.Message
}

type memQueue struct {
	msgs []*memMsg // in sequence order
	dlq  []*memMsg
	seq  uint64
	// heldByOther counts messages some other consumer holds forever.
	heldByOther int64
}

type memMsg struct {
	seq       uint64
	m         *mapping.Message
	locked    bool
	scheduled bool
	// blocked: ready, and never delivered (queued behind a stuck
	// message of its FIFO group).
	blocked bool
}

var (
	brokersMu sync.Mutex
	brokers   = map[string]*memBroker{}
)

func newBroker(id string) *memBroker {
	b := &memBroker{changed: make(chan struct{}), queues: map[string]*memQueue{}}
	brokersMu.Lock()
	brokers[id] = b
	brokersMu.Unlock()
	return b
}

func brokerOf(id string) *memBroker {
	brokersMu.Lock()
	defer brokersMu.Unlock()
	return brokers[id]
}

func (b *memBroker) queue(name string) *memQueue {
	q := b.queues[name]
	if q == nil {
		q = &memQueue{}
		b.queues[name] = q
	}
	return q
}

func (b *memBroker) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// put enqueues messages (test setup and sinks).
func (b *memBroker) put(queue string, ms ...*mapping.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	for _, m := range ms {
		q.seq++
		q.msgs = append(q.msgs, &memMsg{seq: q.seq, m: m.Clone()})
	}
	b.notify()
}

func (b *memBroker) putBlocked(queue string, ms ...*mapping.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	for _, m := range ms {
		q.seq++
		q.msgs = append(q.msgs, &memMsg{seq: q.seq, m: m.Clone(), blocked: true})
	}
}

func (b *memBroker) putScheduled(queue string, m *mapping.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	q.seq++
	q.msgs = append(q.msgs, &memMsg{seq: q.seq, m: m.Clone(), scheduled: true})
}

func (b *memBroker) putDead(queue string, m *mapping.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	q.seq++
	q.dlq = append(q.dlq, &memMsg{seq: q.seq, m: m.Clone()})
}

// messages returns a queue's messages in order.
func (b *memBroker) messages(queue string) []*mapping.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*mapping.Message
	for _, mm := range b.queue(queue).msgs {
		out = append(out, mm.m)
	}
	return out
}

func (b *memBroker) backlog(queue string) driver.Backlog {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	bl := driver.Backlog{InFlight: q.heldByOther, DeadLetter: int64(len(q.dlq))}
	for _, mm := range q.msgs {
		switch {
		case mm.scheduled:
			bl.Scheduled++
		case mm.locked:
			bl.InFlight++
		default:
			bl.Ready++
		}
	}
	return bl
}

type memSourceConfig struct {
	Broker string `hcl:"broker"`
	Queue  string `hcl:"queue"`
	// Spelling changes the identity (memqpar) and not the queue: one
	// queue named two ways, as an SQS queue_url and queue_name are.
	Spelling string `hcl:"spelling,optional"`
	// Ordered makes its count say that it keeps each group in order (an
	// SQS FIFO queue).
	Ordered bool `hcl:"ordered,optional"`
	// ExactCount makes its count say that it is exact (JetStream).
	ExactCount bool `hcl:"exact_count,optional"`
	// ReceivesCounted makes every receive raise the delivery count (not
	// a hand-back), and its count say so and name the queue, as SQS's
	// ApproximateReceiveCount and QueueArn.
	ReceivesCounted bool `hcl:"receives_counted,optional"`

	browse     bool
	after      uint64
	deadLetter bool
	migrating  bool // set by ForMigration
}

func (c *memSourceConfig) Validate() error {
	if c.Queue == "" {
		return errors.New("queue: required")
	}
	return nil
}

type memSinkConfig struct {
	Broker   string `hcl:"broker"`
	Queue    string `hcl:"queue"`
	Spelling string `hcl:"spelling,optional"` // as memSourceConfig's
	// RejectAttr makes the sink refuse messages with this attribute.
	RejectAttr string `hcl:"reject_attr,optional"`
	// EncodeAttr makes the sink report this attribute as encoded (the
	// Encode policy), as a codec moving it into the envelope does.
	EncodeAttr string `hcl:"encode_attr,optional"`
	// ShedAttr makes the sink report the carry envelope's correlation_id
	// shed from a message with this attribute, as an SQS encoder does when
	// the message has 10 attributes already.
	ShedAttr string `hcl:"shed_attr,optional"`
	// Dedup makes the sink keep one message per DedupID and drop the rest
	// silently, as SQS FIFO does within its window.
	Dedup bool `hcl:"dedup,optional"`
	// ReportDuplicates makes it say how many it dropped
	// (driver.DuplicateReporter), as an SQS FIFO sink tells them from the
	// message ids SQS answers.
	ReportDuplicates bool `hcl:"report_duplicates,optional"`
	// KeepsAtMost makes the sink keep at most that many, the newest, and
	// its count say so (a JetStream stream's max_msgs under discard old).
	KeepsAtMost int64 `hcl:"keeps_at_most,optional"`
	// KeepsNone makes it say that it keeps nothing (interest retention
	// with no consumer).
	KeepsNone bool `hcl:"keeps_none,optional"`
	// ExactCount makes its count say that it is exact (a JetStream stream).
	ExactCount bool `hcl:"exact_count,optional"`

	opt mapping.Options
}

func (c *memSinkConfig) Validate() error {
	if c.Queue == "" {
		return errors.New("queue: required")
	}
	return nil
}

func init() {
	hooks := config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name:        "memq",
		NewSource:   newMemSource,
		NewSink:     newMemSink(false),
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
		CountSource: func(_ context.Context, c memSourceConfig, _ *slog.Logger) (driver.Backlog, error) {
			b := brokerOf(c.Broker)
			b.mu.Lock()
			missing, stalled := b.missing, b.stalled
			failNow := b.failCounts > 0
			if failNow {
				b.failCounts--
			}
			b.mu.Unlock()
			if failNow {
				return driver.Backlog{}, errors.New("memq: count: connection reset")
			}
			if missing {
				return driver.Backlog{}, driver.Permanent(fmt.Errorf("memq: queue %s does not exist", c.Queue))
			}
			if stalled {
				return driver.Backlog{}, errors.New("memq: count: no answer")
			}
			bl := b.backlog(c.Queue)
			bl.Ordered, bl.Exact = c.Ordered, c.ExactCount
			if c.ReceivesCounted {
				bl.ReceivesCounted, bl.Entity = true, "memq:"+c.Broker+"/"+c.Queue
			}
			return bl, nil
		},
		ForMigration: func(c memSourceConfig) memSourceConfig {
			c.migrating = true
			return c
		},
		CountSink: func(_ context.Context, c memSinkConfig, _ *slog.Logger) (driver.Backlog, error) {
			br := brokerOf(c.Broker)
			br.mu.Lock()
			err := br.sinkCountErr
			br.sinkCounts++
			n, on := br.sinkCounts, br.onSinkCount
			br.mu.Unlock()
			if on != nil {
				on(n)
			}
			if err != nil {
				return driver.Backlog{}, err
			}
			b := br.backlog(c.Queue)
			b.Deduplicates, b.Exact = c.Dedup, c.ExactCount
			if c.KeepsAtMost > 0 {
				b.KeepsAtMost, b.Limits = c.KeepsAtMost, fmt.Sprintf("max_msgs %d, discard old", c.KeepsAtMost)
			}
			if c.KeepsNone {
				b.KeepsNone, b.Limits = true, "interest retention with no consumer"
			}
			return b, nil
		},
		Browse: func(c memSourceConfig, after uint64) (memSourceConfig, error) {
			c.browse, c.after = true, after
			return c, nil
		},
		DeadLetterSource: func(_ context.Context, c memSourceConfig, _ *slog.Logger) (memSourceConfig, error) {
			c.deadLetter = true
			return c, nil
		},
		NewDrySink: newMemSink(true),
	}
	config.Register(hooks)
	config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name:        "memqplain",
		NewSource:   newMemSource,
		NewSink:     newMemSink(false),
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
		NewDrySink:  newMemSink(true),
	})
}

type memSource struct {
	b    *memBroker
	cfg  memSourceConfig
	mu   sync.Mutex
	next uint64 // browse cursor
	end  uint64 // browse: last sequence when browsing began
	done bool
}

func newMemSource(ctx context.Context, c memSourceConfig, _ *slog.Logger) (driver.Source, error) {
	b := brokerOf(c.Broker)
	b.mu.Lock()
	fail := b.failOpen
	gone := b.goneOnOpen
	hang := b.hangOpen
	if c.migrating {
		b.openedForMigration = true
	}
	b.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail {
		return nil, errors.New("memq: connection refused")
	}
	if gone {
		return nil, driver.Permanent(fmt.Errorf("memq: queue %s does not exist", c.Queue))
	}
	b.mu.Lock()
	if b.reopened != nil && !b.breakBrowse {
		close(b.reopened)
		b.reopened = nil
	}
	b.mu.Unlock()
	s := &memSource{b: b, cfg: c, next: c.after}
	if c.browse && b.refuseBrowse {
		return nil, fmt.Errorf("memq: the broker did not grant a copy link: %w", driver.ErrCannotBrowse)
	}
	if c.browse {
		b.mu.Lock()
		s.end = b.queue(c.Queue).seq
		b.mu.Unlock()
		return &browsingMemSource{s}, nil
	}
	return s, nil
}

func (s *memSource) list(q *memQueue) *[]*memMsg {
	if s.cfg.deadLetter {
		return &q.dlq
	}
	return &q.msgs
}

func (s *memSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.b.mu.Lock()
		if s.cfg.browse && s.b.breakBrowse {
			s.b.breakBrowse = false
			s.b.mu.Unlock()
			return nil, errors.New("memq: connection lost")
		}
		q := s.b.queue(s.cfg.Queue)
		if s.b.stalled {
			ch := s.b.changed
			s.b.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		for ; s.b.vanish > 0 && len(q.msgs) > 0 && !s.cfg.browse; s.b.vanish-- {
			q.msgs = q.msgs[1:]
		}
		for ; s.b.brokerDeadLetters > 0 && len(q.msgs) > 0 && !s.cfg.browse && !s.cfg.deadLetter; s.b.brokerDeadLetters-- {
			q.dlq = append(q.dlq, q.msgs[0])
			q.msgs = q.msgs[1:]
		}
		var out []driver.Delivery
		for _, mm := range *s.list(q) {
			if len(out) == max {
				break
			}
			if s.cfg.browse {
				if mm.seq <= s.next {
					continue
				}
				s.next = mm.seq
				m := mm.m.Clone()
				m.Source.SequenceNumber = strconv.FormatUint(mm.seq, 10)
				out = append(out, &memDelivery{s: s, m: m, browse: true})
				continue
			}
			if mm.locked || mm.scheduled || mm.blocked {
				continue
			}
			mm.locked = true
			if s.cfg.ReceivesCounted {
				mm.m.Source.DeliveryCount++ // this receive, as SQS counts it
			}
			m := mm.m.Clone()
			m.Source.EnqueuedTime = mm.m.Source.EnqueuedTime
			out = append(out, &memDelivery{s: s, mm: mm, m: m})
		}
		if s.cfg.browse && len(out) == 0 && s.next >= s.end {
			s.mu.Lock()
			s.done = true
			s.mu.Unlock()
		}
		ch := s.b.changed
		s.b.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *memSource) Close(context.Context) error { return nil }

// Ping answers unless the broker is stalled (driver.Pinger).
func (s *memSource) Ping(context.Context) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.stalled {
		return errors.New("memq: ping: no answer")
	}
	return nil
}

func (s *memSource) Ready(context.Context) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.notReady
}

type browsingMemSource struct{ *memSource }

func (s *browsingMemSource) Drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

type memDelivery struct {
	s      *memSource
	mm     *memMsg
	m      *mapping.Message
	browse bool
}

func (d *memDelivery) Message() *mapping.Message { return d.m }

func (d *memDelivery) Ack(context.Context) error {
	if d.browse {
		return nil
	}
	b := d.s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(d.s.cfg.Queue)
	l := d.s.list(q)
	for i, mm := range *l {
		if mm == d.mm {
			*l = append((*l)[:i], (*l)[i+1:]...)
			break
		}
	}
	b.notify()
	return nil
}

func (d *memDelivery) Nack(context.Context, time.Duration) error {
	if d.browse {
		return nil
	}
	b := d.s.b
	if b.nackLinger > 0 {
		n := b.nackWaiting.Add(1)
		for p := b.nackPeak.Load(); n > p && !b.nackPeak.CompareAndSwap(p, n); p = b.nackPeak.Load() {
		}
		time.Sleep(b.nackLinger) // the batch's linger: what a call waits for
		b.nackWaiting.Add(-1)
	}
	b.mu.Lock()
	d.mm.locked = false
	if !d.s.cfg.ReceivesCounted {
		// The next delivery counts one more, as brokers that count
		// failed deliveries do.
		d.mm.m.Source.DeliveryCount = max(d.mm.m.Source.DeliveryCount, 1) + 1
	}
	b.notify()
	b.mu.Unlock()
	return nil
}

func (d *memDelivery) Extend(context.Context, time.Duration) error { return nil }

type memSink struct {
	b       *memBroker
	cfg     memSinkConfig
	dry     bool
	dups    atomic.Int64 // dropped as duplicates (Dedup)
	ownDups atomic.Int64 // of those, duplicates of what this sink sent
	sentMu  sync.Mutex
	sent    map[string]bool // the dedup ids this sink sent
}

// Duplicates implements driver.DuplicateReporter (ReportDuplicates).
func (s *memSink) Duplicates() int64 {
	if !s.cfg.ReportDuplicates {
		return 0
	}
	return s.dups.Load()
}

// DuplicatesOfThisRun implements driver.RunDuplicateReporter: the
// duplicates of ids this sink sent itself.
func (s *memSink) DuplicatesOfThisRun() int64 {
	if !s.cfg.ReportDuplicates {
		return 0
	}
	return s.ownDups.Load()
}

func newMemSink(dry bool) func(context.Context, memSinkConfig, func(field, reason string), *slog.Logger) (driver.Sink, error) {
	return func(_ context.Context, c memSinkConfig, onDrop func(field, reason string), _ *slog.Logger) (driver.Sink, error) {
		c.opt.OnDrop = onDrop
		return &memSink{b: brokerOf(c.Broker), cfg: c, dry: dry}, nil
	}
}

func (s *memSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if s.cfg.RejectAttr != "" {
			if _, bad := m.Attr(s.cfg.RejectAttr); bad {
				errs[i] = mapping.Rejectf("memq", fmt.Sprintf("attribute %q", s.cfg.RejectAttr), "refused by this sink")
				continue
			}
		}
		if _, ok := m.Attr(s.cfg.ShedAttr); ok && s.cfg.ShedAttr != "" {
			s.cfg.opt.Shed([]string{"correlation_id"})
		}
		if _, ok := m.Attr(s.cfg.EncodeAttr); ok && s.cfg.EncodeAttr != "" && s.cfg.opt.Policy == mapping.Encode {
			s.cfg.opt.Encoded(fmt.Sprintf("attribute %q", s.cfg.EncodeAttr), "not allowed here: moved into the envelope")
		}
		if !s.dry {
			if !s.take() {
				errs[i] = errors.New("memq: sink unavailable")
				continue
			}
			if s.cfg.Dedup && m.DedupID != "" {
				s.sentMu.Lock()
				own := s.sent[m.DedupID]
				if s.sent == nil {
					s.sent = map[string]bool{}
				}
				s.sent[m.DedupID] = true
				s.sentMu.Unlock()
				if s.seenDedup(m.DedupID) {
					s.dups.Add(1) // dropped; the answer names the first message
					if own {
						s.ownDups.Add(1)
					}
					continue
				}
			}
			s.b.put(s.cfg.Queue, m)
			if s.cfg.KeepsAtMost > 0 {
				s.b.keepNewest(s.cfg.Queue, int(s.cfg.KeepsAtMost))
			}
			s.b.growIfDue(s.cfg.Queue)
		}
	}
	return errs
}

// keepNewest drops a queue's oldest messages beyond n (discard old).
func (b *memBroker) keepNewest(queue string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue(queue)
	if over := len(q.msgs) - n; over > 0 {
		q.msgs = q.msgs[over:]
	}
}

// growIfDue puts grow at the source once the sink queue holds growAfter.
func (b *memBroker) growIfDue(sink string) {
	b.mu.Lock()
	due := b.growAfter > 0 && len(b.queue(sink).msgs) >= b.growAfter
	if due {
		b.growAfter = 0
	}
	b.mu.Unlock()
	if due {
		b.put(b.growInto, b.grow...)
	}
}

func (s *memSink) Close(context.Context) error { return nil }

// seenDedup reports whether id was sent before, and records it.
func (s *memSink) seenDedup(id string) bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.dedup == nil {
		s.b.dedup = map[string]bool{}
	}
	seen := s.b.dedup[id]
	s.b.dedup[id] = true
	return seen
}

// take counts a message against the broker's sinkLimit.
func (s *memSink) take() bool {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sinkLimit > 0 && b.sinkTaken >= b.sinkLimit {
		if b.sinkFailed != nil {
			close(b.sinkFailed)
			b.sinkFailed = nil
		}
		return false
	}
	b.sinkTaken++
	return true
}
