package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

func TestVerification(t *testing.T) {
	bl := func(ready, inFlight int64) *driver.Backlog { return &driver.Backlog{Ready: ready, InFlight: inFlight} }
	dedup := func(ready int64) *driver.Backlog { return &driver.Backlog{Ready: ready, Deduplicates: true} }
	fifo := func(ready int64) *driver.Backlog {
		return &driver.Backlog{Ready: ready, Deduplicates: true, DedupWindow: 5 * time.Minute}
	}
	capped := func(ready int64) *driver.Backlog {
		return &driver.Backlog{Ready: ready, Limits: "max_msgs 100, discard old", KeepsAtMost: 100}
	}
	for _, tc := range []struct {
		name          string
		j             JobReport
		mode          Mode
		nil, verified bool
		checked       bool
		note          string
	}{
		{name: "as written", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: bl(0, 0), SinkAfter: bl(3, 1)},
			mode: ModeMove, verified: true, checked: true},
		{name: "duplicates the sink reported, a resumed copy, within what the last run may have written", j: JobReport{Counts: Counts{Written: 4, DuplicatesDropped: 3}, ResumedFrom: 10, rewritable: 3, SinkBefore: bl(5, 0), SinkAfter: bl(6, 0)},
			mode: ModeCopy, verified: true, checked: true, note: "3 of the duplicates the sink reported are taken for rewrites of what the interrupted copy may have written"},
		// An incremental copy (-state, run again later) whose new messages
		// reuse ids: they were merged away, and it said verified.
		{name: "duplicates the sink reported, a resumed copy, beyond what the last run may have written", j: JobReport{Counts: Counts{Written: 50, DuplicatesDropped: 50}, ResumedFrom: 50, SinkBefore: bl(50, 0), SinkAfter: bl(50, 0)},
			mode: ModeCopy, checked: true, note: "the sink dropped 50 messages as duplicates of others it holds"},
		{name: "duplicates the sink reported, explained by retries", j: JobReport{Counts: Counts{Written: 4, DuplicatesDropped: 3, Retried: 1, AckFailed: 2}, SinkBefore: bl(5, 0), SinkAfter: bl(6, 0)},
			mode: ModeMove, verified: true, checked: true},
		// A delivery before this run is no proof of a write: an audit
		// merged half a stream away after a consumer had NAKed every
		// message once, and the move said a plain verified.
		{name: "duplicates forgiven only as redeliveries: the allowance, said", j: JobReport{Counts: Counts{Written: 100, DuplicatesDropped: 50, Redelivered: 100}, SinkBefore: bl(0, 0), SinkAfter: bl(50, 0)},
			mode: ModeMove, verified: true, checked: true, note: "50 of the duplicates the sink reported are taken for rewrites of messages the source had delivered before"},
		// An audit: two sources numbering their ids alike, merged into one
		// JetStream stream: the sink dropped the second source's messages
		// as duplicates, and the move said verified.
		// An AMQP link lost mid-move: the accept of one message failed,
		// RabbitMQ delivered it again (with no delivery count), and the
		// sink dropped the second copy. A clean move said "merged".
		{name: "a duplicate explained by a failed acknowledgement", j: JobReport{Counts: Counts{Written: 3001, DuplicatesDropped: 1, AckFailed: 1}, SinkBefore: bl(0, 0), SinkAfter: bl(3000, 0)},
			mode: ModeMove, verified: true, checked: true},
		{name: "duplicates nothing explains: distinct messages merged", j: JobReport{Counts: Counts{Written: 4, DuplicatesDropped: 3}, SinkBefore: bl(5, 0), SinkAfter: bl(6, 0)},
			mode: ModeMove, checked: true, note: "the sink dropped 3 messages as duplicates of others it holds"},
		{name: "fewer: merged or taken", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: bl(0, 0), SinkAfter: bl(1, 0)},
			mode: ModeMove, checked: true, note: "3 fewer than migrate wrote"},
		{name: "reported duplicates that were retries of stored sends", j: JobReport{Counts: Counts{Written: 900, DuplicatesDropped: 3}, SinkBefore: bl(0, 0), SinkAfter: bl(900, 0)},
			mode: ModeMove, verified: true, checked: true},
		{name: "more than written: another producer", j: JobReport{Counts: Counts{Written: 900, DuplicatesDropped: 3}, SinkBefore: bl(0, 0), SinkAfter: bl(905, 0)},
			mode: ModeMove, verified: true, checked: true, note: "grew by 5 more than migrate wrote"},
		{name: "fewer, within the redelivered: a resume", j: JobReport{Counts: Counts{Written: 4, Redelivered: 3}, SinkBefore: dedup(2), SinkAfter: dedup(3)},
			mode: ModeMove, verified: true, checked: true, note: "within the 3 messages the source had delivered before"},
		// Delivered before (a dry run's sample, a failed consumer) but the
		// sink keeps every copy: a shortfall is a shortfall.
		{name: "fewer, within the redelivered, sink without duplicate detection", j: JobReport{Counts: Counts{Written: 4, Redelivered: 3}, SinkBefore: bl(2, 0), SinkAfter: bl(3, 0)},
			mode: ModeMove, checked: true, note: "3 fewer than migrate wrote"},
		{name: "fewer than written, more than redelivered", j: JobReport{Counts: Counts{Written: 4, Redelivered: 2}, SinkBefore: dedup(0), SinkAfter: dedup(1)},
			mode: ModeMove, checked: true, note: "3 fewer than migrate wrote: its broker dropped them as duplicates (its duplicate detection"},
		{name: "fewer, sink without duplicate detection", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: bl(0, 0), SinkAfter: bl(1, 0)},
			mode: ModeMove, checked: true, note: "3 fewer than migrate wrote, and it does not drop duplicates: another consumer"},
		{name: "more: another producer", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: bl(0, 0), SinkAfter: bl(6, 0)},
			mode: ModeMove, verified: true, checked: true, note: "2 more"},
		{name: "uncountable sink", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: nil, SinkAfter: nil, CountErrors: map[string]string{"sink": "counting the amqp sink: unsupported operation"}},
			mode: ModeMove, note: "the sink cannot be counted: its broker offers no message count for this sink, so the verification could not be done"},
		// A resume into RabbitMQ: the note a counted sink gives was lost.
		{name: "uncountable sink, redelivered: may be there twice", j: JobReport{Counts: Counts{Written: 40, Redelivered: 30}, SinkBefore: nil, SinkAfter: nil},
			mode: ModeMove, note: "verification could not be done; up to 30 of the messages may be there twice"},
		{name: "countable sink whose count failed", j: JobReport{Counts: Counts{Written: 4}, SinkBefore: nil, SinkAfter: nil, sinkCountable: true, CountErrors: map[string]string{"sink": "memq: count: timed out"}},
			mode: ModeMove, note: "cannot be counted: nothing to compare with (memq: count: timed out)"},
		// A resumed copy writes again what the last run wrote past its
		// checkpoint: an audit saw every exact resume into a FIFO queue
		// reported "NOT verified".
		{name: "resumed copy, within what the last run may have written", j: JobReport{Counts: Counts{Written: 980}, ResumedFrom: 1020, rewritable: 60, SinkBefore: dedup(1080), SinkAfter: dedup(2000)},
			mode: ModeCopy, verified: true, checked: true, note: "within the 60 positions the interrupted copy may have written past its checkpoint"},
		{name: "resumed copy, short by more", j: JobReport{Counts: Counts{Written: 980}, ResumedFrom: 1020, rewritable: 50, SinkBefore: dedup(1080), SinkAfter: dedup(2000)},
			mode: ModeCopy, checked: true, note: "60 fewer than migrate wrote"},
		// A copy killed after its lease and before its first checkpoint:
		// the rerun starts from the beginning, and the sink reported what
		// the first run wrote as duplicates. CI saw it "NOT verified:
		// distinct messages ... were merged".
		// Verified by the resume allowance, which the first line names: the
		// lease says what the first run may have written, not what it did.
		{name: "copy rerun after a kill before its first checkpoint, duplicates reported", j: JobReport{Counts: Counts{Written: 600, DuplicatesDropped: 150}, rewritable: 1000, SinkBefore: dedup(150), SinkAfter: dedup(600)},
			mode: ModeCopy, verified: true, checked: true, note: "150 of the duplicates the sink reported are taken for rewrites"},
		{name: "copy rerun after a kill before its first checkpoint, short", j: JobReport{Counts: Counts{Written: 600}, rewritable: 1000, SinkBefore: dedup(150), SinkAfter: dedup(600)},
			mode: ModeCopy, verified: true, checked: true, note: "within the 1000 positions the interrupted copy may have written past its checkpoint"},
		// A dead-letter queue's job writes to the dead-letter sink, and
		// what it cannot write it dead-letters there too: an audit saw
		// them credited to "another producer".
		{name: "dead letters into the sink's own entity", j: JobReport{Counts: Counts{Written: 2, DeadLetteredTotal: 3}, deadLettersIntoSink: true, SinkBefore: bl(0, 0), SinkAfter: bl(5, 0)},
			mode: ModeMove, verified: true, checked: true},
		{name: "dead letters into the sink's own entity, short", j: JobReport{Counts: Counts{Written: 2, DeadLetteredTotal: 3}, deadLettersIntoSink: true, SinkBefore: bl(0, 0), SinkAfter: bl(2, 0)},
			mode: ModeMove, checked: true, note: "3 fewer than migrate wrote"},
		{name: "dead letters elsewhere", j: JobReport{Counts: Counts{Written: 2, DeadLetteredTotal: 3}, SinkBefore: bl(0, 0), SinkAfter: bl(2, 0)},
			mode: ModeMove, verified: true, checked: true},
		// A stream at its cap pushes out its oldest to take what is
		// written, as the job warned before the move: it said NOT verified
		// (after 15 s of recounting).
		{name: "sink at its cap, pushed out its oldest", j: JobReport{Counts: Counts{Written: 60}, SinkBefore: capped(80), SinkAfter: capped(100)},
			mode: ModeMove, verified: true, checked: true, note: "pushed out 40 of its oldest messages to keep the 100 newest"},
		{name: "sink below its cap, short", j: JobReport{Counts: Counts{Written: 60}, SinkBefore: capped(20), SinkAfter: capped(70)},
			mode: ModeMove, checked: true, note: "10 fewer than migrate wrote: its limits (max_msgs 100, discard old)"},
		// A resume into a sink that keeps every copy: verified, and the
		// possible duplicates said (an audit found 20 of 20,000 twice).
		// An audit: every move after a dry run said its sample "may be
		// there twice", also when it wrote nothing.
		{name: "delivered before, nothing written", j: JobReport{Counts: Counts{Redelivered: 10}, SinkBefore: bl(0, 0), SinkAfter: bl(0, 0)},
			mode: ModeMove, verified: true, checked: true},
		{name: "delivered before, fewer written", j: JobReport{Counts: Counts{Written: 3, Redelivered: 10}, SinkBefore: bl(0, 0), SinkAfter: bl(3, 0)},
			mode: ModeMove, verified: true, checked: true, note: "up to 3 of the messages may be there twice"},
		{name: "resumed copy, sink without duplicate detection", j: JobReport{Counts: Counts{Written: 1470}, ResumedFrom: 2030, rewritable: 520, SinkBefore: bl(1740, 0), SinkAfter: bl(3210, 0)},
			mode: ModeCopy, verified: true, checked: true, note: "up to 520 of the messages may be there twice: the interrupted copy may have written them"},
		{name: "resumed move, sink without duplicate detection", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20}, SinkBefore: bl(0, 0), SinkAfter: bl(100, 0)},
			mode: ModeMove, verified: true, checked: true, note: "up to 20 of the messages may be there twice"},
		// A deduplicating sink drops only copies with an id it knows: a
		// JetStream message without Nats-Msg-Id goes to a JetStream stream
		// without one. An audit resumed a copy killed at sequence 210 of
		// 500 into such a stream, which then held 90 twice, under a plain
		// "verified".
		{name: "resumed copy, deduplicating sink that dropped nothing", j: JobReport{Counts: Counts{Written: 290}, ResumedFrom: 210, rewritable: 800, SinkBefore: dedup(300), SinkAfter: dedup(590)},
			mode: ModeCopy, verified: true, checked: true, note: "up to 290 of the messages may be there twice: the interrupted copy"},
		{name: "resumed copy, deduplicating sink that dropped some", j: JobReport{Counts: Counts{Written: 290, DuplicatesDropped: 40}, ResumedFrom: 210, rewritable: 90, SinkBefore: dedup(300), SinkAfter: dedup(550)},
			mode: ModeCopy, verified: true, checked: true, note: "up to 50 of the messages may be there twice: the interrupted copy"},
		{name: "resumed move, deduplicating sink that dropped nothing", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20}, SinkBefore: dedup(0), SinkAfter: dedup(100)},
			mode: ModeMove, verified: true, checked: true, note: "up to 20 of the messages may be there twice"},
		// An SQS FIFO sink drops a copy within 5 minutes of the first:
		// a message the source first delivered within that of its write
		// here is not there twice, whoever had it before.
		{name: "resumed move, SQS FIFO sink, every redelivery within its window", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20}, redeliveredInWindow: 20, SinkBefore: fifo(0), SinkAfter: fifo(100)},
			mode: ModeMove, verified: true, checked: true},
		{name: "resumed move, SQS FIFO sink, some redeliveries beyond its window", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20}, redeliveredInWindow: 12, SinkBefore: fifo(0), SinkAfter: fifo(100)},
			mode: ModeMove, verified: true, checked: true, note: "up to 8 of the messages may be there twice: the source had delivered them before (an interrupted run may have written them; a dry run's sample or another consumer raises the same count), and the sink drops a copy only within its duplicate window (5m0s) of the first, which the source does not show them to be in"},
		{name: "resumed move, deduplicating sink that dropped some", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20, DuplicatesDropped: 5}, SinkBefore: dedup(0), SinkAfter: dedup(95)},
			mode: ModeMove, verified: true, checked: true, note: "up to 15 of the messages may be there twice"},
		{name: "resumed move, deduplicating sink that dropped every copy", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20, DuplicatesDropped: 20}, SinkBefore: dedup(0), SinkAfter: dedup(80)},
			mode: ModeMove, verified: true, checked: true, note: "20 of the duplicates the sink reported are taken for rewrites of messages the source had delivered before"},
		// An embedded server killed with the process loses the last
		// acknowledgements it took: an audit found 256 twice where "up to
		// 128" was said. Not said where nothing was interrupted, nor where
		// a deduplicating sink dropped the copies.
		{name: "resumed move from an embedded server", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20}, SourceBefore: &driver.Backlog{Ready: 80, InFlight: 20, ForgetsRecentAcks: true}, SinkBefore: bl(0, 0), SinkAfter: bl(100, 0)},
			mode: ModeMove, verified: true, checked: true, note: "up to 20 of the messages may be there twice: the source had delivered them before (an interrupted run may have written them; a dry run's sample or another consumer raises the same count), and the sink did not drop them as duplicates; more may be there twice than any count shows"},
		{name: "clean move from an embedded server", j: JobReport{Counts: Counts{Written: 100}, SourceBefore: &driver.Backlog{Ready: 100, ForgetsRecentAcks: true}, SinkBefore: bl(0, 0), SinkAfter: bl(100, 0)},
			mode: ModeMove, verified: true, checked: true},
		{name: "resumed move from an embedded server, copies dropped", j: JobReport{Counts: Counts{Written: 100, Redelivered: 20, DuplicatesDropped: 20}, SourceBefore: &driver.Backlog{Ready: 80, InFlight: 20, ForgetsRecentAcks: true}, SinkBefore: dedup(0), SinkAfter: dedup(80)},
			mode: ModeMove, verified: true, checked: true, note: "20 of the duplicates the sink reported are taken for rewrites"},
		{name: "dry run", j: JobReport{DryRun: &DryRunReport{}}, mode: ModeDryRun, nil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verification(&tc.j, tc.mode)
			if tc.nil {
				if v != nil {
					t.Fatalf("got %+v, want none", v)
				}
				return
			}
			if v.Verified != tc.verified || v.Checked != tc.checked || !strings.Contains(v.Note, tc.note) || (tc.note == "" && v.Note != "") {
				t.Errorf("got %+v, want verified %v checked %v note containing %q", v, tc.verified, tc.checked, tc.note)
			}
		})
	}
}

