package nats

import (
	"context"
	"maps"
	"slices"
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

// nak hands m (stream sequence seq) back: after delay, or at once (delay 0).
func (s *jsSource) nak(m jetstream.Msg, seq uint64, delay time.Duration) error {
	reply := m.Reply()
	if delay > 0 {
		if err := m.NakWithDelay(delay); err != nil {
			return err
		}
		s.lastNak.Store(&reply)
		s.noteDelayed(seq, reply, time.Now().Add(delay))
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

// nakDueNow makes a message handed back with a delay due at once, by the
// reply subject of the delivery it was handed back with: the two NAKs of a
// hand-back at once. The server goes by stream sequence, whichever
// delivery a NAK names, and takes it while the message is pending.
func (s *jsSource) nakDueNow(reply string) error {
	if err := s.conn.nc.Publish(reply, nakDueNow); err != nil {
		return err
	}
	if err := s.conn.nc.Publish(reply, nakPlain); err != nil {
		return err
	}
	s.lastNak.Store(&reply)
	return nil
}

// A delayed hand-back outlived the source that made it: after a restart,
// or the next run of an interrupted migration, the message waited out the
// delay of a retry that was no longer running (up to retry.max), and a
// recovery with it. So Close makes the ones still waiting due at once.
// One whose delay is about to run out is left to the server: it may be
// giving it out right then. A delivery of a message removes it (see
// forgetDelayedLocked), so one the engine holds again is not handed back
// under it.
type delayedNak struct {
	seq   uint64
	reply string
	due   time.Time
}

// dueMargin: a delayed hand-back due sooner than this at Close is left to
// the server.
const dueMargin = time.Second

// noteDelayed records a hand-back with a delay. Entries are few (failures
// only) and bounded by max_ack_pending: past it, the ones that have run
// out are dropped.
func (s *jsSource) noteDelayed(seq uint64, reply string, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delayed == nil {
		s.delayed = make(map[uint64]delayedNak)
	}
	if len(s.delayed) >= max(s.set.js.maxAckPending, 1) {
		now := time.Now()
		maps.DeleteFunc(s.delayed, func(_ uint64, n delayedNak) bool { return !n.due.After(now) })
	}
	s.delayed[seq] = delayedNak{seq: seq, reply: reply, due: due}
}

// forgetDelayedLocked removes the messages of ds from the delayed
// hand-backs: the server gave them out again. s.mu is held.
func (s *jsSource) forgetDelayedLocked(ds []*jsDelivery) {
	if len(s.delayed) == 0 {
		return
	}
	for _, d := range ds {
		delete(s.delayed, d.seq)
	}
}

// dueNowAtCloseLocked returns the delayed hand-backs to make due at once,
// in stream order, and forgets them all; left (handed back at close
// anyway) are not among them. s.mu is held.
func (s *jsSource) dueNowAtCloseLocked(left []*jsDelivery) []delayedNak {
	s.forgetDelayedLocked(left)
	if len(s.delayed) == 0 {
		return nil
	}
	seqs := slices.Sorted(maps.Keys(s.delayed))
	cut := time.Now().Add(dueMargin)
	due := make([]delayedNak, 0, len(seqs))
	for _, seq := range seqs {
		if n := s.delayed[seq]; n.due.After(cut) {
			due = append(due, n)
		}
	}
	s.delayed = nil
	return due
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
