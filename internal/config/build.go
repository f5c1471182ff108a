package config

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

// Definitions turns the pipelines into the engine's definitions. Adapters
// are opened by the engine, not here. log is the parent of the adapters'
// loggers.
func (c *Config) Definitions(log *slog.Logger) ([]bridge.Definition, error) {
	defs := make([]bridge.Definition, 0, len(c.Pipelines))
	for _, p := range c.Pipelines {
		d, err := p.Definition(log)
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// routeShed wraps a sink's drop callback: what the carry envelope shed
// (mapping.ShedReport) is counted in qbridge_mapping_envelope_shed_total
// and logged at debug level; real drops go on to the engine's callback.
func routeShed(onDrop func(field, reason string), pipeline string, log *slog.Logger) func(field, reason string) {
	return func(field, reason string) {
		if fields, ok := mapping.ShedReport(field, reason); ok {
			bridge.CountEnvelopeShed(pipeline, fields)
			log.Debug("carry envelope shed", "fields", fields)
			return
		}
		if onDrop != nil {
			onDrop(field, reason)
		}
	}
}

// adapterLog is the logger of one adapter of a pipeline: every line says
// which kind and which role (source, sink, dead-letter, dry-run) it comes
// from. The adapters add neither, so a key is never there twice.
func adapterLog(log *slog.Logger, kind, role string) *slog.Logger {
	return log.With("adapter", kind, "role", role)
}

// Definition builds the engine definition of one pipeline.
func (p *Pipeline) Definition(log *slog.Logger) (bridge.Definition, error) {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("pipeline", p.Name)
	s := p.Spec
	src, snk := lookupKind(s.Source.Kind), lookupKind(s.Sink.Kind)
	if src == nil || snk == nil {
		return bridge.Definition{}, fmt.Errorf("pipeline %q: adapter kind %q or %q is not registered", p.Name, s.Source.Kind, s.Sink.Kind)
	}
	cfg := bridge.Config{
		Name:       p.Name,
		SourceKind: s.Source.Kind,
		Source: func(ctx context.Context) (driver.Source, error) {
			return src.openSource(ctx, s.Source.Config, adapterLog(log, s.Source.Kind, "source"))
		},
		SinkKind: s.Sink.Kind,
		Sink: func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
			opt := s.Mapping.options()
			opt.OnDrop = routeShed(onDrop, p.Name, log)
			return snk.openSink(ctx, s.Sink.Config, opt, adapterLog(log, s.Sink.Kind, "sink"))
		},
		Options: s.Engine,
	}
	switch dl := s.DeadLetter; {
	case dl.Native:
		cfg.DeadLetter.Native = true
	case dl.Sink != nil:
		k := lookupKind(dl.Sink.Kind)
		if k == nil {
			return bridge.Definition{}, fmt.Errorf("pipeline %q: adapter kind %q is not registered", p.Name, dl.Sink.Kind)
		}
		dlCfg := dl.Sink.Config
		cfg.DeadLetter.SinkKind = dl.Sink.Kind
		cfg.DeadLetter.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
			opt := deadLetterOptions()
			opt.OnDrop = routeShed(onDrop, p.Name, log)
			return k.openSink(ctx, dlCfg, opt, adapterLog(log, dl.Sink.Kind, "dead-letter"))
		}
	}
	if !s.Mapping.Rules.IsZero() {
		r, err := rules.Compile(s.Mapping.Rules)
		if err != nil {
			return bridge.Definition{}, fmt.Errorf("pipeline %q: mapping: %w", p.Name, err)
		}
		cfg.Transform = r.Apply
	}
	return bridge.Definition{Config: cfg, Spec: s}, nil
}