// moveSharingOneDedupID moves 4 messages that share one dedup id into a
// deduplicating sink (which says how many it dropped when report is set).
func moveSharingOneDedupID(t *testing.T, report bool) *Report {
	t.Helper()
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0 // the memq counts are exact: no lag to wait out
	sink := "dedup = true"
	if report {
		sink += "\n    report_duplicates = true"
	}
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, sink, 1))
	ms := msgs(4, 0)
	for _, m := range ms {
		m.DedupID = "same"
	}
	b.put("in", ms...)
	return Run(context.Background(), pipes, fastOptions(ModeMove), nil)
}

// TestMigrationVerifiesTheSink: a sink that keeps fewer messages than were
// written to it (here it drops equal dedup ids silently, as SQS FIFO does)
// is reported: "NOT verified" on the pipeline, and on the first line of a
// run that would otherwise just say complete. An audit saw a move print
// "written 4 ... sink 0 → 1", complete, exit 0.
func TestMigrationVerifiesTheSink(t *testing.T) {
	rep := moveSharingOneDedupID(t, false)
	j := rep.Jobs[0]
	if j.Written != 4 || j.Verification == nil || j.Verification.Verified || j.Verification.SinkGrowth != 1 || j.Verification.Expected != 4 {
		t.Fatalf("written %d, verification %+v", j.Written, j.Verification)
	}
	if rep.Outcome != OutcomeComplete || !strings.Contains(rep.Reason, "not verified: the sink holds 3 fewer than migrate wrote") {
		t.Errorf("outcome %s: %q", rep.Outcome, rep.Reason)
	}
	// The sink did not say that it dropped them: a consumer of the sink
	// may have taken them (a cut-over), so the exit code stays 0.
	if rep.ExitCode != ExitComplete {
		t.Errorf("exit code %d, want %d", rep.ExitCode, ExitComplete)
	}
	var sum strings.Builder
	rep.Summary(&sum)
	if !strings.Contains(sum.String(), "NOT verified: the sink holds 3 fewer") {
		t.Errorf("summary:\n%s", sum.String())
	}

	// Distinct ids: verified.
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true", 1))
	b.put("in", msgs(4, 0)...)
	rep = Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if v := rep.Jobs[0].Verification; v == nil || !v.Verified || rep.Reason != "" || rep.ExitCode != ExitComplete {
		t.Fatalf("verification %+v, reason %q, exit %d", v, rep.Reason, rep.ExitCode)
	}
	sum.Reset()
	rep.Summary(&sum)
	if !strings.Contains(sum.String(), "verified: the sink grew by 4, 4 written") {
		t.Errorf("summary:\n%s", sum.String())
	}
}

