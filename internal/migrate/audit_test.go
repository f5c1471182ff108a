package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// Kinds for the audit's tests, on the memq brokers: "memqx" is memq with a
// source identity and counts that can hang (an unreachable endpoint);
// "memqrel" samples like memqplain, with deliveries that can be released
// (driver.Releaser), counting nacks and releases; like SQS, a closed source
// releases nothing. "memqlate" is memqrel whose last delivery comes back
// from a receive only as the engine stops (a poll that returns then).
var (
	auditHang  sync.Map // broker id → *atomic.Bool: counts wait for their context
	auditStats sync.Map // broker id → *auditSettles
)

type auditSettles struct{ nacks, releases atomic.Int64 }

func auditHangs(id string) *atomic.Bool {
	v, _ := auditHang.LoadOrStore(id, new(atomic.Bool))
	return v.(*atomic.Bool)
}

func auditSettled(id string) *auditSettles {
	v, _ := auditStats.LoadOrStore(id, new(auditSettles))
	return v.(*auditSettles)
}

func init() {
	count := func(ctx context.Context, broker, queue string) (driver.Backlog, error) {
		if auditHangs(broker).Load() {
			<-ctx.Done()
			return driver.Backlog{}, fmt.Errorf("memqx: dial: %w", ctx.Err())
		}
		return brokerOf(broker).backlog(queue), nil
	}
	config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name:        "memqx",
		NewSource:   newMemSource,
		NewSink:     newMemSink(false),
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
		CountSource: func(ctx context.Context, c memSourceConfig, _ *slog.Logger) (driver.Backlog, error) {
			return count(ctx, c.Broker, c.Queue)
		},
		CountSink: func(ctx context.Context, c memSinkConfig, _ *slog.Logger) (driver.Backlog, error) {
			return count(ctx, c.Broker, c.Queue)
		},
		Browse: func(c memSourceConfig, after uint64) (memSourceConfig, error) {
			c.browse, c.after = true, after
			return c, nil
		},
		NewDrySink: newMemSink(true),
		SourceIdentity: func(c memSourceConfig) string {
			return fmt.Sprintf("broker %s queue %s", c.Broker, c.Queue)
		},
	})
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "memqrel", true: "memqlate"}[late]
		config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
			Name: name,
			NewSource: func(ctx context.Context, c memSourceConfig, log *slog.Logger) (driver.Source, error) {
				s, err := newMemSource(ctx, c, log)
				if err != nil {
					return nil, err
				}
				return &releasingSource{memSource: s.(*memSource), st: auditSettled(c.Broker), late: late}, nil
			},
			NewSink:     newMemSink(false),
			SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
			NewDrySink:  newMemSink(true),
		})
	}
}

type releasingSource struct {
	*memSource
	st     *auditSettles
	closed atomic.Bool
	// late: the first delivery is kept back and returned once the queue
	// is empty and the receive's context ends. Receive runs on the
	// engine's one receive loop, so these need no lock.
	late     bool
	kept     driver.Delivery
	lateDone bool
}

func (s *releasingSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if s.late && !s.lateDone {
		if s.kept == nil {
			ds, err := s.memSource.Receive(ctx, 1)
			if len(ds) == 0 {
				return nil, err
			}
			s.kept = &releasingDelivery{ds[0].(*memDelivery), s}
		}
		if s.b.backlog(s.cfg.Queue).Ready == 0 {
			<-ctx.Done()
			s.lateDone = true
			return []driver.Delivery{s.kept}, nil
		}
	}
	ds, err := s.memSource.Receive(ctx, max)
	for i, d := range ds {
		ds[i] = &releasingDelivery{d.(*memDelivery), s}
	}
	return ds, err
}

func (s *releasingSource) Close(ctx context.Context) error {
	s.closed.Store(true)
	return s.memSource.Close(ctx)
}

type releasingDelivery struct {
	*memDelivery
	s *releasingSource
}

func (d *releasingDelivery) Nack(ctx context.Context, delay time.Duration) error {
	d.s.st.nacks.Add(1)
	return d.memDelivery.Nack(ctx, delay)
}

func (d *releasingDelivery) Release(ctx context.Context) error {
	if d.s.closed.Load() {
		return errors.New("memqrel: closed")
	}
	d.s.st.releases.Add(1)
	return d.memDelivery.Nack(ctx, 0)
}

