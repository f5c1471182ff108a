package servicebus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/lockhold"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// settler is what a delivery settles through: *azservicebus.Receiver or
// *azservicebus.SessionReceiver.
type settler interface {
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error
	DeferMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeferMessageOptions) error
}

// delivery is one message received over AMQP. Settlement goes through the
// receiving link (the SDK falls back to the management link by lock token
// when the link is gone).
type delivery struct {
	rcv   settler
	renew func(ctx context.Context) (time.Time, error) // message lock, or the session lock
	rm    *azservicebus.ReceivedMessage
	m     *mapping.Message
	err   error // decode error
	hold  *lockhold.Holder
	max   time.Duration // longest Nack delay held

	settled  atomic.Bool
	doneOnce sync.Once
	done     chan struct{} // closed once the message is settled or handed back
	// held, for a session's message, is closed by Held: the session's
	// worker goes on to the next message without waiting for this one.
	held     chan struct{}
	heldOnce sync.Once
	// quiet, for a session's message, is the source's Quiesce flag.
	quiet *atomic.Bool
}

// dlDelivery is a delivery of a queue or subscription (not a sub-queue):
// it can be dead-lettered.
type dlDelivery struct{ *delivery }

var (
	_ driver.Delivery      = (*delivery)(nil)
	_ driver.DecodeErrorer = (*delivery)(nil)
	_ driver.DeadLetterer  = dlDelivery{}
	_ driver.Holdable      = (*delivery)(nil)
)

func newDelivery(rcv settler, rm *azservicebus.ReceivedMessage, hold *lockhold.Holder, maxNack time.Duration, renew func(ctx context.Context) (time.Time, error)) *delivery {
	return &delivery{rcv: rcv, rm: rm, hold: hold, max: maxNack, renew: renew, done: make(chan struct{})}
}

func (d *delivery) Message() *mapping.Message { return d.m }
func (d *delivery) DecodeError() error        { return d.err }

func (d *delivery) finish() { d.doneOnce.Do(func() { close(d.done) }) }

// Held tells the source that a dry run keeps this message unsettled until
// its end (driver.Holdable). A session's worker hands out one message at a
// time and waits for it to be settled, so a held sample stopped at one
// message a session; now the worker goes on with the session and, before
// it lets the session go, waits for the held messages to be handed back.
// Other deliveries have nothing waiting on them.
func (d *delivery) Held() {
	if d.held != nil {
		d.heldOnce.Do(func() { close(d.held) })
	}
}

// Ack completes the message.
func (d *delivery) Ack(ctx context.Context) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	defer d.finish()
	return settleErr("complete", d.rcv.CompleteMessage(ctx, d.rm, nil))
}

// Nack abandons the message (its delivery count grows). Service Bus has no
// abandon delay: a positive delay (capped at max_nack_delay) keeps the
// message locked, renewing its lock, and abandons it when the delay ends.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	delay = min(delay, d.max)
	if delay > 0 && d.hold.Hold(delay, lockedUntil(d.rm), amqpLock{d}, d.rm.MessageID, d.finish) {
		return nil
	}
	if delay == 0 && d.quiet != nil && d.quiet.Load() {
		// A quiesced session (a dry run handing its sample back) lets its
		// messages go with the session, which counts one delivery for
		// each, as an abandon does. An abandon would return the message
		// to the session's link while a receive cut short by Quiesce may
		// still have credit there: the broker would deliver it again, and
		// the session's close count that unseen delivery too.
		d.finish()
		return nil
	}
	defer d.finish()
	return settleErr("abandon", d.rcv.AbandonMessage(ctx, d.rm, nil))
}

// Extend renews the message lock (a session's lock for session messages)
// by the entity's lock duration; d is not used: Service Bus renews by the
// duration configured on the entity.
func (d *delivery) Extend(ctx context.Context, _ time.Duration) error {
	if d.settled.Load() {
		return nil
	}
	_, err := d.renew(ctx)
	return settleErr("renew lock", err)
}

