package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/lockhold"
	"github.com/qbridge/qbridge/mapping"
)

// settler is the part of *amqp.Receiver a delivery settles through (an
// interface so the settlement logic can be tested without a broker).
type settler interface {
	AcceptMessage(ctx context.Context, msg *amqp.Message) error
	RejectMessage(ctx context.Context, msg *amqp.Message, e *amqp.Error) error
	ReleaseMessage(ctx context.Context, msg *amqp.Message) error
	ModifyMessage(ctx context.Context, msg *amqp.Message, options *amqp.ModifyMessageOptions) error
}

var errSettled = errors.New("amqp: delivery already settled")

// settlePolicy holds the settlement choices shared by a source's deliveries,
// including what auto mode learnt about the broker.
type settlePolicy struct {
	mode       nackMode
	rejectCond amqp.ErrCond
	log        *slog.Logger
	// refused: the broker does not take Modify (auto mode then releases).
	refused atomic.Bool
}

// useModify says whether Nack sends Modify (else Release).
func (p *settlePolicy) useModify() bool {
	switch p.mode {
	case nackModify:
		return true
	case nackRelease:
		return false
	}
	return !p.refused.Load()
}

// refuse records that the broker does not take Modify. Only auto mode
// changes course; an explicit nack = "modify" keeps modifying (each Nack
// then costs the session on such a broker: no message is lost, the session
// end returns its unsettled deliveries).
func (p *settlePolicy) refuse(why string, args ...any) {
	if p.mode != nackAuto || !p.refused.CompareAndSwap(false, true) {
		return
	}
	p.log.Warn("amqp source: the broker does not take the Modify outcome: Nack releases from now on ("+why+")", args...)
}

// linkEnded is told how a link ended, and whether a Modify was sent on it.
// A session or link ended by the peer right after a Modify (RabbitMQ 3.x
// answers it with end(amqp:invalid-field) "Unrecognised state
// v1_0.modified") means the broker refuses Modify. It reports whether it
// concluded so.
func (p *settlePolicy) linkEnded(modifySent bool, err error) bool {
	if !modifySent {
		return false
	}
	re := remoteErr(err)
	if re == nil {
		return false
	}
	// The conditions a broker refuses an outcome with (RabbitMQ 3.x:
	// invalid-field), or a description naming it; a broker shutting down
	// (connection:forced, internal-error "shutdown", ...) is no refusal.
	switch re.Condition {
	case amqp.ErrCondInvalidField, amqp.ErrCondNotImplemented, amqp.ErrCondNotAllowed,
		amqp.ErrCondDecodeError, amqp.ErrCondIllegalState:
	default:
		if !strings.Contains(strings.ToLower(re.Description), "modified") {
			return false
		}
	}
	p.refuse("the peer ended the link after a Modify", "condition", re.Condition, "description", re.Description)
	return true
}

var (
	_ driver.DecodeErrorer = (*delivery)(nil)
	_ driver.DeadLetterer  = (*delivery)(nil)
	_ driver.Holdable      = (*delivery)(nil)
)

// delivery is one received message and its settlement handle.
type delivery struct {
	st       settler
	msg      *amqp.Message
	m        *mapping.Message
	pol      *settlePolicy
	modSent  *atomic.Bool     // the link's "a Modify went out" flag; may be nil
	hold     *lockhold.Holder // keeps a Nack's delay; nil: Nack hands back at once
	credits  *linkCredit      // the link's; nil in tests without a link
	credited atomic.Bool      // its credit was given back (creditBack)
	redeliv  *redeliveries    // the source's; nil in tests without a source
	settled  atomic.Bool
	// peers is the link's tracker this delivery is registered with (nil
	// when untracked); peerState is set when the broker settled the
	// delivery on its own, before the engine did.
	peers     *peerSettlements
	peerState atomic.Pointer[amqp.DeliveryState]
	// decodeErr: the message cannot be decoded; m holds its raw bytes
	// (RawMessageContentType) and the engine dead-letters it. Its settlement
	// is a delivery's like any other: DeadLetter rejects it; Nack (the
	// engine's fallback when the dead-letter sink failed) hands it back, so
	// the dead-letter copy is retried (at-least-once).
	decodeErr error
}

func (d *delivery) Message() *mapping.Message { return d.m }

// DecodeError is nil, or why the message could not be decoded.
func (d *delivery) DecodeError() error { return d.decodeErr }

// Ack accepts the message.
func (d *delivery) Ack(ctx context.Context) error {
	if err, done := d.begin("accept", false); done {
		return err
	}
	defer d.creditBack()
	d.forget()
	return settleErr("accept", d.st.AcceptMessage(ctx, d.msg))
}

