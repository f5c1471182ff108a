package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
)

// sendLoop is one of Batch.Concurrency senders; it runs until workers ends.
func (p *Pipeline) sendLoop(workers, work context.Context) {
	for {
		batch := p.nextBatch(workers)
		if batch == nil {
			return
		}
		p.sendBatch(work, batch)
	}
}

// nextBatch takes up to batchSize ready items, waiting up to Batch.Linger
// for a batch to fill once the first item is there. It returns nil when ctx
// ends.
func (p *Pipeline) nextBatch(ctx context.Context) []*item {
	linger := p.opt.Batch.Linger
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var deadline <-chan time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	size := p.batchSize
	for {
		n := len(p.ready)
		if n >= size || (n > 0 && linger == 0) {
			return p.takeReady(size)
		}
		if n > 0 && deadline == nil {
			timer = time.NewTimer(linger)
			deadline = timer.C
		}
		ch := p.waitChan()
		p.mu.Unlock()
		select {
		case <-ch:
			p.mu.Lock()
		case <-deadline:
			p.mu.Lock()
			if len(p.ready) > 0 {
				return p.takeReady(size)
			}
			deadline = nil // another sender took them; start over
		case <-ctx.Done():
			p.mu.Lock()
			return nil
		}
	}
}

// takeReady removes up to n items from the ready queue; p.mu is held. When
// pipelining (p.pipelined), an item brings the messages queued behind it in
// its lane, in order, while the batch has room: one call then carries
// several messages of a group, and no other call has any.
func (p *Pipeline) takeReady(n int) []*item {
	batch := make([]*item, 0, min(n, len(p.ready)))
	taken := 0
	for taken < len(p.ready) && len(batch) < n {
		it := p.ready[taken]
		taken++
		it.state = stSending
		batch = append(batch, it)
		if !p.pipelined || it.lane == "" || it.preErr != nil {
			continue // a message to dead-letter goes alone: its followers wait for it
		}
		g := it.g // ready: active
		g.head = nil
		// The call is the lane's latest: written again once on the wire,
		// and the lane goes on from here after a failure.
		it.call = g.calls
		g.calls++
		g.written, g.broken = false, false
		for len(g.queue) > 0 && len(batch) < n && g.queue[0].preErr == nil {
			f := g.queue[0]
			g.queue[0] = nil
			g.queue = g.queue[1:]
			g.active++
			f.active = true
			f.state = stSending
			f.call = it.call
			batch = append(batch, f)
		}
	}
	clear(p.ready[:taken])
	p.ready = p.ready[taken:]
	if len(p.ready) == 0 {
		p.ready = nil // let the array go
	}
	return batch
}

