package bridge

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/qbridge/qbridge/bridge/driver"
)

func counterValue(t *testing.T, v *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestMetricsExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	q := newQueue(t)
	// A broker whose clock runs an hour ahead of this host's.
	ahead := msg("h", 0)
	ahead.Source.EnqueuedTime = time.Now().Add(time.Hour)
	q.push(msg("g", 0), msg("g", 1), ahead)
	sink := newSink(t)
	gate := make(chan struct{})
	sink.gate = gate
	start(t, Config{Options: fastOptions(), Metrics: m}, q, sink)
	// The first Receive returns all three; the receive loop calls Receive
	// again only after it admitted them.
	eventually(t, 5*time.Second, "received and admitted", func() bool { return q.receiveCalls() >= 2 })

	got := gather(t, reg)
	for name, want := range map[string]float64{
		`qbridge_messages_received_total{adapter="mem",pipeline="test"}`: 3,
		`qbridge_in_flight{pipeline="test"}`:                             3,
		`qbridge_groups_backlogged{pipeline="test"}`:                     1,
		`qbridge_group_backlog_max{pipeline="test"}`:                     1,
		`qbridge_pipeline_running{pipeline="test"}`:                      1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	// Every dead-letter reason has its series from the start, at 0, so
	// that rate() and increase() alerts see the first one.
	for _, r := range reasons {
		name := `qbridge_messages_dead_lettered_total{pipeline="test",reason="` + r + `"}`
		if v, ok := got[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
	// So has each carry envelope member's shed count.
	for _, f := range []string{"id", "types", "text"} {
		name := `qbridge_mapping_envelope_shed_total{field="` + f + `",pipeline="test"}`
		if v, ok := got[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
	const oldest = `qbridge_oldest_unsettled_age_seconds{pipeline="test"}`
	if got[oldest] <= 0 {
		t.Errorf("%s = %v while three messages wait, want > 0", oldest, got[oldest])
	}
	close(gate)
	eventually(t, 5*time.Second, "acked", func() bool {
		return gather(t, reg)[`qbridge_messages_acked_total{adapter="mem",pipeline="test"}`] == 3
	})
	// An item leaves in_flight just after its ack is counted.
	const inFlight = `qbridge_in_flight{pipeline="test"}`
	eventually(t, 5*time.Second, inFlight+" = 0", func() bool {
		v, ok := gather(t, reg)[inFlight]
		return ok && v == 0
	})
	if v, ok := gather(t, reg)[oldest]; !ok || v != 0 {
		t.Errorf("%s = %v (exported %v) with nothing in flight, want 0", oldest, v, ok)
	}
	// How many Send calls carry the three messages depends on scheduling
	// (g/0 and h/0 together or apart; g/1 alone after g/0): one
	// observation per call the sink saw.
	sizes := sink.batches()
	sum := 0
	for _, n := range sizes {
		sum += n
	}
	if sum != 3 || len(sizes) < 2 {
		t.Errorf("sink batches %v, want 3 messages in 2 or 3 calls", sizes)
	}
	got = gather(t, reg)
	for name, want := range map[string]float64{
		`qbridge_messages_sent_total{adapter="mem",pipeline="test"}`:     3,
		`qbridge_end_to_end_latency_seconds_count{pipeline="test"}`:      3,
		`qbridge_sink_send_seconds_count{adapter="mem",pipeline="test"}`: float64(len(sizes)),
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}

	// No negative latency: rate() of the sum needs it to rise.
	if sum := histogramSum(t, reg, "qbridge_end_to_end_latency_seconds"); sum < 0 {
		t.Errorf("end-to-end latency sum %v, want >= 0 with a broker clock ahead", sum)
	}

	m.Forget("test")
	for name := range gather(t, reg) {
		if strings.HasPrefix(name, "qbridge_messages_") {
			t.Errorf("%s remains after Forget", name)
		}
	}
}

func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// gather flattens a registry into "name{labels}" → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[mf.GetName()+"_count{"+strings.Join(ls, ",")+"}"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// lossySource is an at-most-once source that dropped some messages and
// has a warning for the operator.
type lossySource struct {
	memSource
	lost uint64
}

func (s *lossySource) Lost() uint64       { return s.lost }
func (s *lossySource) Warnings() []string { return []string{"another client reads this consumer"} }

// A source's losses (driver.LossCounter) are exported as a counter that
// keeps what earlier sources lost across a restart, and shown with the
// adapters' warnings (driver.Warner) in the pipeline's readiness detail.
func TestSourceLossAndWarnings(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := newQueue(t)
	var fail atomic.Bool
	q.receiveErr = func(int) error {
		if fail.CompareAndSwap(true, false) {
			return errors.New("connection reset")
		}
		return nil
	}
	var opens atomic.Int64
	open := func(ctx context.Context) (driver.Source, error) {
		n := opens.Add(1)
		return &lossySource{memSource: memSource{q: q}, lost: uint64(10 * n)}, nil
	}
	h := start(t, Config{Options: fastOptions(), Metrics: NewMetrics(reg), Source: open}, q, newSink(t))
	const lost = `qbridge_source_lost_total{pipeline="test"}`
	eventually(t, 5*time.Second, "running", func() bool { return h.p.Stats().Running })
	if got := gather(t, reg)[lost]; got != 10 {
		t.Errorf("%s = %v, want 10", lost, got)
	}
	w := h.p.Warnings()
	if len(w) != 2 || !strings.Contains(w[0], "dropped 10 messages") || w[1] != "another client reads this consumer" {
		t.Errorf("warnings %q", w)
	}
	// A failing receive restarts the source: the first one's 10 are kept.
	// (the blocked Receive returns the pushed message; the next one fails)
	fail.Store(true)
	q.push(msg("", 0))
	eventually(t, 10*time.Second, "reopened", func() bool { return opens.Load() == 2 && h.p.Stats().Running })
	if got := gather(t, reg)[lost]; got != 30 {
		t.Errorf("%s = %v after a restart, want 10 + 20", lost, got)
	}
}
