package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

var brokerSeq atomic.Int64

// setup makes a broker and loads a configuration for it; %[1]s in hcl is
// the broker id.
func setup(t *testing.T, hcl string) (*memBroker, []*config.Pipeline) {
	t.Helper()
	id := fmt.Sprintf("b%d", brokerSeq.Add(1))
	b := newBroker(id)
	src := fmt.Sprintf(hcl, id)
	cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("config: %s\n%s", diags.Error(), src)
	}
	return b, cfg.Pipelines
}

const moveHCL = `
pipeline "p" {
  source "memq" {
    broker = "%[1]s"
    queue  = "in"
  }
  sink "memq" {
    broker      = "%[1]s"
    queue       = "out"
    reject_attr = "bad"
  }
  dead_letter {
    sink "memq" {
      broker = "%[1]s"
      queue  = "dlq"
    }
  }
}
`

// nativeHCL is moveHCL whose dead-letter destination is the source's own
// dead-letter queue.
var nativeHCL = strings.Replace(moveHCL, `dead_letter {
    sink "memq" {
      broker = "%[1]s"
      queue  = "dlq"
    }
  }`, `dead_letter {
    native = true
  }`, 1)

func msgs(n, groups int) []*mapping.Message {
	out := make([]*mapping.Message, n)
	for i := range out {
		m := &mapping.Message{ID: fmt.Sprintf("m%04d", i), Body: []byte(fmt.Sprintf("body %d", i))}
		if groups > 0 {
			m.GroupKey = fmt.Sprintf("g%d", i%groups)
		}
		m.SetAttr("n", mapping.Int32(int32(i)))
		m.Source.EnqueuedTime = time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
		out[i] = m
	}
	return out
}

func fastOptions(mode Mode) Options {
	return Options{
		Mode: mode, Idle: 30 * time.Millisecond, CountEvery: 5 * time.Millisecond,
		CountTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second,
		Log: slog.New(slog.DiscardHandler), pingEvery: 5 * time.Millisecond,
	}
}

