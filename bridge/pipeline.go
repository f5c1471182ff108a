// Package bridge is qbridge's pipeline engine: it moves messages from a
// driver.Source to a driver.Sink, at least once, in order per group key.
//
// A delivery is acked only after the sink confirmed its message. Messages of
// one group key reach the sink in source order, at most Ordering.PerGroup at
// a time; other groups and ungrouped messages proceed concurrently, up to
// Ordering.MaxInFlight unsettled messages per pipeline, beyond which the
// engine stops receiving. A transient sink failure blocks only its group
// while it is retried with backoff; permanent failures and exhausted retries
// are dead-lettered. Every unsettled delivery's lock is extended
// periodically, so a slow sink does not cause redeliveries.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
)

// opTimeout bounds each settlement, extension and close call, so one hung
// broker call cannot hold up a drain forever.
const opTimeout = 15 * time.Second

// Pipeline is one running source → sink bridge. Create it with New and run
// it with Run.
type Pipeline struct {
	name string
	cfg  Config
	opt  Options
	log  *slog.Logger
	met  *pipelineMetrics
	// stopBy bounds, once a graceful stop's drain has ended (or its
	// deadline passed), what is left of the stop: the wait for the last
	// settlements and the closes of source and sinks share one opTimeout
	// (each had its own: shutdown_timeout + 60 s at worst, above the
	// grace period the manifests give). Zero: each close has opTimeout.
	// Used by Run's goroutine only.
	stopBy time.Time
	// nackLog paces the error logged for each message handed back with no
	// dead_letter, or refused by the dead-letter sink too: one that nothing
	// takes and whose broker has no redelivery delay (AMQP) came back
	// thousands of times a second, a line each time. dlLog paces the
	// warning of each dead letter: a migration of a backlog that the sink
	// refuses whole printed one per message.
	nackLog *logpace.Pacer
	dlLog   *logpace.Pacer

	started atomic.Bool

	// base carries Run's context values without its cancellation, for
	// settlement calls that must outlive the stop request.
	base context.Context

	mu       sync.Mutex
	changed  chan struct{} // nil, or closed on the next state change: see waitChan
	groups   map[string]*group
	ready    []*item
	live     liveSet
	draining bool // retries stop: transient failures are nacked
	stopping bool // Run's context ended: the pipeline finishes and stops
	running  bool // adapters open, receiving
	source   driver.Source
	sink     driver.Sink
	dlq      driver.Sink

	// pipelined: the sink keeps the order of a call and PerGroup is 1, so a
	// lane's consecutive messages share calls (set when the sink opens).
	pipelined bool
	// overlap: pipelined, and the sink says when a call is on the wire
	// (driver.WriteSignaller), so a lane's calls overlap (queue.go).
	overlap     bool
	maxInFlight int // Ordering.MaxInFlight, or the automatic bound (MaxInFlightAuto)
	batchSize   int // Batch.Size, or the automatic size

	lastErr error // the last failure to open or receive, for /readyz; nil once open
	// confirmedAt is when the sink last confirmed a message, or the source
	// opened: Ready reports a stall from it (Options.StallAfter), with
	// sendErr, the sink's last failure since.
	confirmedAt time.Time
	sendErr     error
	lostBefore  uint64 // what closed sources lost (driver.LossCounter)

	// acks holds the items the sink confirmed, for the ackers (guarded by
	// mu); ackWake wakes one acker.
	acks    []*item
	ackWake chan struct{}

	settling sync.WaitGroup // goroutines of the rare settlements: nacks, dead letters
	admitted uint64         // items placed so far: the next item's seq
}

// New checks cfg and returns a pipeline ready to Run.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Name == "" {
		return nil, errors.New("bridge: pipeline needs a name")
	}
	if cfg.Source == nil || cfg.Sink == nil {
		return nil, fmt.Errorf("bridge: pipeline %q needs a source and a sink", cfg.Name)
	}
	if cfg.DeadLetter.Native && cfg.DeadLetter.Sink != nil {
		return nil, fmt.Errorf("bridge: pipeline %q: dead letter is either native or a sink, not both", cfg.Name)
	}
	opt := cfg.Options.withDefaults()
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("bridge: pipeline %q: %w", cfg.Name, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	met := cfg.Metrics
	if met == nil {
		met = NewMetrics(nil)
	}
	return &Pipeline{
		name:    cfg.Name,
		cfg:     cfg,
		opt:     opt,
		log:     log.With("pipeline", cfg.Name),
		met:     met.forPipeline(cfg.Name, cfg.SourceKind, cfg.SinkKind, cfg.DeadLetter.SinkKind),
		ackWake: make(chan struct{}, 1),
		groups:  map[string]*group{},
		nackLog: logpace.New(1, time.Second),
		dlLog:   logpace.PerMessage(),
	}, nil
}

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.name }