// sendBatch sends a batch and routes each result: ack, retry, dead letter.
func (p *Pipeline) sendBatch(work context.Context, batch []*item) {
	items := batch[:0:0]
	msgs := make([]*mapping.Message, 0, len(batch))
	now := time.Now()
	for _, it := range batch {
		if it.preErr != nil {
			p.mu.Lock()
			mine := it.state == stSending // not taken by a drain deadline meanwhile
			it.state = stSettling
			p.mu.Unlock()
			if mine {
				p.goSettle(func() { p.deadLetter(it, it.preReason, it.preErr) })
			}
			continue
		}
		if it.attempts == 0 {
			it.firstAttempt = now
		}
		it.attempts++
		items = append(items, it)
		msgs = append(msgs, withTTLLeft(it.msg, now))
	}
	if len(items) == 0 {
		return
	}

	lanes := p.callLanes(items)
	ctx := work
	var written bool
	if len(lanes) > 0 {
		ctx = driver.WithWritten(work, func() {
			if !written {
				written = true
				p.wrote(lanes)
			}
		})
	}
	errs := p.sink.Send(ctx, msgs)
	done := time.Now()
	p.met.sinkLatency.Observe(done.Sub(now).Seconds())
	if len(errs) != len(msgs) {
		err := fmt.Errorf("%s sink returned %d results for %d messages", p.cfg.SinkKind, len(errs), len(msgs))
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
	}

	type dl struct {
		it     *item
		reason string
		err    error
	}
	// Once a retry is scheduled another sender may take the item, send,
	// ack and recycle it (driver.Recycler): what the log needs is read
	// while p.mu is held.
	type retry struct {
		group, id string
		err       error
		attempt   int
		delay     time.Duration
	}
	var acks, nacks []*item
	var dls []dl
	var retries []retry
	// broken holds the lanes where a message failed and will be sent (or
	// nacked) again: their later messages in this call go again after it,
	// whatever their own result, so the lane keeps its order.
	var broken map[string][]*item
	p.mu.Lock()
	// Results are routed in the order of the lanes' calls: a later call's
	// success must not be acked before an earlier call's failure is known.
	for _, lc := range lanes {
		for lc.g.routed != lc.call {
			ch := p.waitChan()
			p.mu.Unlock()
			<-ch
			p.mu.Lock()
		}
		if lc.call < lc.g.requeueBelow {
			// Taken before a failure of the lane was routed: it goes again
			// after the failed message, whatever its own result.
			breakLane(&broken, lc.first)
		}
	}
	for i, it := range items {
		if it.state != stSending {
			continue // settled by the drain deadline while it was sent
		}
		err := errs[i]
		if p.pipelined && it.lane != "" {
			if again, ok := broken[it.lane]; ok {
				if err == nil {
					it.attempts-- // not its failure: the attempt does not count against it
				}
				if p.draining && !p.overlap {
					it.state = stSettling
					nacks = append(nacks, it)
				} else {
					broken[it.lane] = append(again, it)
				}
				continue
			}
		}
		switch {
		case err == nil:
			it.state = stSettling
			// Order at the sink needs only the confirmation: the group's
			// next message may go while this one is acked.
			p.release(it)
			acks = append(acks, it)
		case driver.IsPermanent(err):
			it.state = stSettling
			dls = append(dls, dl{it, SinkReason(err), err})
		case p.exhausted(it, done):
			it.state = stSettling
			dls = append(dls, dl{it, ReasonRetriesExhausted,
				fmt.Errorf("gave up after %d attempts in %s: %w", it.attempts, done.Sub(it.firstAttempt).Round(time.Millisecond), err)})
		case p.draining && p.overlap && it.lane != "":
			// Nacked with the rest of its lane once no call of the lane is
			// out (afterRouting): the later calls' messages come before
			// those queued behind them.
			p.breakCalls(it.g)
			breakLane(&broken, it)
			broken[it.lane] = append(broken[it.lane], it)
		case p.draining:
			it.state = stSettling
			nacks = append(nacks, it)
			nacks = append(nacks, p.takeFollowers(it)...)
			breakLane(&broken, it)
		default:
			retries = append(retries, retry{it.group, it.msg.ID, err, it.attempts, p.scheduleRetry(it)})
			if p.overlap && it.lane != "" {
				p.breakCalls(it.g)
			}
			breakLane(&broken, it)
		}
	}
	for _, again := range broken {
		p.requeue(again)
	}
	for _, lc := range lanes {
		lc.g.routed++
		nacks = append(nacks, p.afterRouting(lc.g)...)
	}
	if len(lanes) > 0 {
		p.broadcast() // a later call may wait for these to be routed
	}
	if len(acks) > 0 {
		p.confirmedAt, p.sendErr = done, nil // the sink answers (Ready's stall check)
	}
	if len(retries) > 0 {
		p.sendErr = retries[len(retries)-1].err
	}
	p.mu.Unlock()

	for _, r := range retries {
		p.met.retried.Inc()
		if driver.IsThrottled(r.err) {
			p.met.throttled.Inc()
		}
		log := p.log.Debug
		if r.attempt == 1 {
			log = p.log.Warn // once per message: later attempts would flood the log in an outage
		}
		log("sink failed; retrying", "error", r.err, "group", r.group, "id", r.id, "attempt", r.attempt, "retry_in", r.delay)
	}

	if len(acks) > 0 {
		p.met.sent.Add(float64(len(acks)))
		// Before queueAcks: once queued, an acker may recycle the
		// messages (driver.Recycler).
		for _, it := range acks {
			if t := it.orig.Source.EnqueuedTime; !t.IsZero() {
				// At least 0: a broker clock ahead of this host's must
				// not lower the histogram's sum (rate() needs it to rise).
				p.met.e2eLatency.Observe(max(done.Sub(t).Seconds(), 0))
			}
		}
		p.queueAcks(acks)
	}
	for _, d := range dls {
		p.goSettle(func() { p.deadLetter(d.it, d.reason, d.err) })
	}
	p.goNackInOrder(nacks)
}

