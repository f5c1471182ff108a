package nats

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/mapping"
)

// jsDelivery settles through JetStream acks.
type jsDelivery struct {
	m          jetstream.Msg
	msg        *mapping.Message
	decodeErr  error
	log        *slog.Logger
	last       bool // this is delivery MaxDeliver: a failure must not vanish
	maxDeliver int
	src        *jsSource
	seq        uint64 // stream sequence
	pending    uint64 // the consumer's NumPending when it was delivered

	touchedAt atomic.Int64 // when it was delivered or last InProgress (unix ns), while held
	handed    atomic.Bool  // given to the engine: in src.outstanding
	settled   atomic.Bool  // Ack, Nack or DeadLetter was called
	leftover  bool         // handed out by a quiesced source (Quiesce)
}

func (d *jsDelivery) touched() time.Time { return time.Unix(0, d.touchedAt.Load()) }

// touch restarts the ack timer of a held delivery.
func (d *jsDelivery) touch() {
	if err := d.m.InProgress(); err != nil {
		d.log.Warn("nats: in progress for a held message failed; it may be delivered again", "error", err)
	}
	d.touchedAt.Store(time.Now().UnixNano())
}

// settle marks the delivery settled: it no longer counts as the engine's.
// It runs before the ack, nak or term goes out: until the server has it,
// the message then counts as not ours, which makes a recovery wait (for the
// settlement, or for a redelivery if it failed) instead of ending early.
// gone: an ack or a term, after which the server forgets the message
// whichever of its deliveries the settlement names (see jsSource.settled).
func (d *jsDelivery) settle(gone bool) {
	if d.settled.CompareAndSwap(false, true) && d.handed.Load() {
		d.src.settled(d.seq, gone)
	}
}

// unsettled undoes what settle(true) recorded when the ack or term failed:
// the server may still have the message, and a copy it redelivers is ours.
func (d *jsDelivery) unsettled() {
	if d.handed.Load() {
		d.src.notGone(d.seq)
	}
}

func (d *jsDelivery) Message() *mapping.Message { return d.msg }

// DecodeError is why natsmap refused the message, or nil.
func (d *jsDelivery) DecodeError() error { return d.decodeErr }

// Ack is a double ack: it returns once the server confirmed it, so an acked
// message is not redelivered.
func (d *jsDelivery) Ack(ctx context.Context) error {
	d.settle(true)
	if err := d.m.DoubleAck(ctx); err != nil {
		d.unsettled()
		return fmt.Errorf("nats: ack: %w", err)
	}
	d.src.acked(d.m)
	return nil
}

// Nack asks for redelivery after delay (jsSource.nak). On the consumer's last
// allowed delivery (max_deliver) the server would never redeliver, so the
// message is terminated instead: a dead-letter with a reason, never a
// silent loss.
func (d *jsDelivery) Nack(ctx context.Context, delay time.Duration) error {
	d.settle(d.last)
	if d.last {
		d.log.Warn("nats: message failed on its last delivery (max_deliver); terminating it",
			"subject", d.msg.Source.Address, "stream_seq", d.msg.Source.SequenceNumber, "deliveries", d.msg.Source.DeliveryCount)
		return d.term(fmt.Sprintf("qbridge: max_deliver (%d) reached", d.maxDeliver))
	}
	if d.leftover && delay == 0 {
		d.src.giveBack(d) // Close NAKs it, in stream order
		return nil
	}
	// A pull that Receive left may still be open on the server: it would
	// take the message.
	d.src.waitAbandoned(ctx)
	if err := d.src.nak(d.m, d.seq, delay); err != nil {
		return fmt.Errorf("nats: nak: %w", err)
	}
	return nil
}

// Extend sends InProgress, which restarts the consumer's full AckWait
// (whatever d is): to hold a message longer than ack_wait, call it again.
func (d *jsDelivery) Extend(ctx context.Context, _ time.Duration) error {
	if err := d.m.InProgress(); err != nil {
		return fmt.Errorf("nats: in progress: %w", err)
	}
	return nil
}

// DeadLetter terminates the message (no further redelivery); the reason is
// in the server's MSG_TERMINATED advisory.
func (d *jsDelivery) DeadLetter(ctx context.Context, reason, description string) error {
	d.settle(true)
	return d.term(termReason(reason, description))
}

func (d *jsDelivery) term(reason string) error {
	if err := d.m.TermWithReason(reason); err != nil {
		d.unsettled()
		return fmt.Errorf("nats: term: %w", err)
	}
	return nil
}

// termReason joins reason and description on one bounded line.
func termReason(reason, description string) string {
	s := reason
	if description != "" {
		if s != "" {
			s += ": "
		}
		s += description
	}
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	const maxLen = 1024
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	return s
}
