package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/logpace"
)

// maxPullWait bounds how long one waiting pull request stays open on the
// server, and so how long a nack or Close may wait for one (see waitPull).
const maxPullWait = time.Second

// pull is a waiting pull request running to its end.
type pull struct {
	done chan struct{}
	out  []*jsDelivery
	err  error
}

// Receive returns what the consumer has at once (one FetchNoWait); when it
// has nothing it waits up to fetch_wait for one message and then takes
// whatever else is there, so an idle source answers without delay and a
// busy one gets full batches in one round trip.
//
// Before it fetches anything new, it makes sure that the consumer's
// unacknowledged messages that are not ours (those of a killed process,
// or lost in a disconnect) came back first: see recoverPending.
func (s *jsSource) Receive(ctx context.Context, limit int) ([]driver.Delivery, error) {
	batch := min(max(limit, 1), s.set.js.fetchBatch)
	bo := backoff.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}
	failing := false
	for {
		if err := s.ctx.Err(); err != nil {
			return nil, errors.New("nats: source closed")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.quiet.Load() {
			return s.quietReceive(batch), nil
		}
		// What recoverPending holds waits for its end (in pinned mode it
		// also holds what came with a new pin).
		recovering := s.needRecover()
		cons, maxDeliver := s.consumer()
		if !recovering {
			if out := s.takeHeld(batch); len(out) > 0 {
				if len(out) < batch && s.pinnedMode() && !s.hasAbandoned() {
					// The pull that brought the pin brought one message.
					more, _ := s.fetch(cons, batch-len(out), 0, maxDeliver) // an error shows on the next call
					out = append(out, s.handOut(more)...)
				}
				return out, nil
			}
		}
		// A NAK is applied by the server after the pull that follows it
		// may be (it queues a consumer's acks): that pull then takes a
		// message after the NAKed one, which comes back behind it (a
		// group's order broken). Only after a NAK: a round trip.
		s.confirmNaksNow(ctx)
		if s.hasAbandoned() {
			// The pull a cancelled Receive left comes first: its
			// messages are the next ones.
			out, err := s.waitPull(ctx, cons, maxDeliver)
			if h := s.handOut(out); len(h) > 0 {
				return h, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				s.log.Debug("nats jetstream pull failed", "error", err) // the next fetch retries
			}
			continue
		}
		var err error
		if recovering {
			if err = s.recoverPending(ctx, cons, maxDeliver); err == nil {
				s.mu.Lock()
				s.recover = false
				s.mu.Unlock()
				continue
			}
		} else {
			var out []*jsDelivery
			start := time.Now()
			out, err = s.fetch(cons, batch, 0, maxDeliver)
			if len(out) == 0 && err == nil {
				out, err = s.waitPull(ctx, cons, maxDeliver)
				if ctx.Err() != nil && len(out) == 0 {
					return nil, ctx.Err()
				}
				if len(out) > 0 && batch > 1 {
					more, _ := s.fetch(cons, batch-1, 0, maxDeliver) // an error shows on the next call
					out = append(out, more...)
				}
			}
			// A pull can end without an error and without reaching the
			// server while the connection is still down (pinned mode): not
			// a recovery yet.
			if err == nil && failing && s.conn.ready() == nil {
				s.log.Info("nats jetstream fetch recovered")
				failing = false
				bo.Reset()
			}
			if h := s.handOut(out); len(h) > 0 {
				return h, nil
			}
			if err == nil {
				// A pull the server ends at once without messages (a status
				// the client does not report as an error) must not spin.
				if time.Since(start) < 20*time.Millisecond {
					s.pause(ctx, 50*time.Millisecond)
				}
				continue
			}
		}
		if ctx.Err() != nil {
			// Whatever recoverPending collected is handed out: the
			// engine settles it in order (or the broker redelivers it).
			// In pinned mode it stays held until the recovery ends (or
			// Close nacks it): a previous pinned client's messages may
			// still come back ahead of it.
			if !s.pinnedMode() {
				if out := s.takeHeld(batch); len(out) > 0 {
					return out, nil
				}
			}
			return nil, ctx.Err()
		}
		if s.ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return nil, fmt.Errorf("nats: fetch: %w", err)
		}
		if consumerGone(ctx, cons, err) {
			s.log.Warn("nats jetstream consumer is gone; setting it up again", "durable", s.set.js.durable, "error", err)
			s.dropHeld()
			if err := s.setup(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if !failing {
			s.log.Warn("nats jetstream fetch failed; retrying", "error", err)
			failing = true
		}
		s.pause(ctx, bo.Next())
	}
}

// waitPull waits (up to fetch_wait, at most maxPullWait) for one message.
// The pull request is never abandoned on the server: a request whose
// client went away stays in the consumer's waiting list until it expires,
// and a message nacked meanwhile (the engine nacks what it holds when it
// stops) would be sent to it and lost until ack_wait, or put back at the
// end of the redelivery queue behind the later messages of its group. So
// when ctx ends first, waitPull returns at once but the pull runs on:
// Nack waits for its end, the next Receive takes its messages, and Close
// nacks them.
func (s *jsSource) waitPull(ctx context.Context, cons jetstream.Consumer, maxDeliver int) ([]*jsDelivery, error) {
	s.mu.Lock()
	p := s.abandoned
	s.abandoned = nil
	s.mu.Unlock()
	if p == nil {
		p = &pull{done: make(chan struct{})}
		go func() {
			defer close(p.done)
			p.out, p.err = s.fetch(cons, 1, min(s.set.js.fetchWait, maxPullWait), maxDeliver)
		}()
	}
	select {
	case <-p.done:
		return p.out, p.err
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	s.mu.Lock()
	s.abandoned = p
	s.mu.Unlock()
	return nil, ctx.Err()
}

func (s *jsSource) hasAbandoned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned != nil
}

// waitAbandoned waits until the pull Receive left is over on the server,
// so that a nack does not hand the message to it.
func (s *jsSource) waitAbandoned(ctx context.Context) {
	s.mu.Lock()
	p := s.abandoned
	s.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

// handOut counts deliveries as the engine's until they are settled. A copy
// of a message the engine acked or terminated is left out (see settled).
func (s *jsSource) handOut(ds []*jsDelivery) []driver.Delivery {
	out := make([]driver.Delivery, 0, len(ds))
	s.mu.Lock()
	if s.outstanding == nil {
		s.outstanding = make(map[uint64]int)
	}
	ds, dropped := s.dropGoneLocked(ds)
	s.forgetDelayedLocked(ds)
	for _, d := range ds {
		d.handed.Store(true)
		s.outstanding[d.seq]++
		out = append(out, d)
	}
	n := len(s.outstanding)
	s.mu.Unlock()
	s.ackCopies(dropped)
	if len(ds) > 0 && s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("nats jetstream: handed to the engine", "seqs", deliverySeqs(ds), "outstanding", n)
	}
	return out
}

// hold adds fetched deliveries to what Receive holds, but for copies of a
// message the engine acked or terminated (see settled).
func (s *jsSource) hold(ds []*jsDelivery) {
	s.mu.Lock()
	kept, dropped := s.dropGoneLocked(ds)
	s.forgetDelayedLocked(kept)
	s.held = append(s.held, kept...)
	s.mu.Unlock()
	s.ackCopies(dropped)
}

// dropGoneLocked splits off the deliveries of messages the engine acked
// or terminated: the server no longer has them pending, so they are
// neither the engine's work nor part of the consumer's NumAckPending. s.mu
// is held.
func (s *jsSource) dropGoneLocked(ds []*jsDelivery) (kept, dropped []*jsDelivery) {
	// Copies are rare: the common batch is returned as it is, with no
	// allocation (this runs for every batch handed out).
	first := slices.IndexFunc(ds, func(d *jsDelivery) bool { return s.gone.has(d.seq) })
	if first < 0 {
		return ds, nil
	}
	kept = append(make([]*jsDelivery, 0, len(ds)), ds[:first]...)
	for _, d := range ds[first:] {
		if s.gone.has(d.seq) {
			dropped = append(dropped, d)
		} else {
			kept = append(kept, d)
		}
	}
	return kept, dropped
}

// ackCopies acks the copies dropGoneLocked or settled left out: the
// engine settled the message, after the sink took it or as a dead letter,
// so this ack changes nothing on a server that has the engine's; on one
// that lost it (its consumer state was not written before it died), it
// does what the engine's did instead of letting the copy come back again.
func (s *jsSource) ackCopies(ds []*jsDelivery) {
	for _, d := range ds {
		d.settled.Store(true)
		s.log.Debug("nats jetstream: a copy of a message already settled; acked, not handed out", "seq", d.seq)
		if err := d.m.Ack(); err != nil {
			s.log.Debug("nats jetstream: ack of a copy failed", "seq", d.seq, "error", err)
		}
	}
}

// settled removes one delivery of seq from what the engine holds. gone: it
// was acked or terminated. The server then forgets the message whichever
// of its deliveries the settlement names (server/consumer.go processAckMsg
// goes by stream sequence), so no other copy of it counts as ours any
// more: not one the engine holds too (the server redelivered it while the
// engine had it), nor one held for a recovery, which is dropped. Counted as
// ours, such a copy made missing come out one short, and a pinned recovery
// end while a previous pinned client's message was still out: the later
// messages of its group went first. A copy that arrives afterwards (the
// server sent it before it had the ack) is dropped too (gone).
func (s *jsSource) settled(seq uint64, gone bool) {
	s.mu.Lock()
	if !gone {
		if s.outstanding[seq] <= 1 {
			delete(s.outstanding, seq)
		} else {
			s.outstanding[seq]--
		}
		s.mu.Unlock()
		return
	}
	delete(s.outstanding, seq)
	s.gone.add(seq)
	var copies []*jsDelivery
	s.held = slices.DeleteFunc(s.held, func(d *jsDelivery) bool {
		if d.seq == seq {
			copies = append(copies, d)
			return true
		}
		return false
	})
	s.mu.Unlock()
	s.ackCopies(copies)
}

// notGone forgets that seq was acked or terminated: the settlement failed,
// so the server may still have the message, and redeliver it.
func (s *jsSource) notGone(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone.remove(seq)
}

// goneKeep is how many settled sequences seqSet remembers at least: a
// copy the server sent before it had the ack arrives within moments.
const goneKeep = 4096

// seqSet holds the most recent stream sequences added to it: between
// goneKeep and twice as many, in two generations.
type seqSet struct{ cur, prev map[uint64]struct{} }

func (g *seqSet) add(seq uint64) {
	if g.cur == nil {
		g.cur = make(map[uint64]struct{})
	}
	g.cur[seq] = struct{}{}
	if len(g.cur) >= goneKeep {
		g.prev, g.cur = g.cur, make(map[uint64]struct{})
	}
}

func (g *seqSet) has(seq uint64) bool {
	_, a := g.cur[seq]
	_, b := g.prev[seq]
	return a || b
}

func (g *seqSet) remove(seq uint64) {
	delete(g.cur, seq)
	delete(g.prev, seq)
}

// outstandingCount is how many messages the engine holds (for logs).
func (s *jsSource) outstandingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.outstanding)
}

