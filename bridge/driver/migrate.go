package driver

import (
	"context"
	"errors"
	"time"
)

// Backlog is what a broker says one entity (a queue, a stream consumer, a
// subscription) holds. Counts are as exact as the broker's: SQS's are
// approximate. A field the broker does not report is 0; Known says which
// were reported.
type Backlog struct {
	// Ready is receivable now (SQS ApproximateNumberOfMessages, Service Bus
	// ActiveMessageCount, JetStream consumer NumPending).
	Ready int64 `json:"ready"`
	// InFlight is received by some consumer and not yet settled (SQS
	// ApproximateNumberOfMessagesNotVisible, JetStream NumAckPending).
	InFlight int64 `json:"in_flight"`
	// Scheduled is not receivable yet (SQS ApproximateNumberOfMessagesDelayed,
	// Service Bus ScheduledMessageCount).
	Scheduled int64 `json:"scheduled"`
	// DeadLetter is in the entity's own dead-letter sub-queue, where the
	// broker has one (Service Bus DeadLetterMessageCount).
	DeadLetter int64 `json:"dead_letter"`
	// Deferred is set aside by an application (Service Bus Defer): such a
	// message is receivable only by its sequence number, so a receiver
	// never gets it. Not part of Pending.
	Deferred int64 `json:"deferred,omitempty"`
	// Sessions is the number of sessions with messages (or session
	// state), for Service Bus session entities; HasSessions says it was
	// counted.
	Sessions    int64 `json:"sessions,omitempty"`
	HasSessions bool  `json:"-"`
	// Deduplicates says that the counted entity, as a sink, drops a message
	// whose deduplication id it has seen within its window (SQS FIFO,
	// Service Bus duplicate detection, a JetStream stream's duplicate
	// window), so that a resume's rewrites need not grow it.
	Deduplicates bool `json:"-"`
	// DedupWindow is how long such a sink drops an id it has seen, where
	// that is fixed and known (SQS FIFO: 5 minutes); 0 where it is not.
	DedupWindow time.Duration `json:"-"`
	// Ordered says that the counted entity keeps each group's messages
	// in order for its consumers (an SQS FIFO queue, a Service Bus entity
	// with sessions, a JetStream stream): a migration from such a source
	// into a sink that does not warns that the order is not kept there.
	Ordered bool `json:"-"`
	// Limits describes, for a sink, the limits by which the counted entity
	// drops what it holds without refusing a write (a JetStream stream
	// with discard old: "max_msgs 100, discard old"), and KeepsAtMost is
	// its limit on the number of messages (0: none): what goes past it
	// pushes out the oldest.
	Limits      string `json:"-"`
	KeepsAtMost int64  `json:"-"`
	// KeepsNone says that it keeps nothing written to it (a JetStream
	// stream with interest retention and no consumer).
	KeepsNone bool `json:"-"`
	// Exact says that the broker counts exactly and at once (a JetStream
	// consumer's NumPending and NumAckPending, a stream's messages, where
	// SQS's counts lag): a migration takes a source's count of 0 for
	// drained after a short quiet spell instead of -idle, and a sink's
	// short count for the truth instead of counting it again.
	Exact bool `json:"-"`
	// ForgetsRecentAcks says, of a source, that its broker runs in this
	// process and keeps the last acknowledgements it took in memory for a
	// moment (an embedded nats-server writes a consumer's state at most
	// ten times a second): a kill -9 loses them with the process, and the
	// messages come again as first deliveries, which no delivery count
	// shows as an earlier run's.
	ForgetsRecentAcks bool `json:"-"`
	// Entity names the counted entity as the broker knows it (SQS
	// QueueArn), or is empty: a source and a sink configured in different
	// words but naming one entity have the same Entity.
	Entity string `json:"-"`
	// Created is when the broker made the counted entity (a JetStream
	// stream, a Service Bus queue or subscription), or zero where it does
	// not say. Positions begin again in an entity deleted and made again:
	// a copy's checkpoint keeps this, and a resume into a newer one is
	// refused instead of skipping the new entity's first messages.
	Created time.Time `json:"-"`
	// ReceivesCounted says that every receive of a message raises its
	// delivery count, a hand-back's included (SQS ApproximateReceiveCount,
	// Service Bus DeliveryCount, which every receive not completed raises,
	// a JetStream durable consumer's NumDelivered),
	// and that no read leaves it as it was: a dry run that reads a sample
	// raises the counts a later move takes for an interrupted run's
	// deliveries, so the dry run records what it raised (Entity names the
	// record).
	ReceivesCounted bool `json:"-"`
	// DeliveriesOf names what keeps those delivery counts where it is not
	// the entity itself: a JetStream durable consumer (its NumDelivered,
	// which a hand-back raises too); "" where it is the entity's own (SQS,
	// Service Bus). ReceiveLedger is the name of the record either way.
	DeliveriesOf string `json:"-"`
}