// Run opens the adapters and bridges until ctx ends, then shuts down
// gracefully: it stops receiving, lets in-flight messages finish for up to
// ShutdownTimeout, nacks what is left, and closes the adapters. Failures to
// open adapters and receive errors are retried with backoff, never returned;
// Run returns nil after a clean stop, or the adapters' close errors. Run may
// be called once.
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return fmt.Errorf("bridge: pipeline %q: Run called twice", p.name)
	}
	p.base = context.WithoutCancel(ctx)
	p.met.m.track(p)
	defer p.met.m.untrack(p)

	if !p.openSinks(ctx) {
		return p.closeSinks()
	}
	// Senders and the heartbeat outlive ctx: they finish the in-flight work
	// during the drain. work is what sink calls run under; cancelling it
	// aborts them when the drain deadline passes.
	workers, stopWorkers := context.WithCancel(p.base)
	work, cancelWork := context.WithCancel(p.base)
	defer cancelWork()
	var wg sync.WaitGroup
	for range p.opt.Batch.Concurrency {
		wg.Go(func() { p.sendLoop(workers, work) })
	}
	for range ackers {
		wg.Go(func() { p.ackLoop(workers) })
	}
	wg.Go(func() { p.heartbeat(workers) })

	p.log.Info("pipeline started", "source", p.cfg.SourceKind, "sink", p.cfg.SinkKind)
	if p.cfg.DeadLetter.Sink == nil && !p.cfg.DeadLetter.Native {
		// Without a destination nothing is dropped, but a message that can
		// never be delivered keeps coming back (at once on brokers without a
		// redelivery delay, such as RabbitMQ 3.x).
		p.log.Warn("no dead_letter is configured: messages that cannot be delivered are handed back to the source for redelivery; configure dead_letter { sink ... } or { native = true }")
	}
	var closeErr error
	for fails := 0; ; {
		src, ok := p.openSource(ctx)
		if !ok {
			break
		}
		p.setRunning(true)
		opened := time.Now()
		err := p.receive(ctx, src)
		p.setRunning(false)
		if err == nil { // ctx ended: graceful stop
			p.mu.Lock()
			p.stopping = true
			p.mu.Unlock()
			p.drain(cancelWork, true)
			if p.stopBy.IsZero() {
				p.stopBy = time.Now().Add(opTimeout)
			}
			closeErr = p.closeSource(src)
			break
		}
		p.met.errReceive.Inc()
		p.met.restarts.Inc()
		// Back off harder only while the source keeps failing quickly.
		if time.Since(opened) > p.opt.Restart.Max {
			fails = 0
		}
		fails++
		delay := p.opt.Restart.Delay(fails)
		p.setLastErr(fmt.Errorf("source failed: %w", err))
		p.log.Error("source failed; restarting", "error", err, "retry_in", delay)
		// Settle what this source delivered before closing it: some brokers
		// settle only on the link the message came from.
		p.drain(nil, false)
		_ = p.closeSource(src)
		if !sleep(ctx, delay) {
			break
		}
	}
	// Everything is settled: a send still running (one that outlived a
	// drain deadline) has nothing left to confirm.
	stopWorkers()
	cancelWork()
	wg.Wait()
	p.settling.Wait()
	err := errors.Join(closeErr, p.closeSinks())
	p.log.Info("pipeline stopped")
	return err
}

func (p *Pipeline) setRunning(v bool) {
	p.mu.Lock()
	p.running = v
	if v {
		p.confirmedAt = time.Now()
	}
	p.mu.Unlock()
}

func (p *Pipeline) setLastErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
}