func ids(ms []*mapping.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestMoveDrainsByCountInGroupOrder(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(300, 7)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete || rep.ExitCode != 0 {
		t.Fatalf("outcome %s (%d): %s", rep.Outcome, rep.ExitCode, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.DrainedBy != "count" || !j.Drained {
		t.Errorf("drained by %q (%v), want count", j.DrainedBy, j.Drained)
	}
	if j.Written != 300 || j.Acknowledged != 300 || j.Read != 300 || j.Groups != 7 {
		t.Errorf("written %d acked %d read %d groups %d, want 300 300 300 7", j.Written, j.Acknowledged, j.Read, j.Groups)
	}
	if j.SourceBefore == nil || j.SourceBefore.Pending() != 300 || j.SourceAfter == nil || j.SourceAfter.Pending() != 0 {
		t.Errorf("source before %+v after %+v", j.SourceBefore, j.SourceAfter)
	}
	if j.SinkBefore.Pending() != 0 || j.SinkAfter.Pending() != 300 {
		t.Errorf("sink before %+v after %+v", j.SinkBefore, j.SinkAfter)
	}
	out := b.messages("out")
	if len(out) != 300 {
		t.Fatalf("sink holds %d messages, want 300", len(out))
	}
	last := map[string]int32{}
	for _, m := range out {
		v, _ := m.Attr("n")
		n := int32(v.Int())
		if p, ok := last[m.GroupKey]; ok && n < p {
			t.Fatalf("group %s: %d after %d", m.GroupKey, n, p)
		}
		last[m.GroupKey] = n
	}
}

func TestDeadLettersAreCountedByReason(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(40, 0)
	for _, m := range ms[:6] {
		m.SetAttr("bad", mapping.String("x"))
	}
	b.put("in", ms...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeDeadLettered || rep.ExitCode != ExitDeadLettered {
		t.Fatalf("outcome %s (%d): %s", rep.Outcome, rep.ExitCode, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != 34 || j.DeadLetteredTotal != 6 || j.DeadLettered["rejected"] != 6 {
		t.Errorf("written %d, dead-lettered %v", j.Written, j.DeadLettered)
	}
	if ex := j.Examples["rejected"]; !strings.Contains(ex.Description, `attribute "bad"`) {
		t.Errorf("example %+v lacks the reason", ex)
	}
	if n := len(b.messages("dlq")); n != 6 {
		t.Errorf("dead-letter queue holds %d, want 6", n)
	}
	if n := len(b.messages("in")); n != 0 {
		t.Errorf("source still holds %d", n)
	}
	// Two sinks of a kind that cannot name its entity are not taken for
	// one: the dead letters are not expected at the sink (they were, and
	// the job waited for a growth that could not come).
	if v := j.Verification; v == nil || !v.Verified || v.Expected != 34 {
		t.Errorf("verification %+v, want 34 expected and verified", v)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	for _, kind := range []string{"memq", "memqplain"} {
		t.Run(kind, func(t *testing.T) {
			b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "`+kind+`"`))
			ms := msgs(60, 3)
			ms[5].SetAttr("bad", mapping.String("x"))
			b.put("in", ms...)
			opt := fastOptions(ModeDryRun)
			opt.Sample = 25
			rep := Run(context.Background(), pipes, opt, nil)
			if rep.Outcome != OutcomeDeadLettered {
				t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
			}
			d := rep.Jobs[0].DryRun
			want, sampled := int64(59), false
			if kind == "memqplain" {
				want, sampled = 24, true // a sample of 25, one refused
			}
			if d == nil || d.WouldWrite != want || d.WouldReject["rejected"] != 1 || d.Sampled != sampled {
				t.Fatalf("dry run %+v, want %d would-write, 1 rejected, sampled %v", d, want, sampled)
			}
			if ex := d.Examples["reject:rejected"]; ex.MessageID != "m0005" {
				t.Errorf("example %+v, want m0005", ex)
			}
			if got := b.backlog("in"); got.Ready != 60 || got.InFlight != 0 {
				t.Errorf("source after the dry run: %+v, want 60 ready", got)
			}
			if n := len(b.messages("out")) + len(b.messages("dlq")); n != 0 {
				t.Errorf("a dry run wrote %d messages", n)
			}
			if rep.Jobs[0].Written != 0 {
				t.Errorf("report says written %d in a dry run", rep.Jobs[0].Written)
			}
		})
	}
}

func TestCopyResumesFromItsCheckpoint(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(50, 0)...)
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	if j := rep.Jobs[0]; j.Checkpoint != 50 || j.DrainedBy != "browse" || j.Written != 50 {
		t.Errorf("checkpoint %d, drained by %q, written %d", j.Checkpoint, j.DrainedBy, j.Written)
	}
	if got := b.backlog("in").Ready; got != 50 {
		t.Errorf("the copy changed the source: %d ready", got)
	}
	// Again: nothing new to copy. Then 20 more arrive: only they are copied.
	rep = Run(context.Background(), pipes, opt, nil)
	if j := rep.Jobs[0]; rep.Outcome != OutcomeComplete || j.Written != 0 || j.ResumedFrom != 50 {
		t.Fatalf("second copy: %s, written %d, resumed from %d", rep.Outcome, j.Written, j.ResumedFrom)
	}
	b.put("in", msgs(20, 0)...)
	rep = Run(context.Background(), pipes, opt, nil)
	if j := rep.Jobs[0]; j.Written != 20 || j.Checkpoint != 70 {
		t.Fatalf("third copy: written %d, checkpoint %d", j.Written, j.Checkpoint)
	}
	if n := len(b.messages("out")); n != 70 {
		t.Errorf("sink holds %d, want 70", n)
	}
}

// An incremental copy after one that wrote scheduled messages before they
// were due: Service Bus enqueues each anew once due, after the checkpoint,
// and the next copy writes it again; a deduplicating sink keeps one. The
// state file names them, so the next copy expects them: it said NOT
// verified with nothing missing (an audit, Service Bus → SQS FIFO).
func TestIncrementalCopyExpectsScheduledMessagesAgain(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 0 // the memq counts are exact: no lag to wait out
	b, pipes := setup(t, strings.Replace(moveHCL, `reject_attr = "bad"`, "dedup = true", 1))
	all := msgs(15, 0)
	for _, m := range all {
		m.DedupID = m.ID // a MessageId, which the sink deduplicates on
	}
	b.put("in", all[:10]...)
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sched, later := all[10:12], all[12]
	for _, m := range all[10:13] {
		m.ScheduledAt = at
		m.Source.State = mapping.StateScheduled // as the broker says of it
		b.putScheduled("in", m)
	}
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete || rep.Jobs[0].Written != 13 {
		t.Fatalf("first copy: %s, written %d: %s", rep.Outcome, rep.Jobs[0].Written, rep.Reason)
	}
	// Two are due now: enqueued anew, active, with new sequence numbers;
	// and two new messages.
	for _, m := range sched {
		m.Source.State = mapping.StateActive
	}
	b.put("in", sched...)
	b.put("in", all[13:]...)
	rep := Run(context.Background(), pipes, opt, nil)
	j := rep.Jobs[0]
	if j.Written != 4 || j.recopied != 2 {
		t.Fatalf("second copy: written %d, read again %d, want 4 and 2", j.Written, j.recopied)
	}
	if v := j.Verification; v == nil || !v.Verified || !strings.Contains(v.Note, "2 scheduled messages an earlier copy wrote before they were due") {
		t.Fatalf("verification %+v", v)
	}
	// Expected once only, and only as themselves: the two again, and a
	// new message that reuses the id of the one still scheduled (without
	// its scheduled time), are merges.
	impostor := later.Clone()
	impostor.ScheduledAt, impostor.Source.State = time.Time{}, mapping.StateActive
	b.put("in", append(sched, impostor)...)
	rep = Run(context.Background(), pipes, opt, nil)
	if j := rep.Jobs[0]; j.recopied != 0 || j.Verification == nil || j.Verification.Verified {
		t.Errorf("a third copy: read again %d, verification %+v, want 0 and not verified", j.recopied, j.Verification)
	}
}

// A copy whose source fails while the sink is down: the engine nacks what
// waited for a retry and opens the source again, and the copy reads on
// from its checkpoint: every message is written once and the run is
// complete (it reported the nacked ones as "could not be copied" and wrote
// the first ones again, reading from where the run began).
func TestCopyReadsOnFromItsCheckpointAfterASourceFailure(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	want := msgs(50, 0)
	b.put("in", want...)
	failed, reopened := make(chan struct{}), make(chan struct{})
	b.mu.Lock()
	b.sinkLimit, b.sinkFailed = 20, failed
	b.mu.Unlock()
	done := make(chan *Report, 1)
	go func() { done <- Run(context.Background(), pipes, fastOptions(ModeCopy), nil) }()
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case rep := <-done:
			t.Fatalf("the copy ended (%s: %s) before %s", rep.Outcome, rep.Reason, what)
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s within 30 s", what)
		}
	}
	wait(failed, "sink failure")
	b.mu.Lock()
	b.breakBrowse, b.reopened = true, reopened
	b.notify()
	b.mu.Unlock()
	wait(reopened, "reopened source")
	b.mu.Lock()
	b.sinkLimit = 0
	b.mu.Unlock()
	rep := <-done
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	got := ids(b.messages("out"))
	slices.Sort(got) // ungrouped: no order to keep
	if !slices.Equal(got, ids(want)) {
		t.Errorf("the sink holds %d messages %v, want each of the 50 once", len(got), got)
	}
	if j := rep.Jobs[0]; j.Checkpoint != 50 {
		t.Errorf("checkpoint %d, want 50", j.Checkpoint)
	}
}

func TestCopyRefusedWhereTheSourceCannotBrowse(t *testing.T) {
	_, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`))
	rep := Run(context.Background(), pipes, fastOptions(ModeCopy), nil)
	if rep.Outcome != OutcomeFailed || rep.ExitCode != ExitFailed || !strings.Contains(rep.Reason, "cannot be read without consuming") {
		t.Fatalf("outcome %s (%d): %s", rep.Outcome, rep.ExitCode, rep.Reason)
	}
}

func TestIdleDecidesWhereTheSourceCannotCount(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`))
	b.put("in", msgs(30, 0)...)
	opt := fastOptions(ModeMove)
	opt.pingEvery = 25 * time.Millisecond // near -idle, as 1 s is near 5 s: the pings have not covered it at the first look
	var logs bytes.Buffer
	opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
	rep := Run(context.Background(), pipes, opt, nil)
	// A broker that answers its pings is no news (an audit saw the
	// warning on every quiet RabbitMQ move, "error=<nil>").
	if strings.Contains(logs.String(), "does not answer") {
		t.Errorf("a healthy broker was said not to answer:\n%s", logs.String())
	}
	if j := rep.Jobs[0]; rep.Outcome != OutcomeComplete || j.DrainedBy != "idle" || j.Written != 30 {
		t.Fatalf("outcome %s, drained by %q, written %d: %s", rep.Outcome, j.DrainedBy, j.Written, rep.Reason)
	}
	if j := rep.Jobs[0]; j.SourceBefore != nil || j.CountErrors["source"] == "" {
		t.Errorf("a source that cannot count: before %+v, errors %v", j.SourceBefore, j.CountErrors)
	}
}

// A source whose broker counts exactly (JetStream) is drained by a count
// of 0 after a quiet second: -idle waits out counts that lag (SQS), and made
// every JetStream migration wait its 5 s after the last message.
func TestExactCountIsTrustedWithoutIdle(t *testing.T) {
	b, pipes := setup(t, strings.Replace(moveHCL, `queue  = "in"`, "queue  = \"in\"\n    exact_count = true", 1))
	b.put("in", msgs(30, 0)...)
	opt := fastOptions(ModeMove)
	opt.Idle = time.Hour
	opt.Timeout = 30 * time.Second
	rep := Run(context.Background(), pipes, opt, nil)
	if j := rep.Jobs[0]; rep.Outcome != OutcomeComplete || j.DrainedBy != "count" || j.Written != 30 {
		t.Fatalf("outcome %s, drained by %q, written %d: %s", rep.Outcome, j.DrainedBy, j.Written, rep.Reason)
	}
}

func TestInterruptHandsBackAndLosesNothing(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(400, 0)...)
	opt := fastOptions(ModeMove)
	opt.Rate = 200 // slow enough to interrupt midway
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(b.messages("out")) < 20 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
		cancel()
	}()
	rep := Run(ctx, pipes, opt, nil)
	if rep.Outcome != OutcomeInterrupted || rep.ExitCode != ExitInterrupted {
		t.Fatalf("outcome %s (%d)", rep.Outcome, rep.ExitCode)
	}
	in, out := b.backlog("in"), len(b.messages("out"))
	if in.InFlight != 0 || int(in.Ready)+out != 400 {
		t.Fatalf("after the interrupt: source %+v, sink %d; want nothing locked and 400 in all", in, out)
	}
	if out >= 400 {
		t.Fatalf("the interrupt came too late to test anything (%d written)", out)
	}
}

// A filtered copy's checkpoint passes what the filter left out: it stayed
// at the last copied message, and every resume read the rest again (an
// audit: -where matched 1 of 3,000, checkpoint 502, not 3,000). What it
// says was written (written_up_to) stays the copied messages'.
func TestFilteredCopyCheckpointPassesTheLeftOut(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(30, 0)
	for i, m := range ms {
		tenant := "other"
		if i == 4 {
			tenant = "acme"
		}
		m.SetAttr("tenant", mapping.String(tenant))
	}
	b.put("in", ms...)
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	c, err := ParseCondition("{attr.tenant}==acme")
	if err != nil {
		t.Fatal(err)
	}
	opt.Where = []Condition{c}
	rep := Run(context.Background(), pipes, opt, nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeComplete || j.Written != 1 || j.Skipped != 29 {
		t.Fatalf("outcome %s, written %d, skipped %d: %s", rep.Outcome, j.Written, j.Skipped, rep.Reason)
	}
	if j.Checkpoint != 30 {
		t.Errorf("checkpoint %d, want 30: past the messages the filter left out", j.Checkpoint)
	}
	st, err := openState(opt.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if st.after(j.Pipeline) != 30 || st.rewritable(j.Pipeline) != 0 {
		t.Errorf("state: after %d, rewritable %d; want 30 and 0", st.after(j.Pipeline), st.rewritable(j.Pipeline))
	}
}

func TestFiltersSelectWhatIsCopied(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(30, 0)
	for i, m := range ms {
		tenant := "other"
		if i%3 == 0 {
			tenant = "acme"
		}
		m.SetAttr("tenant", mapping.String(tenant))
	}
	b.put("in", ms...)
	opt := fastOptions(ModeCopy)
	c, err := ParseCondition("{attr.tenant}==acme")
	if err != nil {
		t.Fatal(err)
	}
	opt.Where = []Condition{c}
	opt.Since = time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC) // drops m0000
	rep := Run(context.Background(), pipes, opt, nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeComplete || j.Written != 9 || j.Skipped != 21 {
		t.Fatalf("outcome %s, written %d, skipped %d: %s", rep.Outcome, j.Written, j.Skipped, rep.Reason)
	}
	for _, m := range b.messages("out") {
		if v, _ := m.Attr("tenant"); v.Str() != "acme" || m.ID == "m0000" {
			t.Errorf("copied %s (tenant %s)", m.ID, v.Str())
		}
	}
}

func TestOptionsRefuseContradictions(t *testing.T) {
	c, _ := ParseCondition("{group}==a")
	for name, o := range map[string]Options{
		"filter on a move": {Mode: ModeMove, Where: []Condition{c}},
		"state on a move":  {Mode: ModeMove, StateFile: "s.json"},
		"until before":     {Mode: ModeCopy, Since: time.Unix(100, 0), Until: time.Unix(50, 0)},
		"negative rate":    {Mode: ModeMove, Rate: -1},
		"rate NaN":         {Mode: ModeMove, Rate: math.NaN()}, // taken as no cap
		"rate Inf":         {Mode: ModeMove, Rate: math.Inf(1)},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, tc := range []struct{ bad, says string }{
		{"{group}", "want TEMPLATE==VALUE"},
		{"{nope}==x", "{nope}"},
		// Spaces around the operator were part of the template and the
		// value: the filter matched nothing, and the copy said complete.
		{"{attr.tenant} == acme", "write {attr.tenant}==acme"},
		{"{attr.tenant}== acme", "write {attr.tenant}==acme"},
		{"{attr.tenant}\t!=acme", "write {attr.tenant}!=acme"},
	} {
		if _, err := ParseCondition(tc.bad); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ParseCondition(%q) = %v, want an error saying %q", tc.bad, err, tc.says)
		}
	}
	// A space inside the value is the value's.
	if c, err := ParseCondition("{subject}==a b"); err != nil || c.Value != "a b" {
		t.Errorf("ParseCondition(\"{subject}==a b\") = %+v, %v", c, err)
	}
}

func TestDeadLetterQueueKeepsItsReason(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(5, 0)...)
	for i, m := range msgs(3, 0) {
		if i < 2 { // the third as SQS keeps it: no reason
			m.Source.DeadLetterReason, m.Source.DeadLetterDesc = "MaxDeliveryCountExceeded", "tried 10 times"
		}
		b.putDead("in", m)
	}
	opt := fastOptions(ModeMove)
	opt.IncludeDeadLetters = true
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete || len(rep.Jobs) != 2 {
		t.Fatalf("outcome %s, %d jobs: %s", rep.Outcome, len(rep.Jobs), rep.Reason)
	}
	if rep.Jobs[1].Queue != "dead-letter" || rep.Jobs[1].Written != 3 || rep.Totals.Written != 8 {
		t.Errorf("dead-letter job %+v, totals %+v", rep.Jobs[1], rep.Totals)
	}
	// The pipeline has a dead-letter sink: dead letters stay dead letters.
	dl := b.messages("dlq")
	if len(dl) != 3 {
		t.Fatalf("target dead-letter queue holds %d, want 3", len(dl))
	}
	reasons := map[string]int{}
	for _, m := range dl {
		r, _ := m.Attr("DeadLetterReason")
		reasons[r.Str()]++
		if d, _ := m.Attr("DeadLetterErrorDescription"); r.Str() == "MaxDeliveryCountExceeded" && d.Str() != "tried 10 times" {
			t.Errorf("description %q", d.Str())
		}
	}
	if reasons["MaxDeliveryCountExceeded"] != 2 || reasons[ReasonSourceDeadLetterQueue] != 1 {
		t.Errorf("reasons %v: want the source's, and %s where it recorded none", reasons, ReasonSourceDeadLetterQueue)
	}
}

// Without a dead-letter sink (native dead-lettering here) the source's dead
// letters go to the sink, the live queue at the target: the summary says
// so under the dead-letter queue's line (an audit found them among live
// messages with nothing said).
func TestDeadLettersIntoTheLiveQueueAreSaid(t *testing.T) {
	for _, tc := range []struct {
		hcl, to string
		said    bool
	}{{nativeHCL, "out", true}, {moveHCL, "dlq", false}} {
		b, pipes := setup(t, tc.hcl)
		b.put("in", msgs(2, 0)...)
		for _, m := range msgs(3, 0) {
			b.putDead("in", m)
		}
		opt := fastOptions(ModeMove)
		opt.IncludeDeadLetters = true
		rep := Run(context.Background(), pipes, opt, nil)
		if rep.Outcome != OutcomeComplete || len(rep.Jobs) != 2 || len(b.messages(tc.to)) < 3 {
			t.Fatalf("outcome %s, %d jobs, %s holds %d: %s", rep.Outcome, len(rep.Jobs), tc.to, len(b.messages(tc.to)), rep.Reason)
		}
		var sum strings.Builder
		rep.Summary(&sum)
		if got := strings.Contains(sum.String(), "the source's dead letters go to its sink, beside live messages"); got != tc.said {
			t.Errorf("into %s: said %v, want %v:\n%s", tc.to, got, tc.said, sum.String())
		}
	}
}

func TestScheduledMessagesAreReportedLeftBehind(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(10, 0)...)
	b.putScheduled("in", msgs(1, 0)[0])
	b.putScheduled("in", msgs(1, 0)[0])
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeNotDrained || rep.ExitCode != ExitNotDrained || j.LeftBehind["scheduled"] != 2 || j.Written != 10 {
		t.Fatalf("outcome %s (%d), left behind %v, written %d: %s", rep.Outcome, rep.ExitCode, j.LeftBehind, j.Written, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "scheduled") {
		t.Errorf("reason %q does not name the scheduled messages", rep.Reason)
	}
}

// With -scheduled wait, a move that has only scheduled messages left
// says that it waits for them: its progress stood still at the last
// figure, with nothing said, until they were due.
func TestWaitForScheduledMessagesIsSaid(t *testing.T) {
	const msg = "waiting for scheduled messages to become due (-scheduled wait): the progress stands still until then; -scheduled leave finishes without them"
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(3, 0)...)
	b.putScheduled("in", msgs(1, 0)[0])
	b.putScheduled("in", msgs(1, 0)[0])
	opt := fastOptions(ModeMove)
	opt.WaitScheduled = true
	opt.Timeout = 30 * time.Second // the wait's ending without the fix
	done, interrupt := runUntilSaid(t, pipes, opt, msg)
	interrupt() // memq never makes them due: the user's Ctrl-C
	if rep := <-done; rep.Outcome != OutcomeInterrupted || rep.Jobs[0].Written != 3 {
		t.Errorf("outcome %s, written %d: %s", rep.Outcome, rep.Jobs[0].Written, rep.Reason)
	}
}

// A dry run says what the move would do with scheduled messages: leave
// them (-scheduled leave). It browsed and counted them as "would write",
// complete, where the move then left them and exited 4 (an audit).
func TestDryRunLeavesScheduledMessagesAsTheMoveWould(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(12, 0)
	// Deliverable now, though it names a time to come (carried in an
	// envelope from an earlier hop): the move takes it, and so must the
	// dry run (a review saw it left out).
	ms[9].ScheduledAt = time.Now().Add(time.Hour)
	b.put("in", ms[:10]...)
	for _, m := range ms[10:] {
		m.ScheduledAt = time.Now().Add(time.Hour)
		m.Source.State = mapping.StateScheduled // as the broker says of it
		b.putScheduled("in", m)
	}
	rep := Run(context.Background(), pipes, fastOptions(ModeDryRun), nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeNotDrained || rep.ExitCode != ExitNotDrained || j.LeftBehind["scheduled"] != 2 || j.DryRun == nil || j.DryRun.WouldWrite != 10 || j.Skipped != 0 {
		t.Fatalf("outcome %s (%d), left behind %v, dry run %+v, skipped %d: %s", rep.Outcome, rep.ExitCode, j.LeftBehind, j.DryRun, j.Skipped, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "a move would leave them") {
		t.Errorf("reason %q", rep.Reason)
	}
	if n := len(b.messages("out")); n != 0 {
		t.Errorf("the dry run wrote %d", n)
	}
}

// While it waits for messages another consumer holds, the log says for
// what, once, at WARN (the progress stood still without a word; an info
// line is hidden under the bar). Held after a kill in a FIFO queue, their
// groups' later messages wait too, counted ready and not delivered.
func TestTimeoutWhenAnotherConsumerHoldsMessages(t *testing.T) {
	for _, behind := range []int{0, 4} {
		b, pipes := setup(t, moveHCL)
		b.put("in", msgs(5, 0)...)
		b.putBlocked("in", msgs(behind, 5)...)
		b.mu.Lock()
		b.queue("in").heldByOther = 3
		b.mu.Unlock()
		opt := fastOptions(ModeMove)
		opt.Timeout = time.Second
		var logs syncBuffer
		opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
		rep := Run(context.Background(), pipes, opt, nil)
		if rep.Outcome != OutcomeNotDrained || !strings.Contains(rep.Reason, "-timeout") || rep.Jobs[0].Written != 5 {
			t.Fatalf("outcome %s: %s (written %d)", rep.Outcome, rep.Reason, rep.Jobs[0].Written)
		}
		l := logs.String()
		if n := strings.Count(l, "level=WARN msg=\"waiting for messages in flight at the source"); n != 1 || !strings.Contains(l, "in_flight=3") {
			t.Errorf("behind %d: %d waiting lines:\n%s", behind, n, l)
		}
		if got := strings.Contains(l, "queued behind them in their FIFO groups"); got != (behind > 0) {
			t.Errorf("behind %d: the ready ones waiting behind said %v:\n%s", behind, got, l)
		}
	}
}

// An attempt to open that has not returned when the connect timeout
// passes leaves no error in the log: the reason says so, and what to do
// (an audit: "not connected after 8s ... the log has each attempt's
// error", and the log had none).
func TestConnectTimeoutWhileTheFirstAttemptHangs(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.hangOpen = make(chan struct{})
	defer close(b.hangOpen)
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = 200 * time.Millisecond
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "no attempt to open the adapters has returned yet") {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
}

func TestConnectTimeoutSaysWhy(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.failOpen = true
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = 200 * time.Millisecond
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "not connected after") {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	// A timeout under a second is not rounded away (it said "not
	// connected after 0s").
	if strings.Contains(rep.Reason, "after 0s") {
		t.Errorf("reason %q", rep.Reason)
	}
	// Nothing was written: nothing to verify (it said "verified: the sink
	// grew by 0, 0 written").
	if s := summaryOf(rep); rep.Jobs[0].Verification != nil || strings.Contains(s, "verified") {
		t.Errorf("verification %+v; summary:\n%s", rep.Jobs[0].Verification, s)
	}
}

func TestNewDedupIDsAreStablePerRun(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(3, 0)
	ms[0].DedupID = "keep-me"
	b.put("in", ms...)
	opt := fastOptions(ModeMove)
	opt.RunID = "rerun-1"
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	out := b.messages("out")
	src := pipes[0].SourceIdentity() + "\x00"
	want := map[string]string{
		"m0000": rerunDedupID(src+"keep-me", "rerun-1"),
		"m0001": rerunDedupID(src+"m0001", "rerun-1"),
	}
	for _, m := range out {
		if w, ok := want[m.ID]; ok && m.DedupID != w {
			t.Errorf("%s: dedup id %q, want %q", m.ID, m.DedupID, w)
		}
	}
	if rerunDedupID("a", "r1") == rerunDedupID("a", "r2") || len(rerunDedupID("a", "r1")) != 64 {
		t.Error("rerun ids must differ per run and be 64 hex digits")
	}
}

// rerunDedupIDs moves three messages, prepared by prep, with
// -new-dedup-ids rerun-1, and returns how often each dedup id arrived and
// the id -new-dedup-ids makes of a key there.
func rerunDedupIDs(t *testing.T, prep func(i int, m *mapping.Message)) (map[string]int, func(key string) string) {
	t.Helper()
	b, pipes := setup(t, moveHCL)
	ms := msgs(3, 0)
	for i, m := range ms {
		prep(i, m)
	}
	b.put("in", ms...)
	opt := fastOptions(ModeMove)
	opt.RunID = "rerun-1"
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	seen := map[string]int{}
	for _, m := range b.messages("out") {
		seen[m.DedupID]++
	}
	src := pipes[0].SourceIdentity()
	return seen, func(key string) string { return rerunDedupID(src+"\x00"+key, "rerun-1") }
}

func natsSeq(i int) mapping.Source {
	return mapping.Source{Protocol: "nats", Address: "in", SequenceNumber: fmt.Sprint(i + 1)}
}

// TestNewDedupIDsWithoutIDs: messages with no id of their own get a rerun
// id from the source's name for them, or none (the sink makes a unique
// one): never one id for all of them, which a FIFO sink would keep once
// (an audit saw 20 such messages arrive as 1).
func TestNewDedupIDsWithoutIDs(t *testing.T) {
	seen, id := rerunDedupIDs(t, func(i int, m *mapping.Message) {
		m.ID = ""
		if i < 2 {
			m.Source = natsSeq(i)
		}
	})
	if seen[id("nats\x00in\x001")] != 1 || seen[id("nats\x00in\x002")] != 1 || seen[""] != 1 {
		t.Errorf("dedup ids %v: want the two from the source's sequence numbers and none for the third", seen)
	}
}

// TestNewDedupIDsSplitSharedIDs: messages that share a dedup id at the
// source (a Nats-Msg-Id reused outside the stream's window) are distinct
// messages there; the re-run's ids follow the source's name for each, so
// a FIFO sink keeps all of them (the audit: 3 moved, 1 arrived, with and
// without the flag).
func TestNewDedupIDsSplitSharedIDs(t *testing.T) {
	seen, id := rerunDedupIDs(t, func(i int, m *mapping.Message) {
		m.ID, m.DedupID, m.Source = "", "order-42", natsSeq(i)
	})
	for i := range 3 {
		if seen[id(fmt.Sprintf("nats\x00in\x00%d", i+1))] != 1 {
			t.Errorf("dedup ids %v: want one per source sequence", seen)
		}
	}
}

func TestReportFileAndSummary(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(12, 2)
	ms[0].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	path := filepath.Join(t.TempDir(), "report.json")
	if err := rep.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got["outcome"] != "complete-with-dead-letters" || got["exit_code"] != float64(3) {
		t.Errorf("report outcome %v, exit %v", got["outcome"], got["exit_code"])
	}
	p := got["pipelines"].([]any)[0].(map[string]any)
	for k, want := range map[string]float64{"read": 12, "written": 11, "dead_lettered_total": 1, "groups_seen": 2} {
		if p[k] != want {
			t.Errorf("pipelines[0].%s = %v, want %v", k, p[k], want)
		}
	}
	var sum bytes.Buffer
	rep.Summary(&sum)
	for _, want := range []string{"complete-with-dead-letters", "written 11", "dead-lettered 1: rejected", "groups seen 2", "source 12 → 0; sink 0 → 11"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

// The report's maps are {} when empty, never null: dead_lettered was null
// when nothing was dead-lettered (a pipeline's, the totals, a pipeline that
// did not run), where the dry run's maps were {}.
func TestReportHasNoNullMaps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      Mode
		interrupt bool // before it starts: the second pipeline is skipped
	}{
		{"move", ModeMove, false},
		{"dry run", ModeDryRun, false},
		{"skipped", ModeMove, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good, _, pipes := setupTwo(t)
			good.put("in", msgs(3, 0)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.interrupt {
				cancel()
			}
			rep := Run(ctx, pipes, fastOptions(tc.mode), nil)
			var out bytes.Buffer
			if err := rep.WriteJSON(&out); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Totals    map[string]any   `json:"totals"`
				Pipelines []map[string]any `json:"pipelines"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			maps := map[string]any{"totals.dead_lettered": got.Totals["dead_lettered"]}
			for _, p := range got.Pipelines {
				maps[p["pipeline"].(string)+".dead_lettered"] = p["dead_lettered"]
				if d, ok := p["dry_run"].(map[string]any); ok {
					for _, k := range []string{"would_reject", "would_drop", "would_encode", "examples"} {
						maps[p["pipeline"].(string)+".dry_run."+k] = d[k]
					}
				}
			}
			if len(got.Pipelines) != 2 {
				t.Fatalf("%d pipelines in the report, want 2", len(got.Pipelines))
			}
			for k, v := range maps {
				if m, ok := v.(map[string]any); !ok || len(m) != 0 {
					t.Errorf("%s = %v, want {}", k, v)
				}
			}
		})
	}
}

func TestLogProgressReportsFigures(t *testing.T) {
	var buf bytes.Buffer
	lp := &LogProgress{Log: slog.New(slog.NewTextHandler(&buf, nil)), Every: time.Nanosecond}
	lp.Start("p", 100)
	lp.Update("p", Figures{Done: 10, Total: 100})
	lp.Update("p", Figures{Done: 40, Total: 100, Rate: 20, ETA: 3 * time.Second, DeadLettered: 2, Retried: 1})
	lp.Finish("p", Figures{Done: 100, Total: 100}, OutcomeComplete)
	out := buf.String()
	for _, want := range []string{"migration started", "total=100", "moved=40", "percent=40.0", "rate=20/s", "eta=3s", "dead_lettered=2", "retried=1", "outcome=complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "moved=10 ") {
		t.Errorf("the first update should wait one interval:\n%s", out)
	}
}

// A dry run's lines count what it read: it moves nothing (they said
// "moved=20").
func TestLogProgressDryRunSaysRead(t *testing.T) {
	var buf bytes.Buffer
	lp := &LogProgress{Log: slog.New(slog.NewTextHandler(&buf, nil)), Every: time.Nanosecond}
	lp.Finish("p", Figures{Done: 20, Total: 20, DryRun: true}, OutcomeComplete)
	if out := buf.String(); !strings.Contains(out, " read=20 ") || strings.Contains(out, "moved=") {
		t.Errorf("dry run's line: %s", out)
	}
}

// In JSON logs the figures are numbers (percent, messages per second,
// seconds), for whatever reads them; they were strings ("20/s").
func TestLogProgressFiguresAreNumbersInJSON(t *testing.T) {
	var buf bytes.Buffer
	lp := &LogProgress{Log: slog.New(slog.NewJSONHandler(&buf, nil)), Every: time.Nanosecond}
	lp.Finish("p", Figures{Done: 40, Total: 100, Rate: 20.4, ETA: 90 * time.Second}, OutcomeComplete)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	for k, want := range map[string]float64{"moved": 40, "total": 100, "percent": 40, "rate": 20, "eta": 90} {
		if got, ok := line[k].(float64); !ok || got != want {
			t.Errorf("%s = %#v, want the number %v: %s", k, line[k], want, buf.Bytes())
		}
	}
}

func TestCopyRefusesNativeDeadLetters(t *testing.T) {
	_, pipes := setup(t, nativeHCL)
	rep := Run(context.Background(), pipes, fastOptions(ModeCopy), nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "native = true") {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
}

// A broker that refuses to browse only when the source opens: a dry run
// samples instead, a copy fails at once with the broker's reason.
func TestBrowseRefusedWhenTheSourceOpens(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.refuseBrowse = true
	b.put("in", msgs(40, 0)...)
	opt := fastOptions(ModeDryRun)
	opt.Sample = 10
	var logs bytes.Buffer
	opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete || len(rep.Jobs) != 1 {
		t.Fatalf("dry run: %s, %d jobs: %s", rep.Outcome, len(rep.Jobs), rep.Reason)
	}
	// The job handles the refusal: no ERROR "cannot open source;
	// retrying" from the engine for a retry that never comes.
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "reads a sample instead") {
		t.Errorf("the dry run's log:\n%s", logs.String())
	}
	if d := rep.Jobs[0].DryRun; d == nil || !d.Sampled || d.WouldWrite != 10 {
		t.Errorf("dry run report %+v, want a sample of 10", d)
	}
	if got := b.backlog("in"); got.Ready != 40 {
		t.Errorf("source after the dry run: %+v", got)
	}
	start := time.Now()
	copyOpt := fastOptions(ModeCopy)
	copyOpt.ConnectTimeout = 10 * time.Minute // what failing at the connect timeout would take
	rep = Run(context.Background(), pipes, copyOpt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "did not grant a copy link") {
		t.Fatalf("copy: %s: %s", rep.Outcome, rep.Reason)
	}
	if el := time.Since(start); el > time.Minute { // about 0.1 s; a loaded machine must not fail it
		t.Errorf("the refused copy took %s: it should fail at once, not at the connect timeout", el)
	}
}

// A dry run's held sample is handed back (and extended) many at once: one
// after another, each SQS call waited for its batch's linger, 2,000 took
// 40 s, and the last of them lapsed meanwhile and were received again
// (with a redrive policy, into the dead-letter queue).
func TestDryRunHandsTheSampleBackAtOnce(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.refuseBrowse = true
	b.nackLinger = 500 * time.Millisecond
	b.put("in", msgs(20, 0)...)
	opt := fastOptions(ModeDryRun)
	opt.Sample = 100
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete || rep.Jobs[0].DryRun == nil || rep.Jobs[0].DryRun.WouldWrite != 20 {
		t.Fatalf("dry run: %s: %s", rep.Outcome, rep.Reason)
	}
	// A sample larger than the queue is the queue: complete once read,
	// where it was held for -idle more, waiting for messages to come.
	if by := rep.Jobs[0].DrainedBy; by != "sample" {
		t.Errorf("drained by %q, want sample", by)
	}
	if got := b.backlog("in"); got.Ready != 20 {
		t.Errorf("source after the dry run: %+v, want 20 ready", got)
	}
	if peak := b.nackPeak.Load(); peak < 2 {
		t.Errorf("at most %d hand-backs at once: the sample was handed back one by one", peak)
	}
}

// What the encode policy changes on the way to the sink is said: a dry run
// lists it by field (would_encode), a move counts it (mapping_encoded) and
// says so in its summary; neither counts it as dropped.
func TestEncodedItemsAreReported(t *testing.T) {
	hcl := `
pipeline "p" {
  source "memq" {
    broker = "%[1]s"
    queue  = "in"
  }
  sink "memq" {
    broker      = "%[1]s"
    queue       = "out"
    encode_attr = "odd"
  }
  mapping {
    policy = "encode"
  }
}
`
	b, pipes := setup(t, hcl)
	ms := msgs(10, 0)
	for _, m := range ms[:3] {
		m.SetAttr("odd", mapping.String("x"))
	}
	b.put("in", ms...)

	dry := Run(context.Background(), pipes, fastOptions(ModeDryRun), nil)
	d := dry.Jobs[0].DryRun
	if d == nil || d.WouldEncode[`attribute "odd": not allowed here: moved into the envelope`] != 3 || len(d.WouldDrop) != 0 {
		t.Fatalf("dry run %+v: want 3 encoded, none dropped", d)
	}
	if s := summary(dry); !strings.Contains(s, `would encode 3: attribute "odd": not allowed here`) {
		t.Errorf("dry-run summary:\n%s", s)
	}

	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeComplete || j.Written != 10 || j.Encoded != 3 || j.Dropped != 0 || rep.Totals.Encoded != 3 {
		t.Fatalf("outcome %s, written %d, encoded %d, dropped %d, totals %d", rep.Outcome, j.Written, j.Encoded, j.Dropped, rep.Totals.Encoded)
	}
	if s := summary(rep); !strings.Contains(s, "mapping: 0 items left out (policy drop), 3 encoded to fit the sink") {
		t.Errorf("summary:\n%s", s)
	}
}

// A -state file must be a state file: a report (which has a version too)
// or any other JSON object is refused, not read as "no checkpoints" and
// overwritten.
func TestStateFileRefusesOtherJSON(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"report", `{"version": 1, "mode": "copy", "pipelines": []}`, "it is a migration report (-report)"},
		{"other", `{"version": 1}`, "it has no checkpoints"},
		{"not json", "pipeline {}", "is not a qbridge migrate state file"},
	} {
		path := filepath.Join(dir, tc.name+".json")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openState(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	path := filepath.Join(dir, "state.json")
	s, err := openState(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save("p", 7, 12); err != nil {
		t.Fatal(err)
	}
	// One migration at a time on a state file: two copies resuming from
	// one checkpoint wrote everything twice.
	if _, err := openState(path); err == nil || !strings.Contains(err.Error(), "another qbridge migrate uses the state file") {
		t.Fatalf("a state file in use opened again: %v", err)
	}
	s.close()
	if s, err = openState(path); err != nil || s.after("p") != 7 || s.rewritable("p") != 5 {
		t.Fatalf("a saved state file reads back: %v", err)
	}
	defer s.close()
	// Neither figure moves back.
	if err := s.save("p", 6, 9); err != nil {
		t.Fatal(err)
	}
	if s.after("p") != 7 || s.rewritable("p") != 5 {
		t.Fatalf("moved back: after %d, rewritable %d", s.after("p"), s.rewritable("p"))
	}
}

// A copy checkpoint is kept with its selection: a copy with other -where,
// -since or -until filters is refused instead of resuming after what the
// first one skipped (an audit copied tenant a, then tenant b from the same
// state file: 4 of b's 5 were never copied, "complete" and "verified").
// The same selection resumes.
func TestCopyCheckpointKeepsItsFilters(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(10, 0)
	for i, m := range ms {
		m.SetAttr("tenant", mapping.String([]string{"a", "b"}[i%2]))
	}
	b.put("in", ms...)
	where := func(s string) Condition {
		c, err := ParseCondition(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	opt.Where = []Condition{where("{attr.tenant}==a")}
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete || rep.Jobs[0].Written != 5 {
		t.Fatalf("tenant a: %s (%s), written %d", rep.Outcome, rep.Reason, rep.Jobs[0].Written)
	}
	opt.Where = []Condition{where("{attr.tenant}==b")}
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, `selected only -where "{attr.tenant}==a", and this one selects only -where "{attr.tenant}==b"`) {
		t.Fatalf("tenant b from a's checkpoint: %s: %s", rep.Outcome, rep.Reason)
	}
	opt.Where = nil
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "this one selects every message") {
		t.Fatalf("no filter from a's checkpoint: %s: %s", rep.Outcome, rep.Reason)
	}
	opt.Where = []Condition{where("{attr.tenant}==a")}
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete || rep.Jobs[0].ResumedFrom == 0 || rep.Jobs[0].Written != 0 {
		t.Fatalf("tenant a again: %s (%s), resumed from %d, written %d", rep.Outcome, rep.Reason, rep.Jobs[0].ResumedFrom, rep.Jobs[0].Written)
	}
	if n := len(b.messages("out")); n != 5 {
		t.Errorf("sink holds %d, want tenant a's 5", n)
	}
}

// A dry run whose filter matches nothing says how many it left out, not
// only "would write 0".
func TestDryRunSaysWhatTheFiltersLeaveOut(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(10, 0)...)
	opt := fastOptions(ModeDryRun)
	c, err := ParseCondition("{subject}==orders.x")
	if err != nil {
		t.Fatal(err)
	}
	opt.Where = []Condition{c}
	rep := Run(context.Background(), pipes, opt, nil)
	if s := summary(rep); !strings.Contains(s, "read 10; would write 0; the filters (-since, -until, -where) leave out 10") {
		t.Errorf("summary:\n%s", s)
	}
}

// A dead-letter queue's message the sink refuses, in a pipeline whose
// dead-letter destination is native: a dead-letter queue cannot
// dead-letter again, so nothing takes it. It is stuck, and the phase ends
// not-drained saying so (it said "complete" with nothing written, or ran
// until interrupted).
func TestNativeDeadLetterOfADeadLetterIsStuck(t *testing.T) {
	b, pipes := setup(t, nativeHCL)
	bad := msgs(1, 0)[0]
	bad.SetAttr("bad", mapping.String("x"))
	b.putDead("in", bad)
	b.putDead("in", msgs(2, 0)[1])
	opt := fastOptions(ModeMove)
	opt.IncludeDeadLetters = true
	rep := Run(context.Background(), pipes, opt, nil)
	if len(rep.Jobs) != 2 {
		t.Fatalf("%d jobs", len(rep.Jobs))
	}
	j := rep.Jobs[1]
	if j.Queue != "dead-letter" || j.Outcome != OutcomeNotDrained || j.StuckTotal != 1 || j.Written != 1 || !strings.Contains(j.Reason, "stuck") {
		t.Fatalf("dead-letter phase: %s (%s), stuck %d, written %d", j.Outcome, j.Reason, j.StuckTotal, j.Written)
	}
	if ex := j.StuckExamples["rejected"]; !strings.Contains(ex.Description, "cannot dead-letter again") {
		t.Errorf("stuck example %+v", ex)
	}
}

// Messages the source's broker dead-letters on its own during a move (its
// maximum delivery count) are not at the sink, though the queue empties:
// not-drained, left behind in the source's dead-letter queue, with the
// remedy. It said "complete".
func TestBrokerDeadLettersDuringAMove(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(10, 0)...)
	b.brokerDeadLetters = 2
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	j := rep.Jobs[0]
	if j.Outcome != OutcomeNotDrained || j.Written != 8 || j.LeftBehind["source-dead-letter-queue"] != 2 || !strings.Contains(j.Reason, "-include-dead-letters") {
		t.Fatalf("%s (%s): written %d, left behind %v", j.Outcome, j.Reason, j.Written, j.LeftBehind)
	}
}

// A broker that cannot count and stalls mid-move (the connection open,
// nothing delivered, no answer) is idle too: the move "completed" with the
// queue left behind. The job now takes idle for drained only while the
// broker answers its pings, and moves the rest once it does again.
func TestStalledBrokerThatCannotCountIsNotDrained(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`))
	b.put("in", msgs(30, 0)...)
	b.mu.Lock()
	b.stalled = true
	b.mu.Unlock()
	// Said where the job used to find the source drained.
	done, _ := runUntilSaid(t, pipes, fastOptions(ModeMove), "does not answer every ping")
	b.mu.Lock()
	b.stalled = false
	b.notify()
	b.mu.Unlock()
	rep := <-done
	if j := rep.Jobs[0]; rep.Outcome != OutcomeComplete || j.DrainedBy != "idle" || j.Written != 30 {
		t.Fatalf("outcome %s, drained by %q, written %d: %s", rep.Outcome, j.DrainedBy, j.Written, rep.Reason)
	}
}

// runUntilSaid starts the job and returns once its log says match (the job
// ending first fails t): done delivers its report, and interrupt is the
// user's Ctrl-C.
func runUntilSaid(t *testing.T, pipes []*config.Pipeline, opt Options, match string) (done <-chan *Report, interrupt func()) {
	t.Helper()
	said := make(chan struct{})
	opt.Log = slog.New(&signalHandler{match: match, signal: said})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reports := make(chan *Report, 1)
	go func() { reports <- Run(ctx, pipes, opt, nil) }()
	select {
	case <-said:
	case rep := <-reports:
		t.Fatalf("the job ended before it said %q: outcome %s: %s", match, rep.Outcome, rep.Reason)
	}
	return reports, cancel
}

// signalHandler closes signal at the first record whose message contains
// match.
type signalHandler struct {
	match  string
	signal chan struct{}
	once   sync.Once
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.once.Do(func() { close(h.signal) })
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// An interrupted dry run that samples says its sample went back, and
// nothing was written: it said "run the same command again to go on", as
// a move does, of a run that has nothing to go on with.
func TestInterruptedSampledDryRunSaysSo(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`))
	b.put("in", msgs(3, 0)...)
	b.mu.Lock()
	b.stalled = true // it yields nothing and does not answer: the job waits
	b.mu.Unlock()
	opt := fastOptions(ModeDryRun)
	opt.ConnectTimeout = time.Minute
	done, interrupt := runUntilSaid(t, pipes, opt, "does not answer every ping")
	interrupt()
	rep := <-done
	const want = "the dry run's sample was handed back to the source; nothing was written or settled"
	if j := rep.Jobs[0]; j.Outcome != OutcomeInterrupted || j.Reason != want {
		t.Errorf("%s: %q, want interrupted: %q", j.Outcome, j.Reason, want)
	}
}

// A sink that counts and could not be counted leaves the move unverified,
// and the first line says so: it said a plain "complete" (the summary's
// body and the report had it). A sink that cannot count at all stays
// quiet there.
func TestUnverifiedMoveSaysSoOnTheFirstLine(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(5, 0)...)
	b.mu.Lock()
	b.sinkCountErr = errors.New("memq: count: timed out")
	b.mu.Unlock()
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete || !strings.Contains(rep.Reason, "not verified") || !strings.Contains(rep.Reason, "memq: count: timed out") {
		t.Fatalf("outcome %s, reason %q", rep.Outcome, rep.Reason)
	}

	b2, pipes2 := setup(t, strings.ReplaceAll(moveHCL, `sink "memq"`, `sink "memqplain"`))
	b2.put("in", msgs(5, 0)...)
	rep = Run(context.Background(), pipes2, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeComplete || rep.Reason != "" {
		t.Fatalf("a sink that cannot count: outcome %s, reason %q", rep.Outcome, rep.Reason)
	}
	// Nor does its body cry "NOT verified", the words of a sink short of
	// what was written: a clean move into RabbitMQ said so.
	if s := summary(rep); strings.Contains(s, "NOT verified") || !strings.Contains(s, "not checked: the sink cannot be counted: its broker offers no message count") || strings.Contains(s, "unsupported operation") {
		t.Errorf("a sink that cannot count: summary\n%s", s)
	}
}

// -new-dedup-ids makes distinct ids for messages of two sources that name
// them alike (one subject name on two servers): an audit saw a whole
// pipeline merged away at the sink by the remedy for merging.
func TestNewDedupIDsDifferBySource(t *testing.T) {
	m := &mapping.Message{Source: natsSeq(7)}
	a, b := rerunKey("nats nats://eu:4222 stream ORDERS", m), rerunKey("nats nats://us:4222 stream ORDERS", m)
	if a == "" || a == b || rerunDedupID(a, "r1") == rerunDedupID(b, "r1") {
		t.Fatalf("keys %q and %q", a, b)
	}
	if rerunKey("x", m) != rerunKey("x", m.Clone()) {
		t.Fatal("not stable for one source")
	}
}

// Jobs whose brokers stop answering, or refuse everything, end after
// -connect-timeout with the reason, where each used to run until -timeout
// (the guard here) or an interrupt:
//   - a source whose broker went away mid-move (open while its client
//     reconnects): the adapters say they are not ready;
//   - a broker that cannot count and stalls (the connection open, no
//     answer): its pings fail;
//   - a broker that counts and stalls: its counts fail;
//   - a sink that refuses every send, reconnecting in between (RabbitMQ
//     3.10's AMQP session crashed on every publish into a full queue):
//     nothing confirmed for stall_after.
func TestJobsFailAfterTheConnectTimeout(t *testing.T) {
	stalled := func(b *memBroker) { b.stalled = true }
	for _, tc := range []struct {
		name, hcl, want string
		prepare         func(b *memBroker)
		msgs, written   int
	}{
		{"source gone, reconnecting", moveHCL, "memq: connection lost; reconnecting", func(b *memBroker) {
			b.queue("in").heldByOther = 1 // never drained
			b.notReady = errors.New("memq: connection lost; reconnecting")
		}, 0, 0},
		{"broker that cannot count stalls", strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqplain"`), "memq: ping: no answer", stalled, 20, 0},
		{"broker that counts stalls", moveHCL, "the source's count fails: memq: count: no answer", stalled, 20, 0},
		{"sink refuses every send", strings.Replace(moveHCL, `pipeline "p" {`, "pipeline \"p\" {\n  stall_after = \"200ms\"", 1),
			"messages wait (the oldest for ", func(b *memBroker) { b.sinkLimit = 5 }, 20, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pipes := setup(t, tc.hcl)
			b.put("in", msgs(tc.msgs, 0)...)
			b.mu.Lock()
			tc.prepare(b)
			b.mu.Unlock()
			opt := fastOptions(ModeMove)
			opt.ConnectTimeout = 300 * time.Millisecond
			opt.Timeout = time.Minute // the guard: it used to end only here
			rep := Run(context.Background(), pipes, opt, nil)
			if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, tc.want) {
				t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
			}
			if tc.written > 0 && !strings.Contains(rep.Reason, "its last send failed: memq: sink unavailable") {
				t.Errorf("the stall's reason lacks the sink's error: %s", rep.Reason)
			}
			if j := rep.Jobs[0]; j.Written != int64(tc.written) {
				t.Errorf("written %d, want %d", j.Written, tc.written)
			}
		})
	}
}

// An interrupted copy says the source is as it was; an interrupted move
// that in-flight messages were finished or handed back (a copy takes
// nothing, and the move's wording had been used for both).
func TestInterruptedReasonByMode(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		want string
	}{
		{ModeCopy, "the source was only read and is as it was; without -state, the same command copies everything again"},
		{ModeMove, "in-flight messages were finished or handed back to the source; run the same command again to go on"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			b, pipes := setup(t, moveHCL)
			b.put("in", msgs(20, 0)...)
			failed := make(chan struct{})
			b.mu.Lock()
			b.sinkLimit, b.sinkFailed = 5, failed // then the sink fails until the stop
			b.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan *Report, 1)
			var logs syncBuffer
			opt := fastOptions(tc.mode)
			opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
			go func() { done <- Run(ctx, pipes, opt, nil) }()
			select {
			case <-failed:
			case rep := <-done:
				t.Fatalf("ended (%s: %s) before the sink failed", rep.Outcome, rep.Reason)
			case <-time.After(30 * time.Second):
				t.Fatal("the sink never failed")
			}
			cancel()
			rep := <-done
			if j := rep.Jobs[0]; j.Outcome != OutcomeInterrupted || j.Reason != tc.want {
				t.Errorf("%s: %q, want interrupted: %q", j.Outcome, j.Reason, tc.want)
			}
			// The stop is said when it starts, not only at the end.
			if !strings.Contains(logs.String(), "interrupted: stopping") || !strings.Contains(logs.String(), "interrupt again to quit at once") {
				t.Errorf("no word of the stop in the log:\n%s", logs.String())
			}
			// Said once, on the pipeline's line: the first line and the
			// line standard error ends with said it too, word for word.
			sum, line := summary(rep), rep.ErrorLine()
			if n := strings.Count(sum+line, tc.want); n != 1 || !strings.Contains(sum, "p: memq → memq, interrupted ("+tc.want+")") {
				t.Errorf("the reason is said %d times:\n%s%s", n, sum, line)
			}
			if first, _, _ := strings.Cut(sum, "\n"); !strings.HasPrefix(first, "qbridge migrate ("+string(tc.mode)+"): interrupted in ") || strings.Contains(first, ": p") {
				t.Errorf("first line %q", first)
			}
			if want := "interrupted in pipeline p; the summary says what was done and what is left"; line != want {
				t.Errorf("error line %q, want %q", line, want)
			}
		})
	}
}

