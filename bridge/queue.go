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
}

// liveSet holds the unsettled items, each at the index it records: adding
// and removing one is a slice write, where a map hashed every message.
type liveSet struct{ items []*item }

func (s *liveSet) add(it *item) {
	it.liveAt = len(s.items)
	s.items = append(s.items, it)
}

// remove takes it out by moving the last item into its place.
func (s *liveSet) remove(it *item) {
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
}

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
		it.active = true
		p.pushReady(it)
		return
	}
	it.state = stQueued
	g.queue = append(g.queue, it)
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
		next := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		g.active++
		next.active = true
		p.pushReady(next)
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
// their lane back at the front of the lane's queue, in order: the lane
// resends from the failed message once it succeeds (pipelining, see
// driver.OrderedSender). The failed item still holds the lane.
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
	g.queue = append(items, g.queue...)
}
