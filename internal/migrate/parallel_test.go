package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// "memqpar" is memq with identities (so -parallel can tell its entities
// apart) and sinks that report, per broker, which queues have a sink open
// at once, and may hold every Send until enough queues have one.
func init() {
	config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name:      "memqpar",
		NewSource: newMemSource,
		NewSink: func(ctx context.Context, c memSinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
			s, err := newMemSink(false)(ctx, c, onDrop, log)
			if err != nil {
				return nil, err
			}
			ps := parStateOf(c.Broker)
			ps.opened(c.Queue)
			return &parSink{Sink: s, ps: ps, queue: c.Queue}, nil
		},
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
		CountSource: countMemSource,
		CountSink:   countMemSink,
		NewDrySink:  newMemSink(true),
		SourceIdentity: func(c memSourceConfig) string {
			return fmt.Sprintf("broker %s queue %s%s", c.Broker, c.Queue, c.Spelling)
		},
		SinkIdentity: func(c memSinkConfig) string {
			return fmt.Sprintf("broker %s queue %s%s", c.Broker, c.Queue, c.Spelling)
		},
	})
}

// parState is what the memqpar sinks of one broker saw.
type parState struct {
	mu   sync.Mutex
	open map[string]int // queue → sinks open on it now
	// shared lists the queues that had two sinks open at once.
	shared []string
	// gateAt > 0 holds every Send until that many queues have a sink open
	// at the same time (gate is closed then).
	gateAt int
	gate   chan struct{}
}

var (
	parMu     sync.Mutex
	parStates = map[string]*parState{}
)

func parStateOf(broker string) *parState {
	parMu.Lock()
	defer parMu.Unlock()
	ps := parStates[broker]
	if ps == nil {
		ps = &parState{open: map[string]int{}, gate: make(chan struct{})}
		parStates[broker] = ps
	}
	return ps
}

func (ps *parState) opened(queue string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.open[queue]++
	if ps.open[queue] > 1 && !slices.Contains(ps.shared, queue) {
		ps.shared = append(ps.shared, queue)
	}
	if ps.gateAt > 0 && len(ps.open) >= ps.gateAt {
		ps.gateAt = 0
		close(ps.gate)
	}
}

func (ps *parState) closed(queue string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.open[queue]--; ps.open[queue] == 0 {
		delete(ps.open, queue)
	}
}

type parSink struct {
	driver.Sink
	ps    *parState
	queue string
	once  sync.Once
}