// doneSignal is a Progress that closes reached once job shows done
// messages done.
type doneSignal struct {
	NoProgress
	job     string
	done    int64
	reached chan struct{}
	once    sync.Once
}

func (d *doneSignal) Update(job string, f Figures) {
	if job == d.job && f.Done >= d.done {
		d.once.Do(func() { close(d.reached) })
	}
}

// An interrupt once every message has moved (in the quiet spell that
// confirms the drain, -idle, here an hour) ends the job as it would have
// ended a moment later: complete, exit 0, verified. It said interrupted,
// exit 130, and "run the same command again to go on", with the source
// empty and everything written and acknowledged. Where something is left
// (a message another consumer holds) it stays interrupted, and so does a
// run whose next pipeline the interrupt kept from starting.
func TestInterruptAfterEverythingMoved(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mode        Mode
		heldByOther int64
		two         bool // p0bad, then p1, which the interrupt keeps from starting
		job, run    Outcome
		exit        int
		by          string
		// approx: the source counts as SQS does, approximately, and the
		// interrupt comes before half of -idle has confirmed its 0.
		approx bool
	}{
		{"move", ModeMove, 0, false, OutcomeComplete, OutcomeComplete, ExitComplete, "count", false},
		{"copy", ModeCopy, 0, false, OutcomeComplete, OutcomeComplete, ExitComplete, "browse", false},
		{"move, one held by another consumer", ModeMove, 1, false, OutcomeInterrupted, OutcomeInterrupted, ExitInterrupted, "", false},
		{"move, the next pipeline not started", ModeMove, 0, true, OutcomeComplete, OutcomeInterrupted, ExitInterrupted, "count", false},
		{"move, an approximate count not confirmed yet", ModeMove, 0, false, OutcomeInterrupted, OutcomeInterrupted, ExitInterrupted, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exact := func(hcl string) string {
				if tc.approx {
					return hcl
				}
				return strings.ReplaceAll(hcl, "queue  = \"in\"\n", "queue  = \"in\"\n    exact_count = true\n")
			}
			var b *memBroker
			var pipes []*config.Pipeline
			name := "p"
			if tc.two {
				id := fmt.Sprintf("b%d", brokerSeq.Add(1))
				newBroker(id)
				b = newBroker(id + "-bad")
				cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(fmt.Sprintf(exact(twoPipelinesHCL), id)))
				if diags.HasErrors() {
					t.Fatal(diags.Error())
				}
				pipes = cfg.Pipelines
				name = "p0bad"
			} else {
				b, pipes = setup(t, exact(moveHCL))
			}
			b.put("in", msgs(20, 0)...)
			b.queue("in").heldByOther = tc.heldByOther
			opt := fastOptions(tc.mode)
			opt.Idle = time.Hour // the job waits in its quiet spell until the interrupt
			prog := &doneSignal{job: name, done: 20, reached: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reports := make(chan *Report, 1)
			go func() { reports <- Run(ctx, pipes, opt, prog) }()
			select {
			case <-prog.reached:
			case rep := <-reports:
				t.Fatalf("ended before the interrupt: %s: %s", rep.Outcome, rep.Reason)
			}
			cancel() // Ctrl-C, once all 20 are done
			rep := <-reports
			j := rep.Jobs[0]
			if j.Outcome != tc.job || j.DrainedBy != tc.by || rep.Outcome != tc.run || rep.ExitCode != tc.exit {
				t.Fatalf("job %s (drained by %q), run %s, exit %d; want %s (%q), %s, %d\n%s",
					j.Outcome, j.DrainedBy, rep.Outcome, rep.ExitCode, tc.job, tc.by, tc.run, tc.exit, summary(rep))
			}
			switch {
			case tc.job == OutcomeComplete:
				if v := j.Verification; v == nil || !v.Verified || !j.Drained || !strings.Contains(j.Reason, "interrupted once every message was") {
					t.Errorf("complete, but: %s", summary(rep))
				}
			case j.Written != 20 || !strings.Contains(j.Reason, "run the same command again"):
				t.Errorf("interrupted, but: %s", summary(rep))
			}
			if tc.two {
				if want := "interrupted; not started: pipeline p1; the summary says what was done and what is left"; rep.Jobs[1].Outcome != OutcomeSkipped || rep.ErrorLine() != want {
					t.Errorf("p1 %s; error line %q, want %q", rep.Jobs[1].Outcome, rep.ErrorLine(), want)
				}
			}
		})
	}
}