// DeadLetter moves the message to the entity's dead-letter queue with
// DeadLetterReason and DeadLetterErrorDescription.
func (d dlDelivery) DeadLetter(ctx context.Context, reason, description string) error {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled
	}
	defer d.finish()
	reason, description = truncate(reason, 4096), truncate(description, 4096)
	return settleErr("dead-letter", d.rcv.DeadLetterMessage(ctx, d.rm, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &description}))
}

// amqpLock renews and abandons for the holder.
type amqpLock struct{ d *delivery }

func (l amqpLock) Renew(ctx context.Context) (time.Time, error) { return l.d.renew(ctx) }
func (l amqpLock) Release(ctx context.Context) error {
	return l.d.rcv.AbandonMessage(ctx, l.d.rm, nil)
}

func lockedUntil(rm *azservicebus.ReceivedMessage) time.Time {
	if rm.LockedUntil != nil {
		return *rm.LockedUntil
	}
	return time.Time{}
}

// settleErr explains a failed settlement.
func settleErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if sdkCode(err) == azservicebus.CodeLockLost {
		return fmt.Errorf("servicebus: %s: the lock was lost; the message is (or will be) delivered again: %w", op, err)
	}
	return fmt.Errorf("servicebus: %s: %w", op, err)
}

// decodeReceived maps a received message to the model; a message sbmap
// refuses keeps what can be read, with the error.
func decodeReceived(rm *azservicebus.ReceivedMessage, address string) (*mapping.Message, error) {
	var m *mapping.Message
	var err error
	if rm.RawAMQPMessage != nil {
		m, err = sbmap.Decode(toAMQP(rm.RawAMQPMessage))
	} else {
		err = mapping.Rejectf(sbmap.Wire, "message", "no AMQP message")
	}
	if err != nil {
		if m = withoutEnvelope(rm.RawAMQPMessage); m == nil {
			m = rawModel(rm)
		}
	}
	m.Source.Address = address
	return m, err
}

// withoutEnvelope decodes a refused message without its carry envelope
// (the usual culprit), for the dead-letter copy: its properties are kept,
// and the envelope's text travels on as mapping.RefusedEnvelopeAttr. Nil
// when the message has no envelope or is refused without it too.
func withoutEnvelope(am *azservicebus.AMQPAnnotatedMessage) *mapping.Message {
	if am == nil {
		return nil
	}
	env, ok := am.ApplicationProperties[mapping.EnvelopeName]
	if !ok {
		return nil
	}
	msg := toAMQP(am)
	props := make(map[string]any, len(am.ApplicationProperties))
	for k, v := range am.ApplicationProperties {
		if k != mapping.EnvelopeName {
			props[k] = v
		}
	}
	msg.ApplicationProperties = props
	m, err := sbmap.Decode(msg)
	if err != nil {
		return nil
	}
	text, ok := env.(string)
	if !ok {
		text = fmt.Sprint(env) // not even a string: its value, for whoever inspects it
	}
	m.SetAttr(mapping.RefusedEnvelopeAttr, mapping.String(text))
	return m
}

// rawModel keeps what can be trusted of an undecodable message, for the
// dead-letter copy: the body (one data section), ids and broker facts.
func rawModel(rm *azservicebus.ReceivedMessage) *mapping.Message {
	m := &mapping.Message{Body: rm.Body, ID: rm.MessageID, Source: mapping.Source{
		Protocol: sbmap.Wire, DeliveryCount: int(rm.DeliveryCount), PartitionID: -1,
		LockToken: mapping.UUIDString(rm.LockToken),
	}}
	if rm.SessionID != nil {
		m.GroupKey = *rm.SessionID
	}
	if rm.CorrelationID != nil {
		m.CorrelationID = *rm.CorrelationID
	}
	if rm.ContentType != nil {
		m.ContentType = *rm.ContentType
	}
	if rm.Subject != nil {
		m.Subject = *rm.Subject
	}
	if rm.EnqueuedTime != nil {
		m.Source.EnqueuedTime = *rm.EnqueuedTime
	}
	if rm.SequenceNumber != nil {
		m.Source.SequenceNumber = fmt.Sprint(*rm.SequenceNumber)
	}
	return m
}

// truncate is mapping.TruncateUTF8, named for this package's callers.
func truncate(s string, n int) string { return mapping.TruncateUTF8(s, n) }
