package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// tick is how often a job looks at its pipeline. Counting brokers is paced
// apart (Options.CountEvery) and only happens once the pipeline is quiet.
const tick = 100 * time.Millisecond

// job is one pipeline (or its dead-letter queue) migrated to the end.
type job struct {
	opt   *Options
	pipe  *config.Pipeline
	queue string // "main" or "dead-letter"
	from  uint64 // copy mode: resume after this position
	// rewritable: positions past from that the last copy may have written
	// (copy mode): the verification's allowance for a resume.
	rewritable uint64
	log        *slog.Logger
	state      *stateFile
	// saveFailing: the last save of the checkpoint failed (saved).
	saveMu      sync.Mutex
	saveFailing bool
	// noBrowse: a dry run whose broker refused to browse when the source
	// opened; it samples instead.
	noBrowse bool
}

func (j *job) key() string {
	if j.queue == "main" {
		return j.pipe.Name
	}
	return j.pipe.Name + "/" + j.queue
}

// run migrates until the source is drained, ctx ends (an interrupt) or the
// timeout passes, and reports.
func (j *job) run(ctx context.Context, prog Progress) *JobReport {
	opt := j.opt
	rep := &JobReport{
		Pipeline: j.pipe.Name, Queue: j.queue,
		SourceKind: j.pipe.Spec.Source.Kind, SinkKind: j.pipe.Spec.Sink.Kind,
		ResumedFrom: j.from, CountErrors: map[string]string{}, rewritable: int64(j.rewritable),
		deadLettersIntoSink: j.pipe.DeadLettersIntoSink(),
		liveDeadLetters:     j.queue == "dead-letter" && j.pipe.Spec.DeadLetter.Sink == nil,
	}
	start := time.Now()
	rep.started = start
	var w *watch
	// timing sets the duration, the active time and the rate: before the
	// progress's last line, which shows the report's rate, and on return.
	timing := func() {
		rep.Seconds = time.Since(start).Seconds()
		// The rate is over the time spent moving messages: the idle spell
		// that confirms the drain is not part of it.
		done := rep.Done()
		if opt.Mode == ModeDryRun {
			done = rep.Read // nothing is written: what a dry run does is read and translate
		}
		active := rep.Seconds
		if w != nil && !w.lastDoneAt.IsZero() {
			if done > w.lastDone {
				// Finished after the watch last looked (while stopping).
				w.lastDoneAt = w.stoppedAt
			}
			active = w.lastDoneAt.Sub(start).Seconds()
		}
		if active > 0 {
			rep.Rate = float64(done) / active
			rep.ActiveSeconds = active
		}
	}
	defer func() {
		timing()
		if len(rep.CountErrors) == 0 {
			rep.CountErrors = nil
		}
	}()
	fail := func(err error) *JobReport {
		rep.Outcome, rep.Reason = OutcomeFailed, err.Error()
		return rep
	}

	if j.state != nil && opt.Mode == ModeCopy {
		if err := j.state.check(j.key(), j.pipe.SourceIdentity(), opt.filterText()); err != nil {
			rep.ResumedFrom = 0 // the checkpoint is another source's: nothing resumed
			return fail(err)
		}
	}

	tr := newTracker()
	tr.dryRun = opt.Mode == ModeDryRun
	tr.keep = opt.filter()
	tr.leaveScheduled = opt.leavesScheduled()
	if j.state != nil && opt.Mode == ModeCopy {
		tr.scheduledCopied = j.state.scheduled(j.key())
	}
	if opt.Rate > 0 {
		tr.limiter = rate.NewLimiter(rate.Limit(opt.Rate), max(1, int(opt.Rate/10)))
	}
	def, browsing, err := j.definition(tr)
	if err != nil {
		return fail(err)
	}
	if !browsing {
		// The job consumes (a move, or a dry run's held sample): one
		// reader of the queue at a time on this machine. Taken before
		// the first count, so that a second job stops here before it
		// touches the source at all (an embedded server's store is
		// opened by every phase of a job in turn).
		unlock, err := lockSource(j.pipe.SourceIdentity() + " " + j.queue)
		if err != nil {
			return fail(err)
		}
		defer unlock()
	}

	var srcErr, snkErr error
	rep.SourceBefore, rep.SinkBefore, srcErr, snkErr = j.countBoth(ctx, rep, false)
	if !browsing && rep.SourceBefore != nil && rep.SourceBefore.Entity != "" {
		// Locked by the broker's name too: one queue given as localhost
		// in one run and 127.0.0.1 in another had two locks, and both
		// runs consumed it (an audit).
		unlock, err := lockSource("entity " + rep.SourceBefore.Entity + " " + j.queue)
		if err != nil {
			return fail(err)
		}
		defer unlock()
	}
	if driver.IsPermanent(srcErr) {
		// A queue or stream that does not exist: the engine would retry
		// until -connect-timeout, as a daemon waiting for it should; a
		// migration of a mistyped name says so now.
		return fail(fmt.Errorf("the source cannot be read: %w", srcErr))
	}
	if driver.IsPermanent(snkErr) {
		// Likewise the sink: a dry run that said "complete" here was
		// followed by a move retrying for -connect-timeout.
		return fail(fmt.Errorf("the sink cannot be written: %w", snkErr))
	}
	if src, snk := rep.SourceBefore, rep.SinkBefore; src != nil && snk != nil && src.Entity != "" && src.Entity == snk.Entity {
		// The configuration check compares what the blocks say; spelled
		// differently (a queue_url and a queue_name, two endpoints of one
		// service), only the broker's answer shows the loop.
		return fail(fmt.Errorf("the sink writes into the source: both are %s; its messages would circulate without end and the source would never drain", src.Entity))
	}
	if j.state != nil && opt.Mode == ModeCopy && rep.SourceBefore != nil {
		if err := j.state.checkCreated(j.key(), rep.SourceBefore.Created); err != nil {
			rep.ResumedFrom = 0
			return fail(err)
		}
	}
	if src := rep.SourceBefore; src != nil && src.ReceivesCounted && !browsing && (tr.hold || opt.Mode == ModeMove) {
		// Read by the broker's name for the queue, as the entity lock
		// (one queue spelled two ways is one ledger), or for what keeps
		// its delivery counts (a JetStream durable consumer).
		tr.ledger = openLedger(src.ReceiveLedger())
		if opt.Mode == ModeMove {
			// A move that stops early hands back what its source
			// received ahead, as a dry run its sample (unsentLeftovers).
			tr.releaseHeld = func() { j.release(tr) }
		}
	}
	if snk := rep.SinkBefore; snk != nil && snk.Deduplicates {
		tr.dedupWindow = snk.DedupWindow
	}
	if into, ok := j.deadLettersIntoSink(ctx, rep.SinkBefore); ok {
		rep.deadLettersIntoSink = into
	}

	if src, snk := rep.SourceBefore, rep.SinkBefore; src != nil && snk != nil {
		// The sink takes every write and drops what goes past its limits:
		// a move then emptied the source, lost the difference and said
		// complete. A copy leaves the source as it is (and a resumed one
		// writes less than the source holds): it is warned only.
		switch over := src.Pending() - snk.KeepsAtMost; {
		case opt.Mode == ModeCopy && (snk.KeepsNone || snk.Limits != ""):
			j.log.Warn("the sink drops what it holds beyond its limits without refusing a write; check that they keep what this copy writes", "limits", snk.Limits)
		case snk.KeepsNone:
			return fail(driver.Permanent(fmt.Errorf("the sink keeps nothing written to it (%s): every message moved would be lost; add a consumer to it, or migrate into another stream", snk.Limits)))
		case snk.KeepsAtMost > 0 && over > 0:
			return fail(driver.Permanent(fmt.Errorf("the sink keeps at most %d messages (%s): of the %d at the source it would drop %d, without refusing a write; raise its limits, or migrate into another stream",
				snk.KeepsAtMost, snk.Limits, src.Pending(), over)))
		case snk.KeepsAtMost > 0 && snk.Pending()+src.Pending() > snk.KeepsAtMost:
			out := snk.Pending() + src.Pending() - snk.KeepsAtMost
			j.log.Warn("the sink keeps at most so many messages: what this migration writes pushes out the oldest it holds",
				"limits", snk.Limits, "pushed_out", out)
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the sink keeps at most %d messages (%s): what this migration writes pushes out the oldest %d it holds", snk.KeepsAtMost, snk.Limits, out))
		case snk.Limits != "":
			j.log.Warn("the sink drops what it holds beyond its limits without refusing a write; check that they keep what this migration writes", "limits", snk.Limits)
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the sink drops what it holds beyond its limits (%s) without refusing a write: check that they keep what this migration writes", snk.Limits))
		}
	}
	if src, snk := rep.SourceBefore, rep.SinkBefore; src != nil && snk != nil && src.Ordered && !snk.Ordered {
		// Said before anything moves: an SQS FIFO queue moved into a
		// standard one said "complete, verified" and nothing of the order
		// (and the deduplication) its consumers lose.
		msg := "the source keeps each group's messages in order (a FIFO queue, sessions, a stream) and the sink does not (an SQS standard queue, a Service Bus queue without sessions): its consumers may see a group's messages out of order"
		if !snk.Deduplicates {
			msg += ", and it drops no duplicates"
		}
		j.log.Warn(msg)
		rep.Warnings = append(rep.Warnings, msg)
	}
	if tr.hold {
		tr.sample = opt.Sample
		if src := rep.SourceBefore; src != nil && src.Ready > 0 && src.Ready < tr.sample {
			// The whole queue is the sample: done once it is read, not
			// after waiting -idle for more. Held for that wait, a sample
			// outlived its visibility timeout where it was not extended
			// in time, and each redelivery counted as a receive towards
			// the redrive policy (an audit: 95 messages moved to the
			// dead-letter queue by a dry run).
			tr.sample = src.Ready
		}
		tr.releaseHeld = func() { j.release(tr) }
	}
	if browsing && opt.Mode == ModeCopy && j.state != nil {
		tr.lease = func(upTo uint64) {
			j.saved(j.state.save(j.key(), 0, upTo))
		}
	}
	cfg := def.Config
	reg := prometheus.NewRegistry()
	cfg.Metrics = bridge.NewMetrics(reg)
	// The envelope's shed counts are shared by all registries: this job's
	// start at 0 (another job of the pipeline ran before it, the
	// dead-letter queue's after the main one's).
	cfg.Metrics.Forget(cfg.Name)
	// The engine adds the pipeline's name. A source that cannot browse
	// is the job's to handle (a dry run reads a sample instead; a copy
	// fails), not the ERROR "cannot open source; retrying" the engine
	// logs for an open that fails.
	cfg.Logger = slog.New(expectedRefusals{opt.Log.Handler()})
	dry := newDryRecorder()
	cfg.Sink = j.watchSink(cfg.Sink, dry, tr)
	if cfg.DeadLetter.Sink != nil {
		cfg.DeadLetter.Sink = watchDeadLetters(cfg.DeadLetter.Sink, tr)
	}
	if opt.Mode == ModeDryRun {
		// The dry run records dead letters at the delivery; whether they
		// would stay at the source instead is for it to find out.
		dl := j.pipe.Spec.DeadLetter
		tr.noDeadLetter = !dl.Native && dl.Sink == nil
		tr.dlq = j.pipe.DryRunDeadLetterSink(opt.Log)
		defer tr.closeDeadLetterSink(context.WithoutCancel(ctx), j.log)
	} else {
		// A message nothing takes comes back for ever (until the
		// source's redrive limit): the job must not wait for it.
		cfg.OnUndeliverable = tr.undeliverable
	}
	// Only a broker that cannot count is pinged: one that counts answers
	// the count that decides, or fails it.
	live := &liveness{every: opt.pingEvery, off: !errors.Is(srcErr, errors.ErrUnsupported)}
	openSource := cfg.Source
	cfg.Source = func(ctx context.Context) (driver.Source, error) {
		open := openSource
		if browsing && opt.Mode == ModeCopy {
			// The engine opens the source again after it failed: a copy
			// reads on from its checkpoint, not from where this run began
			// (what it nacked while stopping is read again; what it wrote
			// is not written twice).
			open = j.browseFrom(tr, openSource)
		}
		s, err := open(ctx)
		if err == nil {
			live.use(s)
		}
		if err != nil {
			if errors.Is(err, driver.ErrCannotBrowse) || driver.IsPermanent(err) {
				// Only the broker's answer tells (an AMQP copy link it
				// does not grant, a source that does not exist): no
				// retry will change it.
				tr.refuse(err)
			}
			return nil, err
		}
		return tr.wrap(s), nil
	}
	tr.groupsByRules = cfg.Transform != nil
	cfg.Transform = j.transform(cfg.Transform, tr)
	p, err := bridge.New(cfg)
	if err != nil {
		return fail(err)
	}

	total := int64(-1)
	if b := rep.SourceBefore; b != nil && (!browsing || j.from == 0) {
		total = b.Pending()
		if opt.Mode == ModeDryRun && tr.hold && opt.Sample > 0 {
			total = min(total, opt.Sample)
		}
	}
	prog.Start(j.key(), total)

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	var pinging sync.WaitGroup
	pinging.Go(func() { live.run(runCtx) })
	defer func() {
		stop() // ends the pings
		pinging.Wait()
	}()

	// lastRunning starts with the job: -connect-timeout bounds the time
	// until the pipeline runs, counts before it included.
	w = &watch{name: cfg.Name, j: j, p: p, tr: tr, live: live, reg: reg, browsing: browsing, start: start, total: total, lastRunning: start,
		exactCount: rep.SourceBefore != nil && rep.SourceBefore.Exact}
	outcome, by, reason := w.loop(ctx, done, prog)
	stoppedEarly := outcome == OutcomeInterrupted || outcome == OutcomeNotDrained
	if opt.Mode == ModeMove && tr.ledger != nil && stoppedEarly {
		tr.unsentLeftovers.Store(true)
	}
	rep.blockedBehind = w.blockedBehind
	rep.browseRefused = errors.Is(tr.refused(), driver.ErrCannotBrowse)
	if tr.hold {
		// Hand the sample back now, visible while the engine stops; what
		// it settles meanwhile goes back when it closes the source
		// (trackedSource.Close).
		tr.quiesce()
		j.release(tr)
	}
	if outcome == OutcomeInterrupted && !tr.hold {
		// The drain can take up to shutdown_timeout, with the sink
		// stalled: say what happens, and keep the figures moving (the
		// bar stood still, and nothing was said until the end). The
		// engine's count of what is in flight leaves out what it holds
		// unstarted (it said 0 while it handed back 20).
		msg := "interrupted: stopping; the messages in flight are finished or handed back to the source, for at most the pipeline's shutdown_timeout; interrupt again to quit at once (they then come back when their lock lapses)"
		if browsing {
			msg = "interrupted: stopping once the writes in flight are confirmed, for at most the pipeline's shutdown_timeout; interrupt again to quit at once"
		}
		j.log.Warn(msg, "shutdown_timeout", cfg.ShutdownTimeout) // the engine logs how many it hands back
	}
	stop()
	runErr := w.drain(done, prog)
	w.stoppedAt = time.Now()
	if tr.ledger != nil && (tr.hold || opt.Mode == ModeMove && stoppedEarly) {
		// Once the source is closed: what the engine settled while it
		// stopped was held, and handed back, too; a move's messages it
		// never sent were released, and what its source received ahead.
		tr.mu.Lock()
		err := tr.ledger.save(rep.SourceBefore.ReceiveLedger())
		tr.mu.Unlock()
		if err != nil && tr.hold {
			j.log.Warn("a move after this dry run will take the sample's deliveries for an earlier run's (\"may be there twice\")", "error", err)
		} else if err != nil {
			j.log.Warn("the next run will take the deliveries this one handed back unsent for an earlier run's (\"may be there twice\")", "error", err)
		}
	}
	snap := tr.snapshot()
	var checkpointErr error // the last save of a copy's checkpoint failed
	rep.Counts = readCounts(reg, cfg.Name)
	rep.Read = snap.taken
	rep.Redelivered = snap.ackedAgain
	rep.redeliveredInWindow = snap.ackedAgainInWindow
	rep.Skipped = snap.skipped - snap.scheduled
	rep.Groups = snap.groups
	tr.mu.Lock()
	rep.GroupNames = append([]string(nil), tr.groupNames...)
	slices.Sort(rep.GroupNames) // arrival order means nothing to a reader
	rep.GroupsTruncated = len(tr.groups) > len(tr.groupNames)
	examples := tr.examples
	rejects := tr.rejects
	tr.mu.Unlock()
	stuck, stuckExamples := tr.stuckReport()
	rep.DuplicatesDropped = dry.duplicates()
	rep.duplicatesOfThisRun = dry.duplicatesOfThisRun()
	if browsing && opt.Mode == ModeCopy {
		rep.Checkpoint = snap.checkpoint
		if j.state != nil {
			save := j.state.save
			if snap.notCopied == 0 {
				// Nothing is pending or handed back: what was written is
				// known to the position, and the lease that ran ahead of
				// it (leaseUpTo) must not let the next copy forgive
				// duplicates of messages this one never wrote.
				save = j.state.settle
			}
			copies, recopied := tr.scheduledCopies()
			rep.recopied = recopied
			j.state.setScheduled(j.key(), copies)
			checkpointErr = save(j.key(), snap.checkpoint, snap.highest)
			j.saved(checkpointErr)
		}
	}
	if opt.Mode == ModeDryRun {
		rep.DryRun = dry.report(rep.Written, rejects, examples, tr.hold && opt.Sample > 0)
		rep.sampleAsked = opt.Sample
		rep.DryRun.WouldStick = stuck
		for k, ex := range stuckExamples {
			rep.DryRun.Examples["stuck:"+k] = ex
		}
		// Nothing was written: what the dry sink accepted is in WouldWrite.
		rep.Written, rep.Acknowledged = 0, 0
		rep.DeadLettered, rep.DeadLetteredTotal = nil, 0
	} else {
		if len(examples) > 0 {
			rep.Examples = examples
		}
		rep.Stuck, rep.StuckExamples = stuck, stuckExamples
		for _, n := range stuck {
			rep.StuckTotal += n
		}
	}

	// After an interrupt, or against a broker that could not be counted
	// before and never connected, the counts are quick: a stop must not
	// wait on them.
	rep.SourceAfter, rep.SinkAfter, _, _ = j.countBoth(ctx, rep, !w.everRan)
	lateInterrupt := false
	if outcome == OutcomeInterrupted {
		if drainedBy := w.doneBeforeInterrupt(rep, snap); drainedBy != "" {
			// The interrupt came once everything had moved (in the quiet
			// spell that confirms the drain, or the count that ends it):
			// the job is what it would have been a moment later. It said
			// "interrupted", exit 130, and to run it again for nothing.
			outcome, by, reason, lateInterrupt = "", drainedBy, "", true
		}
	}
	if rep.Written > 0 || outcome == "" {
		// A pipeline that failed, or was stopped, before it wrote anything
		// has nothing to verify ("verified: the sink grew by 0, 0
		// written" read as a success).
		rep.Verification = j.verify(ctx, rep)
	}
	rep.DrainedBy = by

	rep.stuckWhy = j.stuckWhy("it")
	brokerDLQ := brokerDeadLettered(rep, tr)
	if v := rep.Verification; v != nil && opt.Mode == ModeMove {
		// The sink's growth says nothing of messages that never reached
		// the job: an old consumer still running at a cut-over took
		// them, or they expired.
		n, slack, ackedAnyway := leftTheSource(rep, nativeDeadLettered(tr), brokerDLQ, j.pipe.Spec.Source.Kind == "sqs")
		if ackedAnyway > 0 {
			v.addNote(fmt.Sprintf("%d acknowledgements failed and the source's count fell by them all the same: taken for acknowledgements the broker applied after all (one that times out while the broker is away may be), of messages the sink had already confirmed", ackedAnyway))
		}
		if slack > 0 {
			// Not taken for a loss at 1 % of a large queue, but said: at
			// scale that is thousands, and another consumer is one cause.
			note := fmt.Sprintf("the source's count fell by %d more than this run acknowledged (from %d to %d while %d were acknowledged): "+
				"within what SQS's approximate counts are off by (1 %%), so not taken for messages lost; if another consumer reads this queue, they may have left through it",
				slack, rep.SourceBefore.Pending(), rep.SourceAfter.Pending(), rep.Acknowledged)
			if v.Note != "" {
				note = v.Note + "; " + note
			}
			v.Note = note
		}
		if n > 0 {
			v.LeftTheSource, v.Verified = n, false
			causes := "another consumer, expiry without dead-lettering, a purge, or the queue's own redrive to its dead-letter queue, which -include-dead-letters moves"
			switch k := j.pipe.Spec.Source.Kind; {
			case k == "nats":
				// no dead-letter queue to move; the source itself
				// terminates a message on its consumer's last delivery
				causes = "a message this run terminated on its last delivery (the consumer's max_deliver: the log says which), another consumer, expiry, or a purge"
			case k != "sqs" && k != "servicebus":
				causes = "another consumer, expiry, or a purge" // no dead-letter queue to move
			}
			note := fmt.Sprintf("%s left the source other than through this migration (its count fell from %d to %d while %d were acknowledged: %s); they are not at the sink",
				messages(n), rep.SourceBefore.Pending(), rep.SourceAfter.Pending(), rep.Acknowledged, causes)
			if v.Note != "" {
				note += "; " + v.Note
			}
			v.Note = note
			j.log.Warn("migrate: " + note)
		}
	}
	switch {
	case outcome != "":
		// Interrupted, failed, timed out: decided by the loop.
		if outcome == OutcomeNotDrained && snap.stuck > 0 {
			reason += "; " + j.stuckReason(snap.stuck, stuck, stuckExamples) + behindStuck(opt.Mode, rep)
		}
	case snap.stuck > 0:
		// Everything else is done: these will not be.
		outcome, reason, by = OutcomeNotDrained, j.stuckReason(snap.stuck, stuck, stuckExamples)+behindStuck(opt.Mode, rep), ""
		rep.DrainedBy = ""
	case opt.Mode == ModeCopy && snap.notCopied > 0:
		outcome = OutcomeNotDrained
		reason = fmt.Sprintf("%d messages could not be copied (see the log); the checkpoint stays before the first of them, so running the same command again retries them", snap.notCopied)
	case opt.Mode == ModeMove && rep.SourceAfter != nil && rep.SourceAfter.Ready+rep.SourceAfter.InFlight > 0:
		outcome = OutcomeNotDrained
		reason = fmt.Sprintf("%d messages are at the source after the migration (they arrived after it was found drained, or another consumer held them); run the same command again", rep.SourceAfter.Ready+rep.SourceAfter.InFlight)
	case opt.Mode == ModeMove && !opt.IncludeDeadLetters && j.queue == "main" && brokerDLQ > 0:
		// Messages that left the queue for its dead-letter queue on the
		// broker's own account (MaxDeliveryCountExceeded, expiry): not at
		// the sink, though the queue is empty.
		outcome = OutcomeNotDrained
		rep.LeftBehind = map[string]int64{"source-dead-letter-queue": brokerDLQ}
		reason = fmt.Sprintf("%d messages were dead-lettered by the source's broker during the move (its dead-letter count grew from %d to %d): they are in the source's dead-letter queue, not at the sink; move them with -include-dead-letters",
			brokerDLQ, rep.SourceBefore.DeadLetter, rep.SourceAfter.DeadLetter)
	case opt.Mode == ModeMove && rep.SourceAfter != nil && rep.SourceAfter.Deferred > 0:
		// An application set them aside (Defer): a receiver never gets
		// them, so the queue looked empty. A copy, which peeks, has them.
		outcome = OutcomeNotDrained
		rep.LeftBehind = map[string]int64{"deferred": rep.SourceAfter.Deferred}
		reason = fmt.Sprintf("%d deferred messages stay at the source: an application set them aside (Defer), and only a receive by sequence number gets them, which a move does not do; have that application receive them, or copy them (-copy peeks them)", rep.SourceAfter.Deferred)
	case opt.Mode == ModeMove && rep.SourceAfter != nil && rep.SourceAfter.Scheduled > 0:
		outcome = OutcomeNotDrained
		rep.LeftBehind = map[string]int64{"scheduled": rep.SourceAfter.Scheduled}
		reason = fmt.Sprintf("%d scheduled messages are not due yet and stay at the source; run again once they are due, or use -scheduled wait", rep.SourceAfter.Scheduled)
	case opt.leavesScheduled() && (snap.scheduled > 0 || rep.SourceAfter != nil && rep.SourceAfter.Scheduled > 0):
		// What the move would do: it leaves them (its -scheduled leave),
		// so the dry run translates them no more than the move writes them.
		n := snap.scheduled
		if rep.SourceAfter != nil {
			n = max(n, rep.SourceAfter.Scheduled)
		}
		outcome = OutcomeNotDrained
		rep.LeftBehind = map[string]int64{"scheduled": n}
		reason = fmt.Sprintf("%d scheduled messages are not due yet: a move would leave them at the source; run it once they are due, or with -scheduled wait", n)
	case rep.DeadLetteredTotal > 0 || (rep.DryRun != nil && len(rep.DryRun.WouldReject) > 0):
		outcome = OutcomeDeadLettered
		reason = "some messages were dead-lettered; the report lists them by reason"
		if opt.Mode == ModeDryRun {
			reason = "some messages would be dead-lettered; the report lists them by reason"
		}
	default:
		outcome = OutcomeComplete
	}
	if lateInterrupt {
		note := "interrupted once every message was moved: nothing is left to go on with"
		if opt.Mode == ModeCopy {
			note = "interrupted once every message was copied: nothing is left to go on with"
		}
		if reason != "" {
			note = reason + "; " + note
		}
		reason = note
	}
	if checkpointErr != nil {
		// What was copied is at the sink, but not known to the state
		// file: the same command would copy it all again.
		why := fmt.Sprintf("the checkpoint could not be saved in %s (%v): running the same command again would copy everything again; fix the file's place and run it again, or give -state another file (a copy then starts from the beginning)", opt.StateFile, checkpointErr)
		if outcome == OutcomeComplete || outcome == OutcomeDeadLettered {
			outcome, reason = OutcomeFailed, why
		} else {
			reason += "; " + why
		}
	}
	rep.Outcome, rep.Reason = outcome, reason
	rep.Drained = outcome == OutcomeComplete || outcome == OutcomeDeadLettered
	if opt.Mode == ModeMove && rep.Drained {
		if err := tr.ledger.remove(); err != nil {
			j.log.Debug("the source is drained", "error", err)
		}
	}
	if runErr != nil {
		j.log.Warn("closing the pipeline's adapters", "error", runErr)
	}
	if opt.Mode == ModeMove && w.total >= 0 && rep.SourceAfter != nil {
		// The last count: what was done, and what is left.
		w.total = w.done(rep.Counts, snap) + rep.SourceAfter.Ready + rep.SourceAfter.InFlight
	}
	f := w.figures(rep.Counts, snap)
	timing()
	f.Rate = rep.Rate // over the active time, as the report's
	prog.Finish(j.key(), finalFigures(f, opt.Mode), rep.Outcome)
	return rep
}