// An interrupt while a pipeline's verification counts its sink again
// leaves that pipeline complete, saying the count may lag; the run is
// interrupted all the same when a later pipeline did not start. It said
// complete, exit 0, with p1 never run.
func TestInterruptDuringVerification(t *testing.T) {
	id := fmt.Sprintf("b%d", brokerSeq.Add(1))
	good, bad := newBroker(id), newBroker(id+"-bad")
	hcl := strings.Replace(twoPipelinesHCL, `queue  = "out0"`, "queue  = \"out0\"\n    dedup  = true", 1)
	cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(fmt.Sprintf(hcl, id)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms := msgs(5, 0)
	for _, m := range ms {
		m.DedupID = "same" // the sink keeps one: short, so it is counted again
	}
	bad.put("in", ms...)
	verifying := make(chan struct{})
	good.onSinkCount = func(n int) {
		if n == 3 { // before the move, after it, then the verification's
			close(verifying)
		}
	}
	opt := fastOptions(ModeMove)
	opt.VerifyWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan *Report, 1)
	go func() { reports <- Run(ctx, cfg.Pipelines, opt, nil) }()
	select {
	case <-verifying:
	case rep := <-reports:
		t.Fatalf("ended before the verification: %s: %s", rep.Outcome, rep.Reason)
	}
	cancel()
	rep := <-reports
	j := rep.Jobs[0]
	if j.Outcome != OutcomeComplete || j.Verification == nil || !strings.Contains(j.Verification.Note, "interrupted before the sink was counted again") {
		t.Errorf("p0bad %s, verification %+v", j.Outcome, j.Verification)
	}
	if rep.Outcome != OutcomeInterrupted || rep.ExitCode != ExitInterrupted || rep.Jobs[1].Outcome != OutcomeSkipped || !strings.Contains(rep.Reason, "before pipeline p1 started") {
		t.Fatalf("run %s (exit %d): %s\n%s", rep.Outcome, rep.ExitCode, rep.Reason, summary(rep))
	}
}

