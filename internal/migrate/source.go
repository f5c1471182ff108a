package migrate

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// maxGroupNames bounds the group names a report lists (the count is exact).
const maxGroupNames = 1000

// tracker watches what a job's source delivers and how each delivery is
// settled, without changing the engine: the job wraps the source it opens.
type tracker struct {
	dryRun bool
	// lease, when set (a copy with -state), records in the state file that
	// positions up to its argument may be written (leaseUpTo); leasedTo
	// is the last one recorded. Touched by the source's Receive only.
	lease    func(upTo uint64)
	leasedTo uint64
	hold     bool  // dry run on a source that cannot browse: keep deliveries until the end
	sample   int64 // hold mode: take at most this many
	// releaseHeld hands the held deliveries back (hold mode); the tracked
	// source calls it before it closes the source they came from.
	releaseHeld func()
	// unsentLeftovers: a move stops with its source not drained (an
	// interrupt, -timeout), and keeps a ledger: what the source received
	// and did not hand out goes back as a dry run's sample does, recorded
	// (trackedSource.Close), so the next run does not take those receives
	// for an earlier write.
	unsentLeftovers atomic.Bool
	limiter         *rate.Limiter
	keep            func(*mapping.Message) bool // filters; nil keeps all
	// leaveScheduled: a dry run of a move that leaves scheduled messages
	// (-scheduled leave) passes over those the broker holds as scheduled,
	// as the move will (a browse reads them; a receive does not get them).
	leaveScheduled bool
	// scheduledCopied, in a copy with -state, holds the messages copied
	// while the broker held them as scheduled, by id, with their scheduled
	// time (stateFile's Scheduled): Service Bus enqueues each anew once
	// due, and a later copy writes it again (recopied). nil when not
	// tracked; set before the source opens. Guarded by mu.
	scheduledCopied map[string]time.Time
	recopied        int64

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced when something arrives
	lastRecv   time.Time
	taken      int64
	skipped    int64 // by the filters, or scheduled and left (scheduled counts those)
	scheduled  int64
	groups     map[string]struct{}
	groupNames []string
	browser    driver.Browser
	held       []driver.Delivery
	quiet      bool                // hold mode: the sample is being handed back, take no more
	quiescer   quiescer            // the open source, where it can stop taking messages
	spell      time.Duration       // the open source's QuietSpell (quietSpeller)
	pending    map[uint64]struct{} // positions delivered, not yet done
	maxDone    uint64
	passedUpTo uint64           // the highest position a filter left out (checkpointLocked)
	dlqNative  map[string]int64 // reason code → count, dead-lettered at the source
	rejects    map[string]int64 // dry run: reason code → count
	examples   map[string]Example
	notCopied  int64 // copy mode: deliveries handed back, so not copied
	refusal    error // the broker refused to browse when the source opened
	// Messages nothing takes, so they stay at the source: the engine
	// reports them (bridge.Config.OnUndeliverable) each time it hands one
	// back; a dry run finds them (wouldStick). Keyed by stuckKey, so a
	// redelivery is not counted again and is not news that keeps the job
	// from finding the rest of the source drained.
	stuck         map[string]struct{}
	stuckReasons  map[string]int64 // reason code → messages
	stuckExamples map[string]Example
	stuckInFlight int64 // redeliveries of stuck messages the engine holds
	// ackedAgain counts deliveries acknowledged that the source had
	// delivered before (an interrupted earlier run may have written them:
	// a deduplicating sink drops the copy), for the verification.
	ackedAgain int64
	// dedupWindow is the sink's fixed duplicate window (driver.Backlog.
	// DedupWindow; 0: none, or not known), set before the source opens;
	// ackedAgainInWindow counts, of ackedAgain, the messages the source
	// first delivered within it, margin included, of their write here: an
	// earlier run wrote such a message within the window too, if it did,
	// and the sink dropped this copy. Neither kind is there twice.
	dedupWindow        time.Duration
	ackedAgainInWindow int64
	// handedBack holds, by stuckKey, the messages this run handed back
	// unsent (a nack, a release), with whether the source had delivered
	// them before this run first took them: their redelivery is this
	// run's own, no sign of an earlier run's write. A move that handed
	// back the rest of a stuck message's group said "up to 2 of the
	// messages may be there twice" of messages written once. Kept until
	// the message is acknowledged: bounded by what is handed back and not
	// yet done.
	handedBack map[string]bool
	// ledger, when not nil, records a dry run's sample of a source whose
	// every receive counts, and tells a move which earlier deliveries were
	// dry runs' (sampleLedger). Set before the source opens; its maps are
	// guarded by mu.
	ledger *sampleLedger
	// Dry run: whether the dead-letter destination would take what the
	// sink refuses. noDeadLetter: the pipeline has none (the engine hands
	// such messages back for good); dlq opens the dead-letter sink's dry
	// sink, nil when there is none or it cannot encode without sending.
	noDeadLetter bool
	dlq          func(context.Context, func(field, reason string)) (driver.Sink, error)
	dlqSink      driver.Sink
	dlqErr       error
	// groupsByRules: the mapping rules set the group key, so groups are
	// recorded after them (job.transform), not from the source's message.
	groupsByRules bool
}

