package amqp

import (
	"sync"
	"sync/atomic"
)

// redeliveries counts, by message-id, how often the source handed a
// message back. A broker that takes no Modify (RabbitMQ 3.x: Nack
// releases) does not raise a released message's delivery-count, so every
// redelivery said DeliveryCount 1, and the engine's backoff, which grows
// with it, stayed at its first step: a message nothing takes came back
// five times a second for ever. The source reports the larger of the
// broker's count and its own.
type redeliveries struct {
	any atomic.Bool // n has held an entry: the receive path looks up only then

	mu sync.Mutex
	n  map[string]int
}

// maxRedeliveries bounds the ids counted: past it, an arbitrary one is
// forgotten (its next delivery counts from the broker's count again).
const maxRedeliveries = 10000

// handedBack counts one hand-back of the message id.
func (r *redeliveries) handedBack(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	if _, ok := r.n[id]; !ok && len(r.n) >= maxRedeliveries {
		for k := range r.n {
			delete(r.n, k)
			break
		}
	}
	r.n[id]++
	r.mu.Unlock()
	r.any.Store(true)
}

// deliveryCount is the delivery count to report for id, whose broker count
// is broker.
func (r *redeliveries) deliveryCount(id string, broker int) int {
	if id == "" || !r.any.Load() {
		return broker
	}
	r.mu.Lock()
	n := r.n[id]
	r.mu.Unlock()
	return max(broker, n+1)
}

// settled forgets id: the message left the queue.
func (r *redeliveries) settled(id string) {
	if id == "" || !r.any.Load() {
		return
	}
	r.mu.Lock()
	delete(r.n, id)
	r.mu.Unlock()
}
