package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
)

// twoPipelinesHCL: p0bad reads from broker "%[1]s-bad", p1 from "%[1]s".
const twoPipelinesHCL = `
pipeline "p0bad" {
  source "memq" {
    broker = "%[1]s-bad"
    queue  = "in"
  }
  sink "memq" {
    broker = "%[1]s"
    queue  = "out0"
  }
}
pipeline "p1" {
  source "memq" {
    broker = "%[1]s"
    queue  = "in"
  }
  sink "memq" {
    broker = "%[1]s"
    queue  = "out1"
  }
}
`

// setupTwo is setup with a second broker, "<id>-bad", for p0bad.
func setupTwo(t *testing.T) (good, bad *memBroker, pipes []*config.Pipeline) {
	t.Helper()
	id := fmt.Sprintf("b%d", brokerSeq.Add(1))
	good, bad = newBroker(id), newBroker(id+"-bad")
	cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(fmt.Sprintf(twoPipelinesHCL, id)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return good, bad, cfg.Pipelines
}

func summary(rep *Report) string {
	var b bytes.Buffer
	rep.Summary(&b)
	return b.String()
}

func reportJSON(t *testing.T, rep *Report) map[string]string {
	t.Helper()
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pipelines []struct{ Pipeline, Outcome string }
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range got.Pipelines {
		out[p.Pipeline] = p.Outcome
	}
	return out
}

func TestFailedPipelineDoesNotStopTheOthers(t *testing.T) {
	good, bad, pipes := setupTwo(t)
	bad.failOpen = true
	good.put("in", msgs(5, 0)...)
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = 200 * time.Millisecond
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeFailed || rep.ExitCode != ExitFailed || !strings.Contains(rep.Reason, "pipeline p0bad: not connected after") {
		t.Fatalf("outcome %s (exit %d): %s", rep.Outcome, rep.ExitCode, rep.Reason)
	}
	// The first line says p0bad was not all: with one failure of two it
	// named p0bad alone, as if nothing else had run.
	if !strings.Contains(rep.Reason, "(of 2: 1 failed, 0 skipped; the summary lists each)") {
		t.Errorf("reason does not count the pipelines: %s", rep.Reason)
	}
	if got := reportJSON(t, rep); got["p0bad"] != "failed" || got["p1"] != "complete" {
		t.Fatalf("report pipelines %v, want p0bad failed and p1 complete", got)
	}
	if n := len(good.messages("out1")); n != 5 {
		t.Errorf("p1 wrote %d messages, want 5", n)
	}
	if s := summary(rep); !strings.Contains(s, "p1: memq → memq, complete") {
		t.Errorf("summary lacks p1:\n%s", s)
	}
}

func TestInterruptListsTheRestAsSkipped(t *testing.T) {
	_, _, pipes := setupTwo(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := Run(ctx, pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeInterrupted || rep.ExitCode != ExitInterrupted {
		t.Fatalf("outcome %s (exit %d): %s", rep.Outcome, rep.ExitCode, rep.Reason)
	}
	if got := reportJSON(t, rep); got["p1"] != "skipped" {
		t.Fatalf("report pipelines %v, want p1 skipped", got)
	}
	s := summary(rep)
	if !strings.Contains(s, "p1: memq → memq, skipped (not started: the migration was interrupted)") {
		t.Errorf("summary lacks the skipped pipeline:\n%s", s)
	}
	if !strings.Contains(rep.Reason, "1 skipped") {
		t.Errorf("reason does not count the skipped pipeline: %s", rep.Reason)
	}
	// The first line names where it stopped and counts the pipelines; the
	// reason is p0bad's line's.
	if first, _, _ := strings.Cut(s, "\n"); !strings.HasSuffix(first, ": pipeline p0bad (of 2: 0 failed, 1 skipped; the summary lists each)") {
		t.Errorf("first line %q", first)
	}
	if want := "interrupted in pipeline p0bad; not started: pipeline p1; the summary says what was done and what is left"; rep.ErrorLine() != want {
		t.Errorf("error line %q, want %q", rep.ErrorLine(), want)
	}
}

func TestDeadLetterQueueSkippedWhenItsMainQueueFails(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.failOpen = true
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = 200 * time.Millisecond
	opt.IncludeDeadLetters = true
	rep := Run(context.Background(), pipes, opt, nil)
	if len(rep.Jobs) != 2 || rep.Jobs[0].Outcome != OutcomeFailed || rep.Jobs[1].Outcome != OutcomeSkipped || rep.Jobs[1].Queue != "dead-letter" {
		t.Fatalf("jobs: %s", summary(rep))
	}
	if rep.Outcome != OutcomeFailed {
		t.Errorf("outcome %s, want failed", rep.Outcome)
	}
}

func TestMissingSourceFailsAtOnce(t *testing.T) {
	good, bad, pipes := setupTwo(t)
	bad.missing = true
	good.put("in", msgs(3, 0)...)
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = time.Minute // the engine alone would retry this long
	start := time.Now()
	rep := Run(context.Background(), pipes, opt, nil)
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("took %s", el)
	}
	if rep.Jobs[0].Outcome != OutcomeFailed || !strings.Contains(rep.Jobs[0].Reason, "the source cannot be read: memq: queue in does not exist") {
		t.Fatalf("p0bad: %s: %s", rep.Jobs[0].Outcome, rep.Jobs[0].Reason)
	}
	if rep.Jobs[1].Outcome != OutcomeComplete {
		t.Errorf("p1: %s: %s", rep.Jobs[1].Outcome, rep.Jobs[1].Reason)
	}
}

func TestSourcesOpenForMigration(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(2, 0)...)
	if rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil); rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.openedForMigration {
		t.Error("the source was opened without the kind's ForMigration change (it may create what it reads)")
	}
}