func newTracker() *tracker {
	return &tracker{
		changed:   make(chan struct{}),
		lastRecv:  time.Now(),
		groups:    map[string]struct{}{},
		pending:   map[uint64]struct{}{},
		dlqNative: map[string]int64{},
		rejects:   map[string]int64{},
		examples:  map[string]Example{},

		handedBack:    map[string]bool{},
		stuck:         map[string]struct{}{},
		stuckReasons:  map[string]int64{},
		stuckExamples: map[string]Example{},
	}
}

// wrap returns src with every delivery tracked.
func (t *tracker) wrap(src driver.Source) driver.Source {
	t.mu.Lock()
	t.browser, _ = src.(driver.Browser)
	t.quiescer, _ = src.(quiescer)
	if qs, ok := src.(quietSpeller); ok {
		t.spell = qs.QuietSpell()
	}
	t.mu.Unlock()
	ts := &trackedSource{PassSource: driver.PassSource{Source: src}, t: t}
	if ba, ok := src.(driver.BatchAcker); ok {
		return &batchTrackedSource{trackedSource: ts, ba: ba}
	}
	return ts
}

// quietSpeller is a source that may hand out nothing for a while with
// messages still waiting: a Service Bus session source keeps an emptied
// session for its idle_timeout before it takes the next, so a quiet spell
// shorter than QuietSpell is no sign of an empty source.
type quietSpeller interface{ QuietSpell() time.Duration }

// quiescer is a source that can stop taking messages before it closes, so
// that what a held dry run hands back is not received again meanwhile (a
// Service Bus session source: each such receive counts a delivery). The
// channel it returns is closed once the source will hand out nothing more.
type quiescer interface{ Quiesce() <-chan struct{} }

// snapshot is the tracker's state for the job's drain decision and report.
type snapshot struct {
	lastRecv   time.Time
	spell      time.Duration // quietSpeller's: no quiet spell shorter says drained
	taken      int64
	skipped    int64 // passed over: by the filters, or scheduled (leaveScheduled)
	scheduled  int64 // of those, scheduled and not due (a dry run's)
	groups     int
	sampleDone bool
	browsed    bool // the browser read to the end
	canBrowse  bool
	checkpoint uint64
	highest    uint64 // the highest position done (a copy's, for the state file)
	notCopied  int64  // copy mode: nacked without a position, or still pending
	stuck      int64  // messages nothing takes (distinct)
	// stuckInFlight: redeliveries of those the engine holds now.
	stuckInFlight      int64
	ackedAgain         int64
	ackedAgainInWindow int64
}