// A report to a pipe or a device (-report /dev/stdout) is written in
// place: the rename of an atomic write replaced /dev/stdout with a
// regular file (as root) or failed (as anyone else).
func TestReportToAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := fmt.Sprintf("/proc/self/fd/%d", w.Fd())
	rep := &Report{Outcome: OutcomeComplete}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if err := rep.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer the pipe's link: %v %v", path, fi, err)
	}
	w.Close()
	var back map[string]any
	if err := json.Unmarshal(<-got, &back); err != nil || back["outcome"] != string(OutcomeComplete) {
		t.Errorf("read from the pipe: %v %v", back, err)
	}
}

// removeOnStart removes a directory when the job starts: the state file
// opened, then its place went away (a full disk, a volume gone).
type removeOnStart struct {
	NoProgress
	dir string
}

func (r removeOnStart) Start(string, int64) { os.RemoveAll(r.dir) }

// A copy whose checkpoint could not be saved fails, saying that the next
// run would copy everything again: it said complete, exit 0, and the next
// run duplicated every message.
func TestCopyWhoseCheckpointCannotBeSavedFails(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(20, 0)...)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(dir, "state.json")
	opt.Rate = 10 // two seconds: periodic saves fail too
	var logs syncBuffer
	opt.Log = slog.New(slog.NewTextHandler(&logs, nil))
	rep := Run(context.Background(), pipes, opt, removeOnStart{dir: dir})
	// Said once while saves keep failing: it was an error line every
	// second.
	if n := strings.Count(logs.String(), "cannot save the copy checkpoint"); n != 1 {
		t.Errorf("%d lines about the failing saves:\n%s", n, logs.String())
	}
	if rep.Outcome != OutcomeFailed || rep.ExitCode == 0 || !strings.Contains(rep.Jobs[0].Reason, "the checkpoint could not be saved") ||
		!strings.Contains(rep.Jobs[0].Reason, "copy everything again") {
		t.Fatalf("outcome %s (exit %d): %s", rep.Outcome, rep.ExitCode, rep.Jobs[0].Reason)
	}
	if j := rep.Jobs[0]; j.Written != 20 {
		t.Errorf("written %d, want 20 (the copy itself went through)", j.Written)
	}
	// Found before anything moves where the place is missing already.
	rep = Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "cannot write") || rep.Jobs[0].Written != 0 {
		t.Errorf("with no directory for the state file: %s, written %d: %s", rep.Outcome, rep.Jobs[0].Written, rep.Reason)
	}
}