// retryOpen calls open until it succeeds or ctx ends. what is the
// adapter's role ("source", "sink", "dead-letter sink"), kind its kind.
func (p *Pipeline) retryOpen(ctx context.Context, what, kind string, open func(context.Context) error) bool {
	for n := 1; ; n++ {
		err := open(ctx)
		if err == nil {
			p.setLastErr(nil)
			p.log.Info("connected", "role", what, "adapter", kind)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		p.setLastErr(err)
		p.met.errOpen.Inc()
		delay := p.opt.Restart.Delay(n)
		p.log.Error("cannot open "+what+"; retrying", "adapter", kind, "error", err, "attempt", n, "retry_in", delay)
		if !sleep(ctx, delay) {
			return false
		}
	}
}

func (p *Pipeline) openSinks(ctx context.Context) bool {
	ok := p.retryOpen(ctx, "sink", p.cfg.SinkKind, func(ctx context.Context) error {
		s, err := p.cfg.Sink(ctx, p.onDrop)
		if err != nil {
			return fmt.Errorf("open %s sink: %w", p.cfg.SinkKind, err)
		}
		os, ok := s.(driver.OrderedSender)
		p.mu.Lock()
		p.sink = s
		p.pipelined = ok && os.KeepsOrder() && p.opt.Ordering.PerGroup == 1
		ws, ok := s.(driver.WriteSignaller)
		p.overlap = p.pipelined && ok && ws.SignalsWritten()
		p.setMaxInFlight()
		p.batchSize = p.opt.Batch.Size
		if p.batchSize == 0 {
			p.batchSize = DefaultBatchSize
			if p.pipelined {
				p.batchSize = min(PipelinedBatchSize, p.maxInFlight)
			}
		}
		p.mu.Unlock()
		return nil
	})
	if !ok || p.cfg.DeadLetter.Sink == nil {
		return ok
	}
	return p.retryOpen(ctx, "dead-letter sink", p.cfg.DeadLetter.SinkKind, func(ctx context.Context) error {
		s, err := p.cfg.DeadLetter.Sink(ctx, p.onDeadLetterDrop)
		if err != nil {
			return fmt.Errorf("open %s dead-letter sink: %w", p.cfg.DeadLetter.SinkKind, err)
		}
		p.mu.Lock()
		p.dlq = s
		p.mu.Unlock()
		return nil
	})
}

func (p *Pipeline) openSource(ctx context.Context) (driver.Source, bool) {
	var src driver.Source
	ok := p.retryOpen(ctx, "source", p.cfg.SourceKind, func(ctx context.Context) error {
		s, err := p.cfg.Source(ctx)
		if err != nil {
			return fmt.Errorf("open %s source: %w", p.cfg.SourceKind, err)
		}
		src = s
		return nil
	})
	if ok {
		p.mu.Lock()
		p.source = src
		p.setMaxInFlight()
		p.mu.Unlock()
	}
	return src, ok
}

// setMaxInFlight sets the bound on messages in flight: MaxInFlight, raised
// to OverlapMaxInFlight where a lane's calls overlap and MaxInFlightAuto is
// set, but not above what the source itself holds back at most
// (driver.UnsettledBound: a JetStream consumer past max_ack_pending leaves
// a pull open on the server, docs/adapter-nats.md). p.mu is held.
func (p *Pipeline) setMaxInFlight() {
	p.maxInFlight = p.opt.Ordering.MaxInFlight
	if !p.overlap || !p.opt.Ordering.MaxInFlightAuto {
		return
	}
	auto := OverlapMaxInFlight
	if b, ok := p.source.(driver.UnsettledBound); ok && b.MaxUnsettled() > 0 {
		auto = min(auto, b.MaxUnsettled())
	}
	p.maxInFlight = max(p.maxInFlight, auto)
}

func (p *Pipeline) closeSource(src driver.Source) error {
	p.mu.Lock()
	p.source = nil
	p.mu.Unlock()
	defer func() {
		// Read after the close: the count is final then.
		if lc, ok := src.(driver.LossCounter); ok {
			p.mu.Lock()
			p.lostBefore += lc.Lost()
			p.mu.Unlock()
		}
	}()
	ctx, cancel := p.closeCtx()
	defer cancel()
	if err := src.Close(ctx); err != nil {
		p.met.errClose.Inc()
		p.log.Warn("closing source", "error", err)
		return fmt.Errorf("pipeline %q: close source: %w", p.name, err)
	}
	return nil
}

// closeCtx bounds one close: by what is left of a graceful stop
// (stopBy), else by opTimeout.
func (p *Pipeline) closeCtx() (context.Context, context.CancelFunc) {
	if p.stopBy.IsZero() {
		return context.WithTimeout(p.base, opTimeout)
	}
	return context.WithDeadline(p.base, p.stopBy)
}

func (p *Pipeline) closeSinks() error {
	p.mu.Lock()
	sinks := []driver.Sink{p.sink, p.dlq}
	p.sink, p.dlq = nil, nil
	p.mu.Unlock()
	var errs []error
	for i, s := range sinks {
		if s == nil {
			continue
		}
		ctx, cancel := p.closeCtx()
		err := s.Close(ctx)
		cancel()
		if err != nil {
			what := [...]string{"sink", "dead-letter sink"}[i]
			p.met.errClose.Inc()
			p.log.Warn("closing "+what, "error", err)
			errs = append(errs, fmt.Errorf("pipeline %q: close %s: %w", p.name, what, err))
		}
	}
	return errors.Join(errs...)
}

// onDrop is handed to sinks for the Drop mapping policy; what the Encode
// policy reports through it (mapping.EncodedReport) is counted apart.
func (p *Pipeline) onDrop(field, reason string) {
	p.countDrop(p.met.dropped, p.met.encoded, roleSink, field, reason)
}

// onDeadLetterDrop is onDrop for the dead-letter sink's encoder.
func (p *Pipeline) onDeadLetterDrop(field, reason string) {
	p.countDrop(p.met.dlDropped, p.met.dlEncoded, roleDeadLetter, field, reason)
}

func (p *Pipeline) countDrop(dropped, encoded prometheus.Counter, role, field, reason string) {
	if how, ok := mapping.EncodedReport(reason); ok {
		if encoded != nil {
			encoded.Inc()
		}
		p.log.Debug("mapping encoded an item", "role", role, "field", field, "how", how)
		return
	}
	if dropped != nil {
		dropped.Inc()
	}
	p.log.Warn("mapping dropped an item", "role", role, "field", field, "reason", reason)
}

// receive admits deliveries until ctx ends (nil) or the source fails.
func (p *Pipeline) receive(ctx context.Context, src driver.Source) error {
	for {
		n, ok := p.waitCapacity(ctx)
		if !ok {
			return nil
		}
		ds, err := src.Receive(ctx, n)
		p.admit(src, ds)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("receive from %s: %w", p.cfg.SourceKind, err)
		}
		if len(ds) == 0 && !sleep(ctx, 10*time.Millisecond) {
			// A source that returns nothing must not spin the loop.
			return nil
		}
	}
}

