package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// pinIDHeader is the header nats-server puts on each message a consumer
// with the pinned-client policy delivers: the pin of the client it went to
// (server/consumer.go, JSPullRequestNatsPinId).
const pinIDHeader = "Nats-Pin-Id"

// Pinned mode: failover between replicas with the server's own mechanism.
//
// A consumer with a priority group and the pinned-client policy
// (nats-server 2.11+, ADR-42) delivers to one client at a time: the first
// pull request of the group gets a pin id, every message carries it, and
// the server serves only pull requests that carry it. The other clients'
// requests wait on the server, unanswered, until the pinned client sends no
// request for the consumer's pin timeout (PinnedTTL): the server then pins
// the next waiting request. So replicas stand by and one of them takes over
// when the receiving one dies or stalls.
//
// Taking over keeps each group in order the same way a restart does (see
// recoverPending): the new pinned client holds what it gets until every
// unacknowledged message of the consumer is its own, then hands it out in
// stream order. Unlike a restart it waits with no bound: the only other
// clients the server delivered to are earlier pinned ones, and what one of
// them still holds (a stalled replica keeps its messages locked with
// InProgress) is either acknowledged by it or comes back.

// pinMode decides from the consumer's configuration whether this source
// runs in pinned mode, and returns the priority group its pulls name.
func (s *jsSource) pinMode(have jetstream.ConsumerConfig, created bool) (string, error) {
	j := s.set.js
	switch have.PriorityPolicy {
	case jetstream.PriorityPolicyPinned:
		g := j.priorityGroup
		if !slices.Contains(have.PriorityGroups, g) {
			if j.priorityGroupSet || len(have.PriorityGroups) == 0 {
				return "", fmt.Errorf("nats: consumer %q has priority groups %v, not jetstream.priority_group %q", j.durable, have.PriorityGroups, g)
			}
			g = have.PriorityGroups[0]
		}
		s.log.Info("nats jetstream consumer is pinned: one client receives at a time, the others stand by",
			"durable", j.durable, "priority_group", g, "pin_timeout", have.PinnedTTL)
		return g, nil
	case jetstream.PriorityPolicyNone:
		switch {
		case !j.pinned:
		case created:
			s.log.Warn("nats: the server created the consumer without a pinned priority group (it is older than nats-server 2.11): run one qbridge per consumer, a second one breaks per-group order",
				"durable", j.durable)
		default:
			s.log.Warn("nats: the existing consumer has no pinned priority group: run one qbridge per consumer, a second one breaks per-group order; "+
				"give it priority_policy pinned_client (or delete it and let qbridge create it) to run replicas that fail over (docs/scaling.md)",
				"durable", j.durable)
		}
		return "", nil
	default:
		return "", fmt.Errorf("nats: consumer %q has priority policy %s; qbridge reads consumers with none or pinned_client", j.durable, policyName(have.PriorityPolicy))
	}
}

func policyName(p jetstream.PriorityPolicy) string {
	if b, err := p.MarshalJSON(); err == nil {
		return string(b)
	}
	return fmt.Sprint(int(p))
}

// pinnedMode reports whether the consumer has a pinned priority group.
func (s *jsSource) pinnedMode() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group != ""
}

// pinned returns the priority group and this source's pin ("" standing by).
func (s *jsSource) pinned() (group, pin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group, s.pinID
}

// trackPin follows the pin after a pull of a pinned consumer. Messages that
// come with a pin this source did not have are the first ones after the
// server pinned it: they are held and a recovery runs before anything is
// handed out. A pull refused for its pin (the server pinned another
// client) means this source stands by again.
func (s *jsSource) trackPin(out []*jsDelivery, pin string, err error) ([]*jsDelivery, error) {
	if isPinMismatch(err) {
		s.losePin("the server pinned another client")
		return out, nil
	}
	if len(out) == 0 {
		return out, err
	}
	s.mu.Lock()
	s.lastPending = out[len(out)-1].pending
	if pin == "" || pin == s.pinID {
		s.mu.Unlock()
		return out, err
	}
	s.pinID = pin
	s.recover = true
	kept, copies := s.dropGoneLocked(out)
	s.held = append(s.held, kept...)
	s.mu.Unlock()
	s.ackCopies(copies)
	s.log.Info("nats jetstream: the server pinned this client: it receives now, once the messages of the previous pinned client are settled or back",
		"durable", s.set.js.durable, "priority_group", s.group)
	return nil, err
}

func isPinMismatch(err error) bool { return errors.Is(err, jetstream.ErrPinIDMismatch) }