// breakLane marks it's lane broken (sendBatch) when pipelining.
func breakLane(broken *map[string][]*item, it *item) {
	if it.lane == "" {
		return
	}
	if *broken == nil {
		*broken = map[string][]*item{}
	}
	if _, ok := (*broken)[it.lane]; !ok {
		(*broken)[it.lane] = nil
	}
}

func (p *Pipeline) exhausted(it *item, now time.Time) bool {
	r := p.opt.Retry
	return (r.MaxAttempts > 0 && it.attempts >= r.MaxAttempts) ||
		(r.MaxElapsed > 0 && now.Sub(it.firstAttempt) >= r.MaxElapsed)
}

// scheduleRetry parks it until its backoff passes; its group stays blocked
// and the heartbeat keeps its lock. p.mu is held.
func (p *Pipeline) scheduleRetry(it *item) time.Duration {
	delay := p.opt.Retry.Delay(it.attempts)
	it.state = stWaiting
	it.timer = time.AfterFunc(delay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if it.state != stWaiting {
			return
		}
		it.timer = nil
		if g := it.g; p.overlap && it.lane != "" && g.routed < g.requeueBelow {
			g.due = it // the lane's calls sent before the failure come back first
			return
		}
		p.pushReady(it)
	})
	return delay
}

// laneCall is one lane's share of a call (Pipeline.overlap).
type laneCall struct {
	g     *group
	call  uint64
	first *item
}

// callLanes lists the lanes of a call's items and the call's number in
// each, when calls overlap. A lane's items are consecutive in a batch
// (takeReady). Items settled meanwhile are listed too: their lane's count
// must still advance.
func (p *Pipeline) callLanes(items []*item) []laneCall {
	if !p.overlap {
		return nil
	}
	var lanes []laneCall
	for _, it := range items {
		if it.lane == "" || (len(lanes) > 0 && lanes[len(lanes)-1].g == it.g) {
			continue
		}
		lanes = append(lanes, laneCall{g: it.g, call: it.call, first: it})
	}
	return lanes
}

// wrote is the sink's signal that a call is on the wire: each lane of
// which it is the latest call may start its next.
func (p *Pipeline) wrote(lanes []laneCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lc := range lanes {
		if lc.g.calls == lc.call+1 {
			lc.g.written = true
			p.openLane(lc.g, false)
		}
	}
}

// breakCalls stops a lane after a failure of one of its calls: the calls
// taken so far go again after the failed message, and a head let out for
// the next call goes back to the queue. p.mu is held.
func (p *Pipeline) breakCalls(g *group) {
	g.broken = true
	g.requeueBelow = max(g.requeueBelow, g.calls)
	if h := g.head; h != nil && h.state == stReady {
		g.head = nil
		if i := slices.Index(p.ready, h); i >= 0 {
			p.ready = slices.Delete(p.ready, i, i+1)
		}
		p.requeue([]*item{h})
	}
}

// afterRouting goes on with a lane once one of its calls is routed: a
// retry that waited for the earlier calls goes, the next call may start,
// or, in a drain, a broken lane with no call out is nacked whole, in
// order. p.mu is held.
func (p *Pipeline) afterRouting(g *group) []*item {
	if g.due != nil && g.routed >= g.requeueBelow {
		it := g.due
		g.due = nil
		if it.state == stWaiting {
			p.pushReady(it)
		}
	}
	if p.draining && g.broken && g.routed == g.calls && len(g.queue) > 0 {
		rest := g.queue
		g.queue = nil
		for _, it := range rest {
			it.state = stSettling
		}
		if g.active == 0 {
			delete(p.groups, rest[0].lane)
		}
		return rest
	}
	p.openLane(g, true)
	return nil
}

// goSettle runs a nack or a dead-letter in its own goroutine so that it
// does not hold up sending; their number is bounded by MaxInFlight. Acks,
// the common case, go to the ackers instead (ack.go).
func (p *Pipeline) goSettle(f func()) {
	p.settling.Go(f)
}

// goNackInOrder nacks items (for immediate redelivery) in source order per
// lane (goInOrder).
func (p *Pipeline) goNackInOrder(items []*item) {
	p.goInOrder(items, func(it *item) { p.nack(it, 0) })
}

