package amqp

import (
	"fmt"
	"strings"
)

// Replicas and group order. AMQP 1.0 gives a queue's messages to its
// consumers as their credit allows; whether the messages of one group-id
// stay with one consumer is up to the broker. RabbitMQ (3.x and 4.x) pins
// no group: two consumers on one queue (two qbridge replicas) each take a
// share of every group, and the group's order is lost. Its
// single-active-consumer queue argument (x-single-active-consumer, set when
// the queue is declared) keeps order instead: one consumer receives, the
// others wait and the next one takes over when it goes, after its
// unsettled messages went back to the queue. ActiveMQ Artemis pins each
// group-id to one consumer (message grouping). See docs/scaling.md.

// checkOrder tells, once per source, what replicas of this source do to
// group order on this broker, and refuses an address RabbitMQ 3.x cannot
// attach to a single-active-consumer queue.
func (s *source) checkOrder(d *dialed) error {
	if s.set.browse {
		return nil // a copy consumes nothing
	}
	rabbit := strings.HasPrefix(strings.ToLower(d.product), "rabbitmq")
	if s.set.singleActive && d.rabbit3 && strings.HasPrefix(s.set.address, "/queue/") {
		// The 3.x plugin declares /queue/NAME with no arguments, which a
		// queue declared with x-single-active-consumer refuses
		// (precondition-failed: inequivalent arg).
		return fmt.Errorf("single_active_consumer on %s: address the queue as %q (RabbitMQ 3.x declares %q again without the x-single-active-consumer argument and fails)",
			d.product, "/amq/queue/"+strings.TrimPrefix(s.set.address, "/queue/"), s.set.address)
	}
	if !s.orderTold.CompareAndSwap(false, true) {
		return nil
	}
	switch {
	case s.set.singleActive:
		s.log.Info("amqp source: single active consumer: one replica receives from the queue at a time, the others wait (group order holds across replicas)",
			"broker", d.product, "address", s.set.address)
	case rabbit:
		s.log.Warn("amqp source: RabbitMQ pins no message group to a consumer: a second consumer on this queue (another qbridge replica) splits every group and breaks its order; "+
			"declare the queue with x-single-active-consumer and set single_active_consumer = true, or run one qbridge per queue (docs/scaling.md)",
			"broker", d.product, "address", s.set.address)
	}
	return nil
}

// sacAttachHint explains RabbitMQ's refusal to attach to a queue declared
// with x-single-active-consumer through an address that declares it.
func sacAttachHint(err error, address string) error {
	if !strings.Contains(err.Error(), "x-single-active-consumer") || !strings.HasPrefix(address, "/queue/") {
		return err
	}
	return fmt.Errorf("%w (the queue has single active consumer: address it as %q and set single_active_consumer = true)",
		err, "/amq/queue/"+strings.TrimPrefix(address, "/queue/"))
}
