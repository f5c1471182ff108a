package bridge

import (
	"context"
	"strings"
	"testing"
	"time"
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
