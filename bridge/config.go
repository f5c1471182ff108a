package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// SourceOpener connects a source; ctx bounds the attempt. The engine calls it
// again (with backoff) when opening fails or the source's Receive fails.
type SourceOpener func(ctx context.Context) (driver.Source, error)

// SinkOpener connects a sink. onDrop must be handed to the sink's encoder
// (mapping.Options.OnDrop) so that items left out under the Drop policy are
// counted and logged by the pipeline.
type SinkOpener func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error)

// Config describes one pipeline: where messages come from, how they are
// adjusted, where they go, and the engine's limits.
type Config struct {
	Name string

	Source     SourceOpener
	SourceKind string // adapter kind for metrics and logs ("nats", "sqs"...)
	Sink       SinkOpener
	SinkKind   string
	DeadLetter DeadLetter

	// Transform adjusts each message between source and sink (the mapping
	// rules). It gets a copy of the source's message. An error is
	// permanent: the message is dead-lettered. Nil means no change.
	Transform func(m *mapping.Message) error

	// OnUndeliverable, when set, is called each time the engine hands a
	// message back to the source because nothing will ever take it: the
	// dead-letter sink refused it for good (driver.IsPermanent), or the sink
	// refused it for good and the source has no native dead-letter queue or
	// there is no dead-letter destination (retries run out on transient
	// failures are not reported: the next delivery may go through). It
	// stays at the source and comes back until the source's redrive limit;
	// a one-shot job uses this to stop waiting for it. m is the message as
	// the source delivered it (do not modify it); reason is the dead-letter
	// reason code of the refusal that ended it (the dead-letter sink's where
	// it refused, else the sink's); err says why.
	// It runs on a settlement goroutine and must not block.
	OnUndeliverable func(m *mapping.Message, reason string, err error)

	Options

	Logger  *slog.Logger // nil: slog.Default()
	Metrics *Metrics     // nil: metrics are kept but not exported
}

// DeadLetter says where permanently failing messages go. With neither set,
// they are nacked with backoff, so the broker's own redrive policy (SQS
// maxReceiveCount, Service Bus MaxDeliveryCount...) applies.
type DeadLetter struct {
	// Native uses the source broker's dead-letter queue (driver.DeadLetterer).
	Native bool
	// Sink sends the message, with attributes DeadLetterReason and
	// DeadLetterErrorDescription, to another sink, then acks the source.
	// Open it with the Encode policy so that the added attributes never make
	// the message unsendable.
	Sink     SinkOpener
	SinkKind string
	// DryRun: the destination only records what it is given (a
	// migration's dry run), so the engine logs each such message at debug
	// level as one that would be dead-lettered, not as a dead letter.
	DryRun bool
	// DryRunTo names, for that log line, where the pipeline would
	// dead-letter: its dead-letter sink's kind, or "native" (the source's
	// own dead-letter queue); "" where it has no dead-letter destination,
	// so that the message would stay at the source. A dry run records
	// natively whatever the pipeline says ("to=native" was logged for
	// each).
	DryRunTo string
}

// Options are the engine's knobs; all plain values, so two Options compare
// with ==. Start from DefaultOptions.
type Options struct {
	Ordering Ordering
	Batch    Batch
	Retry    Retry
	Lock     Lock
	// ShutdownTimeout bounds how long a stopping pipeline keeps sending what
	// it holds; what is still unsettled then is nacked.
	ShutdownTimeout time.Duration
	// Restart is the backoff between attempts to open adapters and to
	// restart a failed source.
	Restart Backoff
	// StallAfter makes the pipeline not ready (Ready) while it holds
	// messages and the sink has confirmed none of them for this long: a
	// broker that stalls with its connection open looks connected to
	// its client for minutes.
	StallAfter time.Duration
}