// losePin makes this source stand by: what it holds and never handed to
// the engine goes back to the server in stream order, for the next pinned
// client. What the engine has is settled by it as usual.
func (s *jsSource) losePin(reason string) {
	s.mu.Lock()
	had := s.pinID
	s.pinID = ""
	s.lastPending = 0
	s.recover = false
	left := s.held
	s.held = nil
	s.mu.Unlock()
	if had == "" && len(left) == 0 {
		return
	}
	s.log.Info("nats jetstream: no longer the pinned client; standing by", "durable", s.set.js.durable,
		"reason", reason, "handed_back", len(left))
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	s.nackInOrder(ctx, left, nil)
}

// holdCap bounds what a pinned recovery holds on a consumer whose
// max_ack_pending does not (-1): past it, each poll pulls one message,
// which is enough to keep the pin.
const holdCap = 10000

// recoverPinned is recoverPending for a source the server just pinned: it
// fetches nothing to hand out until every unacknowledged message of the
// consumer is its own. Its waiting pulls keep the pin (each one restarts
// the pin timer) and take first what the server redelivers; what they
// bring is held, and handed out in stream order once the recovery ends.
func (s *jsSource) recoverPinned(ctx context.Context, cons jetstream.Consumer, maxDeliver int) error {
	group, pin := s.pinned()
	if pin == "" {
		return nil
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	ackWait := info.Config.AckWait
	poll := min(250*time.Millisecond, max(ackWait/20, 20*time.Millisecond))
	start := time.Now()
	var announced, warned time.Time
	for {
		if other := pinnedClient(info, group); other != "" && other != pin {
			s.losePin("the consumer names another pinned client")
			return nil
		}
		missing := s.missing(info)
		if missing <= 0 {
			s.mu.Lock()
			slices.SortStableFunc(s.held, func(a, b *jsDelivery) int { return cmp.Compare(a.seq, b.seq) })
			n := len(s.held)
			s.mu.Unlock()
			if !announced.IsZero() {
				s.log.Info("nats jetstream recovery done", "durable", s.set.js.durable,
					"took", time.Since(start).Round(time.Millisecond), "held", n,
					"ack_pending", info.NumAckPending, "outstanding", s.outstandingCount())
			}
			return nil
		}
		switch {
		case announced.IsZero():
			announced, warned = time.Now(), time.Now()
			s.log.Info("nats jetstream consumer has unacknowledged messages of a previous pinned client; fetching nothing new until they are settled or back",
				"durable", s.set.js.durable, "ack_pending", info.NumAckPending, "not_ours", missing)
		case time.Since(warned) > max(ackWait, time.Second):
			warned = time.Now()
			s.log.Warn("nats jetstream: still waiting for the unacknowledged messages of a previous pinned client (a stalled replica that keeps them locked); nothing is handed out until they are settled or back",
				"durable", s.set.js.durable, "not_ours", missing, "waiting", time.Since(start).Round(time.Second))
		}
		s.mu.Lock()
		n := min(s.set.js.fetchBatch, missing)
		if len(s.held) >= holdCap {
			n = 1
		}
		s.mu.Unlock()
		ds, err := s.fetch(cons, n, poll, maxDeliver)
		s.hold(ds)
		s.mu.Lock()
		lost := s.pinID != pin
		held := len(s.held)
		s.mu.Unlock()
		s.log.Debug("nats jetstream pinned recovery: polled", "ack_pending", info.NumAckPending, "not_ours", missing,
			"fetched", deliverySeqs(ds), "held", held, "outstanding", s.outstandingCount(), "pin_changed", lost, "error", err)
		if lost {
			// trackPin handed back what was held; a new pin starts a
			// new recovery.
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if info, err = cons.Info(ctx); err != nil {
			return err
		}
	}
}

// pinnedClient is the pin the consumer info shows for group, or "".
func pinnedClient(info *jetstream.ConsumerInfo, group string) string {
	for _, g := range info.PriorityGroups {
		if g.Group == group {
			return g.PinnedClientID
		}
	}
	return ""
}

// releasePin unpins this source when it closes, so that a standby takes
// over at once instead of after the pin timeout. Only a pin the consumer
// still shows as ours is released.
func (s *jsSource) releasePin(ctx context.Context) {
	group, pin := s.pinned()
	if pin == "" {
		return
	}
	s.mu.Lock()
	cons, st := s.cons, s.stream
	s.mu.Unlock()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(ictx)
	if err == nil && pinnedClient(info, group) != pin {
		return
	}
	if err == nil {
		err = st.UnpinConsumer(ictx, s.set.js.durable, group)
	}
	if err != nil {
		s.log.Warn("nats jetstream: could not release the pin; a standby takes over after the pin timeout", "durable", s.set.js.durable, "error", err)
		return
	}
	s.log.Info("nats jetstream: released the pin; a standby takes over", "durable", s.set.js.durable, "priority_group", group)
}
