package e2e

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// What the SQS and AMQP benchmarks share: each puts qbridge, built in
// process from HCL as `qbridge run` builds it, against a minimal
// hand-written forwarder doing the same job with the same concurrency on
// the same brokers, in the same run. Each side is timed from its first
// message to its last (start-up and a last empty poll left out) and its CPU
// is the process's getrusage over its round: both include the embedded
// nats-server's share, neither that of the broker processes.

// cpuNow is the CPU time (user + system) the test process has used.
func cpuNow(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// span records the first and the last moment of a side's messages.
type span struct{ first, last atomic.Int64 }

// begin marks the start of a side's work (a send whose confirmation ends
// it), if nothing did before.
func (s *span) begin() { s.first.CompareAndSwap(0, time.Now().UnixNano()) }

// mark records a message done (and starts the span if nothing did).
func (s *span) mark() {
	now := time.Now().UnixNano()
	s.first.CompareAndSwap(0, now)
	s.last.Store(now)
}

func (s *span) took() time.Duration { return time.Duration(s.last.Load() - s.first.Load()) }

// benchSide keeps a side's rounds: msg/s and CPU µs per message of each.
type benchSide struct{ rates, cpus []float64 }

func (s *benchSide) add(n int, took, cpu time.Duration) {
	s.rates = append(s.rates, float64(n)/took.Seconds())
	s.cpus = append(s.cpus, float64(cpu.Microseconds())/float64(n))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// reportSides reports the median round of both sides (msg/s, CPU µs per
// message) and their ratios. The median, not the sum: fauxqs now and then
// hides a few received-and-returned messages until their visibility
// timeout (30 s) passes, on either side, and one such round would outweigh
// all the others.
func reportSides(b *testing.B, qb, base benchSide) {
	q, s := median(qb.rates), median(base.rates)
	qc, sc := median(qb.cpus), median(base.cpus)
	b.ReportMetric(q, "msg/s")
	b.ReportMetric(s, "baseline-msg/s")
	b.ReportMetric(q/s, "ratio")
	b.ReportMetric(qc, "cpu-µs/msg")
	b.ReportMetric(sc, "baseline-cpu-µs/msg")
	b.ReportMetric(qc/sc, "cpu-ratio")
	b.Logf("rounds, msg/s: qbridge %.0f, baseline %.0f", qb.rates, base.rates)
}

// benchPipeline builds the one pipeline of an HCL configuration in
// process (internal/config, as `qbridge run` does), its sink wrapped by
// wrap if not nil, and runs it until the returned stop is called.
func benchPipeline(b *testing.B, hcl string, wrap func(driver.Sink) driver.Sink) (stop func()) {
	_, stop = runBenchPipeline(b, hcl, wrap)
	return stop
}

// runBenchPipeline is benchPipeline that also returns the pipeline.
func runBenchPipeline(b *testing.B, hcl string, wrap func(driver.Sink) driver.Sink) (*bridge.Pipeline, func()) {
	b.Helper()
	cfg, diags := config.NewLoader().LoadBytes("bench.hcl", []byte(hcl))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	defs, err := cfg.Definitions(log)
	if err != nil || len(defs) != 1 {
		b.Fatalf("definitions: %v (%d)", err, len(defs))
	}
	c := defs[0].Config
	c.Logger = log
	if wrap != nil {
		open := c.Sink
		c.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
			s, err := open(ctx, onDrop)
			if err != nil {
				return nil, err
			}
			return wrap(s), nil
		}
	}
	p, err := bridge.New(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	return p, func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Errorf("pipeline: %v", err)
			}
		})
	}
}

// countingSink counts the messages its sink confirmed and marks when.
type countingSink struct {
	driver.Sink
	ok   atomic.Int64
	seen span
}

func (s *countingSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	s.seen.begin()
	errs := s.Sink.Send(ctx, msgs)
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	s.ok.Add(int64(n))
	s.seen.mark()
	return errs
}

// arrivals counts what a NATS subscriber receives, one side's round at a
// time.
type arrivals struct {
	got  atomic.Int64
	seen atomic.Pointer[span]
}

// subscribeArrivals counts the messages on subject; the subscriber never
// drops.
func subscribeArrivals(b *testing.B, nc *nats.Conn, subject string) *arrivals {
	b.Helper()
	a := &arrivals{}
	a.seen.Store(&span{})
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		a.got.Add(1)
		a.seen.Load().mark()
	})
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	return a
}

// round runs one side (run starts it; it may return before the messages
// arrive) until n messages arrived, and returns the time from the first to
// the last and the process's CPU over the round.
func (a *arrivals) round(b *testing.B, n int, run func()) (took, cpu time.Duration) {
	b.Helper()
	a.got.Store(0)
	sp := &span{}
	a.seen.Store(sp)
	start := cpuNow(b)
	run()
	eventually(b, 5*time.Minute, "every message at the subscriber", func() bool { return a.got.Load() >= int64(n) })
	return sp.took(), cpuNow(b) - start
}
