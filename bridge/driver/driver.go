// Package driver defines the small contract between the pipeline engine
// (package bridge) and the protocol adapters (packages under adapters/), in
// the manner of gocloud.dev/pubsub/driver: adapters import this package and
// mapping, never bridge and never each other.
package driver

import (
	"context"
	"errors"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// Source yields messages from a broker.
type Source interface {
	// Receive blocks until at least one message is available, ctx ends, or
	// the source fails, and returns at most max deliveries in source order.
	// Transient broker errors are retried inside the adapter; an error
	// returned here means the source cannot go on (the engine restarts it
	// with backoff).
	Receive(ctx context.Context, max int) ([]Delivery, error)
	// Close stops receiving and releases connections. Deliveries not yet
	// settled come back from the broker later (at-least-once).
	Close(ctx context.Context) error
}

// Delivery is one received message and its settlement handle. Exactly one of
// Ack, Nack or DeadLetter is called, once; if it fails, the engine calls
// nothing more and the broker redelivers the message when its lock or
// visibility lapses. Extend may be called while the message is queued or
// being sent, never concurrently with settlement.
type Delivery interface {
	Message() *mapping.Message
	// Ack settles the message as done (SQS delete, AMQP accept, JetStream ack).
	Ack(ctx context.Context) error
	// Nack hands the message back for redelivery no sooner than after delay
	// where the broker supports a delay (SQS visibility, JetStream NakWithDelay,
	// Service Bus abandon).
	Nack(ctx context.Context, delay time.Duration) error
	// Extend keeps the message locked (invisible to other consumers) for at
	// least d more. Brokers without locks return nil.
	Extend(ctx context.Context, d time.Duration) error
}

// BatchAcker is implemented by sources that acknowledge many deliveries in
// one call, as gocloud.dev/pubsub's driver does with SendAcks: SQS
// DeleteMessageBatch, JetStream acks pipelined on one connection. ds are
// deliveries this source returned, none settled yet; AckBatch returns one
// error per delivery and settles each at most once, like Ack. The engine
// calls it instead of Ack with what the sink confirmed since the last call,
// under one deadline for the whole batch.
type BatchAcker interface {
	AckBatch(ctx context.Context, ds []Delivery) []error
}

// LossCounter is implemented by at-most-once sources that can lose messages
// before the engine sees them (a core NATS subscription whose client buffer
// overflowed: a slow consumer). Lost returns how many so far; the engine
// exports it as a metric and shows it on /readyz.
type LossCounter interface {
	Lost() uint64
}

// Warner is implemented by adapters that know of a condition the operator
// should fix while messages still flow (another consumer on a consumer the
// adapter needs alone, a broker setting that cannot keep order). /readyz
// lists the warnings; they do not make the pipeline unready.
type Warner interface {
	Warnings() []string
}

// Releaser is implemented by deliveries whose broker can take a message
// back without counting a delivery attempt (AMQP's Released outcome). On
// shutdown the engine hands back what it received and never sent with
// Release where it can, with Nack(ctx, 0) elsewhere.
type Releaser interface {
	Release(ctx context.Context) error
}

// Recycler is implemented by deliveries whose adapter reuses their memory,
// the Message with it, for later deliveries: on the busiest path the
// allocation of each decoded message is a good share of a bridge's CPU. The
// engine calls Recycle once, after the delivery was acknowledged and when it
// holds no reference to the delivery or its Message; neither is used again.
// Sinks therefore keep no Message past the Send that got it. A wrapper of
// deliveries does not pass Recycle on (PassDelivery lacks it): it may keep
// what the delivery gave it, so its deliveries are left to the collector.
type Recycler interface {
	Recycle()
}

// DeadLetterer is implemented by deliveries whose broker has a native
// dead-letter queue (Service Bus dead-letter, JetStream Term, AMQP reject).
type DeadLetterer interface {
	DeadLetter(ctx context.Context, reason, description string) error
}

// DecodeErrorer is implemented by deliveries the adapter could not decode
// (a corrupt digest, an undecodable section, a malformed envelope). Such a
// message is never forwarded: the engine dead-letters it with the error as
// the reason. Message still returns what could be read (raw body, ids,
// source facts) so the dead-letter copy keeps the payload.
type DecodeErrorer interface {
	DecodeError() error
}

// Sink sends messages to a broker.
type Sink interface {
	// Send sends msgs and returns one error per message (nil: the broker
	// confirmed it). It returns only when every message is confirmed or
	// failed, so the engine can ack the sources. Messages of one call may be
	// pipelined or batched; the engine never puts two messages of the same
	// group in one call unless it allows more than one in flight per group.
	// The messages are the engine's again once Send returns: a sink keeps
	// none of them (see Recycler).
	Send(ctx context.Context, msgs []*mapping.Message) []error
	Close(ctx context.Context) error
}

// OrderedSender is implemented by sinks whose Send puts the messages of one
// call on the broker in slice order, and the broker keeps that order
// (publishes on one connection, transfers on one link). KeepsOrder may
// depend on the configuration. The engine then sends consecutive messages
// of a group in one call (pipelining) instead of one per call; when one
// fails, it sends the group again from that message, in order, so the
// later ones of the call may arrive twice (deduplicated by the message's
// dedup id where the broker does).
type OrderedSender interface {
	KeepsOrder() bool
}

// WriteSignaller is implemented by OrderedSenders whose Send puts all of a
// call's messages on the wire before it waits for their confirmation, and
// whose next call's messages go on the wire after them (publishes on one
// connection). Such a Send calls Written(ctx) once it has written them.
// The engine then starts a lane's next call as soon as the previous one is
// written, instead of once it is confirmed: the calls' confirmation round
// trips overlap instead of adding up (docs/benchmarks.md). Results are
// still routed in call order, and when a call fails the lane's later calls
// are sent again after it, whatever their own result, as the later
// messages of one failed call are.
type WriteSignaller interface {
	OrderedSender
	SignalsWritten() bool
}

// UnsettledBound is implemented by sources that deliver at most
// MaxUnsettled messages not yet settled (a JetStream consumer's
// max_ack_pending): the engine's automatic bound on messages in flight
// stays within it.
type UnsettledBound interface {
	MaxUnsettled() int
}

type writtenKey struct{}

// WithWritten returns ctx carrying f for Written. The callback travels in
// the context so that wrappers of a sink (tracing, migration) that pass
// their Send's context on keep it without knowing of it.
func WithWritten(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, writtenKey{}, f)
}

// Written tells the engine that the call with ctx has put its messages on
// the wire (WriteSignaller). A sink calls it at most once per call, from
// within Send, before it returns; it does nothing where the engine asked
// for no signal.
func Written(ctx context.Context) {
	if f, ok := ctx.Value(writtenKey{}).(func()); ok {
		f()
	}
}

// Unordered is implemented by sources whose messages have no order to keep
// apart from their group (an SQS standard queue): the engine sends their
// ungrouped messages concurrently by default.
type Unordered interface {
	Unordered() bool
}

// ReadyChecker is implemented by adapters that can tell whether their
// connection is up; /readyz reports it.
type ReadyChecker interface {
	Ready(ctx context.Context) error
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as permanent: the message is dead-lettered instead of
// retried (too large for the target, rejected by validation, unauthorized
// for this entity...). Returned by an open or a count, where no message is
// at hand, it says that no repeat of the call will change the broker's
// answer (an entity that does not exist, credentials it refuses): the
// engine retries anyway (a daemon waits for the operator), a migration
// fails at once with it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err is permanent: marked by Permanent, or a
// mapping.RejectError (a message the mapping layer cannot translate).
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || mapping.IsReject(err)
}