// goInOrder settles items with op, with one goroutine per lane that
// settles the lane's items one after the other in source order: brokers
// redeliver in the order of the nacks (a JetStream Nak joins the
// consumer's redelivery queue), so concurrent nacks of one group would let
// its messages come back out of order.
func (p *Pipeline) goInOrder(items []*item, op func(*item)) {
	chains := map[string][]*item{}
	for _, it := range items {
		if it.lane == "" {
			p.goSettle(func() { op(it) })
			continue
		}
		chains[it.lane] = append(chains[it.lane], it)
	}
	for _, chain := range chains {
		slices.SortFunc(chain, func(a, b *item) int { return cmp.Compare(a.seq, b.seq) })
		p.goSettle(func() {
			for _, it := range chain {
				op(it)
			}
		})
	}
}

// release0 hands back a message that was never sent: Release where the
// broker does not count it as a delivery (driver.Releaser), Nack at once
// elsewhere.
func (p *Pipeline) release0(it *item) {
	r, ok := it.d.(driver.Releaser)
	if !ok {
		p.nack(it, 0)
		return
	}
	defer p.done(it)
	settled, err := p.settle(it, r.Release)
	if !settled {
		return
	}
	if err != nil {
		p.met.errNack.Inc()
		p.log.Warn("release failed; the broker redelivers the message when its lock lapses", "error", err, "group", it.group, "id", it.msg.ID)
		return
	}
	p.met.nacked.Inc()
}

// settle calls op on the delivery unless it was settled already. It holds
// the item's delivery lock, so no Extend runs meanwhile.
func (p *Pipeline) settle(it *item, op func(ctx context.Context) error) (bool, error) {
	it.dmu.Lock()
	defer it.dmu.Unlock()
	if it.settled {
		return false, nil
	}
	it.settled = true
	ctx, cancel := context.WithTimeout(p.base, opTimeout)
	defer cancel()
	return true, op(ctx)
}

// done removes a settled item.
func (p *Pipeline) done(it *item) {
	p.mu.Lock()
	p.finish(it)
	p.mu.Unlock()
}

func (p *Pipeline) ack(it *item) {
	defer p.done(it)
	ok, err := p.settle(it, it.d.Ack)
	if !ok {
		return
	}
	if err != nil {
		// The sink has the message; the source redelivers it (a duplicate,
		// never a loss).
		p.met.errAck.Inc()
		p.log.Warn("ack failed; the message may be delivered again", "error", err, "group", it.group, "id", it.msg.ID)
		return
	}
	p.met.acked.Inc()
}

func (p *Pipeline) nack(it *item, delay time.Duration) {
	defer p.done(it)
	ok, err := p.settle(it, func(ctx context.Context) error { return it.d.Nack(ctx, delay) })
	if !ok {
		return
	}
	if err != nil {
		p.met.errNack.Inc()
		p.log.Warn("nack failed; the broker redelivers the message when its lock lapses", "error", err, "group", it.group, "id", it.msg.ID)
		return
	}
	p.met.nacked.Inc()
}

// nackGroup nacks it and the messages queued behind it in its group (so
// they come back in order), after a backoff that grows with the delivery
// count: the message keeps failing, so its redeliveries are spaced.
func (p *Pipeline) nackGroup(it *item) {
	delay := p.opt.Retry.Delay(max(1, it.orig.Source.DeliveryCount))
	p.mu.Lock()
	followers := p.takeFollowers(it)
	p.mu.Unlock()
	p.nack(it, delay)
	for _, f := range followers {
		p.nack(f, delay)
	}
}

// withTTLLeft is m as the sink gets it: with the time to live it has left
// (mapping.Message.TTLLeft), in a copy so that a retry counts from the
// source's times again and a dead-letter sink gets the message as it came.
// Most messages have no TTL: they go as they are.
func withTTLLeft(m *mapping.Message, now time.Time) *mapping.Message {
	left, ok := m.TTLLeft(now)
	if !ok || left == m.TTL {
		return m
	}
	cp := *m
	cp.TTL = left
	return &cp
}