// Ordering bounds concurrency.
type Ordering struct {
	// MaxInFlight bounds the messages received and not yet settled; the
	// engine stops receiving while it is reached (backpressure).
	MaxInFlight int
	// MaxInFlightAuto (DefaultOptions; the configuration clears it when
	// max_in_flight is set) raises MaxInFlight to OverlapMaxInFlight where
	// a lane's calls overlap (driver.WriteSignaller): overlapping calls of
	// PipelinedBatchSize need room for several of them at once.
	MaxInFlightAuto bool
	// PerGroup is how many messages of one group key may be at the sink at
	// once. 1 keeps strict order within a group; with a sink that keeps the
	// order of a call (driver.OrderedSender) a group's consecutive messages
	// then share one call. More than 1 sends a group's messages in
	// separate concurrent calls, whose order is not kept.
	PerGroup int
	// Ungrouped says how messages without a group key travel:
	// UngroupedAuto (""), UngroupedSource or UngroupedConcurrent.
	Ungrouped string
}

// Automatic batch sizes (Batch.Size 0).
const (
	DefaultBatchSize = 100
	// PipelinedBatchSize: a pipelined lane (one call in flight at a time)
	// needs large calls to keep up with a fast source; measured with
	// e2e/hotpath_bench_test.go (docs/benchmarks.md).
	PipelinedBatchSize = 1000
	// OverlapMaxInFlight is the automatic MaxInFlight where a lane's
	// calls overlap: laneCalls calls of PipelinedBatchSize. With 1000, a
	// call took every message held and the next could not form; with
	// calls of 250 the calls' own cost ate the gain (docs/benchmarks.md).
	OverlapMaxInFlight = laneCalls * PipelinedBatchSize
	// OverlapMaxBytes bounds the room OverlapMaxInFlight adds beyond
	// MaxInFlight: past MaxInFlight messages, more are taken only while
	// those held weigh less than this (bodies and a share for the rest),
	// so large messages are held as before.
	OverlapMaxBytes = 64 << 20
)

// overlapMaxBytes is OverlapMaxBytes; tests lower it.
var overlapMaxBytes = OverlapMaxBytes

// Ungrouped modes (Ordering.Ungrouped).
const (
	// UngroupedAuto keeps source order when the sink keeps the order of a
	// call, PerGroup is 1 and the source has an order (not
	// driver.Unordered); otherwise concurrent.
	UngroupedAuto = ""
	// UngroupedSource keeps source order: ungrouped messages are one group.
	UngroupedSource = "source"
	// UngroupedConcurrent sends them concurrently, in any order.
	UngroupedConcurrent = "concurrent"
)

// Batch shapes calls to driver.Sink.Send.
type Batch struct {
	// Size is the most messages in one Send call; 0 is automatic:
	// DefaultBatchSize, or PipelinedBatchSize (at most MaxInFlight) where
	// the sink keeps the order of a call, so a lane's messages share
	// calls of that size.
	Size int
	// Linger is how long a sender waits for a batch to fill. 0 sends at once;
	// batches still form from what arrives while earlier sends are in flight.
	Linger time.Duration
	// Concurrency is how many Send calls may run at once.
	Concurrency int
}

// Backoff is an exponential backoff with jitter.
type Backoff struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     float64 // the delay varies by ± this fraction, 0 to 1
}

// Retry governs transient sink failures.
type Retry struct {
	Backoff
	// MaxAttempts counts sink attempts including the first; 0 is no limit.
	MaxAttempts int
	// MaxElapsed bounds the time since the first attempt; 0 is no limit.
	MaxElapsed time.Duration
}

// Lock governs the heartbeat that keeps in-flight messages locked at the
// source (SQS visibility, Service Bus lock, JetStream ack wait).
type Lock struct {
	ExtendEvery time.Duration
	ExtendBy    time.Duration
}

// DefaultOptions returns the defaults documented in docs/config.md.
func DefaultOptions() Options {
	return Options{
		Ordering: Ordering{MaxInFlight: 1000, MaxInFlightAuto: true, PerGroup: 1},
		Batch:    Batch{Concurrency: 4},
		Retry: Retry{
			Backoff: Backoff{Initial: 200 * time.Millisecond, Max: 30 * time.Second, Multiplier: 2, Jitter: 0.2},
		},
		Lock:            Lock{ExtendEvery: 10 * time.Second, ExtendBy: 60 * time.Second},
		ShutdownTimeout: 30 * time.Second,
		Restart:         Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2},
		StallAfter:      time.Minute,
	}
}