func (t *tracker) snapshot() snapshot {
	t.mu.Lock()
	s := snapshot{
		lastRecv: t.lastRecv, spell: t.spell, taken: t.taken, skipped: t.skipped, scheduled: t.scheduled, groups: len(t.groups),
		sampleDone: t.sample > 0 && t.taken >= t.sample,
		canBrowse:  t.browser != nil,
		checkpoint: t.checkpointLocked(),
		highest:    t.maxDone,
		notCopied:  t.notCopied,

		stuck: int64(len(t.stuck)), stuckInFlight: t.stuckInFlight,
		ackedAgain: t.ackedAgain, ackedAgainInWindow: t.ackedAgainInWindow,
	}
	if t.browser != nil && !t.dryRun && !t.hold {
		s.notCopied += int64(len(t.pending))
	}
	browser := t.browser
	t.mu.Unlock()
	// Asked outside the lock: an adapter's Drained may take its own locks,
	// which its Receive holds while this tracker records through t.mu.
	if browser != nil {
		s.browsed = browser.Drained()
	}
	return s
}

// checkpointLocked is the highest position up to which every delivered
// message is done: a resumed copy starts after it.
func (t *tracker) checkpointLocked() uint64 {
	done := max(t.maxDone, t.passedUpTo)
	if len(t.pending) == 0 {
		return done
	}
	low := uint64(0)
	first := true
	for p := range t.pending {
		if first || p < low {
			low, first = p, false
		}
	}
	return min(low-1, done)
}

// received counts n deliveries; fresh is false when all of them are
// redeliveries of stuck messages, which are no sign of more to come.
func (t *tracker) received(n int, fresh bool) {
	t.mu.Lock()
	if fresh {
		t.lastRecv = time.Now()
	}
	t.taken += int64(n)
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// leaseUpTo makes sure the state file says that positions up to pos may be
// written before the engine gets them: a copy killed mid-run writes again,
// on its resume, what it wrote past its checkpoint, and the verification
// allows for those only as far as the state file says (written_up_to).
// The checkpoint itself is saved once a second, behind the writes; so the
// lease runs ahead of them, by a tenth of what was taken (at least 1,000
// positions), and costs a save only when it runs out.
func (t *tracker) leaseUpTo(pos uint64) {
	if t.lease == nil || pos <= t.leasedTo {
		return
	}
	t.mu.Lock()
	ahead := uint64(max(1000, t.taken/10))
	t.mu.Unlock()
	t.leasedTo = pos + ahead
	t.lease(t.leasedTo)
}

// seen records a delivery the engine gets, and says whether it is a
// redelivery of a stuck message.
func (t *tracker) seen(m *mapping.Message, pos uint64, hasPos bool) (stuck bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.groupsByRules {
		t.groupLocked(m.GroupKey)
	}
	if hasPos {
		t.pending[pos] = struct{}{}
	}
	if len(t.stuck) > 0 {
		if _, stuck = t.stuck[stuckKey(m)]; stuck {
			t.stuckInFlight++
		}
	}
	return stuck
}

// stuckKey names a message the same on every delivery of it.
func stuckKey(m *mapping.Message) string {
	if k := m.SourceKey(); k != "" {
		return k
	}
	if m.ID != "" {
		return "id\x00" + m.ID
	}
	h := sha256.Sum256(m.Body)
	return "body\x00" + string(h[:])
}

// undeliverable records a message nothing takes (bridge.Config.OnUndeliverable).
func (t *tracker) undeliverable(m *mapping.Message, reason string, err error) {
	key := stuckKey(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.stuck[key]; ok {
		return
	}
	t.stuck[key] = struct{}{}
	t.stuckReasons[reason]++
	if _, ok := t.stuckExamples[reason]; !ok {
		t.stuckExamples[reason] = exampleOf(m, err.Error())
	}
}

// stuckReport returns the stuck messages by reason, with an example each;
// nil when there are none.
func (t *tracker) stuckReport() (map[string]int64, map[string]Example) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.stuck) == 0 {
		return nil, nil
	}
	return maps.Clone(t.stuckReasons), maps.Clone(t.stuckExamples)
}

