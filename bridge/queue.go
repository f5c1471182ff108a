package bridge

import (
	"sync"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// item is one received delivery on its way through the pipeline.
type item struct {
	d         driver.Delivery
	src       driver.Source    // the source that delivered d (for driver.BatchAcker)
	orig      *mapping.Message // as the source decoded it; what a dead-letter sink gets
	msg       *mapping.Message // after Transform; what the sink gets
	group     string
	lane      string // the ordering key: group, ungroupedLane, or "" (no order kept)
	g         *group // the lane's state while it is active (p.groups[lane] then)
	seq       uint64 // source order: items are numbered as they are placed
	call      uint64 // the lane's call that holds it (group.calls), when overlapping
	preErr    error  // undecodable or refused by Transform: dead-letter without sending
	preReason string // ReasonCorrupt or ReasonMapping
	recvAt    time.Time

	// Touched only by the sender that holds the item (state stSending).
	attempts     int
	firstAttempt time.Time

	// Guarded by Pipeline.mu.
	state      state
	active     bool // counts against its group's PerGroup
	timer      *time.Timer
	extendedAt time.Time

	// dmu serializes calls on d: the heartbeat's Extend must not race with
	// settlement, and a delivery is settled once.
	dmu     sync.Mutex
	settled bool

	liveAt int // its index in Pipeline.live (guarded by Pipeline.mu)
	weight int // its message's body and a share for the rest (liveSet.bytes)
}

// itemOverhead is what an item and its message weigh beside the body,
// about: the model, the delivery, a few attributes.
const itemOverhead = 1024

// liveSet holds the unsettled items, each at the index it records: adding
// and removing one is a slice write, where a map hashed every message.
// bytes is what their messages weigh, about (itemWeight).
type liveSet struct {
	items []*item
	bytes int
}

func (s *liveSet) add(it *item) {
	it.liveAt = len(s.items)
	s.items = append(s.items, it)
	s.bytes += it.weight
}

// remove takes it out by moving the last item into its place.
func (s *liveSet) remove(it *item) {
	s.bytes -= it.weight
	last := len(s.items) - 1
	moved := s.items[last]
	s.items[it.liveAt] = moved
	moved.liveAt = it.liveAt
	s.items[last] = nil
	s.items = s.items[:last]
}

func (s *liveSet) len() int { return len(s.items) }

type state uint8

const (
	stQueued   state = iota // waiting behind its group's in-flight messages
	stReady                 // waiting for a sender
	stSending               // held by a sender
	stWaiting               // waiting to be retried
	stSettling              // being acked, nacked or dead-lettered
	stDone
)

// ungroupedLane is the lane of ungrouped messages whose source order is
// kept (Ordering.Ungrouped). A group key of a real message never starts
// with a NUL byte in practice.
const ungroupedLane = "\x00ungrouped"

// group is the ordering state of one group key.
type group struct {
	queue  []*item // FIFO of stQueued items
	active int     // items ready, sending, waiting or settling ahead of the queue

	// Overlapping calls (Pipeline.overlap): calls numbers the lane's calls
	// in the order they were taken, routed counts those whose results were
	// routed (in that order). written: the latest call is on the wire and
	// no head was let out after it, so the lane's next call may start.
	// broken: a failure of the lane waits to be sent again; nothing else of
	// the lane goes before it. Calls numbered below requeueBelow were taken
	// before that failure was routed: their messages go again after it.
	calls, routed, requeueBelow uint64
	written, broken             bool
	due                         *item // a retry waiting for the earlier calls' routing
	head                        *item // let out for the next call, not taken yet
}

// laneCalls is the most calls of one lane at the sink at once when calls
// overlap: enough to cover a confirmation round trip under load with
// calls of a few hundred messages (docs/benchmarks.md).
const laneCalls = 4

// The methods below are called with p.mu held.

// broadcast wakes everyone waiting for a state change. The channel is
// made only when someone waits (waitChan): most changes on the hot path
// have no waiter and cost nothing.
func (p *Pipeline) broadcast() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// waitChan returns a channel closed on the next state change.
func (p *Pipeline) waitChan() <-chan struct{} {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// place puts a new item in its group's order, or straight to the senders.
func (p *Pipeline) place(it *item) {
	it.seq = p.admitted
	p.admitted++
	p.live.add(it)
	it.lane = p.laneOf(it)
	if it.lane == "" {
		it.active = true
		p.pushReady(it)
		return
	}
	g := p.groups[it.lane]
	if g == nil {
		g = &group{}
		p.groups[it.lane] = g
	}
	it.g = g
	if g.active < p.opt.Ordering.PerGroup && len(g.queue) == 0 {
		g.active++
		g.written = false // its call is the lane's next
		it.active = true
		p.pushReady(it)
		return
	}
	it.state = stQueued
	g.queue = append(g.queue, it)
	p.openLane(g, false)
}

// openLane lets a lane's next call start while its earlier ones await
// their confirmation (Pipeline.overlap): the queue's head goes to the
// senders, which take the messages queued behind it along. Unless now is
// set (a call of the lane was just confirmed), it waits for a quarter of a
// batch: idle senders take a head at once, and calls of one message each
// would fill the lane's calls with round trips. p.mu is held.
func (p *Pipeline) openLane(g *group, now bool) {
	if !g.written || g.broken || p.draining || len(g.queue) == 0 || g.calls-g.routed >= laneCalls {
		return
	}
	if !now && len(g.queue) < max(1, p.batchSize/laneCalls) {
		return
	}
	p.pushHead(g)
}

// pushHead moves the lane's first queued item to the senders. p.mu is held.
func (p *Pipeline) pushHead(g *group) {
	next := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	g.active++
	g.written = false // the head's call is the lane's next
	g.head = next
	next.active = true
	p.pushReady(next)
}

// laneOf is the key that orders it: its group, the ungrouped lane when the
// source order of ungrouped messages is kept, or "" for none.
func (p *Pipeline) laneOf(it *item) string {
	if it.group != "" {
		return it.group
	}
	switch p.opt.Ordering.Ungrouped {
	case UngroupedSource:
		return ungroupedLane
	case UngroupedConcurrent:
		return ""
	}
	if u, ok := it.src.(driver.Unordered); (ok && u.Unordered()) || !p.pipelined {
		return ""
	}
	return ungroupedLane
}

func (p *Pipeline) pushReady(it *item) {
	it.state = stReady
	p.ready = append(p.ready, it)
	p.broadcast()
}

// release frees the item's place in its group so the next may go. It is
// called when the sink confirmed the item, or the item left the pipeline.
func (p *Pipeline) release(it *item) {
	if !it.active {
		return
	}
	it.active = false
	if it.lane == "" {
		return
	}
	g := it.g // active: its group is in p.groups
	g.active--
	for g.active < p.opt.Ordering.PerGroup && len(g.queue) > 0 {
		p.pushHead(g)
	}
	if g.active == 0 && len(g.queue) == 0 {
		delete(p.groups, it.lane)
	}
}

// takeFollowers removes and returns the items queued behind it in its group,
// marked stSettling, for nacking together with it so that order holds on
// redelivery.
func (p *Pipeline) takeFollowers(it *item) []*item {
	if it.lane == "" {
		return nil
	}
	g := p.groups[it.lane]
	if g == nil || len(g.queue) == 0 {
		return nil
	}
	f := g.queue
	g.queue = nil
	for _, x := range f {
		x.state = stSettling
	}
	return f
}

// finish removes a settled item from the pipeline.
func (p *Pipeline) finish(it *item) {
	if it.state == stDone {
		return
	}
	p.release(it)
	if it.timer != nil {
		it.timer.Stop()
		it.timer = nil
	}
	it.state = stDone
	p.live.remove(it)
	p.broadcast()
}

// Stats returns the pipeline's instantaneous state (for metrics and tests).
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Running: p.running, InFlight: p.live.len(), SourceLost: p.lostLocked(), OldestUnsettled: p.oldestLocked()}
	for _, g := range p.groups {
		if n := len(g.queue); n > 0 {
			s.GroupsBacklogged++
			s.MaxGroupBacklog = max(s.MaxGroupBacklog, n)
		}
	}
	return s
}