// finalFigures are the figures of a job's last line: no ETA (finished, it
// said eta=14s after an interrupt), and a dry run's total is what it read
// (its total was the sample's cap: "moved=20 total=100 percent=20.0").
func finalFigures(f Figures, mode Mode) Figures {
	f.ETA = 0
	if mode == ModeDryRun && f.Total > f.Done {
		f.Total = f.Done
	}
	return f
}

// brokerDeadLettered is how much the source's dead-letter count grew during
// the job beyond what the job dead-lettered there itself (native).
func brokerDeadLettered(rep *JobReport, tr *tracker) int64 {
	if rep.SourceBefore == nil || rep.SourceAfter == nil {
		return 0
	}
	return max(0, rep.SourceAfter.DeadLetter-rep.SourceBefore.DeadLetter-nativeDeadLettered(tr))
}

// nativeDeadLettered is what the job dead-lettered at the source.
func nativeDeadLettered(tr *tracker) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var n int64
	for _, c := range tr.dlqNative {
		n += c
	}
	return n
}

// verifyWait is the default of Options.VerifyWait (-verify-wait).
var verifyWait = 15 * time.Second

// verify checks the sink's growth against what the job wrote (see
// Verification), counting a short sink again for up to Options.VerifyWait.
func (j *job) verify(ctx context.Context, rep *JobReport) *Verification {
	v := verification(rep, j.opt.Mode)
	deadline := time.Now().Add(j.opt.VerifyWait)
	// A sink at its cap (discard old) holds no more for being counted
	// again: what it dropped is gone. An exact count (a JetStream stream)
	// does not lag behind the writes it confirmed.
	for v.Short() && !atCap(rep.SinkAfter) && !exact(rep.SinkAfter) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			// Interrupted: what the last count said, which may lag.
			v.addNote("interrupted before the sink was counted again (-verify-wait): its count may lag behind the writes")
			return v
		case <-time.After(min(time.Second, time.Until(deadline))):
		}
		cctx, cancel := context.WithTimeout(ctx, j.countTimeout(false))
		b, err := j.pipe.CountSink(cctx, j.log)
		cancel()
		if err != nil {
			break
		}
		rep.SinkAfter = &b
		v = verification(rep, j.opt.Mode)
	}
	if v.Short() {
		j.log.Warn("migrate: the sink's count disagrees with what was written",
			"written", v.Expected, "sink_growth", v.SinkGrowth, "note", v.Note)
	}
	return v
}

