package nats

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A message handed back for redelivery at once gets two NAKs. A plain NAK
// puts it on the consumer's redelivery queue, which the server serves before
// later messages (a running source's group order needs that), but keeps in
// memory only: a server that stops before it redelivered (an embedded server
// stopping with qbridge, a migration interrupted and resumed) forgets it,
// and the message came back only when its ack_wait ran out. A NAK with a
// delay writes the pending entry's new due time to the consumer's store
// (server/consumer.go, processNak → updateDelivered), so a restarted server
// redelivers it at once, in stream order (checkPending sorts what is due);
// but it also takes the message off the redelivery queue. So the delayed
// form goes first, due at once, and the plain one after it puts the message
// back on the queue; when the due time passes the server skips a message
// already queued. Each hand-back then shows as two NAK advisories.
// docs/adapter-nats.md#handing-messages-back.
var (
	nakDueNow = []byte(`-NAK {"delay": 1}`) // 1 ns
	nakPlain  = []byte(`-NAK`)
)

// nakConfirmTimeout bounds the wait for the server to confirm the NAKs
// (confirmNaks: at Close, and before a pull that follows a NAK).
// The server sends an advisory for each NAK: a CI run under -race took
// more than 2 s for 10,000 of them.
const nakConfirmTimeout = 10 * time.Second

// nak hands m back: after delay, or at once (delay 0).
func (s *jsSource) nak(m jetstream.Msg, delay time.Duration) error {
	reply := m.Reply()
	if delay > 0 {
		if err := m.NakWithDelay(delay); err != nil {
			return err
		}
		s.lastNak.Store(&reply)
		return nil
	}
	if err := s.conn.nc.Publish(reply, nakDueNow); err != nil {
		return err
	}
	if err := m.Nak(); err != nil {
		return err
	}
	s.lastNak.Store(&reply)
	// Not a delayed one: the pull's confirmation (confirmNaksNow) may go
	// to the NAKed message itself, where a plain NAK would make a delayed
	// message due at once; one held for a delay comes back behind later
	// ones anyway.
	s.nakNow.Store(&reply)
	return nil
}

// acked records the reply subject of a message whose ack the server
// confirmed: a NAK sent there changes nothing (the message left the
// consumer's pending set for good), and the server still answers it. Any
// one will do, so only the first is kept: no allocation per ack batch.
func (s *jsSource) acked(m jetstream.Msg) {
	if s.ackedReply.Load() != nil {
		return
	}
	reply := m.Reply()
	s.ackedReply.CompareAndSwap(nil, &reply)
}

// confirmNaks waits until the server has applied the NAKs this source sent.
// nats-server queues a consumer's acks, NAKs among them, and applies them in
// arrival order, answering one that carries a reply subject once it is
// applied (server/consumer.go: pushAck, processAck); it drops what is still
// queued when it stops. So one NAK sent as a request after the others
// confirms them all. It goes to an acknowledged message's subject, where it
// is a no-op. Only when none was acknowledged does it go to the last NAKed
// message, as a plain NAK, which the server ignores while the message waits
// on the redelivery queue; on a consumer shared with another client that
// already took the message back, it would be one redelivery more.
func (s *jsSource) confirmNaks(ctx context.Context) {
	s.confirm(ctx, s.lastNak.Swap(nil))
}

// confirmNaksNow confirms, before a pull, the NAKs at once sent since the
// last pull: the server applies acks apart from pulls, so the pull could
// otherwise take the message after a handed-back one, which then came
// back behind it.
func (s *jsSource) confirmNaksNow(ctx context.Context) {
	s.confirm(ctx, s.nakNow.Swap(nil))
}

// confirm sends the confirming NAK to last, the reply subject of a NAK
// sent, or to an acknowledged message's (see confirmNaks).
func (s *jsSource) confirm(ctx context.Context, last *string) {
	if last == nil {
		return
	}
	reply := *last
	if r := s.ackedReply.Load(); r != nil {
		reply = *r
	}
	cctx, cancel := context.WithTimeout(ctx, nakConfirmTimeout)
	defer cancel()
	if _, err := s.conn.nc.RequestWithContext(cctx, reply, nakPlain); err != nil && ctx.Err() == nil {
		s.log.Warn("nats: the server did not confirm the messages handed back; if it stops now, they come back after ack_wait", "error", err)
	}
}
