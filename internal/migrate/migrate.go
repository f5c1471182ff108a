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
	"time"

	"github.com/qbridge/qbridge/internal/config"
)

// Run migrates the pipelines one after the other (and, with
// IncludeDeadLetters, each one's dead-letter queue after its main queue).
// It always returns a report; Report.Outcome says how it ended.
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
		for _, j := range rep.Jobs {
			rep.Totals.add(j.Counts)
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
		}
		var active float64
		for _, j := range rep.Jobs {
			active += j.ActiveSeconds
		}
		if active > 0 {
			rep.Rate = float64(rep.Totals.Done()) / active
		}
		rep.ExitCode = rep.Outcome.ExitCode()
		return rep
	}
	if err := opt.Validate(); err != nil {
		rep.Outcome, rep.Reason = OutcomeFailed, err.Error()
		return finish()
	}
	var state *stateFile
	if opt.StateFile != "" {
		s, err := openState(opt.StateFile)
		if err != nil {
			rep.Outcome, rep.Reason = OutcomeFailed, err.Error()
			return finish()
		}
		state = s
	}
	for _, p := range pipes {
		jobs := []*job{{opt: &opt, pipe: p, queue: "main"}}
		if opt.IncludeDeadLetters {
			dp, err := p.WithDeadLetterSource(ctx, opt.Log)
			if err != nil {
				rep.Outcome, rep.Reason = OutcomeFailed, fmt.Sprintf("-include-dead-letters: %v", err)
				return finish()
			}
			// Dead letters stay dead letters: they go to the pipeline's
			// dead-letter sink where it has one.
			dp = dp.WithDeadLetterSinkAsSink()
			// Known only now: a dead-letter sink writing into the very
			// dead-letter queue read would move its messages in a circle.
			if why, loops := dp.SinkFeedsSource(); loops {
				rep.Outcome, rep.Reason = OutcomeFailed, fmt.Sprintf("-include-dead-letters: pipeline %q: its dead-letter sink %s (the dead-letter queue read), so its messages would circulate without end; migrate the dead letters without -include-dead-letters, with a pipeline of their own", p.Name, why)
				return finish()
			}
			jobs = append(jobs, &job{opt: &opt, pipe: dp, queue: "dead-letter"})
		}
		for _, j := range jobs {
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
			rep.Jobs = append(rep.Jobs, jr)
			if jr.Outcome == OutcomeInterrupted || jr.Outcome == OutcomeFailed || ctx.Err() != nil {
				return finish()
			}
		}
	}
	return finish()
}
