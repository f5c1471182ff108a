package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Definition is one pipeline as configured.
type Definition struct {
	Config Config
	// Spec is what the pipeline was built from (plain values). Apply compares
	// it with reflect.DeepEqual to decide whether a running pipeline changed.
	Spec any
}

// Supervisor runs a set of pipelines and replaces the set on Apply (for a
// configuration reload): unchanged pipelines keep running, changed and
// removed ones are drained and stopped, new and changed ones started.
type Supervisor struct {
	log     *slog.Logger
	metrics *Metrics

	applyMu sync.Mutex // one Apply or Stop at a time
	mu      sync.Mutex
	running map[string]*instance
}

type instance struct {
	spec   any
	p      *Pipeline
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSupervisor returns an empty supervisor. Pipelines without their own
// Logger or Metrics get these.
func NewSupervisor(log *slog.Logger, m *Metrics) *Supervisor {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Supervisor{log: log, metrics: m, running: map[string]*instance{}}
}

// Apply makes the running pipelines match defs. It checks every definition
// first and changes nothing if one is invalid. It returns once the changed
// and removed pipelines are stopped (each within its ShutdownTimeout) and
// the new ones started.
func (s *Supervisor) Apply(defs []Definition) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()

	want := make(map[string]Definition, len(defs))
	for _, d := range defs {
		if _, dup := want[d.Config.Name]; dup {
			return fmt.Errorf("bridge: pipeline %q defined twice", d.Config.Name)
		}
		want[d.Config.Name] = d
	}
	s.mu.Lock()
	var stop []*instance
	var removed []string
	var start []Definition
	for name, in := range s.running {
		d, ok := want[name]
		if !ok {
			stop = append(stop, in)
			removed = append(removed, name)
		} else if !reflect.DeepEqual(in.spec, d.Spec) {
			stop = append(stop, in)
		}
	}
	for _, d := range defs {
		if in, ok := s.running[d.Config.Name]; !ok || !reflect.DeepEqual(in.spec, d.Spec) {
			start = append(start, d)
		}
	}
	s.mu.Unlock()

	// Build before stopping anything, so an invalid definition leaves the
	// running set alone.
	built := make([]*Pipeline, len(start))
	for i, d := range start {
		cfg := d.Config
		if cfg.Logger == nil {
			cfg.Logger = s.log
		}
		if cfg.Metrics == nil {
			cfg.Metrics = s.metrics
		}
		p, err := New(cfg)
		if err != nil {
			return err
		}
		built[i] = p
	}

	// Stop changed pipelines before starting their new version: two
	// instances consuming one source at once would break group order.
	s.stopAll(stop)
	next := make(map[string]*Pipeline, len(built))
	for _, p := range built {
		next[p.name] = p
	}
	for _, in := range stop {
		// Stopped for good, or restarted with other adapter kinds: what
		// the old instance alone counted in would stay on /metrics.
		var successor *pipelineMetrics
		if p := next[in.p.name]; p != nil && p.met.m == in.p.met.m {
			successor = p.met
		}
		in.p.met.m.retire(in.p.met, successor)
	}
	for _, name := range removed {
		s.log.Info("pipeline removed", "pipeline", name)
	}
	for i, p := range built {
		s.start(p, start[i].Spec)
	}
	return nil
}

func (s *Supervisor) start(p *Pipeline, spec any) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{spec: spec, p: p, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.running[p.name] = in
	s.mu.Unlock()
	go func() {
		defer close(in.done)
		if err := p.Run(ctx); err != nil {
			s.log.Error("pipeline stopped with errors", "pipeline", p.name, "error", err)
		}
	}()
}

// stopAll stops the instances concurrently and waits for them.
func (s *Supervisor) stopAll(ins []*instance) {
	for _, in := range ins {
		in.cancel()
	}
	for _, in := range ins {
		<-in.done
		s.mu.Lock()
		if s.running[in.p.name] == in {
			delete(s.running, in.p.name)
		}
		s.mu.Unlock()
	}
}

// Stop drains and stops every pipeline and waits for them.
func (s *Supervisor) Stop() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	ins := make([]*instance, 0, len(s.running))
	for _, in := range s.running {
		ins = append(ins, in)
	}
	s.mu.Unlock()
	s.stopAll(ins)
}

// Names returns the running pipelines' names, sorted.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PipelineReady is one pipeline's readiness.
type PipelineReady struct {
	Name     string
	Err      error    // why it is not ready (with the last connection error); nil when ready
	Warnings []string // Pipeline.Warnings
}

// ReadyEach reports each running pipeline's readiness, by name.
func (s *Supervisor) ReadyEach(ctx context.Context) []PipelineReady {
	s.mu.Lock()
	ps := make([]*Pipeline, 0, len(s.running))
	for _, in := range s.running {
		ps = append(ps, in.p)
	}
	s.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Pipeline) int { return strings.Compare(a.name, b.name) })
	out := make([]PipelineReady, len(ps))
	for i, p := range ps {
		out[i] = PipelineReady{Name: p.name, Err: p.Ready(ctx), Warnings: p.Warnings()}
	}
	return out
}

// Ready reports every pipeline that is not ready; nil when all are.
func (s *Supervisor) Ready(ctx context.Context) error {
	s.mu.Lock()
	ps := make([]*Pipeline, 0, len(s.running))
	for _, in := range s.running {
		ps = append(ps, in.p)
	}
	s.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Pipeline) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for _, p := range ps {
		if err := p.Ready(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pipeline %q: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}