// exact reports whether a count is exact (driver.Backlog.Exact).
func exact(b *driver.Backlog) bool { return b != nil && b.Exact }

// atCap reports whether a sink's count is at its limit on messages.
func atCap(b *driver.Backlog) bool {
	return b != nil && b.KeepsAtMost > 0 && b.Pending() >= b.KeepsAtMost
}

// stuckWhy says why a message the sink refuses stays at the source.
func (j *job) stuckWhy(it string) string {
	switch dl := j.pipe.Spec.DeadLetter; {
	case dl.Sink != nil:
		return fmt.Sprintf("the dead-letter sink (%s) refuses %s too", dl.Sink.Kind, it)
	case dl.Native:
		return "the source cannot dead-letter " + it
	}
	return "the pipeline has no dead_letter destination"
}

// stuckReason says which messages stay at the source because nothing takes
// them, why, and what to do.
func (j *job) stuckReason(n int64, byReason map[string]int64, examples map[string]Example) string {
	// One message is "it": "1 message is stuck: the sink refuses them" read wrong.
	them, they, stay, were, first := "them", "they", "stay", "were", "the first of them"
	if n == 1 {
		them, they, stay, were, first = "it", "it", "stays", "was", "it"
	}
	why := "the sink refuses " + them + " and " + j.stuckWhy(them)
	if j.opt.Mode == ModeDryRun {
		why = "the sink would refuse " + them + " and " + j.stuckWhy(them)
	}
	var parts []string
	for _, k := range sortedKeys(byReason) {
		p := fmt.Sprintf("%d %s", byReason[k], k)
		if ex, ok := examples[k]; ok {
			p += fmt.Sprintf(", e.g. %s: %s", ex.Name(), ex.Description)
		}
		parts = append(parts, p)
	}
	switch j.opt.Mode {
	case ModeDryRun:
		return fmt.Sprintf("%s would be stuck: %s (%s); a move would leave %s at the source, redelivered until %s", messages(n), why, strings.Join(parts, "; "), them, redriveLimit(j.pipe.Spec.Source.Kind))
	case ModeCopy:
		return fmt.Sprintf("%s stuck: %s (%s); %s %s not copied, and the checkpoint stays before %s", messagesAre(n), why, strings.Join(parts, "; "), they, were, first)
	}
	if j.pipe.Spec.Source.Kind == "nats" {
		// The nats source terminates a message on its last delivery
		// where max_deliver is set: a re-run does not see it then.
		return fmt.Sprintf("%s stuck: %s (%s); %s %s in the stream and running the same command again tries %s again, unless the consumer has a max_deliver: at it the durable terminates %s and never delivers %s again. Give the pipeline a dead-letter destination that takes %s (a dry run finds %s), or move %s otherwise",
			messagesAre(n), why, strings.Join(parts, "; "), they, stay, them, them, them, them, them, them)
	}
	return fmt.Sprintf("%s stuck: %s (%s); %s %s at the source, redelivered until %s: give the pipeline a dead-letter destination that takes %s, or move %s otherwise",
		messagesAre(n), why, strings.Join(parts, "; "), they, stay, redriveLimit(j.pipe.Spec.Source.Kind), them, them)
}

