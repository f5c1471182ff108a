// Package migrate runs pipelines as one-shot migrations: each runs on the
// engine (package bridge) until its source is drained, then stops and
// reports what it read, wrote, dead-lettered and left behind. It changes
// nothing in the engine: it wraps the pipeline's source to watch every
// delivery, reads the engine's own counters, and asks the brokers for
// their counts (config.Pipeline.CountSource). docs/migrate.md is the user's
// guide.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
)

// Run migrates the pipelines one after the other, in the order given (and,
// with IncludeDeadLetters, each one's dead-letter queue after its main
// queue). A failed pipeline does not stop the next; an interrupt does, and
// the report lists what did not run as skipped. It always returns a
// report; Report.Outcome (the worst pipeline's) says how it ended.
func Run(ctx context.Context, pipes []*config.Pipeline, opt Options, prog Progress) *Report {
	opt.withDefaults()
	if prog == nil {
		prog = NoProgress{}
	}
	rep := &Report{Version: 1, Mode: opt.Mode, StartedAt: time.Now().UTC()}
	finish := func() *Report {
		prog.Close()
		rep.FinishedAt = time.Now().UTC()
		rep.Seconds = rep.FinishedAt.Sub(rep.StartedAt).Seconds()
		worst := OutcomeComplete
		failed, skipped := 0, 0
		var notStarted *JobReport // the first an interrupt kept from running
		for _, j := range rep.Jobs {
			rep.Totals.add(j.Counts)
			switch j.Outcome {
			case OutcomeSkipped:
				// Skipped follows a failure or an interrupt, which
				// decides the outcome and the reason; a dead-letter
				// queue the source does not have is no such thing.
				if !j.notApplicable {
					skipped++
				}
				if j.Reason == skippedInterrupted && notStarted == nil {
					notStarted = j
				}
				continue
			case OutcomeFailed:
				failed++
			}
			if j.Outcome.severity() > worst.severity() {
				worst = j.Outcome
				rep.Reason = j.where() + ": " + j.Reason
			}
		}
		if notStarted != nil && worst.severity() < OutcomeInterrupted.severity() {
			// Each pipeline that ran is done (the interrupt came after the
			// last one's last message), and some did not run: the run is
			// interrupted all the same. It said complete, exit 0.
			worst = OutcomeInterrupted
			rep.Reason = "before " + notStarted.where() + " started"
		}
		if rep.Outcome == "" {
			rep.Outcome = worst
			// With more than one pipeline, the first line says the failed
			// one was not all (docs/migrate.md, "Several pipelines").
			if len(rep.Jobs) > 1 && (failed > 0 || skipped > 0) {
				rep.Reason += fmt.Sprintf(" (of %d: %d failed, %d skipped; the summary lists each)", len(rep.Jobs), failed, skipped)
			}
			if worst == OutcomeComplete {
				// Loud on the first line too: "complete" may hide a typo.
				for _, j := range rep.Jobs {
					if strings.HasPrefix(j.Reason, emptyUncounted) || strings.HasPrefix(j.Reason, emptyCountFailed) {
						rep.Reason = fmt.Sprintf("pipeline %s: %s", j.Pipeline, j.Reason)
						break
					}
				}
			}
			if worst == OutcomeComplete || worst == OutcomeDeadLettered {
				// A sink short of what was written is said on the first
				// line too: "complete" alone would hide it.
				for _, j := range rep.Jobs {
					// Short, forgiven by the resume allowance, a source
					// that lost messages another way, or a sink that
					// counts and could not be counted now: "complete"
					// alone was the first line.
					if v := j.Verification; v.Warn() || (v != nil && !v.Checked && j.sinkCountable) {
						what := "not verified"
						if v.Verified {
							what = "verified only by the resume allowance"
						}
						note := fmt.Sprintf("pipeline %s: %s: %s", j.Pipeline, what, v.Note)
						if rep.Reason == "" {
							rep.Reason = note
						} else {
							rep.Reason += "; " + note
						}
						break
					}
				}
			}
		}
		var done float64
		var spans []span
		for _, j := range rep.Jobs {
			done += j.Rate * j.ActiveSeconds // each job's own count: a dry run's is what it read
			if j.ActiveSeconds > 0 {
				spans = append(spans, span{j.started, j.started.Add(time.Duration(j.ActiveSeconds * float64(time.Second)))})
			}
		}
		// The time some job was active: jobs that ran at once (-parallel)
		// count their common time once.
		if active := activeTime(spans).Seconds(); active > 0 {
			rep.Rate = done / active
		}
		rep.ExitCode = rep.Outcome.ExitCode()
		if rep.Outcome == OutcomeComplete || rep.Outcome == OutcomeDeadLettered {
			for _, j := range rep.Jobs {
				if j.Verification.Lost() {
					rep.ExitCode = ExitNotVerified
				}
			}
		}
		return rep
	}
	if err := opt.Validate(); err != nil {
		rep.Outcome, rep.Reason = OutcomeFailed, err.Error()
		skipAll(rep, pipes, "not started: "+err.Error())
		return finish()
	}
	var state *stateFile
	if opt.StateFile != "" {
		s, err := openState(opt.StateFile)
		if err != nil {
			rep.Outcome, rep.Reason = OutcomeFailed, err.Error()
			skipAll(rep, pipes, "not started: "+err.Error())
			return finish()
		}
		state = s
		defer state.close()
	}
	// A failed pipeline does not stop the others: pipelines are
	// independent queues, and stopping at the first failure left the rest
	// unmigrated and unreported. An interrupt stops everything; what did
	// not run is listed as skipped, so the report names every pipeline.
	units := make([]*unit, len(pipes))
	for i, p := range pipes {
		units[i] = prepare(ctx, p, &opt)
	}
	var interrupted atomic.Bool
	runUnit := func(u *unit) {
		mainFailed := false
		for _, j := range u.jobs {
			if interrupted.Load() {
				u.reports = append(u.reports, notRun(j.pipe, j.queue, OutcomeSkipped, skippedInterrupted))
				continue
			}
			if mainFailed {
				// The dead-letter queue comes after its main queue.
				u.reports = append(u.reports, notRun(j.pipe, j.queue, OutcomeSkipped, "not started: the pipeline's main queue failed"))
				continue
			}
			j.log = opt.Log.With("pipeline", j.pipe.Name, "queue", j.queue)
			if state != nil {
				j.state = state
				j.from = state.after(j.key())
				j.rewritable = state.rewritable(j.key())
			}
			jr := j.run(ctx, prog)
			if jr.Outcome == OutcomeFailed && jr.browseRefused && opt.Mode == ModeDryRun {
				// The broker refused to browse once asked: sample instead.
				opt.Log.Warn("the source cannot be browsed; the dry run reads a sample instead", "pipeline", j.pipe.Name, "sample", opt.Sample, "cause", jr.Reason)
				j.noBrowse = true
				jr = j.run(ctx, prog)
			}
			warnEmptyUncounted(jr, j.log)
			u.reports = append(u.reports, jr)
			switch {
			case jr.Outcome == OutcomeInterrupted || ctx.Err() != nil:
				interrupted.Store(true)
			case jr.Outcome == OutcomeFailed && j.queue == "main":
				mainFailed = true
			}
		}
	}
	if opt.Parallel > 1 {
		brokerEntities(ctx, units, &opt)
	}
	refuseCycles(units)
	ordered := runOrder(units)
	lanes := [][]*unit{ordered} // one after the other
	if opt.Parallel > 1 {
		lanes = laneUnits(ordered)
	}
	work := make(chan []*unit)
	var wg sync.WaitGroup
	for range min(opt.Parallel, len(lanes)) {
		wg.Go(func() {
			for lane := range work {
				for _, u := range lane {
					runUnit(u)
				}
			}
		})
	}
	for _, lane := range lanes {
		work <- lane
	}
	close(work)
	wg.Wait()
	for _, u := range units {
		rep.Jobs = append(rep.Jobs, u.reports...)
		rep.Jobs = append(rep.Jobs, u.trailing...)
	}
	return finish()
}