func TestEmptyUncountedSourceIsFlagged(t *testing.T) {
	_, pipes := setup(t, `
pipeline "p" {
  source "memqplain" {
    broker = "%[1]s"
    queue  = "ordres"
  }
  sink "memq" {
    broker = "%[1]s"
    queue  = "out"
  }
}
`)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "check its address") || !strings.Contains(summary(rep), "complete (the source held nothing and its broker cannot count it") {
		t.Errorf("no warning: %s\n%s", rep.Reason, summary(rep))
	}
}

// A source that counts, empty, whose count before the move failed: the
// warning says the count failed and why, not that its broker cannot count
// (an audit saw JetStream called uncountable).
func TestEmptySourceWhoseFirstCountFailed(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.mu.Lock()
	b.failCounts = 1
	b.mu.Unlock()
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	want := "the source held nothing, and it could not be counted before the move (its last count: memq: count: connection reset): check its address"
	if !strings.Contains(rep.Reason, want) || strings.Contains(summary(rep), "cannot count") {
		t.Errorf("first line %q, want %q\n%s", rep.Reason, want, summary(rep))
	}
}

func TestOptionsRefuseNegativeDurations(t *testing.T) {
	for name, o := range map[string]Options{
		"idle":            {Mode: ModeMove, Idle: -time.Second},
		"timeout":         {Mode: ModeMove, Timeout: -time.Second},
		"connect timeout": {Mode: ModeMove, ConnectTimeout: -time.Second},
		"verify wait":     {Mode: ModeMove, VerifyWait: -time.Second},
		"sample":          {Mode: ModeDryRun, Sample: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		// Run fills zero values only: a negative one is not replaced by
		// the default but refused.
		o.Log = fastOptions(ModeMove).Log
		if rep := Run(context.Background(), nil, o, nil); rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "cannot be negative") {
			t.Errorf("%s: Run gave %s: %s", name, rep.Outcome, rep.Reason)
		}
	}
}

// A source whose open fails for good (an AMQP queue that does not exist,
// known only on attach) fails its pipeline at once, in every mode.
func TestPermanentOpenErrorFailsAtOnce(t *testing.T) {
	for _, mode := range []Mode{ModeMove, ModeDryRun} {
		b, pipes := setup(t, moveHCL)
		b.goneOnOpen = true
		opt := fastOptions(mode)
		opt.ConnectTimeout = time.Minute
		start := time.Now()
		rep := Run(context.Background(), pipes, opt, nil)
		if el := time.Since(start); el > 20*time.Second {
			t.Fatalf("%s: took %s", mode, el)
		}
		if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "memq: queue in does not exist") {
			t.Fatalf("%s: outcome %s: %s", mode, rep.Outcome, rep.Reason)
		}
	}
}