// redriveLimit names what ends the redeliveries of a message nothing
// takes, for a source of this kind.
func redriveLimit(kind string) string {
	switch kind {
	case "sqs":
		return "the queue's redrive limit (maxReceiveCount), if it has a redrive policy"
	case "servicebus":
		return "the entity's MaxDeliveryCount, when Service Bus dead-letters them"
	case "amqp":
		return "the broker's delivery limit, where the queue has one (RabbitMQ: a quorum queue's delivery-limit; a classic queue has none)"
	case "nats":
		return "the durable consumer's max_deliver, if it has one (at it, the source terminates the message)"
	}
	return "its redrive limit, if it has one"
}

// messages is "1 message" or "n messages"; messagesAre adds the verb.
func messages(n int64) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

func messagesAre(n int64) string {
	if n == 1 {
		return "1 message is"
	}
	return fmt.Sprintf("%d messages are", n)
}

// behindStuck says, for a move, what waits behind the stuck messages: from
// a source that cannot be counted (AMQP), that messages may (a broker that
// puts a handed-back message at the head of its queue, RabbitMQ, delivers
// it again before them, and only a count would show them); from one whose
// drain ended with ready messages queued behind them (blockedBehind), how
// many, recorded in left_behind too.
func behindStuck(mode Mode, rep *JobReport) string {
	if mode != ModeMove {
		return ""
	}
	if rep.SourceAfter == nil {
		return "; the source cannot be counted, so messages queued behind them may be at the source too: run the same command again once they are dealt with"
	}
	if n := rep.SourceAfter.Pending() - rep.StuckTotal; rep.blockedBehind && n > 0 {
		if rep.LeftBehind == nil {
			rep.LeftBehind = map[string]int64{}
		}
		rep.LeftBehind["behind-stuck"] = n
		return fmt.Sprintf("; %s at the source too, queued behind them (a FIFO group or a session is delivered in order: nothing after a stuck message comes while it is there); run the same command again once they are dealt with",
			messagesAre(n))
	}
	return ""
}