func (s *parSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	select {
	case <-s.ps.gate:
	case <-ctx.Done():
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
	return s.Sink.Send(ctx, msgs)
}

func (s *parSink) Close(ctx context.Context) error {
	s.once.Do(func() { s.ps.closed(s.queue) })
	return s.Sink.Close(ctx)
}

// parPipelines renders one memqpar pipeline per "name: in -> out".
func parPipelines(broker string, specs ...string) string {
	var b strings.Builder
	for _, spec := range specs {
		name, flow, _ := strings.Cut(spec, ": ")
		in, out, _ := strings.Cut(flow, " -> ")
		fmt.Fprintf(&b, `
pipeline %q {
  source "memqpar" {
    broker = %q
    queue  = %q
  }
  sink "memqpar" {
    broker = %q
    queue  = %q
  }
}
`, name, broker, in, broker, out)
	}
	return b.String()
}

// setupPar loads the pipelines on a new broker whose sinks hold their
// sends until gateAt queues have a sink open at once. If that does not
// happen within a minute (the pipelines ran one after the other), the gate
// opens anyway and the test fails.
func setupPar(t *testing.T, gateAt int, specs ...string) (*memBroker, *parState, []*config.Pipeline) {
	t.Helper()
	id := fmt.Sprintf("b%d", brokerSeq.Add(1))
	b := newBroker(id)
	ps := parStateOf(id)
	ps.gateAt = gateAt
	cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(parPipelines(id, specs...)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ps.gate:
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("%d queues never had a sink open at the same time: the pipelines did not run at once", gateAt)
			ps.mu.Lock()
			if ps.gateAt > 0 {
				ps.gateAt = 0
				close(ps.gate)
			}
			ps.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return b, ps, cfg.Pipelines
}

// -parallel 3 runs three independent pipelines at once (each one's sink
// waits until all three are open), and the report lists them in the order
// given, each verified.
func TestParallelRunsPipelinesAtOnce(t *testing.T) {
	b, _, pipes := setupPar(t, 3, "p0: in0 -> out0", "p1: in1 -> out1", "p2: in2 -> out2")
	for i := range 3 {
		b.put(fmt.Sprintf("in%d", i), msgs(20+i, 0)...)
	}
	opt := fastOptions(ModeMove)
	opt.Parallel = 3
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	for i, j := range rep.Jobs {
		if j.Pipeline != fmt.Sprintf("p%d", i) || j.Written != int64(20+i) || j.Verification == nil || !j.Verification.Verified {
			t.Errorf("job %d: pipeline %s, written %d, verification %+v", i, j.Pipeline, j.Written, j.Verification)
		}
		if n := len(b.messages(fmt.Sprintf("out%d", i))); n != 20+i {
			t.Errorf("out%d holds %d, want %d", i, n, 20+i)
		}
	}
	if rep.Rate <= 0 {
		t.Errorf("rate %v", rep.Rate)
	}
}

// Pipelines that write the same queue, or read what another writes, share
// a lane: they run one after the other, in the order given, while the
// others run beside them. Each one's verification brackets its own writes.
func TestParallelSerializesSharedEntities(t *testing.T) {
	b, ps, pipes := setupPar(t, 2, "p0: in0 -> out", "p1: in1 -> out", "p2: in2 -> mid", "p3: mid -> last")
	for i := range 3 {
		b.put(fmt.Sprintf("in%d", i), msgs(10, 0)...)
	}
	opt := fastOptions(ModeMove)
	opt.Parallel = 4
	rep := Run(context.Background(), pipes, opt, nil)
	if rep.Outcome != OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Reason)
	}
	ps.mu.Lock()
	shared := ps.shared
	ps.mu.Unlock()
	if len(shared) > 0 {
		t.Errorf("queues %v had two pipelines' sinks open at once", shared)
	}
	want := map[string]int64{"p0": 10, "p1": 10, "p2": 10, "p3": 10}
	for _, j := range rep.Jobs {
		if j.Written != want[j.Pipeline] || j.Verification == nil || !j.Verification.Verified {
			t.Errorf("%s: written %d, verification %+v", j.Pipeline, j.Written, j.Verification)
		}
	}
	if n := len(b.messages("out")); n != 20 {
		t.Errorf("out holds %d, want 20", n)
	}
	if n := len(b.messages("last")); n != 10 {
		t.Errorf("last holds %d, want 10 (p3 ran before p2 wrote?)", n)
	}
}