// shortForGood is a move of four messages with one dedup id into a sink
// that keeps one (sinkHCL adds to its block): a sink short for good.
func shortForGood(t *testing.T, sinkHCL string) []*config.Pipeline {
	t.Helper()
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true\n    "+sinkHCL, 1))
	ms := msgs(4, 0)
	for _, m := range ms {
		m.DedupID = "same"
	}
	b.put("in", ms...)
	return pipes
}

// A short sink is counted again for Options.VerifyWait (-verify-wait), not
// for the 15 s default, before the shortfall is reported.
func TestVerifyWaitBoundsTheRecount(t *testing.T) {
	pipes := shortForGood(t, "")
	o := fastOptions(ModeMove)
	o.VerifyWait = 300 * time.Millisecond
	start := time.Now()
	rep := Run(context.Background(), pipes, o, nil)
	took := time.Since(start)
	if v := rep.Jobs[0].Verification; v == nil || v.Verified || v.SinkGrowth != 1 {
		t.Fatalf("verification %+v", v)
	}
	// The recount ends at the deadline, after it: a lower bound that holds
	// on any machine; the upper one only tells the default apart.
	if took < o.VerifyWait || took >= verifyWait {
		t.Errorf("took %s with VerifyWait %s (default %s)", took, o.VerifyWait, verifyWait)
	}
}