// wouldStick tells whether a message a dry run would dead-letter would
// stay at the source instead: there is no dead-letter destination, or the
// dead-letter sink would refuse it too (what the engine then does: hand it
// back, for good). It returns the refusal's reason code and error.
func (t *tracker) wouldStick(ctx context.Context, m *mapping.Message, reason, description string) (string, error) {
	if t.noDeadLetter {
		return reason, errors.New(description)
	}
	if t.dlq == nil {
		return "", nil
	}
	t.mu.Lock()
	if t.dlqSink == nil && t.dlqErr == nil {
		t.dlqSink, t.dlqErr = t.dlq(ctx, nil)
	}
	s, err := t.dlqSink, t.dlqErr
	t.mu.Unlock()
	if err != nil {
		return "", nil // cannot tell; the log has the error once (closeDeadLetterSink)
	}
	// The message as the engine would send it there.
	dm := m.Clone()
	dm.SetAttr(bridge.AttrDeadLetterReason, mapping.String(reason))
	dm.SetAttr(bridge.AttrDeadLetterDescription, mapping.String(description))
	errs := s.Send(ctx, []*mapping.Message{dm})
	if len(errs) != 1 || errs[0] == nil || !driver.IsPermanent(errs[0]) {
		return "", nil
	}
	return bridge.SinkReason(errs[0]), errs[0]
}

// closeDeadLetterSink closes the dry run's dead-letter sink, if it opened.
func (t *tracker) closeDeadLetterSink(ctx context.Context, log *slog.Logger) {
	t.mu.Lock()
	s, err := t.dlqSink, t.dlqErr
	t.dlqSink = nil
	t.mu.Unlock()
	if err != nil {
		log.Warn("the dry run could not check whether the dead-letter sink takes what the sink refuses", "error", err)
	}
	if s != nil {
		if err := s.Close(ctx); err != nil {
			log.Debug("closing the dry run's dead-letter sink", "error", err)
		}
	}
}

// group records a group key the mapping rules gave a message.
func (t *tracker) group(g string) {
	t.mu.Lock()
	t.groupLocked(g)
	t.mu.Unlock()
}

func (t *tracker) groupLocked(g string) {
	if g == "" {
		return
	}
	if _, ok := t.groups[g]; !ok {
		t.groups[g] = struct{}{}
		if len(t.groupNames) < maxGroupNames {
			t.groupNames = append(t.groupNames, g)
		}
	}
}

func (t *tracker) done(pos uint64, hasPos bool) {
	if !hasPos {
		return
	}
	t.mu.Lock()
	delete(t.pending, pos)
	t.maxDone = max(t.maxDone, pos)
	t.mu.Unlock()
}

// holdIt keeps a dry run's delivery unsettled until the end of the run.
func (t *tracker) holdIt(d driver.Delivery) {
	t.mu.Lock()
	t.held = append(t.held, d)
	t.mu.Unlock()
	if h, ok := d.(driver.Holdable); ok {
		h.Held() // the source receives the rest of the sample meanwhile
	}
}

// sampled records in the ledger receives that wrote nothing: a held dry
// run's, all of them, settled or not (what the engine has not settled
// when it stops is handed back on close, its count raised all the same),
// and a move's hand-backs of messages it never sent.
func (t *tracker) sampled(ds []driver.Delivery) {
	if t.ledger == nil {
		return
	}
	keys := make([]string, len(ds))
	for i, d := range ds {
		if m := d.Message(); m != nil {
			keys[i] = stuckKey(m) // outside the lock: it may hash the body
		}
	}
	t.mu.Lock()
	for i, d := range ds {
		if keys[i] != "" {
			t.ledger.sampled(keys[i], d.Message().Source.DeliveryCount)
		}
	}
	t.mu.Unlock()
}

// deliveredBefore says that the source had delivered m before this run
// took it, other than to dry runs (sampleLedger). t.mu is held.
func (t *tracker) deliveredBefore(m *mapping.Message, key string) bool {
	return m.Source.DeliveryCount > 1 && !t.ledger.explains(key, m.Source.DeliveryCount)
}

// refuse records a broker's refusal to browse.
func (t *tracker) refuse(err error) {
	t.mu.Lock()
	if t.refusal == nil {
		t.refusal = err
	}
	t.mu.Unlock()
}

func (t *tracker) refused() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusal
}

