package nats

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
)

// needRecover reports whether recoverPending must run before the next
// fetch: after setup, or after a reconnect (messages in flight during the
// outage, and settlements that failed, come back only after ack_wait).
func (s *jsSource) needRecover() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.conn.reconnects.Load(); n != s.reconnects {
		s.reconnects = n
		s.recover = true
	}
	// A source that stands by has nothing to recover: it does so when
	// the server pins it (trackPin).
	return s.recover && (s.group == "" || s.pinID != "")
}

// takeHeld hands out up to n held deliveries, refreshing the ack timer of
// those held long enough that it could lapse before the engine's first
// lock extension.
func (s *jsSource) takeHeld(n int) []driver.Delivery {
	s.mu.Lock()
	k := min(n, len(s.held))
	ds := slices.Clone(s.held[:k])
	s.held = slices.Delete(s.held, 0, k)
	s.mu.Unlock()
	if k == 0 {
		return nil
	}
	for _, d := range ds {
		if time.Since(d.touched()) > s.keepEvery() {
			d.touch()
		}
	}
	return s.handOut(ds)
}

// dropHeld forgets held deliveries (their consumer is gone).
func (s *jsSource) dropHeld() {
	s.mu.Lock()
	s.held = nil
	s.mu.Unlock()
}

func (s *jsSource) keepEvery() time.Duration {
	return max(s.set.js.ackWait/3, 50*time.Millisecond)
}

