package amqp

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/go-amqp"
)

// errPeerSettled: the broker settled the delivery on its own before the
// engine did (RabbitMQ's consumer timeout releasing a message, a broker
// expiring or purging it). Settling it again would name a delivery the
// broker no longer knows.
var errPeerSettled = errors.New("amqp: the broker already settled this delivery")

// peerSettlements tracks a link's unsettled deliveries by delivery tag so
// that a disposition the broker sends on its own (go-amqp's
// OnDeliveryStateChanged) reaches the delivery it concerns, whether the
// engine holds it already or it still waits in the link's prefetch queue.
type peerSettlements struct {
	mu    sync.Mutex
	live  map[string]*delivery          // handed to the engine, not settled yet
	early map[string]amqp.DeliveryState // settled by the broker before deliver saw it
}

func newPeerSettlements() *peerSettlements {
	return &peerSettlements{live: map[string]*delivery{}, early: map[string]amqp.DeliveryState{}}
}

// track registers d, unless the broker settled it already; then it reports
// the state the broker chose and d must not be handed over.
func (p *peerSettlements) track(d *delivery) (amqp.DeliveryState, bool) {
	tag := string(d.msg.DeliveryTag)
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.early[tag]; ok {
		delete(p.early, tag)
		return st, true
	}
	p.live[tag] = d
	d.peers = p
	return nil, false
}

// forget drops d once the engine settles it.
func (p *peerSettlements) forget(d *delivery) {
	p.mu.Lock()
	if p.live[string(d.msg.DeliveryTag)] == d {
		delete(p.live, string(d.msg.DeliveryTag))
	}
	p.mu.Unlock()
}

// settledByPeer records the broker's disposition of msg; it reports whether
// a delivery the engine holds was concerned. It runs on go-amqp's mux
// goroutine, so it only takes a short lock.
func (p *peerSettlements) settledByPeer(msg *amqp.Message, state amqp.DeliveryState) bool {
	tag := string(msg.DeliveryTag)
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.live[tag]; ok {
		delete(p.live, tag)
		d.peerState.Store(&state)
		return true
	}
	p.early[tag] = state
	return false
}

// onPeerSettled is the receiver's OnDeliveryStateChanged: it counts and
// logs a disposition the broker sent on its own.
func (s *source) onPeerSettled(p *peerSettlements) func(*amqp.Message, amqp.DeliveryState) {
	return func(msg *amqp.Message, state amqp.DeliveryState) {
		if _, ok := state.(*amqp.StateReceived); ok {
			return // not an outcome: the delivery stays unsettled
		}
		held := p.settledByPeer(msg, state)
		n := s.peerSettled.Add(1)
		args := []any{"address", s.set.address, "state", stateName(state), "delivery_tag", hex.EncodeToString(msg.DeliveryTag),
			"held_by_engine", held, "peer_settled_total", n}
		if msg.Properties != nil && msg.Properties.MessageID != nil {
			args = append(args, "message_id", fmt.Sprint(msg.Properties.MessageID))
		}
		s.log.Warn("amqp source: the broker settled a delivery on its own (e.g. a consumer timeout); the engine's settlement of it is skipped", args...)
	}
}

// peerSettledErr is what a settlement of a delivery the broker settled
// already returns: nil when the broker's outcome is what op wanted (a Nack
// of a released message), else why op did not happen.
func peerSettledErr(op string, state amqp.DeliveryState, wantReturn bool) error {
	switch state.(type) {
	case *amqp.StateReleased, *amqp.StateModified:
		if wantReturn {
			return nil // handed back, as asked
		}
		return fmt.Errorf("amqp: %s: %w (%s): it goes back to the queue and is delivered again", op, errPeerSettled, stateName(state))
	}
	return fmt.Errorf("amqp: %s: %w (%s)", op, errPeerSettled, stateName(state))
}

func stateName(state amqp.DeliveryState) string {
	switch s := state.(type) {
	case *amqp.StateAccepted:
		return "accepted"
	case *amqp.StateReleased:
		return "released"
	case *amqp.StateModified:
		return "modified"
	case *amqp.StateRejected:
		if s.Error != nil {
			return "rejected: " + s.Error.Error()
		}
		return "rejected"
	case nil:
		return "settled"
	}
	return fmt.Sprintf("%T", state)
}