// A report through a symbolic link replaces the file the link names, and
// the link stays (the rename replaced the link: -report /dev/stdout, with
// standard output sent to a file, made /dev/stdout a regular file). One
// through a descriptor (/proc/self/fd/N, as /dev/stdout is) is appended
// to the file behind it, after what was written there.
func TestReportThroughLinks(t *testing.T) {
	dir := t.TempDir()
	rep := &Report{Outcome: OutcomeComplete}

	target, link := filepath.Join(dir, "report.json"), filepath.Join(dir, "link.json")
	if err := os.Symlink("report.json", link); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteFile(link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if b, err := os.ReadFile(target); err != nil || !strings.Contains(string(b), `"outcome"`) {
		t.Errorf("the link's file: %q %v", b, err)
	}

	out, err := os.Create(filepath.Join(dir, "stdout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	fmt.Fprintln(out, "summary first")
	fd := fmt.Sprintf("/proc/self/fd/%d", out.Fd())
	if err := rep.WriteFile(fd); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fd); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s was replaced: %v %v", fd, fi, err)
	}
	if b, _ := os.ReadFile(out.Name()); !strings.HasPrefix(string(b), "summary first\n{") {
		t.Errorf("the file behind the descriptor: %q", b)
	}
	if err := CheckStateFile(fd); err == nil {
		t.Error("a descriptor taken for a state file")
	}
}

// ResolveLinks takes ".." as the kernel does (after the directory's own
// links: the report went to another file than the kernel's), knows a
// descriptor however it is spelled (/dev/fd/N was written over as a file),
// and only a descriptor (/proc/self/cwd/x is a file), and refuses a loop.
func TestResolveLinks(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "real", "a", "b"), 0o700))
	must(os.Symlink(filepath.Join(dir, "real", "a", "b"), filepath.Join(dir, "dirlink")))
	must(os.Symlink("../target.json", filepath.Join(dir, "real", "a", "b", "link")))
	if got, stream, err := ResolveLinks(filepath.Join(dir, "dirlink", "link")); err != nil || stream || got != filepath.Join(dir, "real", "a", "target.json") {
		t.Errorf("through a linked directory: %q %v %v", got, stream, err)
	}
	f, err := os.Create(filepath.Join(dir, "out"))
	must(err)
	defer f.Close()
	if _, stream, err := ResolveLinks(fmt.Sprintf("/dev/fd/%d", f.Fd())); err != nil || !stream {
		t.Errorf("/dev/fd/N: stream %v %v", stream, err)
	}
	t.Chdir(dir)
	if got, stream, err := ResolveLinks("/proc/self/cwd/new.json"); err != nil || stream || filepath.Base(got) != "new.json" {
		t.Errorf("/proc/self/cwd/new.json: %q %v %v", got, stream, err)
	}
	must(os.Symlink("loopb", filepath.Join(dir, "loopa")))
	must(os.Symlink("loopa", filepath.Join(dir, "loopb")))
	if _, _, err := ResolveLinks(filepath.Join(dir, "loopa")); err == nil {
		t.Error("a loop of links resolved")
	}
	if err := (&Report{}).WriteFile(filepath.Join(dir, "loopa")); err == nil {
		t.Error("a report written through a loop of links")
	}
}