// A sink whose count is exact (a JetStream stream) is not counted again: a
// short count is the truth at once, where it waited out -verify-wait.
func TestExactSinkCountIsNotCountedAgain(t *testing.T) {
	pipes := shortForGood(t, "exact_count = true")
	o := fastOptions(ModeMove)
	o.VerifyWait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := Run(ctx, pipes, o, nil)
	if ctx.Err() != nil {
		t.Fatal("the verification counted the exact sink again until the test's deadline")
	}
	if v := rep.Jobs[0].Verification; v == nil || v.Verified || v.SinkGrowth != 1 {
		t.Fatalf("verification %+v", v)
	}
}

// A sink that says it dropped duplicates (an SQS FIFO queue answering with
// the first message's id) proves the merge: exit 5, so that an automation
// that reads only the exit code does not take the lost messages for a
// clean move (it exited 0).
func TestMergedMessagesExitNotVerified(t *testing.T) {
	rep := moveSharingOneDedupID(t, true)
	v := rep.Jobs[0].Verification
	if rep.Outcome != OutcomeComplete || rep.ExitCode != ExitNotVerified || v == nil || v.Merged != 3 || v.MergedInRun != 3 || !strings.Contains(rep.Reason, "the sink dropped 3 messages as duplicates") {
		t.Fatalf("outcome %s, exit %d, verification %+v: %s", rep.Outcome, rep.ExitCode, v, rep.Reason)
	}
}