// stuckHCL: neither the sink nor the dead-letter sink takes a message
// with attribute "bad" (as a 300 KB message fits neither Service Bus nor
// an SQS dead-letter queue).
const stuckHCL = `
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
      broker      = "%[1]s"
      queue       = "dlq"
      reject_attr = "bad"
    }
  }
}
`

func summaryOf(rep *Report) string {
	var b bytes.Buffer
	rep.Summary(&b)
	return b.String()
}

// lastFigures records the figures a job finished with.
type lastFigures struct {
	NoProgress
	mu sync.Mutex
	f  Figures
}

func (p *lastFigures) Finish(_ string, f Figures, _ Outcome) {
	p.mu.Lock()
	p.f = f
	p.mu.Unlock()
}

// A message neither sink takes comes back for ever: the migration ends
// once everything else moved, not drained, and names it.
func TestStuckMessagesEndTheMigration(t *testing.T) {
	b, pipes := setup(t, stuckHCL)
	ms := msgs(20, 0)
	ms[3].SetAttr("bad", mapping.String("x"))
	ms[11].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	opt := fastOptions(ModeMove)
	// The hang's ending without the fix, which the reason then names. No
	// bound on the time besides: the stuck messages' redeliveries, with
	// their growing delays, take from 0.1 s to 5 s here and 13 s under a
	// loaded CI (a bound of 10 s failed there).
	opt.Timeout = time.Minute
	prog := &lastFigures{}
	rep := Run(context.Background(), pipes, opt, prog)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeNotDrained || rep.ExitCode != ExitNotDrained || j.Written != 18 {
		t.Fatalf("outcome %s (%d), written %d: %s", rep.Outcome, rep.ExitCode, j.Written, rep.Reason)
	}
	for _, want := range []string{"2 messages are stuck", "dead-letter sink (memq) refuses them too", "2 rejected", `attribute "bad"`, "stay at the source"} {
		if !strings.Contains(rep.Reason, want) {
			t.Errorf("reason lacks %s: %s", want, rep.Reason)
		}
	}
	ex := j.StuckExamples["rejected"].MessageID
	if (ex != "m0003" && ex != "m0011") || !strings.Contains(rep.Reason, `message "`+ex+`"`) {
		t.Errorf("example %q, reason %s", ex, rep.Reason)
	}
	if strings.Contains(rep.Reason, "-timeout") {
		t.Errorf("ended by the timeout: %s", rep.Reason)
	}
	if j.StuckTotal != 2 || j.Stuck["rejected"] != 2 || j.Drained {
		t.Errorf("stuck %d %v, examples %v, drained %v", j.StuckTotal, j.Stuck, j.StuckExamples, j.Drained)
	}
	if rep.Totals.StuckTotal != 2 {
		t.Errorf("totals stuck %d", rep.Totals.StuckTotal)
	}
	if got := len(b.messages("in")); got != 2 {
		t.Errorf("source holds %d, want the 2 stuck", got)
	}
	prog.mu.Lock()
	if prog.f.Stuck != 2 {
		t.Errorf("progress figures %+v, want stuck 2", prog.f)
	}
	prog.mu.Unlock()
	if s := summaryOf(rep); !strings.Contains(s, "stuck 2: the dead-letter sink (memq) refuses it too (rejected)") {
		t.Errorf("summary:\n%s", s)
	}
}