// waitCapacity blocks while MaxInFlight messages are unsettled and returns
// how many may be received.
func (p *Pipeline) waitCapacity(ctx context.Context) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		free := p.maxInFlight - p.live.len()
		if p.maxInFlight > p.opt.Ordering.MaxInFlight {
			// The automatic room beyond MaxInFlight (OverlapMaxInFlight)
			// is for small messages: with large ones it would hold four
			// times what MaxInFlight alone allowed. Beyond MaxInFlight, a
			// receive takes what the byte budget leaves room for at the
			// held messages' mean weight.
			n := p.live.len()
			weight := itemOverhead
			if n > 0 {
				weight = max(p.live.bytes/n, itemOverhead)
			}
			room := max(overlapMaxBytes-p.live.bytes, 0) / weight
			free = min(free, max(p.opt.Ordering.MaxInFlight-n, 0)+room)
		}
		if free > 0 {
			return min(free, p.batchSize), true
		}
		ch := p.waitChan()
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			return 0, false
		}
		p.mu.Lock()
	}
}

// admit applies the mapping rules and queues the deliveries in order.
func (p *Pipeline) admit(src driver.Source, ds []driver.Delivery) {
	if len(ds) == 0 {
		return
	}
	p.met.received.Add(float64(len(ds)))
	now := time.Now()
	items := make([]item, len(ds)) // one allocation for the batch
	for i, d := range ds {
		it := &items[i] // fresh and zero: set the fields, not the whole struct
		it.d, it.src, it.orig = d, src, d.Message()
		if it.orig != nil {
			it.weight = len(it.orig.Body) + itemOverhead
		}
		it.recvAt, it.extendedAt = now, now
		p.prepare(it)
	}
	p.mu.Lock()
	for i := range items {
		p.place(&items[i])
	}
	p.mu.Unlock()
}