// A message whose carry envelope did not fit on the sink (SQS: 10
// attributes) goes without what the envelope carried (its CorrelationId,
// Subject...): the report and the summary count it by member, in a move and
// in a dry run. An audit saw a clean report, mapping_dropped 0, with them
// gone.
func TestEnvelopeShedIsReported(t *testing.T) {
	for _, mode := range []Mode{ModeMove, ModeDryRun} {
		b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, `shed_attr = "full"`, 1))
		ms := msgs(5, 0)
		for _, m := range ms[:3] {
			m.SetAttr("full", mapping.String("x"))
		}
		b.put("in", ms...)
		rep := Run(context.Background(), pipes, fastOptions(mode), nil)
		j := rep.Jobs[0]
		if j.EnvelopeShed["correlation_id"] != 3 {
			t.Errorf("%s: envelope shed %v", mode, j.EnvelopeShed)
		}
		want := map[Mode]string{ModeMove: "3 messages went without correlation_id", ModeDryRun: "3 messages would go without correlation_id"}[mode]
		if s := summaryOf(rep); !strings.Contains(s, want) {
			t.Errorf("%s: summary:\n%s", mode, s)
		}
	}
}

// Duplicates of what an earlier run wrote (a copy, then a move of the same
// messages) are no loss: the sink holds them. The move said "not verified"
// and, with exit 5 for merges, failed a cut-over done as documented.
func TestDuplicatesOfAnEarlierRunAreNoLoss(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true\n    report_duplicates = true", 1))
	same := func() []*mapping.Message {
		ms := msgs(3, 0)
		for i, m := range ms {
			m.DedupID = fmt.Sprintf("d%d", i)
		}
		return ms
	}
	b.put("in", same()...)
	if rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil); rep.ExitCode != ExitComplete {
		t.Fatalf("first move: exit %d: %s", rep.ExitCode, rep.Reason)
	}
	b.put("in", same()...) // the same messages again
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if v := rep.Jobs[0].Verification; rep.ExitCode == ExitNotVerified || v == nil || v.Merged != 3 || v.MergedInRun != 0 {
		t.Fatalf("exit %d, verification %+v: %s", rep.ExitCode, v, rep.Reason)
	}
}

// TestResumedMoveIsVerified: messages an interrupted run wrote and did not
// acknowledge come back (delivered before) and are written again; a
// deduplicating sink keeps the first copy, so the sink grows by less than
// was written. Within the redelivered count that is a resume, verified; an
// audit saw every exact resume reported "NOT verified".
func TestResumedMoveIsVerified(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0
	for _, again := range []bool{true, false} {
		b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true", 1))
		ms := msgs(4, 0)
		for i, m := range ms {
			m.DedupID = fmt.Sprintf("d%d", i)
			if i < 2 && again {
				m.Source.DeliveryCount = 2
			}
		}
		// The interrupted run wrote the first two.
		b.mu.Lock()
		b.dedup = map[string]bool{"d0": true, "d1": true}
		b.mu.Unlock()
		b.put("out", ms[0].Clone(), ms[1].Clone())
		b.put("in", ms...)
		rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
		j := rep.Jobs[0]
		v := j.Verification
		if j.Written != 4 || v == nil || v.SinkGrowth != 2 {
			t.Fatalf("written %d, verification %+v", j.Written, v)
		}
		// Verified, and the first line says by what: a dry run's sample
		// raises delivery counts too (an audit: a whole queue merged away
		// and "verified" after the recommended dry run).
		if again && (!v.Verified || j.Redelivered != 2 || v.Allowance != 2 || !strings.Contains(v.Note, "within the 2 messages the source had delivered before") ||
			!strings.Contains(rep.Reason, "verified only by the resume allowance")) {
			t.Errorf("resumed: redelivered %d, verification %+v, reason %q", j.Redelivered, v, rep.Reason)
		}
		if !again && (v.Verified || j.Redelivered != 0) {
			t.Errorf("nothing redelivered: redelivered %d, verification %+v", j.Redelivered, v)
		}
	}
}

// The progress rate is over the last seconds: while nothing moves it falls
// to 0 and the ETA goes (a resume that waited 15 s for locked messages
// showed "eta=1s" throughout).
func TestProgressRateIsRecent(t *testing.T) {
	start := time.Unix(0, 0)
	var r rateWindow
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	if got := r.rate(at(5), 500, start); got != 100 {
		t.Errorf("young run: %v, want 100/s since the start", got)
	}
	for s := 6; s <= 12; s++ {
		r.rate(at(s), 600+int64(s-6)*100, start)
	}
	// From second 12 to 30 nothing moves.
	for s := 13; s <= 30; s++ {
		r.rate(at(s), 1200, start)
	}
	if got := r.rate(at(31), 1200, start); got != 0 {
		t.Errorf("stalled: %v, want 0", got)
	}
	if got := r.rate(at(41), 2200, start); got != 100 {
		t.Errorf("moving again: %v, want 100/s over the last 10 s", got)
	}
}

func TestRateText(t *testing.T) {
	for r, want := range map[float64]string{0: "0 msg/s", 0.08: "0.1 msg/s", 3.33: "3.3 msg/s", 812.4: "812 msg/s"} {
		if got := rateText(r); got != want {
			t.Errorf("rateText(%v) = %q, want %q", r, got, want)
		}
	}
}