// quiesce stops a held dry run from taking more messages, so that what it
// holds can be handed back before the source closes.
func (t *tracker) quiesce() {
	t.mu.Lock()
	t.quiet = true
	q := t.quiescer
	t.mu.Unlock()
	if q != nil {
		q.Quiesce()
	}
}

func (t *tracker) quiesced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.quiet
}

func (t *tracker) takeHeld() []driver.Delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held
	t.held = nil
	return h
}

func (t *tracker) heldNow() []driver.Delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]driver.Delivery(nil), t.held...)
}

func (t *tracker) example(key string, m *mapping.Message, description string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.examples[key]; !ok {
		t.examples[key] = exampleOf(m, description)
	}
}

func exampleOf(m *mapping.Message, description string) Example {
	ex := Example{Description: description}
	if m == nil {
		return ex
	}
	ex.MessageID, ex.Group, ex.Sequence = m.ID, m.GroupKey, m.Source.SequenceNumber
	if ex.MessageID == "" {
		ex.MessageID = m.Source.MessageID
	}
	for i, a := range m.Attributes {
		if i == 10 {
			ex.Attributes = append(ex.Attributes, "…")
			break
		}
		ex.Attributes = append(ex.Attributes, a.Name+" ("+a.Value.DataType()+")")
	}
	const preview = 120
	b := m.Body
	if len(b) > preview {
		b = b[:preview]
	}
	ex.Body = strconv.QuoteToGraphic(string(b))
	return ex
}

type trackedSource struct {
	// PassSource answers what the engine asks a source (Unordered,
	// LossCounter, Warner, ReadyChecker) as the wrapped source would, so a
	// migration runs the engine as qbridge run does: hidden, an SQS standard
	// queue's messages were sent in source order instead of at once.
	// BatchAcker is batchTrackedSource's.
	driver.PassSource
	t *tracker
}

func (s *trackedSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	t := s.t
	if t.hold && t.quiesced() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if t.hold && t.sample > 0 {
		t.mu.Lock()
		left := t.sample - t.taken
		t.mu.Unlock()
		if left <= 0 {
			// The sample is complete: take nothing more until the job ends.
			<-ctx.Done()
			return nil, ctx.Err()
		}
		max = int(min(int64(max), left))
	}
	if t.limiter != nil {
		max = min(max, t.limiter.Burst())
	}
	ds, err := s.Source.Receive(ctx, max)
	if driver.IsPermanent(err) {
		// Credentials refused, a claim missing: the engine would reopen
		// the source until -connect-timeout; the job says so now.
		t.refuse(err)
	}
	if len(ds) == 0 {
		return nil, err
	}
	if t.hold {
		t.sampled(ds)
	}
	if t.hold && t.quiesced() {
		// Arrived while the sample was handed back: hold these too, for
		// the release after the engine stops.
		for _, d := range ds {
			t.holdIt(d)
		}
		return nil, err
	}
	out := make([]driver.Delivery, 0, len(ds))
	var skipped, scheduled int64
	var highest, passedOver uint64 // passedOver: the highest position a filter left out
	fresh := false
	for _, d := range ds {
		m := d.Message()
		pos, hasPos := position(m)
		if pos > highest {
			highest = pos
		}
		td := &trackedDelivery{PassDelivery: driver.PassDelivery{Delivery: d}, t: t, pos: pos, hasPos: hasPos}
		left := m != nil && t.leaveScheduled && m.Source.State == mapping.StateScheduled
		if left || m != nil && t.keep != nil && !decodeFailed(d) && !t.keep(m) {
			skipped++
			if left {
				scheduled++
			} else if hasPos && pos > passedOver {
				passedOver = pos
			}
			fresh = true
			// Browsing sources settle nothing; a held one is released at
			// the end. Filters are refused in move mode (see Options).
			if t.hold {
				t.holdIt(d)
			}
			continue
		}
		if m != nil {
			td.stuck = t.seen(m, pos, hasPos)
		}
		fresh = fresh || !td.stuck
		out = append(out, td)
	}
	t.received(len(ds), fresh)
	t.leaseUpTo(highest)
	if skipped > 0 {
		t.mu.Lock()
		t.skipped += skipped
		t.scheduled += scheduled
		// What a filter left out is done with: the checkpoint may pass it
		// once everything before it is done (it stayed at the last copied
		// message, and every resume read the rest again; an audit). A
		// scheduled message left for later is not passed. Apart from
		// maxDone, which says how far writes went (written_up_to).
		if passedOver > t.passedUpTo {
			t.passedUpTo = passedOver
		}
		t.mu.Unlock()
	}
	if t.limiter != nil {
		// Pace what was taken.
		if werr := t.limiter.WaitN(ctx, len(ds)); werr != nil && err == nil && ctx.Err() != nil {
			// Stopping: the engine takes these deliveries, then stops.
			err = ctx.Err()
		}
	}
	return out, err
}

