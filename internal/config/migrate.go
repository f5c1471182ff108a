package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
)

// ErrUnsupported is wrapped by the migration helpers below when an adapter
// kind lacks the hook. It is errors.ErrUnsupported, so adapters (which do
// not import this package) say the same by wrapping that: a core NATS
// subject, which keeps no messages to count, for instance.
var ErrUnsupported = errors.ErrUnsupported

// ErrNoCount is wrapped where the adapter kind has no counting hook at
// all: its broker offers no count (AMQP). It is ErrUnsupported too, and
// says no more than it; an adapter that can count but is not set up to
// (a Service Bus block without management_endpoint on an emulator) wraps
// ErrUnsupported alone, with its words for why.
var ErrNoCount = fmt.Errorf("%w", ErrUnsupported)

// CountSource asks the source's broker how many messages its entity holds.
func (p *Pipeline) CountSource(ctx context.Context, log *slog.Logger) (driver.Backlog, error) {
	k := lookupKind(p.Spec.Source.Kind)
	if k == nil || k.countSource == nil {
		return driver.Backlog{}, fmt.Errorf("counting the %s source: %w", p.Spec.Source.Kind, ErrNoCount)
	}
	return k.countSource(ctx, p.Spec.Source.Config, orDefault(log))
}

// CountSink asks the sink's broker how many messages its entity holds.
func (p *Pipeline) CountSink(ctx context.Context, log *slog.Logger) (driver.Backlog, error) {
	k := lookupKind(p.Spec.Sink.Kind)
	if k == nil || k.countSink == nil {
		return driver.Backlog{}, fmt.Errorf("counting the %s sink: %w", p.Spec.Sink.Kind, ErrNoCount)
	}
	return k.countSink(ctx, p.Spec.Sink.Config, orDefault(log))
}

// WithBrowsingSource returns a copy of p whose source reads without settling,
// after position after (driver.Browser).
func (p *Pipeline) WithBrowsingSource(after uint64) (*Pipeline, error) {
	k := lookupKind(p.Spec.Source.Kind)
	if k == nil || k.browse == nil {
		return nil, fmt.Errorf("pipeline %q: %s source cannot be read without consuming it: %w", p.Name, AKind(p.Spec.Source.Kind), driver.ErrCannotBrowse)
	}
	cfg, err := k.browse(p.Spec.Source.Config, after)
	if err != nil {
		return nil, fmt.Errorf("pipeline %q: %w", p.Name, err)
	}
	q := *p
	q.Spec.Source.Config = cfg
	return &q, nil
}

// ForMigration returns a copy of p whose source does not create the entity
// it reads (AdapterKind.ForMigration), or p itself where the kind never
// does.
func (p *Pipeline) ForMigration() *Pipeline {
	k := lookupKind(p.Spec.Source.Kind)
	if k == nil || k.forMigration == nil {
		return p
	}
	q := *p
	q.Spec.Source.Config = k.forMigration(p.Spec.Source.Config)
	return &q
}

// WithDeadLetterSource returns a copy of p whose source reads the dead-letter
// queue of p's source entity.
func (p *Pipeline) WithDeadLetterSource(ctx context.Context, log *slog.Logger) (*Pipeline, error) {
	k := lookupKind(p.Spec.Source.Kind)
	if k == nil || k.deadLetterSource == nil {
		return nil, fmt.Errorf("pipeline %q: %w: %s source keeps none (its dead letters go where dead_letter sends them)", p.Name, driver.ErrNoDeadLetterQueue, AKind(p.Spec.Source.Kind))
	}
	cfg, err := k.deadLetterSource(ctx, p.Spec.Source.Config, orDefault(log))
	if err != nil {
		return nil, fmt.Errorf("pipeline %q: %w", p.Name, err)
	}
	q := *p
	q.Spec.Source.Config = cfg
	return &q, nil
}

// SourceIdentity names what p's source reads and where: its kind and the
// kind's SourceIdentity (server, entity; no credentials), or the kind
// alone where the kind has none.
func (p *Pipeline) SourceIdentity() string {
	k := lookupKind(p.Spec.Source.Kind)
	if k == nil || k.sourceIdentity == nil {
		return p.Spec.Source.Kind
	}
	return p.Spec.Source.Kind + " " + k.sourceIdentity(p.Spec.Source.Config)
}