// prepare checks what the source delivered and applies the mapping rules.
func (p *Pipeline) prepare(it *item) {
	if it.orig == nil {
		it.orig = &mapping.Message{}
		it.preErr, it.preReason = errors.New("source delivered no message"), ReasonCorrupt
	}
	if de, ok := it.d.(driver.DecodeErrorer); ok && it.preErr == nil {
		if err := de.DecodeError(); err != nil {
			it.preErr, it.preReason = fmt.Errorf("cannot decode the source's message: %w", err), ReasonCorrupt
		}
	}
	it.msg = it.orig
	if p.cfg.Transform != nil && it.preErr == nil {
		m := it.orig.Clone()
		if err := p.cfg.Transform(m); err != nil {
			it.preErr, it.preReason = fmt.Errorf("mapping rules: %w", err), ReasonMapping
		} else {
			it.msg = m
		}
	}
	it.group = it.msg.GroupKey
}

// drain settles everything in flight: messages waiting for a retry are
// nacked at once, the rest may finish for up to ShutdownTimeout, and what is
// left then is nacked. On a shutdown (handBack) the messages never sent are
// handed back at once (takeUnstarted) instead of being sent: another
// replica takes them while this one finishes its sends. cancelWork, if not
// nil, aborts running sink calls at the deadline.
func (p *Pipeline) drain(cancelWork context.CancelFunc, handBack bool) {
	p.mu.Lock()
	p.draining = true
	var nacks []*item
	for _, it := range p.live.items {
		if it.state == stWaiting {
			if it.timer != nil {
				it.timer.Stop()
				it.timer = nil
			}
			if g := it.g; p.overlap && it.lane != "" && g.routed < g.calls {
				// Earlier calls of its lane are still out: the lane is
				// nacked whole, in order, once they are routed
				// (afterRouting).
				if g.due == it {
					g.due = nil
				}
				p.requeue([]*item{it})
				continue
			}
			it.state = stSettling
			nacks = append(nacks, it)
			nacks = append(nacks, p.takeFollowers(it)...)
		}
	}
	var unstarted []*item
	if handBack {
		unstarted = p.takeUnstarted()
	}
	p.mu.Unlock()
	p.goNackInOrder(nacks)
	if len(unstarted) > 0 {
		p.log.Info("stopping: handing back the messages not sent yet", "messages", len(unstarted))
		p.goInOrder(unstarted, p.release0)
	}

	if !p.waitIdle(p.opt.ShutdownTimeout) {
		if cancelWork != nil {
			cancelWork()
		}
		p.mu.Lock()
		var rest []*item
		for _, it := range p.live.items {
			if it.state != stSettling && it.state != stDone {
				if it.timer != nil {
					it.timer.Stop()
					it.timer = nil
				}
				it.state = stSettling
				rest = append(rest, it)
			}
		}
		p.ready = nil
		for _, g := range p.groups {
			g.queue = nil
		}
		p.mu.Unlock()
		p.log.Warn("drain deadline passed; nacking what is left", "messages", len(rest))
		p.goNackInOrder(rest)
		if handBack { // a graceful stop: the closes share this wait's time
			p.stopBy = time.Now().Add(opTimeout)
		}
		if !p.waitIdle(opTimeout) {
			p.log.Error("settlements still pending after the drain; the broker redelivers them when their locks lapse")
		}
	}

	p.mu.Lock()
	p.draining = false
	p.mu.Unlock()
}