func decodeFailed(d driver.Delivery) bool {
	de, ok := d.(driver.DecodeErrorer)
	return ok && de.DecodeError() != nil
}

// position reads a browsing source's position from the message.
func position(m *mapping.Message) (uint64, bool) {
	if m == nil || m.Source.SequenceNumber == "" {
		return 0, false
	}
	p, err := strconv.ParseUint(m.Source.SequenceNumber, 10, 64)
	return p, err == nil
}

// Close hands a held sample back first: a closed source cannot take it
// (SQS answers "closed"), and what the engine settled while stopping, or a
// receive that returned as it stopped, is held until here.
func (s *trackedSource) Close(ctx context.Context) error {
	if (s.t.hold || s.t.unsentLeftovers.Load()) && s.t.releaseHeld != nil {
		if q, ok := s.Source.(quiescer); ok {
			s.takeLeftovers(q.Quiesce())
		}
		s.t.releaseHeld()
	}
	return s.Source.Close(ctx)
}

// leftoverWait bounds the wait for a quiesced source to hand out what it
// still has (it says when it is done; this is for one that never does).
const leftoverWait = 10 * time.Second

// takeLeftovers holds what a quiesced source had received and not handed
// out (a Service Bus session's worker goes on to the next message while
// the sample is held; SQS pollers receive ahead), until drained is closed:
// those were delivered too, and their counts rose, so the ledger records
// them and they are handed back with the sample, not left for the
// source's close to return unrecorded.
func (s *trackedSource) takeLeftovers(drained <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), leftoverWait)
	defer cancel()
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	go func() {
		select {
		case <-drained:
			dcancel()
		case <-dctx.Done():
		}
	}()
	take := func(ctx context.Context) bool {
		ds, _ := s.Source.Receive(ctx, 100)
		s.t.sampled(ds)
		for _, d := range ds {
			s.t.holdIt(d)
		}
		return len(ds) > 0
	}
	for take(dctx) {
	}
	// Drained, out of time, or the source failed. Once drained, the
	// source still has what it took in but did not hand out yet (SQS keeps
	// a batch it received): a Receive whose context has ended may not
	// return that, so it gets a moment of its own.
	select {
	case <-drained:
		for {
			fctx, fcancel := context.WithTimeout(context.Background(), leftoverFlush)
			more := take(fctx)
			fcancel()
			if !more {
				return
			}
		}
	default:
	}
}

// leftoverFlush bounds a Receive of what a drained source still holds,
// which it returns at once.
const leftoverFlush = 100 * time.Millisecond

// batchTrackedSource is a trackedSource whose source settles batches
// (driver.BatchAcker: JetStream pipelines its acks, SQS deletes ten at a
// time). Only such a source is wrapped as one: the engine acks other
// sources' deliveries one by one, in parallel.
type batchTrackedSource struct {
	*trackedSource
	ba driver.BatchAcker
}

