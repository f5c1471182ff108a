package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// supervised is one pipeline's adapters in a supervisor test.
type supervised struct {
	q    *memQueue
	src  *sourceOpener
	sink *memSink
}

func newSupervised(t *testing.T) *supervised {
	q := newQueue(t)
	return &supervised{q: q, src: &sourceOpener{q: q}, sink: newSink(t)}
}

func (s *supervised) def(name string, spec any) Definition {
	return Definition{
		Spec: spec,
		Config: Config{
			Name: name, Source: s.src.open, Sink: s.sink.open, SourceKind: "mem", SinkKind: "mem",
			Options: fastOptions(),
		},
	}
}

func TestSupervisorApply(t *testing.T) {
	sup := NewSupervisor(quietLog, NewMetrics(nil))
	defer sup.Stop()
	a, b, c := newSupervised(t), newSupervised(t), newSupervised(t)

	if err := sup.Apply([]Definition{a.def("a", "v1"), b.def("b", "v1")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "ready", func() bool { return sup.Ready(context.Background()) == nil })
	a.q.push(msg("g", 0))
	eventually(t, 5*time.Second, "a works", func() bool { return a.sink.count() == 1 })

	// a unchanged, b changed, c new.
	if err := sup.Apply([]Definition{a.def("a", "v1"), b.def("b", "v2"), c.def("c", "v1")}); err != nil {
		t.Fatal(err)
	}
	if n := a.src.opens.Load(); n != 1 {
		t.Errorf("unchanged pipeline a reopened (%d opens)", n)
	}
	eventually(t, 5*time.Second, "b reopened", func() bool { return b.src.opens.Load() == 2 })
	if !b.sink.isClosed() {
		t.Error("old b's sink not closed")
	}
	if got := strings.Join(sup.Names(), ","); got != "a,b,c" {
		t.Errorf("Names = %s", got)
	}

	// Remove a and b.
	if err := sup.Apply([]Definition{c.def("c", "v1")}); err != nil {
		t.Fatal(err)
	}
	if !a.sink.isClosed() || !a.src.allClosed() {
		t.Error("removed pipeline a not closed")
	}
	if got := strings.Join(sup.Names(), ","); got != "c" {
		t.Errorf("Names = %s", got)
	}
	c.q.push(msg("", 0))
	eventually(t, 5*time.Second, "c works", func() bool { return c.sink.count() == 1 })

	sup.Stop()
	if !c.sink.isClosed() || len(sup.Names()) != 0 {
		t.Error("Stop left pipelines running")
	}
}

func TestSupervisorApplyInvalidChangesNothing(t *testing.T) {
	sup := NewSupervisor(quietLog, nil)
	defer sup.Stop()
	a := newSupervised(t)
	if err := sup.Apply([]Definition{a.def("a", 1)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a open", func() bool { return a.src.opens.Load() == 1 })
	bad := a.def("a", 2)
	bad.Config.Options.Ordering.PerGroup = -1
	if err := sup.Apply([]Definition{bad}); err == nil {
		t.Fatal("invalid definition accepted")
	}
	dup := []Definition{a.def("x", 1), a.def("x", 1)}
	if err := sup.Apply(dup); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate names: %v", err)
	}
	if a.src.opens.Load() != 1 || a.sink.isClosed() {
		t.Error("a failed Apply touched the running pipeline")
	}
}

func TestSupervisorReadyReportsNotRunning(t *testing.T) {
	sup := NewSupervisor(quietLog, nil)
	defer sup.Stop()
	a := newSupervised(t)
	a.src.failN = 1 << 30 // never opens
	if err := sup.Apply([]Definition{a.def("a", 1)}); err != nil {
		t.Fatal(err)
	}
	err := sup.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), `pipeline "a": not running`) {
		t.Fatalf("Ready = %v", err)
	}
}

// TestSupervisorApplyRetiresSeries: a reload leaves no series behind for a
// pipeline it removed, nor for the adapter kinds a changed pipeline no
// longer uses, and an unchanged pipeline's counters keep counting from
// where they were.
func TestSupervisorApplyRetiresSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	sup := NewSupervisor(quietLog, NewMetrics(reg))
	defer sup.Stop()
	kept, changed, removed := newSupervised(t), newSupervised(t), newSupervised(t)
	withKinds := func(d Definition, sink, deadLetter string) Definition {
		d.Config.SinkKind = sink
		if deadLetter != "" {
			d.Config.DeadLetter = DeadLetter{Sink: newSink(t).open, SinkKind: deadLetter}
		}
		return d
	}
	if err := sup.Apply([]Definition{
		kept.def("kept", 1),
		withKinds(changed.def("changed", 1), "nats", "amqp"),
		removed.def("removed", 1),
	}); err != nil {
		t.Fatal(err)
	}
	kept.q.push(msg("g", 0))
	changed.q.push(msg("g", 0))
	const keptSent = `qbridge_messages_sent_total{adapter="mem",pipeline="kept"}`
	eventually(t, 5*time.Second, "both sent", func() bool {
		got := gather(t, reg)
		return got[keptSent] == 1 && got[`qbridge_messages_sent_total{adapter="nats",pipeline="changed"}`] == 1
	})

	// The sink of "changed" is now SQS, without a dead-letter sink.
	if err := sup.Apply([]Definition{kept.def("kept", 1), withKinds(changed.def("changed", 2), "sqs", "")}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	for key := range got {
		if strings.Contains(key, `pipeline="removed"`) {
			t.Errorf("removed pipeline's series still exported: %s", key)
		}
		if strings.Contains(key, `pipeline="changed"`) && (strings.Contains(key, `adapter="nats"`) || strings.Contains(key, `adapter="amqp"`)) {
			t.Errorf("changed pipeline's old adapter still exported: %s", key)
		}
	}
	for key, want := range map[string]float64{
		keptSent: 1,
		`qbridge_messages_received_total{adapter="mem",pipeline="kept"}`: 1,
		// The source did not change kind: its counts go on.
		`qbridge_messages_received_total{adapter="mem",pipeline="changed"}`: 1,
		`qbridge_messages_sent_total{adapter="sqs",pipeline="changed"}`:     0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}
