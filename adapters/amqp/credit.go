package amqp

import (
	"log/slog"
	"sync"
)

// creditIssuer is the part of *amqp.Receiver that flows credit.
type creditIssuer interface {
	IssueCredit(credit uint32) error
}

// linkCredit issues a receiver link's credit by hand (ReceiverOptions.Credit
// -1). go-amqp's own flow control gives a delivery's credit back only when
// the delivery settles; a message the source holds for a Nack's delay
// (lockhold) would then keep its credit for the delay, and at RabbitMQ
// 3.x's credit 1 the link would receive nothing behind it. linkCredit gives
// the credit back when a delivery settles or is held, with go-amqp's
// rule for when: once what is owed reaches what the broker still has.
type linkCredit struct {
	rcv creditIssuer
	log *slog.Logger

	mu   sync.Mutex
	out  int // issued and not yet used by a delivery
	owed int // deliveries settled or held whose credit is not issued yet
}

// issue grants n credit at once (a new link; copies, which are not settled).
func (c *linkCredit) issue(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantLocked(n)
}

// received records n deliveries that used credit.
func (c *linkCredit) received(n int) {
	c.mu.Lock()
	c.out = max(0, c.out-n)
	c.mu.Unlock()
}

// settled gives back the credit of one delivery settled or held.
func (c *linkCredit) settled() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owed++
	if c.owed < c.out {
		return // the broker still has as much credit: coalesce the flow
	}
	n := c.owed
	c.owed = 0
	if err := c.grantLocked(n); err != nil {
		// The link is ending: its next receive fails and reconnects.
		c.log.Debug("amqp source: issuing credit failed", "error", err)
	}
}

func (c *linkCredit) grantLocked(n int) error {
	if n <= 0 {
		return nil
	}
	if err := c.rcv.IssueCredit(uint32(n)); err != nil {
		return err
	}
	c.out += n
	return nil
}