type span struct{ from, to time.Time }

// activeTime is the length of the union of spans.
func activeTime(spans []span) time.Duration {
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var total time.Duration
	var cur span
	for i, s := range spans {
		switch {
		case i == 0:
			cur = s
		case !s.from.After(cur.to):
			if s.to.After(cur.to) {
				cur.to = s.to
			}
		default:
			total += cur.to.Sub(cur.from)
			cur = s
		}
	}
	if len(spans) > 0 {
		total += cur.to.Sub(cur.from)
	}
	return total
}

// A unit is one pipeline: its main queue, then (with -include-dead-letters)
// its dead-letter queue. Its reports are in the order of its jobs.
type unit struct {
	jobs    []*job
	reports []*JobReport
	// trailing are reports listed after the jobs' (a dead-letter queue
	// the source does not have).
	trailing []*JobReport
	// touches names what its jobs read and write (config.Pipeline's
	// SourceIdentity and SinkIdentity): units that share one run one after
	// the other.
	touches []string
	// reads and writes split touches: a unit that writes what another
	// reads runs first (runOrder).
	reads, writes []string
	mu            sync.Mutex // guards the three while brokerEntities adds to them
}

// prepare makes p's unit; a dead-letter queue that cannot be found fails
// the pipeline before anything of it runs.
func prepare(ctx context.Context, p *config.Pipeline, opt *Options) *unit {
	// A migration reads what is there: its sources must not create the
	// entity they read (a mistyped name would "complete" empty).
	p = p.ForMigration()
	u := &unit{jobs: []*job{{opt: opt, pipe: p, queue: "main"}}, touches: []string{p.SourceIdentity(), p.SinkIdentity()},
		reads: []string{p.SourceIdentity()}, writes: []string{p.SinkIdentity()}}
	if !opt.IncludeDeadLetters {
		return u
	}
	dp, err := p.WithDeadLetterSource(ctx, opt.Log)
	if errors.Is(err, driver.ErrNoDeadLetterQueue) {
		// The flag asks for the dead-letter queue where there is one: a
		// run over several pipelines need not be split for those without.
		none := notRun(p, "dead-letter", OutcomeSkipped, fmt.Sprintf("-include-dead-letters: %v", err))
		none.notApplicable = true
		u.trailing = []*JobReport{none}
		return u
	}
	if err != nil {
		return &unit{reports: []*JobReport{notRun(p, "main", OutcomeFailed, fmt.Sprintf("-include-dead-letters: %v; nothing of this pipeline was migrated", err))}}
	}
	// Dead letters stay dead letters: they go to the pipeline's
	// dead-letter sink where it has one.
	if p.Spec.DeadLetter.Sink == nil {
		opt.Log.Warn("-include-dead-letters: the pipeline has no dead-letter sink, so the source's dead letters go to its sink, beside live messages (each with DeadLetterReason); a dead_letter { sink … } keeps them apart",
			"pipeline", p.Name)
	}
	dp = dp.WithDeadLetterSinkAsSink()
	// Known only now: a dead-letter sink writing into the very
	// dead-letter queue read would move its messages in a circle.
	if why, loops := dp.SinkFeedsSource(); loops {
		return &unit{reports: []*JobReport{notRun(p, "main", OutcomeFailed, fmt.Sprintf("-include-dead-letters: pipeline %q: its dead-letter sink %s (the dead-letter queue read), so its messages would circulate without end; migrate the dead letters without -include-dead-letters, with a pipeline of their own; nothing of this pipeline was migrated", p.Name, why))}}
	}
	u.jobs = append(u.jobs, &job{opt: opt, pipe: dp, queue: "dead-letter"})
	u.touches = append(u.touches, dp.SourceIdentity(), dp.SinkIdentity())
	u.reads, u.writes = append(u.reads, dp.SourceIdentity()), append(u.writes, dp.SinkIdentity())
	return u
}