// quickCount bounds a count that is not worth waiting for: after an
// interrupt, or against a broker that could not be counted before and
// never connected since.
const quickCount = 2 * time.Second

// countTimeout bounds one count: CountTimeout (which withDefaults keeps
// within -connect-timeout), quickCount when waiting is known to be futile.
func (j *job) countTimeout(quick bool) time.Duration {
	d := j.opt.CountTimeout
	if quick {
		d = min(d, quickCount)
	}
	return d
}

// countBoth asks the source's and the sink's brokers for their counts at
// once (an unreachable endpoint costs one timeout, not two), recording why
// where it cannot, and returns both errors. futile: the pipeline
// never connected, so a broker whose count failed before gets a quick one.
func (j *job) countBoth(ctx context.Context, rep *JobReport, futile bool) (src, snk *driver.Backlog, srcErr, snkErr error) {
	interrupted := ctx.Err() != nil
	if interrupted {
		ctx = context.WithoutCancel(ctx) // an interrupted run still reports its counts
	}
	one := func(what string, f func(context.Context, *slog.Logger) (driver.Backlog, error)) (*driver.Backlog, error) {
		_, failedBefore := rep.CountErrors[what]
		cctx, cancel := context.WithTimeout(ctx, j.countTimeout(interrupted || (futile && failedBefore)))
		defer cancel()
		b, err := f(cctx, j.log)
		if err != nil {
			return nil, err
		}
		return &b, nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { src, srcErr = one("source", j.pipe.CountSource) })
	wg.Go(func() { snk, snkErr = one("sink", j.pipe.CountSink) })
	wg.Wait()
	if srcErr != nil {
		rep.CountErrors["source"] = oneLine(srcErr.Error())
	}
	if snkErr != nil {
		rep.CountErrors["sink"] = oneLine(snkErr.Error())
	}
	if !errors.Is(snkErr, errors.ErrUnsupported) {
		rep.sinkCountable = true
	} else if !errors.Is(snkErr, config.ErrNoCount) {
		// Its broker counts, but not as the block is set up (a Service
		// Bus block without management_endpoint on an emulator): the
		// adapter's words say why, less the Go error's.
		rep.sinkUncountable = strings.TrimSuffix(oneLine(snkErr.Error()), ": "+errors.ErrUnsupported.Error())
	}
	if !errors.Is(srcErr, errors.ErrUnsupported) {
		rep.sourceCountable = true
	}
	return src, snk, srcErr, snkErr
}

// deadLettersIntoSink asks the dead-letter sink's broker which entity it
// writes, where the sink's count named its own: the blocks' words cannot
// always tell (two JetStream sinks that name no stream are filed by the
// server, in one stream or two). ok is false where the broker does not
// say, and the configuration's comparison stands.
func (j *job) deadLettersIntoSink(ctx context.Context, sink *driver.Backlog) (into, ok bool) {
	if sink == nil || sink.Entity == "" || j.pipe.Spec.DeadLetter.Sink == nil {
		return false, false
	}
	cctx, cancel := context.WithTimeout(ctx, j.countTimeout(true))
	defer cancel()
	dl, err := j.pipe.WithDeadLetterSinkAsSink().CountSink(cctx, j.log)
	if err != nil || dl.Entity == "" {
		return false, false
	}
	return dl.Entity == sink.Entity, true
}

// oneLine folds an error's lines into one for the summary and the report:
// the Azure SDK's response errors span several, framed by rules of dashes.
func oneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && strings.Trim(l, "-") != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// browseFrom returns the opener of a copy's browsing source positioned
// after the tracker's checkpoint, or first when nothing was done yet.
func (j *job) browseFrom(tr *tracker, first func(context.Context) (driver.Source, error)) func(context.Context) (driver.Source, error) {
	after := tr.snapshot().checkpoint
	if after <= j.from {
		return first
	}
	return func(ctx context.Context) (driver.Source, error) {
		bp, err := j.pipe.WithBrowsingSource(after)
		if err != nil {
			return nil, fmt.Errorf("copy mode: %w", err)
		}
		def, err := bp.Definition(j.opt.Log)
		if err != nil {
			return nil, fmt.Errorf("copy mode: %w", err)
		}
		j.log.Info("reading on from the copy's checkpoint", "after", after)
		return def.Config.Source(ctx)
	}
}

// definition builds the engine's pipeline for the job's mode, and says
// whether its source browses.
func (j *job) definition(tr *tracker) (bridge.Definition, bool, error) {
	opt, pipe := j.opt, j.pipe
	browsing := false
	switch opt.Mode {
	case ModeCopy:
		if pipe.Spec.DeadLetter.Native {
			return bridge.Definition{}, false, fmt.Errorf("copy mode: pipeline %q dead-letters at the source (dead_letter { native = true }), which a copy must leave untouched: give it a dead-letter sink, or none", pipe.Name)
		}
		bp, err := pipe.WithBrowsingSource(j.from)
		if err != nil {
			return bridge.Definition{}, false, fmt.Errorf("copy mode: %w", err)
		}
		pipe, browsing = bp, true
	case ModeDryRun:
		if j.noBrowse {
			tr.hold = true
		} else if bp, err := pipe.WithBrowsingSource(0); err == nil {
			pipe, browsing = bp, true
		} else {
			// Read and hold a bounded sample, then hand it all back.
			tr.hold = true
		}
	}
	var def bridge.Definition
	var err error
	if opt.Mode == ModeDryRun {
		def, err = pipe.DryRunDefinition(opt.Log)
	} else {
		def, err = pipe.Definition(opt.Log)
	}
	if err != nil {
		return def, false, err
	}
	return def, browsing, nil
}

