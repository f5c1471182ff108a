package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// coreSource subscribes to a subject (optionally in a queue group). Core
// NATS has no acknowledgement and no redelivery: what the client buffer
// holds is lost if the process stops, and a full buffer drops messages
// (the slow-consumer warning). Core → anything is at-most-once on the NATS
// side; Ack, Nack and Extend are no-ops.
type coreSource struct {
	conn  *conn
	sub   *nats.Subscription
	ch    chan *nats.Msg
	codec codec
	set   *sourceSettings
	log   *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

func newCoreSource(ctx context.Context, set *sourceSettings, log *slog.Logger) (*coreSource, error) {
	c, err := dial(ctx, set.conn, log)
	if err != nil {
		return nil, err
	}
	s := &coreSource{
		conn: c, ch: make(chan *nats.Msg, set.bufferSize), codec: newCodec(set.groupHeader, mapping.Options{}),
		set: set, log: log, closed: make(chan struct{}),
	}
	// A channel subscription drops (and reports a slow consumer) when ch is
	// full instead of blocking the connection's reader.
	if set.queue != "" {
		s.sub, err = c.nc.ChanQueueSubscribe(set.subject, set.queue, s.ch)
	} else {
		s.sub, err = c.nc.ChanSubscribe(set.subject, s.ch)
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("nats: subscribe %q: %w", set.subject, err)
	}
	if err := c.nc.FlushTimeout(set.conn.ConnectTimeout); err != nil {
		s.close()
		return nil, fmt.Errorf("nats: subscribe %q: %w", set.subject, err)
	}
	log.Info("nats core source subscribed", "subject", set.subject, "queue_group", set.queue)
	return s, nil
}

func (s *coreSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	for {
		var first *nats.Msg
		select {
		case first = <-s.ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closed:
			return nil, errors.New("nats: source closed")
		}
		out := make([]driver.Delivery, 0, min(max, 1+len(s.ch)))
		if d := s.wrap(first); d != nil {
			out = append(out, d)
		}
	drain:
		for len(out) < max {
			select {
			case m := <-s.ch:
				if d := s.wrap(m); d != nil {
					out = append(out, d)
				}
			default:
				break drain
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// wrap decodes m. A message natsmap refuses still becomes a delivery, with
// what could be read and its DecodeError, so the engine dead-letters it.
func (s *coreSource) wrap(m *nats.Msg) driver.Delivery {
	d := &coreDelivery{log: s.log}
	d.msg, d.decodeErr = s.codec.decode(m)
	if d.decodeErr != nil {
		s.log.Error("nats: received a message that cannot be decoded; it must be dead-lettered",
			"subject", m.Subject, "error", d.decodeErr)
		d.msg = s.codec.decodeRaw(m, nil)
	}
	applySubjectGroup(d.msg, m.Subject, s.set.groupToken)
	return d
}

// applySubjectGroup takes the group key from subject token n (1-based);
// when the subject is too short the group header's value stays.
func applySubjectGroup(msg *mapping.Message, subject string, n int) {
	if n <= 0 {
		return
	}
	if tok, ok := subjectToken(subject, n); ok && tok != "" {
		msg.GroupKey = tok
	}
}

func (s *coreSource) Close(ctx context.Context) error {
	s.close()
	return nil
}

func (s *coreSource) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
		s.conn.close()
		if n := len(s.ch); n > 0 {
			s.log.Warn("nats core source closed with buffered messages; they are lost (core NATS is at-most-once)", "count", n)
		}
	})
}

// Ready reports the connection status.
func (s *coreSource) Ready(ctx context.Context) error { return s.conn.ready() }

// coreDelivery settles nothing: core NATS has no acknowledgement.
type coreDelivery struct {
	msg       *mapping.Message
	decodeErr error
	log       *slog.Logger
}

func (d *coreDelivery) Message() *mapping.Message                   { return d.msg }
func (d *coreDelivery) Ack(context.Context) error                   { return nil }
func (d *coreDelivery) Extend(context.Context, time.Duration) error { return nil }

// DecodeError is why natsmap refused the message, or nil.
func (d *coreDelivery) DecodeError() error { return d.decodeErr }

// Nack cannot hand the message back: core NATS has no redelivery, so the
// message is lost. It is logged so the loss is visible.
func (d *coreDelivery) Nack(_ context.Context, _ time.Duration) error {
	d.log.Warn("nats core source: a failed message cannot be redelivered and is lost (core NATS is at-most-once; use jetstream for at-least-once)",
		"subject", d.msg.Source.Address, "id", d.msg.ID)
	return nil
}