// brokerEntities adds to each unit what the brokers call the entities it
// reads and writes (driver.Backlog.Entity: the SQS QueueArn), asked by a
// count: one queue named by queue_url in one pipeline and by queue_name in
// another has two identities in the configuration's words, and such
// pipelines ran at once, a chain's second before its first had written.
// A count that fails adds nothing (the job counts again and says why).
func brokerEntities(ctx context.Context, units []*unit, opt *Options) {
	var wg sync.WaitGroup
	for _, u := range units {
		for _, j := range u.jobs {
			for _, c := range []struct {
				count func(context.Context, *slog.Logger) (driver.Backlog, error)
				list  *[]string
			}{{j.pipe.CountSource, &u.reads}, {j.pipe.CountSink, &u.writes}} {
				wg.Go(func() {
					cctx, cancel := context.WithTimeout(ctx, min(opt.CountTimeout, quickCount*5))
					defer cancel()
					if b, err := c.count(cctx, opt.Log); err == nil && b.Entity != "" {
						u.mu.Lock()
						u.touches = append(u.touches, "entity "+b.Entity)
						*c.list = append(*c.list, "entity "+b.Entity)
						u.mu.Unlock()
					}
				})
			}
		}
	}
	wg.Wait()
}

// refuseCycles fails, before anything runs, the units that move messages
// in a circle: each writes what the next reads and the last what the first
// reads (qa → qb, qb → qa). In any order the messages end where they
// started, and every pipeline said complete. Only entities named alike
// count here (not a server standing for its entities, as for lanes, nor a
// kind without identities): two pipelines between two servers in opposite
// directions are no circle.
func refuseCycles(units []*unit) {
	feeds := func(k, i int) bool {
		if k == i || len(units[k].jobs) == 0 || len(units[i].jobs) == 0 {
			return false
		}
		for _, w := range units[k].writes {
			// A kind alone (no identity hook) names no entity.
			if strings.Contains(w, " ") && slices.Contains(units[i].reads, w) {
				return true
			}
		}
		return false
	}
	var circle []int
	for i := range units {
		seen := make([]bool, len(units))
		stack := []int{i}
		for len(stack) > 0 && !seen[i] {
			k := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for j := range units {
				if feeds(k, j) && !seen[j] {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
		if seen[i] {
			circle = append(circle, i)
		}
	}
	if len(circle) == 0 {
		return
	}
	names := make([]string, len(circle))
	for n, i := range circle {
		names[n] = units[i].jobs[0].pipe.Name
	}
	for _, i := range circle {
		p := units[i].jobs[0].pipe
		units[i].jobs = nil
		units[i].reports = []*JobReport{notRun(p, "main", OutcomeFailed, fmt.Sprintf(
			"pipelines %s move messages in a circle (each writes what another reads, round to the first): they would end where they started; nothing of them was migrated: move each queue once, with one pipeline", strings.Join(names, ", ")))}
	}
}

// runOrder orders units so that one that writes what another reads runs
// first: a chain a → b, b → c given as b → c, a → b drained b, then a → b
// filled it again, and both said complete. Otherwise the given order
// stands, and so it does among units that write what each other reads (a
// cycle).
func runOrder(units []*unit) []*unit {
	n := len(units)
	before := make([][]int, n) // before[i]: the units that run before i
	for i := range units {
		for k := range units {
			if i != k && touchesCommon(units[k].writes, units[i].reads) && !touchesCommon(units[i].writes, units[k].reads) {
				before[i] = append(before[i], k)
			}
		}
	}
	done := make([]bool, n)
	out := make([]*unit, 0, n)
	for len(out) < n {
		next := -1
		for i := range units {
			if done[i] {
				continue
			}
			if next < 0 {
				next = i // the first left: taken if none is ready (a longer cycle)
			}
			ready := true
			for _, k := range before[i] {
				ready = ready && done[k]
			}
			if ready {
				next = i
				break
			}
		}
		done[next] = true
		out = append(out, units[next])
	}
	return out
}

// laneUnits groups units into lanes that may run at the same time: units
// that read or write a common entity share a lane and run in the order
// given, so that one pipeline's broker counts (before, after, the
// verification) never include another's reads or writes, and a pipeline
// that reads what another writes runs after it. Lanes are in the order of
// their first unit.
func laneUnits(units []*unit) [][]*unit {
	lane := make([]int, len(units)) // each unit's lane, as the index of its first unit
	for i := range units {
		lane[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if lane[i] != i {
			lane[i] = find(lane[i])
		}
		return lane[i]
	}
	for i := range units {
		for k := range i {
			if touchesCommon(units[i].touches, units[k].touches) {
				a, b := find(i), find(k)
				lane[max(a, b)] = min(a, b)
			}
		}
	}
	var lanes [][]*unit
	at := map[int]int{}
	for i, u := range units {
		r := find(i)
		n, ok := at[r]
		if !ok {
			n = len(lanes)
			at[r] = n
			lanes = append(lanes, nil)
		}
		lanes[n] = append(lanes[n], u)
	}
	return lanes
}

// touchesCommon reports whether two lists of identities share an entity:
// equal identities, or one that names only the beginning of the other (a
// server alone, where a sink's entity is a template or known only to the
// server).
func touchesCommon(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y || strings.HasPrefix(x, y+" ") || strings.HasPrefix(y, x+" ") {
				return true
			}
		}
	}
	return false
}

// skippedInterrupted is the reason of a job an interrupt kept from running.
const skippedInterrupted = "not started: the migration was interrupted"

// OutcomeSkipped: the pipeline did not run (an interrupt came first, or
// its main queue failed before its dead-letter queue's turn); Reason says
// which. It never is a run's outcome: what caused it is.
const OutcomeSkipped Outcome = "skipped"

// notRun reports a pipeline that did not run, or failed before it started.
func notRun(p *config.Pipeline, queue string, o Outcome, reason string) *JobReport {
	return &JobReport{
		Pipeline: p.Name, Queue: queue, SourceKind: p.Spec.Source.Kind, SinkKind: p.Spec.Sink.Kind,
		Outcome: o, Reason: reason,
	}
}

func skipAll(rep *Report, pipes []*config.Pipeline, reason string) {
	for _, p := range pipes {
		rep.Jobs = append(rep.Jobs, notRun(p, "main", OutcomeSkipped, reason))
	}
}

// emptyUncounted is the warning for a source that yielded nothing and
// whose broker cannot count: an AMQP broker may create the queue a
// mistyped address names, and a core NATS subject nobody publishes on is
// silent, so "complete" alone would hide the mistake.
const emptyUncounted = "the source held nothing and its broker cannot count it: check its address"

// emptyCountFailed is the same warning for a broker that counts, which
// could not be counted before the move (it used to say "cannot count" too).
const emptyCountFailed = "the source held nothing, and it could not be counted before the move"

func warnEmptyUncounted(jr *JobReport, log *slog.Logger) {
	if jr.Outcome != OutcomeComplete || jr.Read != 0 || jr.SourceBefore != nil || jr.Reason != "" {
		return
	}
	why, uncounted := jr.CountErrors["source"]
	if !uncounted {
		return
	}
	jr.Reason = emptyUncounted
	if jr.sourceCountable {
		jr.Reason = fmt.Sprintf("%s (its last count: %s): check its address", emptyCountFailed, why)
	}
	log.Warn("migrate: " + jr.Reason)
}