// deliverySeqs lists stream sequences and delivery counts for debug logs.
func deliverySeqs(ds []*jsDelivery) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d", d.seq)
		if d.msg != nil && d.msg.Source.DeliveryCount > 1 {
			fmt.Fprintf(&b, "/%d", d.msg.Source.DeliveryCount)
		}
	}
	return b.String()
}

// pause waits d, or less when ctx ends or the source closes (the loop
// then sees it).
func (s *jsSource) pause(ctx context.Context, d time.Duration) {
	_ = backoff.Sleep(ctx, s.ctx.Done(), nil, d)
}

// consumerGone tells whether a fetch failed because the consumer (or its
// stream) no longer exists: a pull to a deleted consumer gets "no responders".
func consumerGone(ctx context.Context, cons jetstream.Consumer, err error) bool {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrStreamNotFound) {
		return true
	}
	if !errors.Is(err, nats.ErrNoResponders) {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, ierr := cons.Info(ictx)
	return errors.Is(ierr, jetstream.ErrConsumerNotFound) || errors.Is(ierr, jetstream.ErrStreamNotFound)
}

// fetch runs one pull request for up to n messages to its end: it waits
// up to wait for them, or with wait 0 takes only what is there. It never
// cancels a pull on the client side (see waitPull): it returns when the
// server ended the request.
//
// In pinned mode every pull names the priority group, and nats.go adds the
// pin it was given. Such a pull cannot be a no-wait one (nats.go's
// FetchNoWait takes no group, and the server refuses a pull without one),
// so "what is there" is a waiting pull for no more than the consumer's
// NumPending as of the last message: the server fills it at once. A
// source that is not pinned takes nothing this way (waitPull stands by).
func (s *jsSource) fetch(cons jetstream.Consumer, n int, wait time.Duration, maxDeliver int) ([]*jsDelivery, error) {
	s.mu.Lock()
	group, pinned, pending := s.group, s.pinID != "", s.lastPending
	s.mu.Unlock()
	var opts []jetstream.FetchOpt
	if group != "" {
		opts = append(opts, jetstream.FetchPriorityGroup(group))
		if wait == 0 {
			if !pinned || pending == 0 {
				return nil, nil
			}
			n = int(min(uint64(n), pending))
			wait = maxPullWait
		}
	}
	s.pullStarts.Add(1)
	s.pulls.Add(1)
	defer s.pulls.Add(-1)
	var (
		mb  jetstream.MessageBatch
		err error
	)
	if wait > 0 {
		mb, err = cons.Fetch(n, append(opts, jetstream.FetchMaxWait(wait))...)
	} else {
		mb, err = cons.FetchNoWait(n)
	}
	if err != nil {
		s.pullFailed(err)
		return nil, err
	}
	var (
		out []*jsDelivery
		pin string
	)
	for m := range mb.Messages() {
		s.delivered.Add(1)
		if p := m.Headers().Get(pinIDHeader); p != "" {
			pin = p
		}
		if d := s.wrap(m, maxDeliver); d != nil {
			out = append(out, d)
		}
	}
	err = mb.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		err = nil // the pull's own expiry
	}
	s.pullFailed(err)
	if group != "" {
		return s.trackPin(out, pin, err)
	}
	return out, err
}