// transform adds the migration's own adjustments after the mapping rules.
func (j *job) transform(rules func(*mapping.Message) error, tr *tracker) func(*mapping.Message) error {
	rerun := j.opt.RunID
	source := j.pipe.SourceIdentity()
	deadLetterQueue := j.queue == "dead-letter"
	if rules == nil && rerun == "" && !deadLetterQueue {
		return nil
	}
	return func(m *mapping.Message) error {
		if deadLetterQueue {
			// Keep why the message was dead-lettered, under the names the
			// engine's own dead letters use.
			if _, ok := m.Attr(bridge.AttrDeadLetterReason); !ok {
				// SQS records no reason: without one a dead letter would
				// arrive looking like any live message.
				r := m.Source.DeadLetterReason
				if r == "" {
					r = ReasonSourceDeadLetterQueue
				}
				m.SetAttr(bridge.AttrDeadLetterReason, mapping.String(r))
			}
			if d := m.Source.DeadLetterDesc; d != "" {
				if _, ok := m.Attr(bridge.AttrDeadLetterDescription); !ok {
					m.SetAttr(bridge.AttrDeadLetterDescription, mapping.String(d))
				}
			}
		}
		if rules != nil {
			if err := rules(m); err != nil {
				return err
			}
			tr.group(m.GroupKey)
		}
		if rerun != "" {
			// From the source's name for the message (the same on a
			// redelivery, so a resumed re-run still deduplicates against
			// itself, and distinct for messages that share an id: a
			// JetStream Nats-Msg-Id reused outside its window), else its
			// own id; without either the sink makes up a unique one anyway
			// (one key for all of them would let the sink keep just one).
			if k := rerunKey(source, m); k != "" {
				m.DedupID = rerunDedupID(k, rerun)
			}
		}
		return nil
	}
}

// rerunKey is what -new-dedup-ids makes a message's id from: its name at
// the source (or its own id), with the source's identity (its server and
// entity), so that two pipelines whose sources number alike on different
// servers (a subject or queue of one name) do not get the same ids and
// merge at a sink. "" where the message has neither name nor id.
func rerunKey(source string, m *mapping.Message) string {
	k := m.SourceKey()
	if k == "" {
		k = m.DedupKey()
	}
	if k == "" {
		return ""
	}
	return source + "\x00" + k
}

// ReasonSourceDeadLetterQueue is the DeadLetterReason of a message moved
// from a dead-letter queue whose broker records no reason (SQS).
const ReasonSourceDeadLetterQueue = "source-dead-letter-queue"

// release hands a dry run's held deliveries back to the source: with
// Release where the delivery has it (driver.Releaser: visible again at once,
// and on AMQP not counted as a delivery), since nothing failed; a Nack
// would apply the source's failure backoff (SQS nack_backoff keeps the
// message invisible for it).
func (j *job) release(tr *tracker) {
	held := tr.takeHeld()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opt.CountTimeout)
	defer cancel()
	errs := eachHeld(held, func(d driver.Delivery) error {
		if r, ok := d.(driver.Releaser); ok {
			return r.Release(ctx)
		}
		return d.Nack(ctx, 0)
	})
	if len(errs) > 0 {
		j.log.Warn("some sampled messages could not be handed back; the broker returns them when their lock lapses",
			"messages", len(errs), "error", errors.Join(errs...))
	}
}

// watch follows a running job and decides when it is done.
type watch struct {
	// blockedBehind: the drain ended with ready messages queued behind
	// stuck ones (blockedBehindStuck).
	blockedBehind bool
	name          string // the pipeline's, as its metrics name it
	j             *job
	p             *bridge.Pipeline
	tr            *tracker
	live          *liveness
	reg           *prometheus.Registry
	browsing      bool
	exactCount    bool // the source's broker counts exactly (driver.Backlog.Exact)
	start         time.Time
	total         int64

	lastCount   time.Time
	lastRecount time.Time     // recount's last count
	recountTook time.Duration // and how long it took
	lastExtend  time.Time
	lastSave    time.Time
	// lastDone is the most messages seen done, lastDoneAt when: the
	// report's rate is over the time until then.
	lastDone   int64
	lastDoneAt time.Time
	// recent: the progress rate over the last seconds, so that the ETA
	// does not promise seconds while nothing moves (messages an earlier
	// run held wait out their lock).
	recent    rateWindow
	stoppedAt time.Time // when the engine stopped
	everRan   bool
	// saidUnanswered: the log said once that an idle source's broker does
	// not answer its pings.
	saidUnanswered bool
	// saidSpell: the log said once that the source's quiet spells make
	// the job wait longer than -idle.
	saidSpell bool
	// countErr is why the last count of the quiet source failed, nil once
	// one answers: a broker that stalls keeps its connection open, and
	// only its counts tell.
	countErr error
	// lastCountOK is when a count of the source last answered.
	lastCountOK time.Time
	waitedFor   int64 // the source's in-flight count last said to be waited for
	// waitedScheduled: the scheduled count last said to be waited for
	// (-scheduled wait).
	waitedScheduled int64
	// lastRunning is when the pipeline was last seen running (the start
	// until it first runs).
	lastRunning time.Time
}

// loop returns an outcome only for interrupted, failed and not-drained
// endings; "" means the source was found drained (by how).
func (w *watch) loop(ctx context.Context, done <-chan error, prog Progress) (Outcome, string, string) {
	opt := w.j.opt
	t := time.NewTicker(tick)
	defer t.Stop()
	var deadline <-chan time.Time
	if opt.Timeout > 0 {
		tm := time.NewTimer(opt.Timeout)
		defer tm.Stop()
		deadline = tm.C
	}
	lastProgress := time.Time{}
	for {
		select {
		case <-ctx.Done():
			// The reasons say what became of the messages, not that it was
			// interrupted: the outcome beside them says so (it was said
			// three times on standard error).
			if w.browsing {
				// A copy or a browsing dry run takes nothing from the source.
				return OutcomeInterrupted, "", "the source was only read and is as it was" + w.resumeHint()
			}
			if w.tr.hold {
				// A dry run that samples: nothing to go on with, as
				// a move's wording said.
				return OutcomeInterrupted, "", "the dry run's sample was handed back to the source; nothing was written or settled"
			}
			return OutcomeInterrupted, "", "in-flight messages were finished or handed back to the source; run the same command again to go on"
		case err := <-done:
			// Run returns only after its context ends; this is a bug guard.
			return OutcomeFailed, "", fmt.Sprintf("the pipeline stopped by itself: %v", err)
		case <-deadline:
			return OutcomeNotDrained, "", fmt.Sprintf("-timeout %s passed before the source was drained", opt.Timeout)
		case now := <-t.C:
			if err := w.tr.refused(); err != nil {
				return OutcomeFailed, "", oneLine(err.Error()) // a hint may follow on a line of its own
			}
			st := w.p.Stats()
			// Running is not enough: a source whose broker went away
			// mid-move stays open while its client reconnects (NATS) or
			// its receives fail (Service Bus). The adapters' own word
			// (Ready: their last operation's failure) counts too, unless
			// messages still move.
			notReady := w.p.Ready(ctx)
			if notReady == nil {
				// A stalled broker keeps the connection open: only a
				// round trip tells (liveness), or the count that decides
				// whether the source is drained.
				notReady = w.live.failure()
			}
			countFails := notReady == nil && w.countErr != nil
			if countFails {
				notReady = fmt.Errorf("the source's count fails: %w", w.countErr)
			}
			if (st.Running && notReady == nil) || w.lastRunning.IsZero() {
				w.lastRunning = now
			}
			// Unhealthy since the later of the last healthy look and the
			// last progress (messages that still move count as health):
			// the job fails -connect-timeout after that, not twice that as
			// when the two were waited for one after the other. A count
			// is asked only once the source is quiet: a broker whose count
			// fails answered last at its last delivery or count, and the
			// looks in between only did not know yet.
			since := w.lastRunning
			if countFails {
				since = w.lastCountOK
				if r := w.tr.snapshot().lastRecv; r.After(since) {
					since = r
				}
				since = later(since, w.start)
			}
			if w.lastDoneAt.After(since) {
				since = w.lastDoneAt
			}
			if now.Sub(since) > opt.ConnectTimeout {
				// The engine retries for ever, as a daemon should; a job
				// gives up and says why.
				cause := "the adapters did not open"
				if notReady != nil {
					cause = notReady.Error()
				}
				if errors.Is(notReady, bridge.ErrOpening) {
					// The log has no attempt's error: none had returned (an
					// audit got this with nothing to go on).
					return OutcomeFailed, "", fmt.Sprintf("not connected after %s: no attempt to open the adapters has returned yet (a broker that takes the connection and does not answer, or a host name that does not resolve, takes longer than that); -connect-timeout %s also covers the counts before the run: give it more to see the attempt's error",
						round(now.Sub(since)), opt.ConnectTimeout)
				}
				if errors.Is(notReady, bridge.ErrStalled) {
					// Connected, and the sink refuses every send: the
					// cause says for how long.
					return OutcomeFailed, "", cause + " (the log has each attempt's error)"
				}
				what := "not connected after"
				if w.everRan && w.tr.snapshot().taken > 0 {
					// It had received: the connection was lost. A source
					// that opens without the network (Service Bus connects
					// on its first receive) and then fails never connected.
					what = "connection lost for"
				}
				return OutcomeFailed, "", fmt.Sprintf("%s %s: %s (the log has each attempt's error)", what, round(now.Sub(since)), cause)
			}
			if st.Running {
				w.everRan = true
			}
			w.extendHeld(now)
			snap := w.tr.snapshot()
			w.saveCheckpoint(now, snap)
			counts := readCounts(w.reg, w.name)
			if d := w.done(counts, snap); d > w.lastDone {
				w.lastDone, w.lastDoneAt = d, now
				w.countErr = nil // moving again: not what a later stall is about
			}
			if now.Sub(lastProgress) >= 250*time.Millisecond {
				w.recount(ctx, now, w.done(counts, snap))
				prog.Update(w.j.key(), w.figures(counts, snap))
				lastProgress = now
			}
			if by, ok := w.drained(ctx, now, st, snap, counts); ok {
				return "", by, ""
			}
		}
	}
}