// Release hands a message the engine never sent back with the Released
// outcome (driver.Releaser): the broker does not count it as a delivery
// attempt (AMQP 1.0 §3.4.4), so a shutdown costs no message its redelivery
// budget.
func (d *delivery) Release(ctx context.Context) error {
	if err, done := d.begin("release", true); done {
		return err
	}
	defer d.creditBack()
	return settleErr("release", d.st.ReleaseMessage(ctx, d.msg))
}

// Nack hands the message back: Modify(delivery-failed) where the broker
// takes it, else Release. AMQP has no redelivery delay, and a message
// handed back at once comes straight back (on RabbitMQ 3.x to the head of
// its queue): for a delay the source keeps the delivery unsettled that
// long (lockhold), while its link goes on receiving what is behind it
// (the held delivery gives its credit back: linkCredit).
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	if err, done := d.begin("nack", true); done {
		return err
	}
	// Held or handed back, the message gives its credit back: the link
	// goes on receiving what is behind it.
	defer d.creditBack()
	if d.redeliv != nil {
		d.redeliv.handedBack(d.m.ID)
	}
	if delay > 0 && d.hold != nil && d.hold.Hold(delay, time.Time{}, heldDelivery{d}, d.m.ID, func() {}) {
		return nil
	}
	return d.handBack(ctx)
}

// handBack sends Nack's outcome.
func (d *delivery) handBack(ctx context.Context) error {
	if !d.pol.useModify() {
		return settleErr("release", d.st.ReleaseMessage(ctx, d.msg))
	}
	if d.modSent != nil {
		d.modSent.Store(true)
	}
	err := d.st.ModifyMessage(ctx, d.msg, &amqp.ModifyMessageOptions{DeliveryFailed: true})
	if err != nil && d.pol.linkEnded(true, err) {
		// The broker ended the session over the Modify, which returns this
		// and every other unsettled delivery of the session to the queue:
		// the message is handed back, as Nack wants.
		return nil
	}
	return settleErr("modify", err)
}

// heldDelivery is a delivery the source holds for its Nack delay: AMQP
// has no lock to renew, and a link that ended meanwhile gave it back.
type heldDelivery struct{ d *delivery }

func (h heldDelivery) Renew(context.Context) (time.Time, error) { return time.Time{}, nil }
func (h heldDelivery) Release(ctx context.Context) error {
	if err := h.d.handBack(ctx); err != nil && !linkDead(err) {
		return err
	}
	return nil
}

// Extend is a no-op: AMQP 1.0 has no lock to renew (an unsettled delivery
// stays with this link until it is settled or the link ends).
func (d *delivery) Extend(context.Context, time.Duration) error { return nil }

// DeadLetter rejects the message with the configured error condition; the
// broker dead-letters or drops it according to its own configuration.
func (d *delivery) DeadLetter(ctx context.Context, reason, description string) error {
	if err, done := d.begin("reject", false); done {
		return err
	}
	defer d.creditBack()
	d.forget()
	desc := reason
	if description != "" {
		desc = reason + ": " + description
	}
	return settleErr("reject", d.st.RejectMessage(ctx, d.msg, &amqp.Error{Condition: d.pol.rejectCond, Description: mapping.TruncateUTF8(desc, 4096)}))
}

// begin claims the delivery's one settlement. done says the settlement is
// over before it started, with err its result: settled already by the
// engine, or by the broker on its own (then nothing goes on the wire, and
// a Nack, wantReturn, of a message the broker handed back succeeded).
func (d *delivery) begin(op string, wantReturn bool) (err error, done bool) {
	if !d.settled.CompareAndSwap(false, true) {
		return errSettled, true
	}
	if d.peers != nil {
		d.peers.forget(d)
	}
	if st := d.peerState.Load(); st != nil {
		d.creditBack()
		return peerSettledErr(op, *st, wantReturn), true
	}
	return nil, false
}

// forget drops the message's hand-back count: it leaves the queue.
func (d *delivery) forget() {
	if d.redeliv != nil {
		d.redeliv.settled(d.m.ID)
	}
}

// creditBack gives the link the credit of this delivery, settled or held
// (linkCredit), once.
func (d *delivery) creditBack() {
	if d.credits != nil && d.credited.CompareAndSwap(false, true) {
		d.credits.settled()
	}
}

// Held gives the link the credit of a delivery a dry run keeps unsettled
// until its end (driver.Holdable): at RabbitMQ 3.x's credit 1 the sample
// was one message.
func (d *delivery) Held() { d.creditBack() }

// settleErr explains a failed settlement: when the link is gone the broker
// has the message back and redelivers it (at-least-once).
func settleErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var le *amqp.LinkError
	var se *amqp.SessionError
	var ce *amqp.ConnError
	if errors.As(err, &le) || errors.As(err, &se) || errors.As(err, &ce) {
		return fmt.Errorf("amqp: %s: the link is gone, the broker redelivers the message: %w", op, err)
	}
	return fmt.Errorf("amqp: %s: %w", op, err)
}
