package driver

import "context"

// The engine asks adapters what they can do by type assertion (the optional
// interfaces above), so a wrapper that embeds only Source, Sink or Delivery
// hides those capabilities: with tracing on, ungrouped JetStream messages
// were reordered (OrderedSender hidden) and a core NATS loss went unseen
// (LossCounter hidden). A wrapper embeds PassSource, PassSink or
// PassDelivery instead: they answer each optional interface whose absence
// has a plain meaning as the wrapped value does, and as a value without it
// where it lacks it. Two are left to the wrapper, because their absence
// changes what the engine does and a wrapper of deliveries must unwrap them
// for the adapter: BatchAcker (sources) and DeadLetterer (deliveries).

// PassSource is a Source that passes ReadyChecker, Unordered,
// UnsettledBound, LossCounter and Warner on to the Source it wraps.
type PassSource struct{ Source }

// Ready is the wrapped source's, nil where it cannot tell.
func (p PassSource) Ready(ctx context.Context) error {
	if rc, ok := p.Source.(ReadyChecker); ok {
		return rc.Ready(ctx)
	}
	return nil
}

// Unordered is the wrapped source's, false where it does not say.
func (p PassSource) Unordered() bool {
	u, ok := p.Source.(Unordered)
	return ok && u.Unordered()
}

// MaxUnsettled is the wrapped source's, 0 (no bound) where it does not say.
func (p PassSource) MaxUnsettled() int {
	if b, ok := p.Source.(UnsettledBound); ok {
		return b.MaxUnsettled()
	}
	return 0
}

// Lost is the wrapped source's, 0 for a source that cannot lose.
func (p PassSource) Lost() uint64 {
	if lc, ok := p.Source.(LossCounter); ok {
		return lc.Lost()
	}
	return 0
}

// Warnings are the wrapped source's.
func (p PassSource) Warnings() []string {
	if w, ok := p.Source.(Warner); ok {
		return w.Warnings()
	}
	return nil
}

// PassSink is a Sink that passes ReadyChecker, OrderedSender,
// WriteSignaller, Warner,
// DuplicateReporter and RunDuplicateReporter on to the Sink it wraps.
type PassSink struct{ Sink }

// Ready is the wrapped sink's, nil where it cannot tell.
func (p PassSink) Ready(ctx context.Context) error {
	if rc, ok := p.Sink.(ReadyChecker); ok {
		return rc.Ready(ctx)
	}
	return nil
}

// KeepsOrder is the wrapped sink's, false where it does not say.
func (p PassSink) KeepsOrder() bool {
	o, ok := p.Sink.(OrderedSender)
	return ok && o.KeepsOrder()
}

// SignalsWritten is the wrapped sink's, false where it does not say. A
// wrapper's Send must pass its context on to the wrapped Send (Written).
func (p PassSink) SignalsWritten() bool {
	w, ok := p.Sink.(WriteSignaller)
	return ok && w.SignalsWritten()
}

// Warnings are the wrapped sink's.
func (p PassSink) Warnings() []string {
	if w, ok := p.Sink.(Warner); ok {
		return w.Warnings()
	}
	return nil
}

// Duplicates is the wrapped sink's, 0 where its broker does not say.
func (p PassSink) Duplicates() int64 {
	if d, ok := p.Sink.(DuplicateReporter); ok {
		return d.Duplicates()
	}
	return 0
}

// DuplicatesOfThisRun is the wrapped sink's, 0 where it does not tell.
func (p PassSink) DuplicatesOfThisRun() int64 {
	if d, ok := p.Sink.(RunDuplicateReporter); ok {
		return d.DuplicatesOfThisRun()
	}
	return 0
}

// PassDelivery is a Delivery that passes DecodeErrorer and Releaser on to
// the Delivery it wraps.
type PassDelivery struct{ Delivery }

// DecodeError is the wrapped delivery's, nil where it decoded.
func (p PassDelivery) DecodeError() error {
	if de, ok := p.Delivery.(DecodeErrorer); ok {
		return de.DecodeError()
	}
	return nil
}

// Release is the wrapped delivery's, or Nack(ctx, 0) where its broker
// cannot release (what the engine does for such a delivery).
func (p PassDelivery) Release(ctx context.Context) error {
	if r, ok := p.Delivery.(Releaser); ok {
		return r.Release(ctx)
	}
	return p.Delivery.Nack(ctx, 0)
}

var (
	_ ReadyChecker         = PassSource{}
	_ Unordered            = PassSource{}
	_ UnsettledBound       = PassSource{}
	_ LossCounter          = PassSource{}
	_ Warner               = PassSource{}
	_ ReadyChecker         = PassSink{}
	_ OrderedSender        = PassSink{}
	_ WriteSignaller       = PassSink{}
	_ Warner               = PassSink{}
	_ DuplicateReporter    = PassSink{}
	_ RunDuplicateReporter = PassSink{}
	_ DecodeErrorer        = PassDelivery{}
	_ Releaser             = PassDelivery{}
)