// A dry run of several jobs totals what it would write; its total said
// "written 0" under per-job "would write" lines.
func TestDryRunTotalSaysWouldWrite(t *testing.T) {
	rep := &Report{Mode: ModeDryRun, Outcome: OutcomeComplete, Totals: Counts{Read: 8}, Jobs: []*JobReport{
		{Pipeline: "p", Queue: "main", Outcome: OutcomeComplete, Counts: Counts{Read: 5}, DryRun: &DryRunReport{WouldWrite: 5}},
		{Pipeline: "p", Queue: "dead-letter", Outcome: OutcomeComplete, Counts: Counts{Read: 3}, DryRun: &DryRunReport{WouldWrite: 3}},
	}}
	if s := summaryOf(rep); !strings.Contains(s, "total: read 8, would write 8") || strings.Contains(s, "written 0") {
		t.Errorf("summary:\n%s", s)
	}
}

func TestOneLine(t *testing.T) {
	azure := "servicebus: runtime properties of queue \"orders4\": GET http://127.0.0.1:41495/orders4\n--------------------------------------------------------------------------------\nRESPONSE 401: 401 Unauthorized\nERROR CODE UNAVAILABLE\n--------------------------------------------------------------------------------\nUnauthorized: 'Manage' claim required for 'orders4'\n--------------------------------------------------------------------------------\n"
	if got, want := oneLine(azure), `servicebus: runtime properties of queue "orders4": GET http://127.0.0.1:41495/orders4 RESPONSE 401: 401 Unauthorized ERROR CODE UNAVAILABLE Unauthorized: 'Manage' claim required for 'orders4'`; got != want {
		t.Errorf("oneLine = %q\nwant %q", got, want)
	}
	if got := oneLine("plain"); got != "plain" {
		t.Errorf("oneLine(plain) = %q", got)
	}
}

// Messages another consumer takes during a move never reach the job, and
// the sink grows by what the job wrote: the move said verified. The
// source's counts show it: its count before, less what the job settled,
// less what is left.
func TestMessagesThatLeftTheSourceAnotherWay(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(10, 0)...)
	b.mu.Lock()
	b.vanish = 3
	b.mu.Unlock()
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	j := rep.Jobs[0]
	v := j.Verification
	if rep.Outcome != OutcomeComplete || j.Written != 7 || v == nil || v.Verified || v.LeftTheSource != 3 {
		t.Fatalf("outcome %s, written %d, verification %+v", rep.Outcome, j.Written, v)
	}
	if !strings.Contains(rep.Reason, "not verified: 3 messages left the source other than through this migration") {
		t.Errorf("first line: %q", rep.Reason)
	}
}

// An incremental copy (-state, run again later) whose new messages reuse
// the dedup ids of ones copied before: the deduplicating sink drops them,
// and the copy must say NOT verified. Its state file ran a lease ahead of
// the writes while copying (so that a killed copy's rewrites are allowed
// for); a copy that ended with nothing pending settles it to what was
// written, or the lease would have forgiven these.
func TestIncrementalCopyWithReusedIDsIsNotVerified(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true", 1))
	first := msgs(5, 0)
	for i, m := range first {
		m.DedupID = fmt.Sprintf("d%d", i)
	}
	b.put("in", first...)
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete || !rep.Jobs[0].Verification.Verified {
		t.Fatalf("first copy: %s: %s", rep.Outcome, rep.Reason)
	}
	raw, err := os.ReadFile(opt.StateFile)
	if err != nil || !strings.Contains(string(raw), `"written_up_to": 5`) {
		t.Fatalf("state after a complete copy: %v\n%s", err, raw)
	}
	again := msgs(5, 0)
	for i, m := range again {
		m.ID, m.DedupID = fmt.Sprintf("n%d", i), fmt.Sprintf("d%d", i) // new messages, old ids
	}
	b.put("in", again...)
	rep := Run(context.Background(), pipes, opt, nil)
	if v := rep.Jobs[0].Verification; v == nil || v.Verified || !strings.Contains(rep.Reason, "not verified") {
		t.Fatalf("incremental copy: verification %+v, reason %q", v, rep.Reason)
	}
}

// A sink that drops what goes past its limits without refusing a write (a
// JetStream stream with max_msgs under discard old) is refused before the
// move when what the move writes would not fit: the move emptied the
// source, lost the difference and said complete, exit 0. What fits goes.
func TestMoveIntoASinkThatWouldDropFails(t *testing.T) {
	for _, tc := range []struct {
		mode            Mode
		keeps, have, in int
		fails           bool
	}{
		{ModeMove, 100, 0, 300, true},
		{ModeDryRun, 100, 0, 300, true},
		{ModeMove, 100, 50, 50, false},
		// A copy leaves the source as it is: warned only.
		{ModeCopy, 100, 0, 300, false},
		// What goes past pushes out the stream's own oldest (its rolling
		// window), not what the move writes: a warning.
		{ModeMove, 100, 90, 20, false},
	} {
		t.Run(fmt.Sprintf("%s %d+%d into %d", tc.mode, tc.have, tc.in, tc.keeps), func(t *testing.T) {
			b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, fmt.Sprintf("keeps_at_most = %d", tc.keeps), 1))
			b.put("in", msgs(tc.in, 0)...)
			b.put("out", msgs(tc.have, 0)...)
			rep := Run(context.Background(), pipes, fastOptions(tc.mode), nil)
			j := rep.Jobs[0]
			if tc.fails {
				if rep.Outcome != OutcomeFailed || !strings.Contains(j.Reason, "max_msgs 100, discard old") || j.Read != 0 || b.backlog("in").Ready != int64(tc.in) {
					t.Errorf("%s, read %d, %d left at the source: %s", rep.Outcome, j.Read, b.backlog("in").Ready, j.Reason)
				}
				return
			}
			if rep.Outcome != OutcomeComplete || j.Written != int64(tc.in) {
				t.Errorf("%s, written %d: %s", rep.Outcome, j.Written, j.Reason)
			}
			if pushed := tc.have + tc.in - tc.keeps; tc.mode == ModeMove && pushed > 0 {
				// Warned before the move: the verification says what was
				// pushed out, and not "NOT verified".
				if v := j.Verification; v == nil || !v.Verified || !strings.Contains(v.Note, fmt.Sprintf("pushed out %d of its oldest", pushed)) {
					t.Errorf("verification %+v", v)
				}
			}
			if tc.mode == ModeCopy && tc.in > tc.keeps {
				// What the copy wrote beyond the cap is gone: said at once.
				if v := j.Verification; v == nil || v.Verified || !strings.Contains(v.Note, "its limits (max_msgs 100, discard old)") {
					t.Errorf("verification %+v", v)
				}
			}
		})
	}
}