// pullFailed makes the next Receive recover first (recoverPending) when a
// pull ended in an error: the server may have sent it messages that never
// arrived (a pull cut off by "server shutdown" while the connection still
// stood), and they come back only after ack_wait, behind the later ones
// the next pull would bring. A reconnect does the same (needRecover); this
// covers the pulls that fail before the connection does, or without it.
func (s *jsSource) pullFailed(err error) {
	if err == nil || isPinMismatch(err) {
		return
	}
	s.mu.Lock()
	s.recover = true
	s.mu.Unlock()
}

// wrap decodes m; natsmap fills the source facts (protocol, subject, stream
// sequence, stored time, delivery count) from the JetStream metadata. A
// message natsmap refuses still becomes a delivery, with what could be read
// and its DecodeError, so the engine dead-letters it.
func (s *jsSource) wrap(m jetstream.Msg, maxDeliver int) *jsDelivery {
	meta, err := m.Metadata()
	if err != nil {
		s.log.Error("nats: message without JetStream metadata; terminating it", "subject", m.Subject(), "error", err)
		_ = m.TermWithReason("qbridge: no JetStream metadata")
		return nil
	}
	// natsmap leaves the pin header of a JetStream delivery out: it belongs
	// to the delivery, not to the message.
	raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	d := &jsDelivery{
		m: m, log: s.log, src: s, seq: meta.Sequence.Stream, pending: meta.NumPending,
		last: maxDeliver > 0 && meta.NumDelivered >= uint64(maxDeliver), maxDeliver: maxDeliver,
	}
	d.touchedAt.Store(time.Now().UnixNano())
	d.msg, d.decodeErr = s.codec.decodeJS(raw, meta)
	if d.decodeErr != nil {
		s.undecodableLog.Do(func(leftOut int64) {
			s.log.Error("nats: received a message that cannot be decoded; it must be dead-lettered",
				"subject", m.Subject(), "stream_seq", meta.Sequence.Stream, "error", d.decodeErr, logpace.LeftOutKey, leftOut)
		})
		d.msg = s.codec.decodeRaw(raw, meta)
	}
	applySubjectGroup(d.msg, m.Subject(), s.set.groupToken)
	return d
}