// -include-dead-letters on a source without a dead-letter queue moves its
// main queue and lists the dead-letter queue as skipped, with why; the run
// is complete (it failed the whole pipeline before, so a run over several
// pipelines had to be split).
func TestIncludeDeadLettersWithoutADeadLetterQueue(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`))
	b.put("in", msgs(5, 0)...)
	opt := fastOptions(ModeMove)
	opt.IncludeDeadLetters = true
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete || rep.Reason != "" || len(rep.Jobs) != 2 {
		t.Fatalf("outcome %s (%q), %d jobs", rep.Outcome, rep.Reason, len(rep.Jobs))
	}
	main, dlq := rep.Jobs[0], rep.Jobs[1]
	if main.Queue != "main" || main.Outcome != OutcomeComplete || main.Written != 5 {
		t.Errorf("main: %s %s, written %d", main.Queue, main.Outcome, main.Written)
	}
	if dlq.Queue != "dead-letter" || dlq.Outcome != OutcomeSkipped || !strings.Contains(dlq.Reason, "no dead-letter queue: a memqplain source keeps none") || strings.Count(dlq.Reason, "no dead-letter queue") != 1 {
		t.Errorf("dead-letter: %s %s (%s)", dlq.Queue, dlq.Outcome, dlq.Reason)
	}
}

// A dry run's sample of an SQS FIFO queue is what one receive gave of each
// group (a group's next message waits until the one before is deleted):
// the summary says so where the sample came out smaller than -sample and
// than the queue. It said "read 3; would write 3 (a sample)" alone.
func TestDryRunSummarySaysAFIFOSampleIsPerGroup(t *testing.T) {
	const note = "an SQS FIFO queue hands out a group's next message only once the one before it is deleted, and a dry run deletes nothing"
	fifo := &driver.Backlog{Ready: 60, Ordered: true, Deduplicates: true}
	standard := &driver.Backlog{Ready: 60}
	for _, tc := range []struct {
		name   string
		kind   string
		src    *driver.Backlog
		read   int64
		groups int
		want   string // "": no note
	}{
		{"fifo, few groups", "sqs", fifo, 3, 3, "read 3; would write 3 (a sample); " + note + ": 3 groups gave 3 messages, not the -sample 40 asked for, of the 60 at the source\n"},
		{"fifo, one group", "sqs", fifo, 1, 1, "1 group gave 1 message, not the -sample 40 asked for"},
		{"fifo, a full sample", "sqs", fifo, 40, 40, ""},
		// An audit: every group's head held by another consumer.
		{"fifo, every head in flight", "sqs", &driver.Backlog{Ready: 290, InFlight: 10, Ordered: true}, 0, 0,
			"0 groups gave 0 messages, not the -sample 40 asked for, of the 300 at the source (10 of them in flight: received by another consumer"},
		{"fifo, the whole queue", "sqs", &driver.Backlog{Ready: 3, Ordered: true}, 3, 3, ""},
		{"standard", "sqs", standard, 3, 0, ""},
		{"not counted", "sqs", nil, 3, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := JobReport{Pipeline: "p", SourceKind: tc.kind, SinkKind: "sqs", Outcome: OutcomeComplete, SourceBefore: tc.src, SourceAfter: tc.src,
				Counts: Counts{Read: tc.read}, Groups: tc.groups, DryRun: &DryRunReport{WouldWrite: tc.read, Sampled: true}, sampleAsked: 40}
			s := summary(&Report{Mode: ModeDryRun, Outcome: OutcomeComplete, Jobs: []*JobReport{&j}})
			if tc.want == "" {
				if strings.Contains(s, note) {
					t.Errorf("summary has the FIFO note:\n%s", s)
				}
				return
			}
			if !strings.Contains(s, tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, s)
			}
		})
	}
}