// A sink that keeps nothing written to it (a JetStream stream with
// interest retention and no consumer) is refused before anything moves.
func TestMoveIntoASinkThatKeepsNothingFails(t *testing.T) {
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "keeps_none = true", 1))
	b.put("in", msgs(3, 0)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if j := rep.Jobs[0]; rep.Outcome != OutcomeFailed || !strings.Contains(j.Reason, "keeps nothing") || j.Read != 0 {
		t.Errorf("%s, read %d: %s", rep.Outcome, j.Read, j.Reason)
	}
}

// Stuck messages at a source that cannot be counted (AMQP) may have others
// queued behind them, which only a count would show: the reason says so.
func TestUncountedBehind(t *testing.T) {
	counted := &JobReport{SourceAfter: &driver.Backlog{}}
	for _, tc := range []struct {
		mode Mode
		rep  *JobReport
		says bool
	}{
		{ModeMove, &JobReport{}, true},
		{ModeMove, counted, false},
		{ModeCopy, &JobReport{}, false},
		{ModeDryRun, &JobReport{}, false},
	} {
		if got := behindStuck(tc.mode, tc.rep); (got != "") != tc.says || tc.says && !strings.Contains(got, "queued behind them") {
			t.Errorf("%s, counted %v: %q", tc.mode, tc.rep.SourceAfter != nil, got)
		}
	}
}

// A move from a source that cannot be counted says how it was found
// drained, and what that cannot see (another consumer's held messages
// came back after a "complete" that said nothing of them).
func TestSummarySaysIdleDrainCannotSeeHeldMessages(t *testing.T) {
	b, pipes := setup(t, strings.Replace(moveHCL, `source "memq"`, `source "memqplain"`, 1))
	b.put("in", msgs(5, 0)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete || rep.Jobs[0].DrainedBy != "idle" {
		t.Fatalf("%s, drained by %q: %s", rep.Outcome, rep.Jobs[0].DrainedBy, rep.Reason)
	}
	if s := summaryOf(rep); !strings.Contains(s, "the source cannot be counted, so messages another consumer holds") {
		t.Errorf("summary:\n%s", s)
	}
	b2, pipes2 := setup(t, moveHCL)
	b2.put("in", msgs(5, 0)...)
	if s := summaryOf(Run(context.Background(), pipes2, fastOptions(ModeMove), nil)); strings.Contains(s, "cannot be counted") {
		t.Errorf("a counted source:\n%s", s)
	}
}

// The summary's counts balance: what was handed back to the source (an
// interrupt, a retry the source redelivers) is said, as read = written +
// handed back shows. An audit saw "read 6060, written 6040, acknowledged
// 6040" and nothing for the 20.
func TestSummarySaysHandedBack(t *testing.T) {
	rep := &Report{Mode: ModeMove, Outcome: OutcomeInterrupted, Jobs: []*JobReport{{Pipeline: "p", Queue: "main", Outcome: OutcomeInterrupted,
		Counts: Counts{Read: 6060, Written: 6040, Acknowledged: 6040, HandedBack: 20}}}}
	if s := summaryOf(rep); !strings.Contains(s, "read 6060, written 6040, acknowledged 6040, dead-lettered 0, retried 0, throttled 0, handed back 20") {
		t.Errorf("summary:\n%s", s)
	}
}

// A FIFO source moved into a sink that keeps no order is warned of before
// anything moves: it said "complete, verified" and nothing else.
func TestOrderedSourceIntoUnorderedSinkIsWarned(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		hcl := moveHCL
		if ordered {
			hcl = strings.Replace(moveHCL, `queue  = "in"`, "queue  = \"in\"\n    ordered = true", 1)
		}
		b, pipes := setup(t, hcl)
		b.put("in", msgs(3, 0)...)
		opt := fastOptions(ModeMove)
		var logs syncBuffer
		opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
		rep := Run(context.Background(), pipes, opt, nil)
		if rep.Outcome != OutcomeComplete {
			t.Fatalf("%s: %s", rep.Outcome, rep.Reason)
		}
		const warning = "its consumers may see a group's messages out of order, and it drops no duplicates"
		if got := strings.Contains(logs.String(), warning); got != ordered {
			t.Errorf("source ordered %v: warned %v:\n%s", ordered, got, logs.String())
		}
		// In the summary and the report too, not only in the log.
		if got := strings.Contains(summaryOf(rep), "warning: the source keeps each group's messages in order"); got != ordered {
			t.Errorf("source ordered %v: in the summary %v:\n%s", ordered, got, summaryOf(rep))
		}
		if got := len(rep.Jobs[0].Warnings) == 1 && strings.Contains(rep.Jobs[0].Warnings[0], warning); got != ordered {
			t.Errorf("source ordered %v: report warnings %q", ordered, rep.Jobs[0].Warnings)
		}
	}
}