// doneBeforeInterrupt reports how the source was drained when an
// interrupt stopped a move or a copy after its last message: every
// delivery taken was written, dead-lettered or left out, nothing was
// handed back or failed its acknowledgement, none is stuck, and then a
// copy had read to the end ("browse") or a move's source counts nothing
// left and every message counted before the run (or since, as it grew) is
// done ("count"). "" otherwise: a source that cannot count has only the
// quiet spell the interrupt cut short to go by, and a dry run moves
// nothing.
func (w *watch) doneBeforeInterrupt(rep *JobReport, snap snapshot) string {
	opt := w.j.opt
	done := w.done(rep.Counts, snap)
	if !w.everRan || w.tr.hold || done != snap.taken || rep.HandedBack > 0 || rep.AckFailed > 0 || snap.stuck > 0 {
		return ""
	}
	switch {
	case opt.Mode == ModeCopy && w.browsing:
		if snap.browsed && snap.notCopied == 0 {
			return "browse"
		}
	case opt.Mode == ModeMove && !w.browsing:
		left := rep.SourceAfter
		if left == nil || w.total < 0 || done < w.total {
			return ""
		}
		pending := left.Ready + left.InFlight
		if opt.WaitScheduled {
			pending += left.Scheduled
		}
		// A count that lags (SQS's approximate ones) says 0 of messages
		// sent a moment ago: it is trusted only after the source has
		// been quiet for half of -idle, as the drain trusts it after all
		// of it.
		quiet := w.exactCount || time.Since(snap.lastRecv) >= opt.Idle/2
		if pending == 0 && quiet {
			return "count"
		}
	}
	return ""
}

// resumeHint says how a copy goes on after an interrupt.
func (w *watch) resumeHint() string {
	switch {
	case w.j.opt.Mode != ModeCopy:
		return ""
	case w.j.state != nil:
		return "; run the same command again to go on from its checkpoint"
	default:
		return "; without -state, the same command copies everything again"
	}
}

// drain waits for the engine to stop, showing the figures meanwhile.
func (w *watch) drain(done <-chan error, prog Progress) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			prog.Update(w.j.key(), w.figures(readCounts(w.reg, w.name), w.tr.snapshot()))
		}
	}
}

// recount refreshes the total of a move whose source grew past the count
// at the start (producers still sending): what is done and what is left.
// It showed "moved=430 total=300 percent=100.0", without an ETA, while
// hundreds were left. At most every totalRecountEvery, and only then.
func (w *watch) recount(ctx context.Context, now time.Time, done int64) {
	if w.j.opt.Mode != ModeMove || w.browsing || w.tr.hold || w.total < 0 || done <= w.total ||
		now.Sub(w.lastRecount) < max(totalRecountEvery, 5*w.recountTook) {
		return
	}
	w.lastRecount = now
	// Short: the watch waits for it, and a slow count only costs the
	// total's refresh. A count that takes long is made less often (five
	// times its length apart): each opens a connection of its own.
	cctx, cancel := context.WithTimeout(ctx, quickCount)
	b, err := w.j.pipe.CountSource(cctx, w.j.log)
	cancel()
	w.recountTook = time.Since(now)
	if err != nil {
		return // the drain's own counts say what fails
	}
	left := b.Ready + b.InFlight
	if w.j.opt.WaitScheduled {
		left += b.Scheduled
	}
	w.total = done + left
}

// totalRecountEvery paces recount (a variable for tests).
var totalRecountEvery = time.Second

// quietFor reports whether a quiet spell of idle says that a source that
// cannot be counted is drained: -idle, or the source's own quiet spell
// where that is longer (a Service Bus session source with more sessions
// than it holds at once, which keeps an emptied session for idle_timeout
// before it takes the next: a -idle of 5 s took the first sessions' end
// for the queue's and left the others behind, "complete").
func (w *watch) quietFor(idle time.Duration, snap snapshot) bool {
	need := max(w.j.opt.Idle, snap.spell)
	if idle >= w.j.opt.Idle && idle < need && !w.saidSpell {
		w.saidSpell = true
		w.j.log.Info("the source cannot be counted and may hand out nothing for a while with messages waiting; waiting for a longer quiet spell than -idle before taking it for drained",
			"quiet_spell", need.Round(time.Millisecond), "idle", w.j.opt.Idle)
	}
	return idle >= need
}

// sayUnanswered logs once that an idle source's broker does not answer
// its pings, so a job that waits for it says why.
func (w *watch) sayUnanswered() {
	if w.saidUnanswered || w.live.failure() == nil {
		// Nothing failed: the pings have not yet covered the whole
		// -idle (a quiet queue); the next ticks tell.
		return
	}
	w.saidUnanswered = true
	w.j.log.Warn("the source yields nothing, and its broker does not answer every ping: waiting for it to answer before taking the queue for drained", "error", w.live.failure())
}