// deadLetter moves a message that cannot be delivered to the dead-letter
// destination and then settles it; if that fails, it is nacked for
// redelivery, never dropped.
func (p *Pipeline) deadLetter(it *item, reason string, cause error) {
	desc := truncate(cause.Error(), maxDescription)
	log := p.log.With("group", it.group, "id", it.orig.ID, "reason", reason, "error", desc)
	switch {
	case p.cfg.DeadLetter.Sink != nil:
		m := it.orig.Clone()
		m.SetAttr(AttrDeadLetterReason, mapping.String(reason))
		m.SetAttr(AttrDeadLetterDescription, mapping.String(desc))
		ctx, cancel := context.WithTimeout(p.base, opTimeout)
		errs := p.dlq.Send(ctx, []*mapping.Message{m})
		cancel()
		err := errors.New("dead-letter sink returned no result")
		if len(errs) == 1 {
			err = errs[0]
		}
		if err != nil {
			p.met.errDeadLetter.Inc()
			if driver.IsPermanent(err) {
				// Retrying will not help (a message larger than the
				// dead-letter destination takes): it stays at the source,
				// whose redrive limit is what ends the redeliveries.
				p.nackLog.Do(func(leftOut int64) {
					log.Error("the dead-letter sink refuses this message too; it stays at the source and is redelivered until the source's redrive limit (JetStream max_deliver, SQS maxReceiveCount, Service Bus MaxDeliveryCount): set one, or a dead-letter destination that takes it",
						"dlq_reason", SinkReason(err), "dlq_error", err, logpace.LeftOutKey, leftOut)
				})
				p.undeliverable(it, SinkReason(err), err)
			} else {
				log.Error("dead-letter sink failed; nacking the message for redelivery", "dlq_error", err)
			}
			p.nackGroup(it)
			return
		}
		p.met.deadLettered(reason)
		p.logDeadLettered(log, p.cfg.DeadLetter.SinkKind)
		p.mu.Lock()
		p.release(it)
		p.mu.Unlock()
		p.ack(it)

	case p.cfg.DeadLetter.Native:
		dlr, ok := it.d.(driver.DeadLetterer)
		if !ok {
			p.met.errDeadLetter.Inc()
			log.Error("the source has no native dead-letter queue; nacking the message for redelivery")
			p.undeliverable(it, reason, cause)
			p.nackGroup(it)
			return
		}
		settled, err := p.settle(it, func(ctx context.Context) error { return dlr.DeadLetter(ctx, reason, desc) })
		if settled && err != nil {
			// A failed settlement is not followed by another (the delivery
			// contract): the broker redelivers when the lock lapses.
			p.met.errDeadLetter.Inc()
			log.Error("native dead-letter failed; the broker redelivers the message when its lock lapses", "dlq_error", err)
			p.mu.Lock()
			followers := p.takeFollowers(it)
			p.mu.Unlock()
			p.done(it)
			for _, f := range followers {
				p.nack(f, 0)
			}
			return
		}
		if settled {
			p.met.deadLettered(reason)
			p.logDeadLettered(log, "native")
		}
		p.done(it)

	default:
		p.nackLog.Do(func(leftOut int64) {
			log.Error("message cannot be delivered and no dead_letter is configured; nacking it for redelivery (the broker's redrive policy applies)",
				logpace.LeftOutKey, leftOut)
		})
		p.undeliverable(it, reason, cause)
		p.nackGroup(it)
	}
}

// undeliverable tells Config.OnUndeliverable about a message that stays at
// the source because nothing will take it. One whose retries ran out on
// transient failures is not such a message: handed back, it may go
// through on its next delivery.
func (p *Pipeline) undeliverable(it *item, reason string, err error) {
	if f := p.cfg.OnUndeliverable; f != nil && reason != ReasonRetriesExhausted {
		f(it.orig, reason, err)
	}
}

// logDeadLettered logs a dead letter; a dry run's destination only records
// it, so the log must not claim one, and names where the pipeline would
// put it (DeadLetter.DryRunTo), not the recording stand-in.
func (p *Pipeline) logDeadLettered(log *slog.Logger, to string) {
	if dl := p.cfg.DeadLetter; dl.DryRun {
		if dl.DryRunTo == "" {
			log.Debug("message would not be dead-lettered: the pipeline has no dead_letter destination, so it would stay at the source (dry run: nothing is written or settled)")
			return
		}
		log.Debug("message would be dead-lettered (dry run: nothing is written or settled)", "to", dl.DryRunTo)
		return
	}
	p.dlLog.Do(func(leftOut int64) {
		log.Warn("message dead-lettered", "to", to, logpace.LeftOutKey, leftOut)
	})
}