// SinkIdentity names what p's sink writes to and where, as its count sees
// it: the kind and the kind's SinkIdentity, or the kind alone where the
// kind has none (then every sink of the kind counts as the same).
func (p *Pipeline) SinkIdentity() string {
	k := lookupKind(p.Spec.Sink.Kind)
	if k == nil || k.sinkIdentity == nil {
		return p.Spec.Sink.Kind
	}
	return p.Spec.Sink.Kind + " " + k.sinkIdentity(p.Spec.Sink.Config)
}

// CanDrySink reports whether the sink's kind can encode without sending.
func (p *Pipeline) CanDrySink() bool {
	k := lookupKind(p.Spec.Sink.Kind)
	return k != nil && k.openDrySink != nil
}

func orDefault(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}

// DryRunDefinition is Definition with a sink that encodes and sends
// nothing, and native dead-lettering, which a migration's dry run records
// instead of performing.
func (p *Pipeline) DryRunDefinition(log *slog.Logger) (bridge.Definition, error) {
	k := lookupKind(p.Spec.Sink.Kind)
	if k == nil || k.openDrySink == nil {
		return bridge.Definition{}, fmt.Errorf("pipeline %q: %s sink cannot encode without sending: %w", p.Name, AKind(p.Spec.Sink.Kind), ErrUnsupported)
	}
	d, err := p.Definition(log)
	if err != nil {
		return d, err
	}
	log = orDefault(log).With("pipeline", p.Name)
	mo, cfg, kind := p.Spec.Mapping, p.Spec.Sink.Config, p.Spec.Sink.Kind
	d.Config.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		opt := mo.options()
		opt.OnDrop = routeShed(onDrop, p.Name, log)
		return k.openDrySink(ctx, cfg, opt, adapterLog(log, kind, "dry-run"))
	}
	// The dry run records dead letters at the delivery (the source is not
	// touched); DryRun keeps the engine from logging them as real ones,
	// and DryRunTo has it name where they would go: the move's
	// destination, as Definition set it.
	to := d.Config.DeadLetter.SinkKind
	if d.Config.DeadLetter.Native {
		to = "native"
	}
	d.Config.DeadLetter = bridge.DeadLetter{Native: true, DryRun: true, DryRunTo: to}
	return d, nil
}

// DryRunDeadLetterSink opens a sink that encodes as p's dead-letter sink
// would (with the dead-letter options) and sends nothing, so that a dry run
// can tell whether a message the sink refuses would be taken there. It
// returns nil when p has no dead-letter sink, or its kind cannot encode
// without sending.
func (p *Pipeline) DryRunDeadLetterSink(log *slog.Logger) bridge.SinkOpener {
	dl := p.Spec.DeadLetter.Sink
	if dl == nil {
		return nil
	}
	k := lookupKind(dl.Kind)
	if k == nil || k.openDrySink == nil {
		return nil
	}
	log = orDefault(log).With("pipeline", p.Name)
	cfg, kind := dl.Config, dl.Kind
	return func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		opt := deadLetterOptions()
		opt.OnDrop = routeShed(onDrop, p.Name, log)
		return k.openDrySink(ctx, cfg, opt, adapterLog(log, kind, "dead-letter dry-run"))
	}
}

// DeadLettersIntoSink reports whether p's dead-letter sink writes where its
// sink does (a dead-letter queue's job: WithDeadLetterSinkAsSink), so that
// what it dead-letters grows the sink too, as far as the blocks' words
// tell; a job whose counts name the entities (driver.Backlog.Entity)
// decides by those.
func (p *Pipeline) DeadLettersIntoSink() bool {
	if p.Spec.DeadLetter.Sink == nil {
		return false
	}
	sink, ok := p.sinkEntity()
	dl, dlOK := p.WithDeadLetterSinkAsSink().sinkEntity()
	return ok && dlOK && sink == dl
}

// sinkEntity is SinkIdentity where the kind can name the entity it writes;
// ok is false where it is only the kind, which proves no two sinks alike.
func (p *Pipeline) sinkEntity() (string, bool) {
	k := lookupKind(p.Spec.Sink.Kind)
	if k == nil || k.sinkIdentity == nil {
		return "", false
	}
	return p.SinkIdentity(), true
}

// WithDeadLetterSinkAsSink returns a copy of p that writes to p's
// dead-letter sink, when it has one: a dead-letter queue's messages stay
// dead letters at the target. Without one, p itself.
func (p *Pipeline) WithDeadLetterSinkAsSink() *Pipeline {
	if p.Spec.DeadLetter.Sink == nil {
		return p
	}
	q := *p
	q.Spec.Sink = *p.Spec.DeadLetter.Sink
	return &q
}
