package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// "gen" is a source that makes its messages as they are received and a sink
// that only counts them: a migration of any length with nothing stored, so
// what grows is the engine's and the migration's own memory.
type genSourceConfig struct {
	Name     string `hcl:"name"`
	Messages int64  `hcl:"messages"`
	Groups   int    `hcl:"groups"`
}

func (c *genSourceConfig) Validate() error { return nil }

type genSinkConfig struct {
	Name string `hcl:"name"`
}

func (c *genSinkConfig) Validate() error { return nil }

type genState struct {
	next, acked, written atomic.Int64
	// heap samples, taken by the sink at each tenth of the run
	mu      sync.Mutex
	samples []uint64
	total   int64
}

var (
	gensMu sync.Mutex
	gens   = map[string]*genState{}
)

func genOf(name string) *genState {
	gensMu.Lock()
	defer gensMu.Unlock()
	return gens[name]
}

func init() {
	config.Register(config.AdapterKind[genSourceConfig, genSinkConfig]{
		Name: "gen",
		NewSource: func(_ context.Context, c genSourceConfig, _ *slog.Logger) (driver.Source, error) {
			return &genSource{c: c, st: genOf(c.Name)}, nil
		},
		NewSink: func(_ context.Context, c genSinkConfig, _ func(field, reason string), _ *slog.Logger) (driver.Sink, error) {
			return &genSink{st: genOf(c.Name)}, nil
		},
		SinkMapping: func(*genSinkConfig, mapping.Options) {},
		CountSource: func(_ context.Context, c genSourceConfig, _ *slog.Logger) (driver.Backlog, error) {
			st := genOf(c.Name)
			return driver.Backlog{Ready: c.Messages - st.next.Load(), InFlight: st.next.Load() - st.acked.Load()}, nil
		},
		CountSink: func(context.Context, genSinkConfig, *slog.Logger) (driver.Backlog, error) {
			return driver.Backlog{}, fmt.Errorf("gen sink: %w", errors.ErrUnsupported)
		},
	})
}

type genSource struct {
	c  genSourceConfig
	st *genState
}

func (s *genSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	out := make([]driver.Delivery, 0, max)
	for len(out) < max {
		n := s.st.next.Add(1)
		if n > s.c.Messages {
			s.st.next.Add(-1)
			break
		}
		m := &mapping.Message{ID: strconv.FormatInt(n, 10), Body: make([]byte, 256)}
		if s.c.Groups > 0 {
			m.GroupKey = "g" + strconv.Itoa(int(n)%s.c.Groups)
		}
		m.SetAttr("n", mapping.Int64(n))
		out = append(out, &genDelivery{st: s.st, m: m})
	}
	if len(out) == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return out, nil
}

func (s *genSource) Close(context.Context) error { return nil }

type genDelivery struct {
	st *genState
	m  *mapping.Message
}

func (d *genDelivery) Message() *mapping.Message                 { return d.m }
func (d *genDelivery) Ack(context.Context) error                 { d.st.acked.Add(1); return nil }
func (d *genDelivery) Nack(context.Context, time.Duration) error { return errors.New("gen: no nack") }
func (d *genDelivery) Extend(context.Context, time.Duration) error {
	return nil
}

type genSink struct{ st *genState }

func (s *genSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	step := s.st.total / 10
	for range msgs {
		if n := s.st.written.Add(1); step > 0 && n%step == 0 {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			s.st.mu.Lock()
			s.st.samples = append(s.st.samples, ms.HeapInuse)
			s.st.mu.Unlock()
		}
	}
	return make([]error, len(msgs))
}

func (s *genSink) Close(context.Context) error { return nil }

// BenchmarkMigrateMemory migrates QBRIDGE_MIGRATE_MESSAGES messages (default
// 50,000; 1,000,000 for the figure in docs/migrate.md) over 100 groups and
// reports the heap at each tenth of the run: flat means the migration keeps
// nothing per message.
func BenchmarkMigrateMemory(b *testing.B) {
	n := int64(50_000)
	if s := os.Getenv("QBRIDGE_MIGRATE_MESSAGES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("mem%d", i)
		st := &genState{total: n}
		gensMu.Lock()
		gens[name] = st
		gensMu.Unlock()
		src := fmt.Sprintf(`pipeline "p" {
  source "gen" {
    name     = %q
    messages = %d
    groups   = 100
  }
  sink "gen" {
    name = %q
  }
  ordering {
    max_in_flight = 1000
  }
}
`, name, n, name)
		cfg, diags := config.NewLoader().LoadBytes("bench.hcl", []byte(src))
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		opt := fastOptions(ModeMove)
		start := time.Now()
		rep := Run(context.Background(), cfg.Pipelines, opt, nil)
		el := time.Since(start)
		if rep.Outcome != OutcomeComplete || rep.Totals.Written != n {
			b.Fatalf("outcome %s, written %d of %d: %s", rep.Outcome, rep.Totals.Written, n, rep.Reason)
		}
		st.mu.Lock()
		samples := append([]uint64(nil), st.samples...)
		st.mu.Unlock()
		if len(samples) >= 4 {
			first, last := samples[1], samples[len(samples)-1] // the first tenth still warms up
			b.ReportMetric(float64(first)/(1<<20), "heap-MiB@20%")
			b.ReportMetric(float64(last)/(1<<20), "heap-MiB@100%")
			b.ReportMetric(float64(last)/float64(first), "heap-growth")
		}
		b.ReportMetric(float64(n)/el.Seconds(), "msg/s")
	}
}
