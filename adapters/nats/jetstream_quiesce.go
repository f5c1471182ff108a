package nats

import (
	"context"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
)

// Quiesce stops the source from pulling before it closes (qbridge migrate's
// stop): what it still has and never handed to the engine, the messages of
// a pull a cancelled Receive left, is handed out by Receive instead of
// being NAKed unseen by Close, so that the job records them as receives
// that wrote nothing (their delivery counts rose). The channel is closed
// once that pull is over on the server. A Nack at once of such a delivery
// gives it back to the source, and Close NAKs it with the rest, in stream
// order: the job hands its held deliveries back in parallel, and a
// JetStream consumer redelivers in the order of the NAKs.
func (s *jsSource) Quiesce() <-chan struct{} {
	s.quietOnce.Do(func() {
		s.drained = make(chan struct{})
		s.quiet.Store(true)
		go func() {
			defer close(s.drained)
			ctx, cancel := context.WithTimeout(s.ctx, maxPullWait+2*time.Second)
			defer cancel()
			s.waitAbandoned(ctx)
		}()
	})
	return s.drained
}

// quietReceive is Receive once quiesced: what the source holds, then what
// the pull a cancelled Receive left brought once it is over, and no pull.
func (s *jsSource) quietReceive(n int) []driver.Delivery {
	s.mu.Lock()
	if p := s.abandoned; p != nil {
		select {
		case <-p.done:
			s.held = append(s.held, p.out...)
			s.abandoned = nil
		default:
		}
	}
	take := s.held[:min(n, len(s.held))]
	s.held = s.held[len(take):]
	s.mu.Unlock()
	out := s.handOut(take)
	for _, d := range out {
		d.(*jsDelivery).leftover = true
	}
	return out
}

// giveBack takes a leftover delivery back for Close to NAK in stream order.
func (s *jsSource) giveBack(d *jsDelivery) {
	s.mu.Lock()
	s.held = append(s.held, d)
	s.mu.Unlock()
}