// keepHeld keeps held deliveries locked (InProgress) until Receive hands
// them out, for as long as the source is open.
func (s *jsSource) keepHeld() {
	every := s.keepEvery()
	t := time.NewTicker(max(every/2, 25*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var due []*jsDelivery
		for _, d := range s.held {
			if time.Since(d.touched()) >= every {
				due = append(due, d)
			}
		}
		s.mu.Unlock()
		for _, d := range due {
			d.touch()
		}
	}
}

// recoverMargin is how long after ack_wait the server has surely queued
// the expired messages for redelivery (its timer, a busy consumer).
func recoverMargin(ackWait time.Duration) time.Duration {
	return min(500*time.Millisecond+ackWait/10, 10*time.Second)
}

// recoverPending runs before the first fetch of new messages when the
// consumer may have unacknowledged messages that are not ours: those a
// killed process had fetched, or ours lost in a disconnect. JetStream
// redelivers such a message only when its ack_wait lapses, but hands out
// new messages at once, so fetching as usual would let the later messages
// of a group overtake the earlier ones.
//
// JetStream serves a pull request from its redelivery queue first and from
// the stream after (consumer.getNextMsg), and queues expired messages in
// stream order. So recoverPending fetches nothing until the consumer's
// pending messages are all either ours or queued for redelivery: it takes
// what is queued (no-wait pulls), then waits, polling the consumer info,
// until every pending message is ours, or at most ack_wait + margin (by
// then every message whose holder is gone has lapsed), and takes what is
// queued again. What it took, old and new, is held and handed out sorted
// by stream sequence.
//
// With several processes on one durable consumer, the pending messages of
// the others are never ours: the wait ends at its bound. Per-group order
// across processes sharing a consumer is then only as strong as ack_wait.
func (s *jsSource) recoverPending(ctx context.Context, cons jetstream.Consumer, maxDeliver int) error {
	if s.pinnedMode() {
		return s.recoverPinned(ctx, cons, maxDeliver)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	missing := s.missing(info)
	act, phase := recoverStep(recoverStart, missing, false)
	if act == recoverDone {
		return nil
	}
	floor := info.Delivered.Stream // every pending message has a sequence <= floor
	ackWait := info.Config.AckWait
	bound := ackWait + recoverMargin(ackWait)
	deadline := time.Now().Add(bound)
	s.log.Info("nats jetstream consumer has unacknowledged messages that are not ours; fetching nothing new until they come back",
		"durable", s.set.js.durable, "ack_pending", info.NumAckPending, "not_ours", missing,
		"last_delivered_seq", floor, "wait_at_most", bound.Round(time.Millisecond))
	start := time.Now()
	defer func() {
		s.mu.Lock()
		slices.SortStableFunc(s.held, func(a, b *jsDelivery) int { return cmp.Compare(a.seq, b.seq) })
		n := len(s.held)
		s.mu.Unlock()
		s.log.Info("nats jetstream recovery done", "durable", s.set.js.durable, "took", time.Since(start).Round(time.Millisecond),
			"held", n, "not_ours_left", missing)
	}()
	for {
		switch act {
		case recoverDone:
			return nil
		case recoverGiveUp:
			s.log.Warn("nats jetstream consumer still has unacknowledged messages of another consumer process after ack_wait; fetching again (per-group order across processes sharing one durable consumer is only as strong as ack_wait)",
				"durable", s.set.js.durable, "not_ours", missing)
			return nil
		case recoverTake:
			if err := s.takeRedeliveries(cons, floor, missing, maxDeliver); err != nil {
				return err
			}
		case recoverWait:
			s.pause(ctx, min(250*time.Millisecond, max(ackWait/20, 20*time.Millisecond)))
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.ctx.Err(); err != nil {
				return err
			}
		}
		info, err := cons.Info(ctx)
		switch {
		case err == nil:
			missing = s.missing(info)
		case phase != recoverLastLook:
			return err
		}
		// After the last take, a failed look keeps the count before it:
		// recovery ends either way.
		act, phase = recoverStep(phase, missing, time.Now().After(deadline))
	}
}

// recoverPhase is where recoverPending stands.
type recoverPhase int

const (
	recoverStart    recoverPhase = iota // before anything was taken
	recoverPolling                      // taken once; watching the consumer info
	recoverLastLook                     // past the bound, taken a last time
)

// recoverAction is what recoverPending does next.
type recoverAction int

const (
	recoverDone   recoverAction = iota // every pending message is ours: fetch as usual
	recoverTake                        // take what is queued for redelivery
	recoverWait                        // wait for more to lapse, then look again
	recoverGiveUp                      // what is still missing is another process's
)

// recoverStep decides recoverPending's next action from how many of the
// consumer's pending messages are not ours (missing) and whether the bound
// (ack_wait + margin) has passed, and the phase it leads to. Kept apart
// from the I/O so that the decisions are tested without a server.
func recoverStep(phase recoverPhase, missing int, pastBound bool) (recoverAction, recoverPhase) {
	switch {
	case missing <= 0:
		return recoverDone, phase
	case phase == recoverStart:
		return recoverTake, recoverPolling
	case phase == recoverLastLook:
		return recoverGiveUp, phase
	case pastBound:
		// Every message whose holder is gone has lapsed and is queued
		// now: take it a last time.
		return recoverTake, recoverLastLook
	default:
		return recoverWait, recoverPolling
	}
}

// missing is how many of the consumer's pending messages are not ours
// (neither held nor with the engine).
func (s *jsSource) missing(info *jetstream.ConsumerInfo) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Held deliveries count by sequence too, and not when the engine
	// holds another delivery of the message.
	held := make(map[uint64]struct{}, len(s.held))
	for _, d := range s.held {
		if s.outstanding[d.seq] == 0 {
			held[d.seq] = struct{}{}
		}
	}
	return notOurs(info.NumAckPending, len(held), len(s.outstanding))
}

// notOurs is how many of ackPending messages are neither held nor with
// the engine.
func notOurs(ackPending, held, outstanding int) int {
	return ackPending - held - outstanding
}

// takeRedeliveries takes what the consumer has queued for redelivery
// (messages up to floor) into held, with no-wait pulls of at most missing
// messages, until a pull brings fewer or a new message (the queue is
// then empty). The new messages a pull brings are held too.
func (s *jsSource) takeRedeliveries(cons jetstream.Consumer, floor uint64, missing, maxDeliver int) error {
	for missing > 0 {
		n := min(missing, s.set.js.fetchBatch)
		ds, err := s.fetch(cons, n, 0, maxDeliver)
		s.hold(ds)
		if err != nil {
			return err
		}
		old := 0
		for _, d := range ds {
			if d.seq <= floor {
				old++
			}
		}
		if old < n {
			return nil
		}
		missing -= old
	}
	return nil
}