// drained decides whether the source has nothing more for this job.
func (w *watch) drained(ctx context.Context, now time.Time, st bridge.Stats, snap snapshot, c Counts) (string, bool) {
	opt := w.j.opt
	// Everything taken from the source reached the engine and was settled,
	// but redeliveries of stuck messages, which never will be.
	settled := st.Running && int64(st.InFlight) <= snap.stuckInFlight && c.Read == snap.taken-snap.skipped
	if !settled {
		return "", false
	}
	idle := now.Sub(snap.lastRecv)
	switch {
	case w.tr.hold:
		if snap.sampleDone {
			return "sample", true
		}
		if idle >= opt.Idle && !w.live.answeredFor(now, opt.Idle) {
			w.sayUnanswered()
			return "", false
		}
		// A held sample keeps its sessions: no other is taken, so the
		// source's quiet spell (quietFor) does not apply.
		return "idle", idle >= opt.Idle
	case w.browsing:
		// The browser read to the end; a short quiet spell lets a last
		// receive come back.
		return "browse", snap.browsed && idle >= min(opt.Idle, lastReceiveQuiet)
	}
	quiet := opt.Idle
	if w.exactCount {
		// -idle waits out counts that lag (SQS); an exact one needs only
		// a last receive to come back empty, as a browse does.
		quiet = min(quiet, lastReceiveQuiet)
	}
	if idle < quiet {
		return "", false
	}
	if now.Sub(w.lastCount) < opt.CountEvery {
		return "", false
	}
	w.lastCount = now
	cctx, cancel := context.WithTimeout(ctx, w.j.countTimeout(false))
	b, err := w.j.pipe.CountSource(cctx, w.j.log)
	cancel()
	if errors.Is(err, errors.ErrUnsupported) {
		// A broker that cannot count: idle is all there is, while the
		// broker answered throughout (a stalled one is idle too).
		if !w.live.answeredFor(now, opt.Idle) {
			w.sayUnanswered()
			return "", false
		}
		return "idle", w.quietFor(idle, snap)
	}
	if err != nil {
		if w.countErr == nil {
			w.j.log.Warn("counting the source failed; trying again (said once; -connect-timeout ends the job if it keeps failing)", "error", err)
		}
		w.countErr = err
		return "", false
	}
	w.countErr, w.lastCountOK = nil, now
	// Something arrived while counting: look again later.
	if w.tr.snapshot().lastRecv != snap.lastRecv {
		return "", false
	}
	pending := b.Ready + b.InFlight
	if opt.WaitScheduled {
		pending += b.Scheduled
		if b.Scheduled > 0 && b.Ready+b.InFlight <= snap.stuck && b.Scheduled != w.waitedScheduled {
			// Only scheduled messages are left: said, as the wait for
			// messages in flight is, since the progress stands still
			// until they are due (it stood at moved=0 for a minute with
			// nothing said).
			w.waitedScheduled = b.Scheduled
			w.j.log.Warn("waiting for scheduled messages to become due (-scheduled wait): the progress stands still until then; -scheduled leave finishes without them", "scheduled", b.Scheduled)
		}
	}
	// Stuck messages stay at the source: the rest is drained when only
	// they are left.
	if pending <= snap.stuck {
		return "count", true
	}
	if snap.stuck > 0 && b.Ready > 0 && idle >= blockedBehindStuck(opt.Idle) {
		// Ready at the source, and yet nothing but the stuck messages
		// has come for a while: a FIFO group or a session keeps its
		// order, so the messages queued behind a stuck one are never
		// delivered while it is there (the job waited for ever). Held
		// elsewhere (in flight) is another matter: those come back.
		w.blockedBehind = true
		return "count", true
	}
	if b.InFlight > 0 && b.InFlight != w.waitedFor {
		// Quiet, and what is left is held by someone else: another
		// consumer, or an interrupted run until its locks lapse. Said
		// once per count, so that a progress that stands still says why
		// (a warning: an info line is hidden under the progress bar). In
		// a FIFO queue or a session their groups' later messages wait
		// too, counted ready: the progress stood still with nothing said.
		w.waitedFor = b.InFlight
		msg := "waiting for messages in flight at the source: another consumer holds them, or an interrupted run did and they come back when their lock lapses"
		if b.Ready > 0 {
			msg += "; the ready ones are not delivered meanwhile: queued behind them in their FIFO groups or sessions (or the broker's count lags)"
		}
		w.j.log.Warn(msg, "in_flight", b.InFlight, "ready", b.Ready)
	}
	return "count", false
}

// lastReceiveQuiet is how long a browsing source, or one whose broker counts
// exactly, must yield nothing before it is drained: more than a JetStream
// pull waits (at most 1 s), so that the last receive came back empty.
const lastReceiveQuiet = time.Second

// blockedBehindStuck is how long a job with stuck messages waits for the
// rest of what its source counts ready before it takes those for queued
// behind them: longer than -idle, since SQS counts lag behind.
var blockedBehindStuck = func(idle time.Duration) time.Duration { return max(3*idle, 30*time.Second) }

// saveCheckpoint writes copy mode's checkpoint every second, so a copy
// killed at any point resumes close to where it was.
func (w *watch) saveCheckpoint(now time.Time, snap snapshot) {
	if w.j.state == nil || !w.browsing || w.j.opt.Mode != ModeCopy || now.Sub(w.lastSave) < time.Second {
		return
	}
	w.lastSave = now
	copies, _ := w.tr.scheduledCopies()
	w.j.state.setScheduled(w.j.key(), copies)
	w.j.saved(w.j.state.save(w.j.key(), snap.checkpoint, snap.highest))
}

// saved logs a failed save of the copy's checkpoint once while saves keep
// failing (it was an error line every second), and when one works again.
func (j *job) saved(err error) {
	j.saveMu.Lock()
	defer j.saveMu.Unlock()
	switch {
	case err != nil && !j.saveFailing:
		j.log.Error("cannot save the copy checkpoint; trying again (said once until a save works)", "error", err)
	case err == nil && j.saveFailing:
		j.log.Info("the copy checkpoint is saved again")
	}
	j.saveFailing = err != nil
}

// extendHeld keeps a dry run's held sample locked at the source.
func (w *watch) extendHeld(now time.Time) {
	if !w.tr.hold {
		return
	}
	lock := w.j.pipe.Spec.Engine.Lock
	if now.Sub(w.lastExtend) < lock.ExtendEvery {
		return
	}
	w.lastExtend = now
	ctx, cancel := context.WithTimeout(context.Background(), w.j.opt.CountTimeout)
	defer cancel()
	for _, err := range eachHeld(w.tr.heldNow(), func(d driver.Delivery) error { return d.Extend(ctx, lock.ExtendBy) }) {
		w.j.log.Debug("extending a sampled message's lock", "error", err)
	}
}

// eachHeld calls f for each of a held sample's deliveries, many at once,
// and returns the errors. Not one after another: each SQS call waits for
// its batch of ten to be sent, and 2,000 extensions in a row took 40 s,
// during which the last of them lapsed and were received again (an
// audit); the hand-back at the end took as long.
func eachHeld(ds []driver.Delivery, f func(driver.Delivery) error) []error {
	var mu sync.Mutex
	var errs []error
	var g errgroup.Group
	g.SetLimit(heldParallel)
	for _, d := range ds {
		g.Go(func() error {
			if err := f(d); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errs
}

// heldParallel bounds eachHeld's calls in flight: enough to fill SQS's
// batches of ten many times over.
const heldParallel = 100

// done is what the progress counts as done: written, dead-lettered or
// skipped; in a dry run, read.
func (w *watch) done(c Counts, snap snapshot) int64 {
	if w.j.opt.Mode == ModeDryRun {
		return snap.taken
	}
	return c.Done() + snap.skipped
}

func (w *watch) figures(c Counts, snap snapshot) Figures {
	f := Figures{
		Done: w.done(c, snap), Total: w.total, Written: c.Written,
		DeadLettered: c.DeadLetteredTotal, Retried: c.Retried, Throttled: c.Throttled,
		Skipped: snap.skipped, Stuck: snap.stuck,
	}
	if w.j.opt.Mode == ModeDryRun {
		f.Written, f.DryRun = 0, true
	}
	now := time.Now()
	f.Rate = w.recent.rate(now, f.Done, w.start)
	if f.Total > 0 && f.Done >= f.Total && !w.lastDoneAt.IsZero() {
		// All moved, confirming the drain: the rate of the move, not one
		// that falls while nothing is left to move.
		if active := w.lastDoneAt.Sub(w.start).Seconds(); active > 0 {
			f.Rate = float64(f.Done) / active
		}
	}
	if f.Total > f.Done && f.Rate > 0 {
		f.ETA = time.Duration(float64(f.Total-f.Done) / f.Rate * float64(time.Second))
	}
	return f
}

// rateWindow is a rate over the last rateSpan: the progress's msg/s and
// ETA. A rate over the whole run kept promising an end while nothing
// moved.
type rateWindow struct{ samples []rateSample }

type rateSample struct {
	at   time.Time
	done int64
}

const rateSpan = 10 * time.Second

// rate records done at now and returns the rate since the oldest sample
// within rateSpan, or over the time since start while the run is younger
// than that.
func (r *rateWindow) rate(now time.Time, done int64, start time.Time) float64 {
	r.samples = append(r.samples, rateSample{now, done})
	i := 0
	for i < len(r.samples)-1 && now.Sub(r.samples[i+1].at) >= rateSpan {
		i++
	}
	r.samples = r.samples[i:]
	from := r.samples[0]
	if now.Sub(from.at) < rateSpan {
		from = rateSample{start, 0}
	}
	if el := now.Sub(from.at).Seconds(); el > 0 {
		return float64(done-from.done) / el
	}
	return 0
}

// expectedRefusals passes records on but those whose error the job
// handles itself: a broker's refusal to browse (driver.ErrCannotBrowse).
type expectedRefusals struct{ slog.Handler }

func (h expectedRefusals) Handle(ctx context.Context, r slog.Record) error {
	refused := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, driver.ErrCannotBrowse) {
			refused = true
			return false
		}
		return true
	})
	if refused {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h expectedRefusals) WithAttrs(as []slog.Attr) slog.Handler {
	return expectedRefusals{h.Handler.WithAttrs(as)}
}

func (h expectedRefusals) WithGroup(name string) slog.Handler {
	return expectedRefusals{h.Handler.WithGroup(name)}
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