// oldestLocked is when the oldest unsettled item was received; zero when
// none is. p.mu is held.
func (p *Pipeline) oldestLocked() time.Time {
	var oldest time.Time
	for _, it := range p.live.items {
		if oldest.IsZero() || it.recvAt.Before(oldest) {
			oldest = it.recvAt
		}
	}
	return oldest
}

// lostLocked is what the sources lost so far (Stats.SourceLost).
func (p *Pipeline) lostLocked() uint64 {
	n := p.lostBefore
	if lc, ok := p.source.(driver.LossCounter); ok {
		n += lc.Lost()
	}
	return n
}

// requeue puts items of one lane that were sent after a failed one of
// their lane back into the lane's queue, in source order: the lane
// resends from the failed message once it succeeds (pipelining, see
// driver.OrderedSender). The failed item still holds the lane. With
// overlapping calls the queue may already hold requeued items of an
// earlier call, so the two are merged by seq.
func (p *Pipeline) requeue(items []*item) {
	if len(items) == 0 {
		return
	}
	g := items[0].g // active until here
	for _, it := range items {
		it.active = false
		it.state = stQueued
		g.active--
	}
	if len(g.queue) == 0 || items[len(items)-1].seq < g.queue[0].seq {
		g.queue = append(items, g.queue...)
		return
	}
	merged := make([]*item, 0, len(items)+len(g.queue))
	i, j := 0, 0
	for i < len(items) && j < len(g.queue) {
		if items[i].seq < g.queue[j].seq {
			merged = append(merged, items[i])
			i++
		} else {
			merged = append(merged, g.queue[j])
			j++
		}
	}
	merged = append(merged, items[i:]...)
	g.queue = append(merged, g.queue[j:]...)
}