// A checkpoint keeps when the broker made the source entity; a resume into
// one made since (deleted and made again: positions begin anew) is
// refused, where it skipped the new entity's first messages and said
// complete. Where either run's broker did not say, nothing is refused,
// and a run that did not count keeps what was known.
func TestStateRefusesARecreatedSource(t *testing.T) {
	made := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	again := made.Add(time.Hour)
	for _, tc := range []struct {
		name          string
		kept, counted time.Time
		refused       bool
	}{
		{"same entity", made, made, false},
		{"made again", made, again, true},
		{"kept by a run whose broker did not say", time.Time{}, again, false},
		{"this broker does not say", made, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			s, err := openState(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.checkCreated("p", tc.kept); err != nil {
				t.Fatal(err)
			}
			if err := s.save("p", 40, 50); err != nil {
				t.Fatal(err)
			}
			s.close()
			if s, err = openState(path); err != nil {
				t.Fatal(err)
			}
			defer s.close()
			err = s.checkCreated("p", tc.counted)
			if tc.refused != (err != nil) {
				t.Fatalf("checkCreated: %v, want refused %v", err, tc.refused)
			}
			if tc.refused {
				if !strings.Contains(err.Error(), "deleted and made again") || !strings.Contains(err.Error(), "skip its first 40 messages") {
					t.Errorf("the error does not say why: %v", err)
				}
				return
			}
			if err := s.save("p", 60, 60); err != nil {
				t.Fatal(err)
			}
			want := tc.counted
			if want.IsZero() {
				want = tc.kept
			}
			if got := s.data.Jobs["p"].SourceCreated; !got.Equal(want) {
				t.Errorf("kept %v, want %v", got, want)
			}
		})
	}
}