// takeUnstarted removes, for a drain, the messages received and never sent
// whose lane has nothing at the sink: a ready lane head that was never
// tried, with the messages queued behind it. Lanes with a message at the
// sink keep theirs: they are sent after it, so the lane's order holds.
// p.mu is held.
func (p *Pipeline) takeUnstarted() []*item {
	var out []*item
	keep := p.ready[:0]
	for _, it := range p.ready {
		if it.attempts > 0 || (it.lane != "" && it.g.active > 1) {
			keep = append(keep, it)
			continue
		}
		it.state = stSettling
		out = append(out, it)
		out = append(out, p.takeFollowers(it)...)
	}
	clear(p.ready[len(keep):])
	p.ready = keep
	return out
}

// waitIdle waits until nothing is in flight, at most d.
func (p *Pipeline) waitIdle(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.live.len() > 0 {
		ch := p.waitChan()
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			p.mu.Lock()
			return p.live.len() == 0
		}
		p.mu.Lock()
	}
	return true
}

// Warnings lists what the operator should fix while messages still flow:
// messages a source lost (driver.LossCounter) and the adapters' own
// warnings (driver.Warner). /readyz shows them; they do not make the
// pipeline unready.
func (p *Pipeline) Warnings() []string {
	p.mu.Lock()
	lost := p.lostLocked()
	adapters := []any{p.source, p.sink, p.dlq}
	p.mu.Unlock()
	var out []string
	if lost > 0 {
		out = append(out, fmt.Sprintf("the source dropped %d messages before the pipeline took them (a slow consumer: raise the source's buffer_size/buffer_bytes, or use JetStream for at-least-once)", lost))
	}
	for _, a := range adapters {
		if w, ok := a.(driver.Warner); ok && a != nil {
			out = append(out, w.Warnings()...)
		}
	}
	return out
}

// Ready reports whether the pipeline is running and its adapters say they
// are connected (driver.ReadyChecker). The error does not name the
// pipeline: its reader does (Supervisor.Ready, /readyz), once.
func (p *Pipeline) Ready(ctx context.Context) error {
	p.mu.Lock()
	running := p.running
	adapters := []struct {
		role string
		a    any
	}{{"source", p.source}, {"sink", p.sink}, {"dead-letter sink", p.dlq}}
	lastErr := p.lastErr
	stall := p.stallLocked(time.Now())
	stopping, inFlight := p.stopping, p.live.len()
	p.mu.Unlock()
	if stopping {
		what := fmt.Sprintf("%d messages", inFlight)
		if inFlight == 1 {
			what = "1 message"
		}
		return fmt.Errorf("stopping (%s in flight to finish or hand back)", what)
	}
	if !running {
		if lastErr != nil {
			return fmt.Errorf("not running (opening adapters or restarting its source): last error: %w", lastErr)
		}
		return ErrOpening
	}
	for _, a := range adapters {
		if rc, ok := a.a.(driver.ReadyChecker); ok && a.a != nil {
			if err := rc.Ready(ctx); err != nil {
				return fmt.Errorf("%s not ready: %w", a.role, err)
			}
		}
	}
	return stall
}

// stallLocked reports a sink that confirmed nothing for StallAfter while
// messages wait for it, the oldest longer than that: a broker stalled with
// its connection open (a process stopped, packets dropped) looks connected
// to its client until its heartbeats time out, minutes later. p.mu is held.
func (p *Pipeline) stallLocked(now time.Time) error {
	after := p.opt.StallAfter
	if !p.running || p.live.len() == 0 || now.Sub(p.confirmedAt) < after {
		return nil
	}
	oldest := p.oldestLocked()
	if now.Sub(oldest) < after {
		return nil // a message that arrived after a quiet spell
	}
	why := "is its broker stalled or refusing?"
	if p.sendErr != nil {
		why = fmt.Sprintf("its last send failed: %v", p.sendErr)
	}
	return fmt.Errorf("%w: the sink has confirmed nothing for %s while %d messages wait (the oldest for %s): %s (stall_after %s)",
		ErrStalled, now.Sub(p.confirmedAt).Round(time.Second), p.live.len(), now.Sub(oldest).Round(time.Second), why, after)
}

// ErrStalled is wrapped by Ready's error for a pipeline whose sink confirms
// nothing (Options.StallAfter).
var ErrStalled = errors.New("stalled")

// ErrOpening is Ready's error while the adapters open, or the source
// restarts, and no attempt has failed yet: the first may still be under
// way.
var ErrOpening = errors.New("not running (opening adapters or restarting its source)")