func TestLaneUnits(t *testing.T) {
	u := func(touches ...string) *unit { return &unit{touches: touches} }
	for _, tc := range []struct {
		name  string
		units []*unit
		want  [][]int // lanes as unit indexes
	}{
		{"independent", []*unit{u("sqs q1", "sb e1"), u("sqs q2", "sb e2"), u("sqs q3", "sb e3")}, [][]int{{0}, {1}, {2}}},
		{"same sink", []*unit{u("sqs q1", "sb e1"), u("sqs q2", "sb e2"), u("sqs q3", "sb e1")}, [][]int{{0, 2}, {1}}},
		{"a chain", []*unit{u("sqs b", "sqs c"), u("sqs x", "sqs y"), u("sqs a", "sqs b")}, [][]int{{0, 2}, {1}}},
		{"server alone", []*unit{u("sqs q1", "nats server h:4222 stream \"A\""), u("sqs q2", "nats server h:4222"), u("sqs q3", "nats server h:4223")}, [][]int{{0, 1}, {2}}},
		{"no prefix of a word", []*unit{u("sqs q1", "sb e1"), u("sqs q2", "sb e10")}, [][]int{{0}, {1}}},
		{"joined later", []*unit{u("a", "b"), u("c", "d"), u("b", "d")}, [][]int{{0, 1, 2}}},
		{"a failed pipeline", []*unit{u(), u("a", "b")}, [][]int{{0}, {1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := map[*unit]int{}
			for i, x := range tc.units {
				at[x] = i
			}
			var got [][]int
			for _, lane := range laneUnits(tc.units) {
				var l []int
				for _, x := range lane {
					l = append(l, at[x])
				}
				got = append(got, l)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("lanes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestActiveTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := func(from, to int) span {
		return span{t0.Add(time.Duration(from) * time.Second), t0.Add(time.Duration(to) * time.Second)}
	}
	for _, tc := range []struct {
		spans []span
		want  time.Duration
	}{
		{nil, 0},
		{[]span{s(0, 10), s(10, 15)}, 15 * time.Second},           // one after the other: the sum
		{[]span{s(0, 10), s(2, 5), s(20, 30)}, 20 * time.Second},  // nested, then a gap
		{[]span{s(5, 12), s(0, 10)}, 12 * time.Second},            // out of order, overlapping
		{[]span{s(0, 10), s(20, 25), s(8, 21)}, 25 * time.Second}, // a span bridging two
	} {
		if got := activeTime(tc.spans); got != tc.want {
			t.Errorf("activeTime(%v) = %s, want %s", tc.spans, got, tc.want)
		}
	}
}

// "memqbatch" is memq whose source settles batches and has no order to
// keep (as JetStream's and SQS standard's do): the engine must see both
// through the migration's wrapper.
func init() {
	config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name: "memqbatch",
		NewSource: func(ctx context.Context, c memSourceConfig, log *slog.Logger) (driver.Source, error) {
			s, err := newMemSource(ctx, c, log)
			if err != nil {
				return nil, err
			}
			return &batchMemSource{Source: s, broker: c.Broker}, nil
		},
		NewSink:     newMemSink(false),
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.opt = o },
		CountSource: countMemSource,
		CountSink:   countMemSink,
		NewDrySink:  newMemSink(true),
	})
}

var batchCalls sync.Map // broker → *atomic.Int64 of AckBatch calls

type batchMemSource struct {
	driver.Source
	broker string
}

func (s *batchMemSource) Unordered() bool { return true }

func (s *batchMemSource) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	n, _ := batchCalls.LoadOrStore(s.broker, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	errs := make([]error, len(ds))
	for i, d := range ds {
		if _, ok := d.(*memDelivery); !ok {
			errs[i] = fmt.Errorf("AckBatch got a %T, not the source's own delivery", d)
			continue
		}
		errs[i] = d.Ack(ctx)
	}
	return errs
}

// The migration's wrapper passes the source's optional interfaces on: the
// engine settles a batching source's deliveries in batches (through the
// wrapper's bookkeeping: every one counted as acknowledged), and sees an
// unordered source as unordered.
func TestWrapperKeepsWhatTheSourceCanDo(t *testing.T) {
	b, pipes := setup(t, strings.ReplaceAll(moveHCL, `source "memq"`, `source "memqbatch"`))
	b.put("in", msgs(200, 0)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	j := rep.Jobs[0]
	if rep.Outcome != OutcomeComplete || j.Written != 200 || j.Acknowledged != 200 || len(b.messages("in")) != 0 {
		t.Fatalf("outcome %s (%s): written %d, acknowledged %d, %d left", rep.Outcome, rep.Reason, j.Written, j.Acknowledged, len(b.messages("in")))
	}
	n, _ := batchCalls.Load(pipes[0].Spec.Source.Config.(memSourceConfig).Broker)
	if n == nil || n.(*atomic.Int64).Load() == 0 {
		t.Errorf("the engine never called the source's AckBatch")
	}
	tr := newTracker()
	src := tr.wrap(&batchMemSource{Source: &memSource{b: b}})
	if _, ok := src.(driver.BatchAcker); !ok {
		t.Error("a batching source is no BatchAcker once wrapped")
	}
	if u, ok := src.(driver.Unordered); !ok || !u.Unordered() {
		t.Error("an unordered source is not unordered once wrapped")
	}
	if _, ok := tr.wrap(&memSource{b: b}).(driver.BatchAcker); ok {
		t.Error("a source that acks one by one became a BatchAcker once wrapped")
	}
}

// countMemSource and countMemSink count a memq queue, as the test kinds of
// this file need (memq's own hooks do more).
// The counts name the entity as a broker does (the SQS QueueArn),
// whatever the configuration's spelling.
func countMemSource(_ context.Context, c memSourceConfig, _ *slog.Logger) (driver.Backlog, error) {
	b := brokerOf(c.Broker).backlog(c.Queue)
	b.Entity = c.Broker + "/" + c.Queue
	return b, nil
}

func countMemSink(_ context.Context, c memSinkConfig, _ *slog.Logger) (driver.Backlog, error) {
	b := brokerOf(c.Broker).backlog(c.Queue)
	b.Entity = c.Broker + "/" + c.Queue
	return b, nil
}

// A chain a → b, b → c whose b is named two ways in the configuration (an
// SQS queue_url in one block, queue_name in the other) has two identities
// there, and the pipelines ran at once: the second found b drained before
// the first wrote to it (an audit: messages stranded in b, exit 0). The
// brokers' names for the entities (asked by a count) put them in one lane.
func TestLanesSeeOneEntityNamedTwoWays(t *testing.T) {
	_, pipes := setup(t, `
pipeline "a-to-b" {
  source "memqpar" {
    broker = "%[1]s"
    queue  = "a"
  }
  sink "memqpar" {
    broker   = "%[1]s"
    queue    = "b"
    spelling = " by name"
  }
}
pipeline "b-to-c" {
  source "memqpar" {
    broker   = "%[1]s"
    queue    = "b"
    spelling = " by URL"
  }
  sink "memqpar" {
    broker = "%[1]s"
    queue  = "c"
  }
}
`)
	opt := fastOptions(ModeMove)
	opt.Parallel = 2
	opt.withDefaults()
	units := make([]*unit, len(pipes))
	for i, p := range pipes {
		units[i] = prepare(context.Background(), p, &opt)
	}
	if lanes := laneUnits(units); len(lanes) != 2 {
		t.Fatalf("the configuration's words alone: %d lanes, want 2 (the test's premise)", len(lanes))
	}
	brokerEntities(context.Background(), units, &opt)
	if lanes := laneUnits(units); len(lanes) != 1 {
		t.Fatalf("%d lanes after the brokers' names, want 1: b is one queue", len(lanes))
	}
}

// A chain given reader first (b → c, then a → b) runs writer first: b → c
// drained b, a → b filled it again after, and both said complete (an
// audit). One after the other (no -parallel) and in a lane alike.
func TestChainRunsWriterFirst(t *testing.T) {
	for _, parallel := range []int{1, 2} {
		b, _, pipes := setupPar(t, 1, "b-to-c: b -> c", "a-to-b: a -> b") // the gate opens at the first sink
		b.put("a", msgs(5, 0)...)
		b.put("b", msgs(3, 0)...)
		opt := fastOptions(ModeMove)
		opt.Parallel = parallel
		rep := Run(context.Background(), pipes, opt, nil)
		if rep.Outcome != OutcomeComplete {
			t.Fatalf("-parallel %d: %s: %s", parallel, rep.Outcome, rep.Reason)
		}
		if got := b.backlog("b").Pending(); got != 0 {
			t.Errorf("-parallel %d: b holds %d after the chain, want 0", parallel, got)
		}
		if got := len(b.messages("c")); got != 8 {
			t.Errorf("-parallel %d: c holds %d, want all 8", parallel, got)
		}
		// The report keeps the order given; a-to-b started first.
		if rep.Jobs[0].Pipeline != "b-to-c" || !rep.Jobs[1].started.Before(rep.Jobs[0].started) {
			t.Errorf("-parallel %d: %s started %s, %s started %s", parallel, rep.Jobs[0].Pipeline, rep.Jobs[0].started, rep.Jobs[1].Pipeline, rep.Jobs[1].started)
		}
	}
}

// Two pipelines that move a queue back and forth (a → b, b → a) are
// refused before anything runs: run in turn, the messages ended where they
// started and both said complete (an audit). A pipeline beside them runs.
func TestCircleOfPipelinesIsRefused(t *testing.T) {
	b, _, pipes := setupPar(t, 1, "a-to-b: a -> b", "b-to-a: b -> a", "c-to-d: c -> d")
	b.put("a", msgs(5, 0)...)
	b.put("c", msgs(2, 0)...)
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), nil)
	if rep.Outcome != OutcomeFailed || len(rep.Jobs) != 3 {
		t.Fatalf("outcome %s, %d jobs: %s", rep.Outcome, len(rep.Jobs), rep.Reason)
	}
	for _, j := range rep.Jobs[:2] {
		if j.Outcome != OutcomeFailed || !strings.Contains(j.Reason, "move messages in a circle") || j.Read != 0 {
			t.Errorf("%s: %s, read %d: %s", j.Pipeline, j.Outcome, j.Read, j.Reason)
		}
	}
	if j := rep.Jobs[2]; j.Outcome != OutcomeComplete || j.Written != 2 {
		t.Errorf("the pipeline beside them: %s, written %d", j.Outcome, j.Written)
	}
	if got := b.backlog("a").Pending(); got != 5 {
		t.Errorf("a holds %d, want its 5 untouched", got)
	}
}