// A sink not counted says why: its kind has no count at all (AMQP), or
// its adapter could count but is not set up to, in its words (a Service
// Bus block without management_endpoint). The second said "its broker
// offers no message count for this sink", which sent a user looking at
// the broker instead of the block.
func TestUncountableSinkSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name, sink string
		countErr   error
		want       string
		wantNot    []string
	}{
		{"no count at all", "memqplain", nil,
			"not checked: the sink cannot be counted: its broker offers no message count for this sink, so the verification could not be done",
			[]string{"unsupported operation"}},
		{"not set up to count", "memq", fmt.Errorf("memq: where it serves its counts is not known: set count_endpoint to count it: %w", errors.ErrUnsupported),
			"not checked: the sink cannot be counted: memq: where it serves its counts is not known: set count_endpoint to count it, so the verification could not be done",
			[]string{"unsupported operation", "offers no message count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pipes := setup(t, strings.ReplaceAll(moveHCL, `sink "memq"`, fmt.Sprintf("sink %q", tc.sink)))
			b.put("in", msgs(5, 0)...)
			b.mu.Lock()
			b.sinkCountErr = tc.countErr
			b.mu.Unlock()
			rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
			if rep.Outcome != OutcomeComplete || rep.Reason != "" {
				t.Fatalf("outcome %s, reason %q", rep.Outcome, rep.Reason)
			}
			s := summary(rep)
			if !strings.Contains(s, tc.want) {
				t.Errorf("summary lacks %q:\n%s", tc.want, s)
			}
			for _, w := range tc.wantNot {
				if strings.Contains(s, w) {
					t.Errorf("summary has %q:\n%s", w, s)
				}
			}
		})
	}
}
