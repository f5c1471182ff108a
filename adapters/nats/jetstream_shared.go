package nats

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
)

var _ driver.Warner = (*jsSource)(nil)

// A consumer without a pinned priority group hands its messages to every
// client that pulls: two qbridge on one durable consumer interleave each
// group's messages between them, and per-group order is lost (measured:
// 13,942 of 50,000 out of order with no fault at all). watchShared looks
// for another client in the consumer info and reports it loudly: an error
// in the log and among /readyz's warnings (driver.Warner), for as long as
// it lasts.
//
// Two signs, both from the consumer info:
//   - deliveries: the consumer's delivery count (Delivered.Consumer, every
//     delivery and redelivery) grows by more than this source received,
//     beyond what one pull may have on the wire: another client got them.
//     This shows a busy client, whose pulls are served at once.
//   - waiting pulls: more pull requests wait on the consumer (NumWaiting)
//     than this source has open, on every look for 2 s (a pull lasts at
//     most maxPullWait, so one left by this source's previous process is
//     gone by then). This shows an idle client.

// sharedErr is what Warnings reports while another client is seen.
type sharedErr struct{ msg string }

func (e *sharedErr) Error() string { return e.msg }

// shareObs is one look at the consumer.
type shareObs struct {
	at         time.Time
	epoch      uint64 // changes when the consumer was set up again or the connection came back
	delivered  uint64 // the consumer's Delivered.Consumer
	received   uint64 // what this source's pulls brought, read after the info
	waiting    int    // the consumer's NumWaiting
	ours       int    // this source's pulls open around the info request
	oursExact  bool   // no pull of ours started during the info request
	pushBound  bool
	inFlight   uint64 // most messages one pull of ours may have on the wire
	waitWindow time.Duration
}

// shareState is what watchShared keeps between looks.
type shareState struct {
	epoch        uint64
	base         bool
	deficit      int64     // delivered - received at the last look
	waitingSince time.Time // first of the looks in a row that saw a foreign waiting pull
}

// observe returns a sign of another client in o, or "". Kept apart from
// the I/O so that it is tested by table.
func (st *shareState) observe(o shareObs) string {
	if o.pushBound {
		return "a push subscriber is bound to it"
	}
	sign := ""
	deficit := int64(o.delivered) - int64(o.received)
	if !st.base || st.epoch != o.epoch {
		// The first look, or a new consumer or connection: what was
		// delivered before is nobody's business.
		*st = shareState{epoch: o.epoch, base: true}
	} else if grew := deficit - st.deficit; grew > int64(o.inFlight) {
		sign = fmt.Sprintf("%d deliveries went to another client", grew)
	}
	st.deficit = deficit
	switch {
	case !o.oursExact:
		// A pull of ours started meanwhile: this look cannot tell.
	case o.waiting > o.ours:
		if st.waitingSince.IsZero() {
			st.waitingSince = o.at
		}
		if sign == "" && o.at.Sub(st.waitingSince) >= o.waitWindow {
			sign = fmt.Sprintf("%d pull requests wait on it, %d of them this source's", o.waiting, o.ours)
		}
	default:
		st.waitingSince = time.Time{}
	}
	return sign
}

// shareEvery is how often watchShared looks.
func shareEvery(ackWait time.Duration) time.Duration {
	return min(5*time.Second, max(ackWait/2, 250*time.Millisecond))
}

// sharedClearAfter is how many clean looks in a row end the report.
const sharedClearAfter = 10

// watchShared looks at the consumer every shareEvery while the source is
// open, when it has no pinned priority group (in pinned mode the server
// itself lets one client receive).
func (s *jsSource) watchShared() {
	every := shareEvery(s.set.js.ackWait)
	t := time.NewTicker(every)
	defer t.Stop()
	var (
		st       shareState
		clean    int
		warn     *logpace.Pacer // new at each report's start: its first line is not held back
		epoch    uint64
		lastCons jetstream.Consumer
	)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		cons, group := s.cons, s.group
		s.mu.Unlock()
		if group != "" || cons == nil {
			st, clean = shareState{}, 0
			s.shared.Store(nil)
			continue
		}
		if cons != lastCons {
			lastCons = cons
			epoch++
		}
		startsBefore := s.pullStarts.Load()
		ours := s.pulls.Load()
		ctx, cancel := context.WithTimeout(s.ctx, every)
		info, err := cons.Info(ctx)
		cancel()
		if err != nil {
			continue // the fetch loop reports a broken connection or consumer
		}
		o := shareObs{
			at:         time.Now(),
			epoch:      epoch<<32 | s.conn.reconnects.Load(),
			delivered:  info.Delivered.Consumer,
			received:   s.delivered.Load(),
			waiting:    info.NumWaiting,
			ours:       int(max(ours, s.pulls.Load())),
			oursExact:  s.pullStarts.Load() == startsBefore,
			pushBound:  info.PushBound,
			inFlight:   uint64(s.set.js.fetchBatch),
			waitWindow: 2 * maxPullWait,
		}
		sign := st.observe(o)
		if sign == "" {
			clean++
			if clean >= sharedClearAfter && s.shared.Load() != nil {
				s.shared.Store(nil)
				s.log.Info("nats jetstream: no other client seen on the consumer any more", "durable", s.set.js.durable)
			}
			continue
		}
		clean = 0
		e := &sharedErr{msg: fmt.Sprintf("nats: another client consumes durable %q of stream %q (%s): "+
			"its messages are split between the clients and per-group order is lost; run one qbridge per consumer, "+
			"or give the consumer a pinned priority group so that replicas fail over (docs/scaling.md)",
			s.set.js.durable, s.set.js.stream, sign)}
		if s.shared.Swap(e) == nil || warn == nil {
			warn = logpace.New(1, time.Minute)
		}
		warn.Do(func(leftOut int64) {
			s.log.Error(e.msg, "durable", s.set.js.durable, logpace.LeftOutKey, leftOut)
		})
	}
}