// withDefaults fills zero fields whose zero is meaningless.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Ordering.MaxInFlight == 0 {
		o.Ordering.MaxInFlight = d.Ordering.MaxInFlight
	}
	if o.Ordering.PerGroup == 0 {
		o.Ordering.PerGroup = d.Ordering.PerGroup
	}
	if o.Batch.Concurrency == 0 {
		o.Batch.Concurrency = d.Batch.Concurrency
	}
	if o.Retry.Backoff == (Backoff{}) {
		o.Retry.Backoff = d.Retry.Backoff
	}
	if o.Lock.ExtendEvery == 0 {
		o.Lock.ExtendEvery = d.Lock.ExtendEvery
	}
	if o.Lock.ExtendBy == 0 {
		o.Lock.ExtendBy = d.Lock.ExtendBy
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = d.ShutdownTimeout
	}
	if o.Restart == (Backoff{}) {
		o.Restart = d.Restart
	}
	if o.StallAfter == 0 {
		o.StallAfter = d.StallAfter
	}
	return o
}

// Validate reports the first option that makes no sense.
func (o Options) Validate() error {
	var errs []error
	if o.Ordering.MaxInFlight < 1 {
		errs = append(errs, errors.New("ordering: max_in_flight must be at least 1"))
	}
	if o.Ordering.PerGroup < 1 {
		errs = append(errs, errors.New("ordering: per_group must be at least 1"))
	}
	switch o.Ordering.Ungrouped {
	case UngroupedAuto, UngroupedSource, UngroupedConcurrent:
	default:
		errs = append(errs, fmt.Errorf("ordering: ungrouped %q: want \"source\" or \"concurrent\"", o.Ordering.Ungrouped))
	}
	if o.Ordering.PerGroup > o.Ordering.MaxInFlight {
		errs = append(errs, errors.New("ordering: per_group cannot exceed max_in_flight"))
	}
	if o.Batch.Size < 0 {
		errs = append(errs, errors.New("batch: size cannot be negative"))
	}
	if o.Batch.Linger < 0 {
		errs = append(errs, errors.New("batch: linger cannot be negative"))
	}
	if o.Batch.Concurrency < 1 {
		errs = append(errs, errors.New("batch: concurrency must be at least 1"))
	}
	if err := o.Retry.Backoff.validate(); err != nil {
		errs = append(errs, fmt.Errorf("retry: %w", err))
	}
	if o.Retry.MaxAttempts < 0 {
		errs = append(errs, errors.New("retry: max_attempts cannot be negative"))
	}
	if o.Retry.MaxElapsed < 0 {
		errs = append(errs, errors.New("retry: max_elapsed cannot be negative"))
	}
	if o.Lock.ExtendEvery <= 0 || o.Lock.ExtendBy <= 0 {
		errs = append(errs, errors.New("lock: extend_every and extend_by must be positive"))
	} else if o.Lock.ExtendBy <= o.Lock.ExtendEvery {
		errs = append(errs, errors.New("lock: extend_by must be longer than extend_every, or locks lapse between extensions"))
	}
	if o.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("shutdown_timeout cannot be negative"))
	}
	if o.StallAfter < 0 {
		errs = append(errs, errors.New("stall_after cannot be negative"))
	}
	if err := o.Restart.validate(); err != nil {
		errs = append(errs, fmt.Errorf("restart: %w", err))
	}
	return errors.Join(errs...)
}

func (b Backoff) validate() error {
	switch {
	case b.Initial <= 0:
		return errors.New("initial must be positive")
	case b.Max < b.Initial:
		return errors.New("max cannot be shorter than initial")
	case b.Multiplier < 1:
		return errors.New("multiplier must be at least 1")
	case b.Jitter < 0 || b.Jitter > 1:
		return errors.New("jitter must be between 0 and 1")
	}
	return nil
}