// ReceiveLedger names the record of receives that wrote nothing (a dry
// run's sample, a stopped move's hand-backs): DeliveriesOf, else Entity.
func (b Backlog) ReceiveLedger() string {
	if b.DeliveriesOf != "" {
		return b.DeliveriesOf
	}
	return b.Entity
}

// Pending is everything still to be moved: ready, in flight and scheduled.
func (b Backlog) Pending() int64 { return b.Ready + b.InFlight + b.Scheduled }

// Browser is implemented by sources opened in browse mode (migration copy
// mode and dry runs): they read without settling, so Ack, Nack, Extend and
// DeadLetter change nothing at the broker, and every message carries its
// position in mapping.Message.Source.SequenceNumber (a decimal uint64: the
// JetStream stream sequence, the Service Bus sequence number).
type Browser interface {
	// Drained reports whether the source has delivered every message that
	// the entity held when browsing started, or found nothing more to read.
	Drained() bool
}

// Holdable is implemented by deliveries whose source receives nothing
// more while enough of its deliveries are unsettled (AMQP link credit). A
// dry run that holds its sample unsettled until the end calls Held on each
// delivery it keeps; the source then receives the rest of the sample. The
// delivery is settled (released) later as usual.
type Holdable interface {
	Held()
}

// Pinger is implemented by sources whose broker cannot count its messages
// (an AMQP 1.0 broker, a core NATS subject): for them, nothing received for
// a while is the only sign of a drained queue, and a broker that stalls
// with the connection open gives that sign too. Ping makes a round trip to
// the broker on the source's connection and returns nil when it answered.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ErrCannotBrowse is wrapped by adapters asked to browse an entity their
// broker cannot read without consuming (SQS).
var ErrCannotBrowse = errors.New("the broker cannot read this entity without consuming it")

// ErrNoDeadLetterQueue is wrapped by adapters asked for the dead-letter queue
// of an entity that has none they can find.
var ErrNoDeadLetterQueue = errors.New("no dead-letter queue")

// DuplicateReporter is implemented by sinks whose broker says when it dropped
// a message as a duplicate (JetStream PubAck.Duplicate). Duplicates is the
// number dropped since the sink was opened.
type DuplicateReporter interface {
	Duplicates() int64
}

// RunDuplicateReporter is implemented by sinks that tell, of the
// duplicates their broker dropped, those of a message this same sink wrote
// since it opened (an SQS FIFO queue answers with the first message's id):
// a retry whose first attempt was stored, or distinct messages that share
// a deduplication id. The rest may duplicate what an earlier run wrote (a
// copy before a move), which is no loss.
type RunDuplicateReporter interface {
	DuplicatesOfThisRun() int64
}

// throttled marks a broker's "slow down" answer.
type throttled struct{ err error }

func (t throttled) Error() string { return t.err.Error() }
func (t throttled) Unwrap() error { return t.err }

// Throttled marks err as the broker's request to slow down (SQS OverLimit,
// RequestThrottled or ThrottlingException, Service Bus ServerBusy): it is
// transient and retried with backoff, and counted apart so operators can see
// that the broker, not qbridge, sets the pace.
func Throttled(err error) error {
	if err == nil {
		return nil
	}
	return throttled{err}
}

// IsThrottled reports whether err was marked by Throttled.
func IsThrottled(err error) bool {
	var t throttled
	return errors.As(err, &t)
}
