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
	"fmt"
	"log/slog"
	"time"

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
		for _, j := range rep.Jobs {
			rep.Totals.add(j.Counts)
			switch j.Outcome {
			case OutcomeSkipped:
				// Skipped follows a failure or an interrupt, which
				// decides the outcome and the reason.
				skipped++
				continue
			case OutcomeFailed:
				failed++
			}
			if j.Outcome.severity() > worst.severity() {
				worst = j.Outcome
				rep.Reason = fmt.Sprintf("pipeline %s: %s", j.Pipeline, j.Reason)
				if j.Queue != "main" {
					rep.Reason = fmt.Sprintf("pipeline %s (%s queue): %s", j.Pipeline, j.Queue, j.Reason)
				}
			}
		}
		if rep.Outcome == "" {
			rep.Outcome = worst
			if failed > 1 || skipped > 0 {
				rep.Reason += fmt.Sprintf(" (of %d: %d failed, %d skipped; the summary lists each)", len(rep.Jobs), failed, skipped)
			}
			if worst == OutcomeComplete {
				// Loud on the first line too: "complete" may hide a typo.
				for _, j := range rep.Jobs {
					if j.Reason == emptyUncounted {
						rep.Reason = fmt.Sprintf("pipeline %s: %s", j.Pipeline, j.Reason)
						break
					}
				}
			}
			if worst == OutcomeComplete || worst == OutcomeDeadLettered {
				// A sink short of what was written is said on the first
				// line too: "complete" alone would hide it.
				for _, j := range rep.Jobs {
					if v := j.Verification; v.Short() {
						note := fmt.Sprintf("pipeline %s: not verified: %s", j.Pipeline, v.Note)
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
		var active, done float64
		for _, j := range rep.Jobs {
			active += j.ActiveSeconds
			done += j.Rate * j.ActiveSeconds // each job's own count: a dry run's is what it read
		}
		if active > 0 {
			rep.Rate = done / active
		}
		rep.ExitCode = rep.Outcome.ExitCode()
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
	}
	// A failed pipeline does not stop the others: pipelines are
	// independent queues, and stopping at the first failure left the rest
	// unmigrated and unreported. An interrupt stops everything; what did
	// not run is listed as skipped, so the report names every pipeline.
	stopped := ""
	for _, p := range pipes {
		// A migration reads what is there: its sources must not create
		// the entity they read (a mistyped name would "complete" empty).
		p = p.ForMigration()
		if stopped != "" {
			rep.Jobs = append(rep.Jobs, notRun(p, "main", OutcomeSkipped, stopped))
			continue
		}
		jobs := []*job{{opt: &opt, pipe: p, queue: "main"}}
		if opt.IncludeDeadLetters {
			dp, err := p.WithDeadLetterSource(ctx, opt.Log)
			if err != nil {
				rep.Jobs = append(rep.Jobs, notRun(p, "main", OutcomeFailed, fmt.Sprintf("-include-dead-letters: %v; nothing of this pipeline was migrated", err)))
				continue
			}
			// Dead letters stay dead letters: they go to the pipeline's
			// dead-letter sink where it has one.
			dp = dp.WithDeadLetterSinkAsSink()
			// Known only now: a dead-letter sink writing into the very
			// dead-letter queue read would move its messages in a circle.
			if why, loops := dp.SinkFeedsSource(); loops {
				rep.Jobs = append(rep.Jobs, notRun(p, "main", OutcomeFailed, fmt.Sprintf("-include-dead-letters: pipeline %q: its dead-letter sink %s (the dead-letter queue read), so its messages would circulate without end; migrate the dead letters without -include-dead-letters, with a pipeline of their own; nothing of this pipeline was migrated", p.Name, why)))
				continue
			}
			jobs = append(jobs, &job{opt: &opt, pipe: dp, queue: "dead-letter"})
		}
		mainFailed := false
		for _, j := range jobs {
			switch {
			case stopped != "":
				rep.Jobs = append(rep.Jobs, notRun(j.pipe, j.queue, OutcomeSkipped, stopped))
				continue
			case mainFailed:
				// The dead-letter queue comes after its main queue.
				rep.Jobs = append(rep.Jobs, notRun(j.pipe, j.queue, OutcomeSkipped, "not started: the pipeline's main queue failed"))
				continue
			}
			j.log = opt.Log.With("pipeline", j.pipe.Name, "queue", j.queue)
			if state != nil {
				j.state = state
				j.from = state.after(j.key())
			}
			jr := j.run(ctx, prog)
			if jr.Outcome == OutcomeFailed && jr.browseRefused && opt.Mode == ModeDryRun {
				// The broker refused to browse once asked: sample instead.
				opt.Log.Warn("the source cannot be browsed; the dry run reads a sample instead", "pipeline", j.pipe.Name, "sample", opt.Sample, "cause", jr.Reason)
				j.noBrowse = true
				jr = j.run(ctx, prog)
			}
			warnEmptyUncounted(jr, j.log)
			rep.Jobs = append(rep.Jobs, jr)
			switch {
			case jr.Outcome == OutcomeInterrupted || ctx.Err() != nil:
				stopped = "not started: the migration was interrupted"
			case jr.Outcome == OutcomeFailed && j.queue == "main":
				mainFailed = true
			}
		}
	}
	return finish()
}

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

func warnEmptyUncounted(jr *JobReport, log *slog.Logger) {
	if jr.Outcome != OutcomeComplete || jr.Read != 0 || jr.SourceBefore != nil || jr.Reason != "" {
		return
	}
	if _, uncounted := jr.CountErrors["source"]; !uncounted {
		return
	}
	jr.Reason = emptyUncounted
	log.Warn("migrate: " + emptyUncounted)
}
