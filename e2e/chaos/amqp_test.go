package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/internal/testenv"
)

// amqpSender sends to one address over a connection it opens again after
// a failed send (the publisher's 3 s deadline can end a send midway, and a
// fresh connection is cheaper than finding out what state that left).
type amqpSender struct {
	url, addr string
	mu        sync.Mutex
	conn      *amqp.Conn
	snd       *amqp.Sender
}

func (s *amqpSender) send(ctx context.Context, msgs []msgRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snd == nil {
		conn, err := amqp.Dial(ctx, s.url, nil)
		if err != nil {
			return err
		}
		sess, err := conn.NewSession(ctx, nil)
		if err == nil {
			s.snd, err = sess.NewSender(ctx, s.addr, nil)
		}
		if err != nil {
			_ = conn.Close()
			return err
		}
		s.conn = conn
	}
	for _, r := range msgs {
		m := amqp.NewMessage([]byte(body(r.g, r.i)))
		m.Header = &amqp.MessageHeader{Durable: true}
		m.Properties = &amqp.MessageProperties{MessageID: dedupID(r.g, r.i), GroupID: ptr(group(r.g))}
		if err := s.snd.Send(ctx, m, nil); err != nil {
			s.close()
			return err
		}
	}
	return nil
}

func (s *amqpSender) close() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	s.conn, s.snd = nil, nil
}

// TestChaosAMQPSingleActive: two replicas on a RabbitMQ queue declared
// with single active consumer, the setting docs/scaling.md gives for
// AMQP: RabbitMQ pins no message group to a consumer, so with two
// consumers on a plain queue each group's messages would be split between
// them. With it, one replica receives and the other takes over when it
// goes (its unsettled messages return to the queue, ahead of the rest).
// RabbitMQ is shared with the other tests: no broker restart here (the
// tests that restart RabbitMQ have a node of their own,
// testenv.RabbitMQForRestart, so this one never sees a restart either).
func TestChaosAMQPSingleActive(t *testing.T) {
	p := runPlan()
	node := testenv.SharedRabbitMQ(t)
	url := node.URL
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := "chaos-" + hex.EncodeToString(b[:])
	node.DeclareQueue(t, q, true)
	snd := &amqpSender{url: url, addr: "/amq/queue/" + q}
	t.Cleanup(func() {
		snd.mu.Lock()
		snd.close()
		snd.mu.Unlock()
	})
	snk := startSink(t)
	runChaos(t, p, kind{
		name:     "amqp-rabbitmq",
		replicas: 2,
		source: fmt.Sprintf(`  source "amqp" {
    url                    = %q
    address                = "/amq/queue/%s"
    single_active_consumer = true
    reconnect_backoff      = "100ms"
    reconnect_backoff_max  = "1s"
  }
`, url, q),
		send: snd.send,
	}, snk)
}