// Messages queued behind a stuck one in its FIFO group are ready at the
// source and never delivered: the migration waited for them for ever (an
// audit stopped it after 10 minutes). It ends not-drained and counts them.
func TestMessagesBehindStuckOnesEndTheMigration(t *testing.T) {
	defer func(f func(time.Duration) time.Duration) { blockedBehindStuck = f }(blockedBehindStuck)
	blockedBehindStuck = func(idle time.Duration) time.Duration { return idle }
	b, pipes := setup(t, stuckHCL)
	ms := msgs(5, 0)
	ms[2].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	b.putBlocked("in", msgs(3, 5)...)
	opt := fastOptions(ModeMove)
	opt.Timeout = time.Minute // the hang's ending without the fix
	rep := Run(context.Background(), pipes, opt, nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeNotDrained || j.Written != 4 || strings.Contains(rep.Reason, "-timeout") {
		t.Fatalf("outcome %s, written %d: %s", rep.Outcome, j.Written, rep.Reason)
	}
	if !strings.Contains(rep.Reason, "3 messages are at the source too, queued behind them") || j.LeftBehind["behind-stuck"] != 3 {
		t.Errorf("left behind %v: %s", j.LeftBehind, rep.Reason)
	}
}

// With -timeout, a stuck message is named in the reason too.
func TestStuckMessagesNamedOnTimeout(t *testing.T) {
	b, pipes := setup(t, stuckHCL)
	ms := msgs(5, 0)
	ms[0].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	b.mu.Lock()
	b.queue("in").heldByOther = 1 // keeps it from ending otherwise
	b.mu.Unlock()
	opt := fastOptions(ModeMove)
	opt.Timeout = 500 * time.Millisecond
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeNotDrained || !strings.Contains(rep.Reason, "-timeout") || !strings.Contains(rep.Reason, "1 message is stuck") {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
}

// The dry run checks the dead-letter sink too: a message it refuses would
// be stuck, not dead-lettered.
func TestDryRunFindsStuckMessages(t *testing.T) {
	for _, kind := range []string{"memq", "memqplain"} {
		t.Run(kind, func(t *testing.T) {
			b, pipes := setup(t, strings.ReplaceAll(stuckHCL, `source "memq"`, `source "`+kind+`"`))
			ms := msgs(10, 0)
			ms[4].SetAttr("bad", mapping.String("x"))
			b.put("in", ms...)
			rep := Run(context.Background(), pipes, fastOptions(ModeDryRun), nil)
			d := rep.Jobs[0].DryRun
			if rep.Outcome != OutcomeNotDrained || d == nil || d.WouldStick["rejected"] != 1 || d.WouldReject["rejected"] != 1 {
				t.Fatalf("outcome %s (%s), dry run %+v", rep.Outcome, rep.Reason, d)
			}
			if !strings.Contains(rep.Reason, "1 message would be stuck") || !strings.Contains(rep.Reason, "m0004") {
				t.Errorf("reason: %s", rep.Reason)
			}
			if s := summaryOf(rep); !strings.Contains(s, "would be stuck 1: the dead-letter sink (memq) refuses it too (rejected)") {
				t.Errorf("summary:\n%s", s)
			}
			if n := len(b.messages("dlq")) + len(b.messages("out")); n != 0 {
				t.Errorf("a dry run wrote %d", n)
			}
		})
	}
	// A dead-letter sink that takes it: dead-lettered, as before.
	b, pipes := setup(t, moveHCL)
	ms := msgs(10, 0)
	ms[4].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	if rep := Run(context.Background(), pipes, fastOptions(ModeDryRun), nil); rep.Outcome != OutcomeDeadLettered || rep.Jobs[0].DryRun.WouldStick != nil {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
}

// The dry run's dead letters are only recorded: its log must not claim one.
func TestDryRunLogDoesNotClaimDeadLetters(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	ms := msgs(10, 0)
	ms[4].SetAttr("bad", mapping.String("x"))
	b.put("in", ms...)
	var logs syncBuffer
	opt := fastOptions(ModeDryRun)
	opt.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeDeadLettered {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	l := logs.String()
	if strings.Contains(l, `msg="message dead-lettered"`) || !strings.Contains(l, "would be dead-lettered") {
		t.Errorf("log:\n%s", l)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The rate is over the time until the last message was done, not the idle
// spell that confirms the drain; a dry run's is over what it read.
func TestRateIsOverActiveTime(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(200, 0)...)
	opt := fastOptions(ModeMove)
	opt.Idle = 600 * time.Millisecond
	rep := Run(context.Background(), pipes, opt, nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	if j.ActiveSeconds <= 0 || j.ActiveSeconds > j.Seconds-0.5 {
		t.Errorf("active %.3fs of %.3fs: the idle spell is counted", j.ActiveSeconds, j.Seconds)
	}
	if want := 200 / j.ActiveSeconds; j.Rate < want*0.99 || rep.Rate < want*0.99 {
		t.Errorf("rate %.0f (run %.0f), want %.0f", j.Rate, rep.Rate, want)
	}

	b, pipes = setup(t, moveHCL)
	b.put("in", msgs(50, 0)...)
	rep = Run(context.Background(), pipes, fastOptions(ModeDryRun), nil)
	if j := rep.Jobs[0]; j.Rate <= 0 || rep.Rate <= 0 || j.ActiveSeconds >= j.Seconds {
		t.Errorf("dry run: rate %.0f (run %.0f), active %.3fs of %.3fs", j.Rate, rep.Rate, j.ActiveSeconds, j.Seconds)
	}
}

// A dry run's sample goes back with Release where the source can (no
// failure backoff: SQS nack_backoff), Nack elsewhere, and before the source
// closes: a closed SQS source cannot release, so what a held dry run
// received as it stopped stayed invisible for its visibility timeout (the
// audit's "sqs: closed"; memqlate returns its last delivery then).
func TestDryRunSampleIsReleased(t *testing.T) {
	for _, tc := range []struct {
		kind          string
		put, sample   int
		wantReleased  int64
		wantSourceRdy int64
	}{
		{"memqrel", 30, 10, 10, 30},
		{"memqlate", 5, 100, 5, 5},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "`+tc.kind+`"`))
			b.put("in", msgs(tc.put, 0)...)
			opt := fastOptions(ModeDryRun)
			opt.Sample = int64(tc.sample)
			rep := Run(context.Background(), pipes, opt, nil)
			if rep.Outcome != OutcomeComplete {
				t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
			}
			st := auditSettled(pipes[0].Spec.Source.Config.(memSourceConfig).Broker)
			if st.releases.Load() != tc.wantReleased || st.nacks.Load() != 0 {
				t.Errorf("released %d, nacked %d; want %d released", st.releases.Load(), st.nacks.Load(), tc.wantReleased)
			}
			if got := b.backlog("in"); got.Ready != tc.wantSourceRdy {
				t.Errorf("source after the dry run: %+v, want %d ready", got, tc.wantSourceRdy)
			}
		})
	}
}

// A copy settles nothing: its summary says what it did instead.
func TestCopySummarySaysWhatItDid(t *testing.T) {
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(5, 0)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeCopy), nil)
	s := summaryOf(rep)
	if rep.Outcome != OutcomeComplete || strings.Contains(s, "acknowledged") || !strings.Contains(s, "copied 5") || !strings.Contains(s, "only read") {
		t.Errorf("outcome %s, summary:\n%s", rep.Outcome, s)
	}
}

// A copy checkpoint belongs to its source: the same pipeline name pointed
// at another queue must not resume from it (it copied nothing and said
// complete).
func TestCopyCheckpointBelongsToItsSource(t *testing.T) {
	hcl := strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqx"`)
	b, pipes := setup(t, hcl)
	b.put("in", msgs(20, 0)...)
	opt := fastOptions(ModeCopy)
	opt.StateFile = filepath.Join(t.TempDir(), "state.json")
	if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete || rep.Jobs[0].Checkpoint != 20 {
		t.Fatalf("first copy: %s: %s", rep.Outcome, rep.Reason)
	}
	// The same source again: resumed, and the summary says from where.
	b.put("in", msgs(3, 0)...)
	rep := Run(context.Background(), pipes, opt, nil)
	if j := rep.Jobs[0]; rep.Outcome != OutcomeComplete || j.ResumedFrom != 20 || j.Written != 3 {
		t.Fatalf("resume: %s, resumed from %d, written %d: %s", rep.Outcome, j.ResumedFrom, j.Written, rep.Reason)
	}
	if s := summaryOf(rep); !strings.Contains(s, "resumed from: sequence 20") {
		t.Errorf("summary:\n%s", s)
	}
	// Another queue under the same pipeline name.
	b.put("other", msgs(30, 0)...)
	cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(strings.Replace(fmt.Sprintf(hcl, pipes[0].Spec.Source.Config.(memSourceConfig).Broker), `queue  = "in"`, `queue  = "other"`, 1)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rep = Run(context.Background(), cfg.Pipelines, opt, nil)
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "queue in") || !strings.Contains(rep.Reason, "queue other") {
		t.Fatalf("another source: %s: %s", rep.Outcome, rep.Reason)
	}
	if s := summaryOf(rep); strings.Contains(s, "resumed from") || rep.Jobs[0].ResumedFrom != 0 {
		t.Errorf("a refused checkpoint is not resumed from:\n%s", s)
	}
	if n := len(b.messages("out")); n != 23 {
		t.Errorf("sink holds %d, want 23", n)
	}
}

// Counts against an unreachable broker give up within -connect-timeout.
func TestUnreachableCountsAreBoundedByTheConnectTimeout(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqx"`), `sink "memq" {
    broker      = "%[1]s"
    queue       = "out"`, `sink "memqx" {
    broker      = "%[1]s"
    queue       = "out"`))
	id := pipes[0].Spec.Source.Config.(memSourceConfig).Broker
	auditHangs(id).Store(true)
	b.failOpen = true
	opt := fastOptions(ModeMove)
	opt.ConnectTimeout = 400 * time.Millisecond
	opt.CountTimeout = 10 * time.Minute // unbounded by the connect timeout, the run would last this long
	start := time.Now()
	rep := Run(context.Background(), pipes, opt, nil)
	if el := time.Since(start); el > time.Minute { // about 1 s; a loaded machine must not fail it
		t.Errorf("took %s with -connect-timeout %s", el, opt.ConnectTimeout)
	}
	if rep.Outcome != OutcomeFailed || !strings.Contains(rep.Reason, "not connected after") {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
}

// An interrupt does not wait long for the counts after it.
func TestInterruptDoesNotWaitForCounts(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqx"`))
	id := pipes[0].Spec.Source.Config.(memSourceConfig).Broker
	b.put("in", msgs(400, 0)...)
	opt := fastOptions(ModeMove)
	opt.Rate = 200
	// A count that waits would take this long; the interrupt's waits at
	// most quickCount (2 s).
	opt.CountTimeout = 10 * time.Minute
	opt.ConnectTimeout = 10 * time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled atomic.Int64
	go func() {
		for len(b.messages("out")) < 20 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
		auditHangs(id).Store(true) // the broker stops answering
		cancelled.Store(time.Now().UnixNano())
		cancel()
	}()
	rep := Run(ctx, pipes, opt, nil)
	if rep.Outcome != OutcomeInterrupted {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	if el := time.Since(time.Unix(0, cancelled.Load())); el > quickCount+time.Minute {
		t.Errorf("the interrupt took %s to end the run", el)
	}
	if rep.Jobs[0].CountErrors["source"] == "" {
		t.Errorf("count errors %v", rep.Jobs[0].CountErrors)
	}
}

// An example is named by its id, else by its position: a JetStream message
// without Nats-Msg-Id was shown as message "".
func TestExampleName(t *testing.T) {
	for _, tc := range []struct {
		ex   Example
		want string
	}{
		{Example{MessageID: "m1", Sequence: "6"}, `message "m1"`},
		{Example{Sequence: "6"}, "the message at sequence 6"},
		{Example{}, "a message without an id"},
	} {
		if got := tc.ex.Name(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.ex, got, tc.want)
		}
	}
}

// The reason names what ends the redeliveries at the source it is about.
// A JetStream source terminates a stuck message at max_deliver: the reason
// must not send the user to a re-run that cannot see it (the audit's
// "complete" after following that advice), nor say a re-run cannot move
// what a consumer without max_deliver delivers again (a later audit).
func TestStuckReasonNamesTheSourcesLimit(t *testing.T) {
	for _, tc := range []struct {
		kind       string
		want, lack string
	}{
		{"nats", "1 message is stuck: the sink refuses it and the pipeline has no dead_letter destination (1 too-large, e.g. the message at sequence 6: too big); it stays in the stream and running the same command again tries it again, unless the consumer has a max_deliver", "stays at the source, redelivered"},
		{"sqs", "it stays at the source, redelivered until the queue's redrive limit (maxReceiveCount)", "max_deliver"},
		// a classic RabbitMQ queue has no limit: the reason must not cite
		// one of SQS or Service Bus (F1 of an audit)
		{"amqp", "redelivered until the broker's delivery limit, where the queue has one", "maxReceiveCount"},
		{"servicebus", "MaxDeliveryCount", "maxReceiveCount"},
	} {
		j := &job{opt: &Options{Mode: ModeMove}, pipe: &config.Pipeline{Name: "p", Spec: config.Spec{Source: config.Adapter{Kind: tc.kind}}}}
		got := j.stuckReason(1, map[string]int64{"too-large": 1}, map[string]Example{"too-large": {Sequence: "6", Description: "too big"}})
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.lack) || !strings.Contains(got, "the message at sequence 6: too big") {
			t.Errorf("%s: %s", tc.kind, got)
		}
	}
}

// The messages a run hands back itself (the rest of a stuck message's
// group, a retry cut short) come back with a higher delivery count, and
// were taken for an earlier run's: a clean move into a sink without
// duplicate detection said "up to N of the messages may be there twice",
// and a deduplicating one would have forgiven a shortfall of as many as a
// resume's. Only a count from before the run is a resume's.
func TestOwnHandBacksAreNoResume(t *testing.T) {
	for _, tc := range []struct {
		name            string
		deliveredBefore int // messages the source had delivered before the run
		redelivered     int64
	}{
		{"nothing delivered before", 0, 0},
		{"delivered before, then handed back by this run too", 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pipes := setup(t, stuckHCL)
			ms := msgs(20, 2)
			ms[2].SetAttr("bad", mapping.String("x")) // group g0: the rest of g0 is handed back with it
			for _, m := range ms[:tc.deliveredBefore] {
				m.Source.DeliveryCount = 2
			}
			b.put("in", ms...)
			opt := fastOptions(ModeMove)
			opt.Timeout = time.Minute // as TestStuckMessagesEndTheMigration
			rep := Run(context.Background(), pipes, opt, nil)
			j := rep.Jobs[0]
			if rep.Outcome != OutcomeNotDrained || j.Written != 19 {
				t.Fatalf("outcome %s, written %d: %s", rep.Outcome, j.Written, rep.Reason)
			}
			if j.HandedBack == 0 {
				t.Fatalf("nothing handed back: the test shows nothing\n%s", summaryOf(rep))
			}
			want := min(tc.redelivered, j.Written)
			if j.Redelivered != want {
				t.Errorf("redelivered %d, want %d (handed back %d)\n%s", j.Redelivered, want, j.HandedBack, summaryOf(rep))
			}
			if twice := strings.Contains(j.Verification.Note, "may be there twice"); twice != (want > 0) {
				t.Errorf("verification note %q, want \"may be there twice\" only for what was delivered before", j.Verification.Note)
			}
		})
	}
}

// A dry run of a source whose every receive counts (SQS) raises the
// receive count of each message it samples; the move after it took those
// for an earlier, interrupted run's deliveries and said "up to N of the
// messages may be there twice" after the dry run users are advised to do
// first (an audit). Only receives no dry run explains (another consumer's,
// a delivery before the dry run) keep the note.
func TestDryRunSampleIsNoEarlierWrite(t *testing.T) {
	const hcl = `
pipeline "p" {
  source "memq" {
    broker           = "%[1]s"
    queue            = "in"
    receives_counted = true
  }
  sink "memq" {
    broker = "%[1]s"
    queue  = "out"
  }
}
`
	for _, tc := range []struct {
		name           string
		countedBefore  int // each message's delivery count before the dry runs (0: never delivered)
		dryRuns        int
		receivedAfter  bool // another consumer received them between the dry runs and the move
		wantRedelivery int64
	}{
		{"one dry run", 0, 1, false, 0},
		{"two dry runs", 0, 2, false, 0},
		{"no dry run, delivered before", 1, 0, false, 20},
		{"delivered before the dry run", 1, 1, false, 20},
		{"received by another consumer after the dry run", 0, 1, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pipes := setup(t, hcl)
			b.refuseBrowse = true // sampled by receiving, as SQS is
			ms := msgs(20, 0)
			for _, m := range ms {
				m.Source.DeliveryCount = tc.countedBefore
			}
			b.put("in", ms...)
			for range tc.dryRuns {
				opt := fastOptions(ModeDryRun)
				opt.Sample = 100
				if rep := Run(context.Background(), pipes, opt, nil); rep.Outcome != OutcomeComplete {
					t.Fatalf("dry run: %s: %s", rep.Outcome, rep.Reason)
				}
			}
			// The test shows nothing unless the dry runs raised the counts
			// the move sees.
			b.mu.Lock()
			got := b.queue("in").msgs[0].m.Source.DeliveryCount
			b.mu.Unlock()
			if want := tc.countedBefore + tc.dryRuns; got != want {
				t.Fatalf("delivery count %d after %d dry runs, want %d", got, tc.dryRuns, want)
			}
			if tc.receivedAfter {
				b.mu.Lock()
				for _, mm := range b.queue("in").msgs {
					mm.m.Source.DeliveryCount++
				}
				b.mu.Unlock()
			}
			rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
			j := rep.Jobs[0]
			if rep.Outcome != OutcomeComplete || j.Written != 20 {
				t.Fatalf("move: %s, written %d: %s", rep.Outcome, j.Written, rep.Reason)
			}
			if j.Redelivered != tc.wantRedelivery {
				t.Errorf("redelivered %d, want %d\n%s", j.Redelivered, tc.wantRedelivery, summaryOf(rep))
			}
			if twice := strings.Contains(j.Verification.Note, "may be there twice"); twice != (tc.wantRedelivery > 0) {
				t.Errorf("verification note %q, want \"may be there twice\" only for deliveries no dry run explains", j.Verification.Note)
			}
		})
	}
}