// A dry run of a session entity samples at most sessions.max_concurrent
// sessions: the summary says how many of the
// entity's sessions that was (an audit read 4 of 10 and was told nothing).
func TestSummarySaysSessionsSampled(t *testing.T) {
	for _, tc := range []struct {
		sessions, groups int
		want             bool
	}{{10, 4, true}, {4, 4, false}} {
		rep := &Report{Mode: ModeDryRun, Outcome: OutcomeComplete, Jobs: []*JobReport{{Pipeline: "p", Queue: "main", Outcome: OutcomeComplete,
			Counts: Counts{Read: int64(tc.groups)}, Groups: tc.groups, DryRun: &DryRunReport{WouldWrite: int64(tc.groups), Sampled: true},
			SourceBefore: &driver.Backlog{Ready: 50, HasSessions: true, Sessions: int64(tc.sessions)}}}}
		if got := strings.Contains(summaryOf(rep), fmt.Sprintf("%d of the %d sessions sampled", tc.groups, tc.sessions)); got != tc.want {
			t.Errorf("%d of %d sessions: said %v, want %v:\n%s", tc.groups, tc.sessions, got, tc.want, summaryOf(rep))
		}
	}
}

// SQS counts are approximate: a fall of the source's count beyond what
// was acknowledged, within 1 %, is no loss, but is said (at scale it is
// thousands of messages, and another consumer is one cause). An
// acknowledgement that failed may have been applied all the same (a
// JetStream ack that timed out during an outage): up to that many are
// not taken for messages that left another way.
func TestLeftTheSourceWithinSQSSlack(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		before, acked, ackFailed, after int64
		approximate                     bool
		left, slack, ackedAnyway        int64
	}{
		{"exact count, 10 gone", 3000, 2990, 0, 0, false, 10, 0, 0},
		{"SQS, 10 of 3000 gone: within 1 %", 3000, 2990, 0, 0, true, 0, 10, 0},
		{"SQS, 40 of 3000 gone: beyond 1 %", 3000, 2960, 0, 0, true, 40, 0, 0},
		{"SQS, 2 of 50 gone: within the least slack", 50, 48, 0, 0, true, 0, 2, 0},
		{"nothing gone", 3000, 3000, 0, 0, true, 0, 0, 0},
		{"arrivals meanwhile", 100, 100, 0, 5, true, 0, 0, 0},
		{"20 acks failed, applied after all", 1500, 1480, 20, 0, false, 0, 0, 20},
		{"20 acks failed, 30 gone", 1500, 1470, 20, 0, false, 10, 0, 20},
		{"20 acks failed, not applied: still there", 1500, 1480, 20, 20, false, 0, 0, 0},
	} {
		j := &JobReport{SourceBefore: &driver.Backlog{Ready: tc.before}, SourceAfter: &driver.Backlog{Ready: tc.after}}
		j.Acknowledged, j.AckFailed = tc.acked, tc.ackFailed
		left, slack, ackedAnyway := leftTheSource(j, 0, 0, tc.approximate)
		if left != tc.left || slack != tc.slack || ackedAnyway != tc.ackedAnyway {
			t.Errorf("%s: left %d, slack %d, acked anyway %d; want %d, %d, %d", tc.name, left, slack, ackedAnyway, tc.left, tc.slack, tc.ackedAnyway)
		}
	}
}

// A redelivery counts as within the sink's duplicate window where the
// source first delivered it within the window of now, less the margin
// for the clocks; a source that does not say when (no first receive
// time) or a sink without a known window never does. The bubble's clock
// stands still, so the ages are exact.
func TestWithinDedupWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			window time.Duration
			age    time.Duration // since the first delivery; -1: not known
			want   bool
		}{
			{5 * time.Minute, time.Minute, true},
			{5 * time.Minute, 5*time.Minute - dedupMargin - time.Second, true},
			{5 * time.Minute, 5*time.Minute - dedupMargin, false},
			{5 * time.Minute, 6 * time.Minute, false},
			{5 * time.Minute, -1, false},
			{0, time.Second, false},
		} {
			m := &mapping.Message{}
			if tc.age >= 0 {
				m.Source.FirstReceiveTime = time.Now().Add(-tc.age)
			}
			tr := &tracker{dedupWindow: tc.window}
			if got := tr.withinDedupWindow(m); got != tc.want {
				t.Errorf("window %s, first delivered %s ago: %v, want %v", tc.window, tc.age, got, tc.want)
			}
		}
	})
}

// What ends the redeliveries of a message nothing takes is said per kind,
// and never as if every source had a limit (a JetStream dry run said
// "redelivered until its redrive limit" of a consumer without max_deliver).
func TestRedriveLimitSaysWhatEndsRedeliveries(t *testing.T) {
	for kind, want := range map[string]string{
		"sqs":        "maxReceiveCount), if it has a redrive policy",
		"servicebus": "MaxDeliveryCount",
		"amqp":       "a classic queue has none",
		"nats":       "max_deliver, if it has one",
		"memq":       "if it has one",
	} {
		if got := redriveLimit(kind); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to say %q", kind, got, want)
		}
	}
}