// AckBatch hands the batch to the source and does each acknowledged
// delivery's bookkeeping, as trackedDelivery.Ack does.
func (s *batchTrackedSource) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	errs := make([]error, len(ds))
	inner := make([]driver.Delivery, 0, len(ds))
	at := make([]int, 0, len(ds))
	for i, d := range ds {
		td, ok := d.(*trackedDelivery)
		if !ok {
			errs[i] = d.Ack(ctx)
			continue
		}
		td.settling()
		if s.t.hold {
			s.t.holdIt(td.Delivery)
			continue
		}
		inner = append(inner, td.Delivery)
		at = append(at, i)
	}
	if len(inner) == 0 {
		return errs
	}
	for k, err := range s.ba.AckBatch(ctx, inner) {
		i := at[k]
		if errs[i] = err; err == nil {
			ds[i].(*trackedDelivery).acked()
		}
	}
	return errs
}

// trackedDelivery records how the engine settles a delivery. In hold mode
// it settles nothing: the job hands every held delivery back at the end.
type trackedDelivery struct {
	// PassDelivery passes DecodeError on; Release is trackedDelivery's own
	// (a held sample is never released to the broker before the end).
	driver.PassDelivery
	t      *tracker
	pos    uint64
	hasPos bool
	// stuck: a redelivery of a message nothing takes, counted in
	// tracker.stuckInFlight until the engine settles it (once: the engine
	// settles a delivery once).
	stuck bool
}

// settling takes a stuck redelivery out of tracker.stuckInFlight.
func (d *trackedDelivery) settling() {
	if !d.stuck {
		return
	}
	d.stuck = false
	d.t.mu.Lock()
	d.t.stuckInFlight--
	d.t.mu.Unlock()
}

func (d *trackedDelivery) Ack(ctx context.Context) error {
	d.settling()
	if d.t.hold {
		d.t.holdIt(d.Delivery)
		return nil
	}
	err := d.Delivery.Ack(ctx)
	if err == nil {
		d.acked()
	}
	return err
}

// acked records a delivery the source acknowledged (in a copy: written).
func (d *trackedDelivery) acked() {
	if m := d.Message(); m != nil && (m.Source.DeliveryCount > 1 || d.t.scheduledCopied != nil) {
		var key string
		if m.Source.DeliveryCount > 1 {
			key = stuckKey(m) // outside the lock: it may hash the body
		}
		// Before done: a checkpoint saved past this message has its id.
		d.t.mu.Lock()
		if m.Source.DeliveryCount > 1 {
			again, handed := d.t.handedBack[key]
			delete(d.t.handedBack, key)
			if again || !handed && d.t.deliveredBefore(m, key) {
				d.t.ackedAgain++
				if d.t.withinDedupWindow(m) {
					d.t.ackedAgainInWindow++
				}
			}
		}
		if d.t.scheduledCopied != nil {
			d.t.copiedScheduled(m)
		}
		d.t.mu.Unlock()
	}
	d.t.done(d.pos, d.hasPos)
}

// dedupMargin is what withinDedupWindow leaves of the sink's window for
// the clocks: the source's broker stamps the first delivery, this
// process reads the time.
const dedupMargin = 30 * time.Second

// withinDedupWindow says that m, acknowledged now (after its write), was
// first delivered within the sink's duplicate window of it (SQS
// ApproximateFirstReceiveTimestamp): whatever wrote it before did so
// within the window too, and the sink dropped this copy.
func (t *tracker) withinDedupWindow(m *mapping.Message) bool {
	first := m.Source.FirstReceiveTime
	return t.dedupWindow > dedupMargin && !first.IsZero() && time.Since(first) < t.dedupWindow-dedupMargin
}

// copiedScheduled notes a message a copy wrote: one the broker holds as
// scheduled, to expect again once due; or one an earlier copy wrote so,
// enqueued anew now that it is due (the same id and scheduled time). t.mu
// is held.
func (t *tracker) copiedScheduled(m *mapping.Message) {
	if m.ID == "" || m.ScheduledAt.IsZero() {
		return
	}
	switch at, ok := t.scheduledCopied[m.ID]; {
	case m.Source.State == mapping.StateScheduled:
		t.scheduledCopied[m.ID] = m.ScheduledAt
	case ok && at.Equal(m.ScheduledAt) && m.Source.State == mapping.StateActive:
		delete(t.scheduledCopied, m.ID)
		t.recopied++
	}
}

// scheduledCopies returns the messages copied while scheduled and not
// written again yet (sorted by id, for the state file), and how many this
// run wrote again once due.
func (t *tracker) scheduledCopies() ([]scheduledCopy, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]scheduledCopy, 0, len(t.scheduledCopied))
	for id, at := range t.scheduledCopied {
		out = append(out, scheduledCopy{ID: id, At: at})
	}
	slices.SortFunc(out, func(a, b scheduledCopy) int { return strings.Compare(a.ID, b.ID) })
	return out, t.recopied
}

func (d *trackedDelivery) Nack(ctx context.Context, delay time.Duration) error {
	d.settling()
	t := d.t
	if t.hold {
		t.holdIt(d.Delivery)
		return nil
	}
	t.handBack(d.Message())
	if !t.dryRun && t.browser != nil && !d.hasPos {
		// A browsing source reads on: this message was not copied. One
		// with a position needs no count: it stays pending (so the
		// checkpoint stays before it) until a read after a source restart
		// copies it, and what is still pending at the end was not copied.
		t.mu.Lock()
		t.notCopied++
		t.mu.Unlock()
	}
	return d.Delivery.Nack(ctx, delay)
}

// Release forwards the engine's shutdown hand-back of a message it never
// sent (driver.Releaser) where the source can release, and nacks at once
// where it cannot.
func (d *trackedDelivery) Release(ctx context.Context) error {
	d.settling()
	if d.t.hold {
		return d.Nack(ctx, 0)
	}
	// Never sent: its receive is no write, which the next run must not
	// take it for (sampleLedger), released or nacked (Service Bus
	// abandons it). A clean interrupt's hand-back made the resume say "up
	// to 40 of the messages may be there twice" of messages written once.
	d.t.sampled([]driver.Delivery{d.Delivery})
	if r, ok := d.Delivery.(driver.Releaser); ok {
		d.t.handBack(d.Message())
		return r.Release(ctx)
	}
	return d.Nack(ctx, 0)
}

// handBack notes a message this run hands back unsent, so that its
// redelivery is not taken for one of an earlier run's (handedBack). Only
// a source that counts deliveries tells them apart.
func (t *tracker) handBack(m *mapping.Message) {
	if m == nil || t.dryRun || t.browser != nil {
		return // nothing is acknowledged again: a dry run, or a copy
	}
	key := stuckKey(m)
	t.mu.Lock()
	if _, ok := t.handedBack[key]; !ok {
		t.handedBack[key] = t.deliveredBefore(m, key)
	}
	t.mu.Unlock()
}

func (d *trackedDelivery) DeadLetter(ctx context.Context, reason, description string) error {
	d.settling()
	t := d.t
	t.example(reason, d.Message(), description)
	if t.dryRun {
		// Record what would happen; the source is not touched.
		t.mu.Lock()
		t.rejects[reason]++
		t.mu.Unlock()
		if stuckReason, err := t.wouldStick(ctx, d.Message(), reason, description); err != nil {
			t.undeliverable(d.Message(), stuckReason, err)
		}
		if t.hold {
			t.holdIt(d.Delivery)
		}
		d.t.done(d.pos, d.hasPos)
		return nil
	}
	dl, ok := d.Delivery.(driver.DeadLetterer)
	if !ok {
		// A native dead-letter destination, and a delivery that has none
		// (a dead-letter sub-queue, the HTTPS transport): nothing takes
		// the message, which comes back when its lock lapses. Stuck, as
		// when the engine finds no DeadLetterer: else a dead-letter queue
		// phase ran until interrupted, or said "complete" with nothing
		// written (audit).
		t.undeliverable(d.Message(), reason, errNoNativeDeadLetter)
		return errNoNativeDeadLetter
	}
	err := dl.DeadLetter(ctx, reason, description)
	if err == nil {
		t.mu.Lock()
		t.dlqNative[reason]++
		t.mu.Unlock()
		d.t.done(d.pos, d.hasPos)
	}
	return err
}

var errNoNativeDeadLetter = errors.New("the source has no native dead-letter queue (a dead-letter sub-queue cannot dead-letter again): give the pipeline a dead_letter { sink ... }")
