package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping"
)

// coreSource subscribes to a subject (optionally in a queue group). Core
// NATS has no acknowledgement and no redelivery: what the client buffer
// holds is lost if the process stops, and a full buffer drops messages
// (the slow-consumer event, counted in Lost). Core → anything is
// at-most-once on the NATS side; Ack, Nack and Extend are no-ops.
//
// The subscription is an asynchronous one: nats.go queues what arrives in
// its pending list, bounded by buffer_size/buffer_bytes (nats.go's own
// defaults unless set), and its delivery goroutine decodes each message and
// hands it over on out, waiting while the pipeline is behind. So a burst
// waits in the client, like it does for a plain nats.go subscriber, and the
// decoding runs beside the engine instead of on its receive path.
type coreSource struct {
	conn           *conn
	sub            *nats.Subscription
	out            chan driver.Delivery
	codec          codec
	set            *sourceSettings
	log            *slog.Logger
	undecodableLog *logpace.Pacer // the log line of an undecodable message

	joined    bool // shares the automatic buffer (autoBuffers)
	closeOnce sync.Once
	closed    chan struct{}
	lost      atomic.Uint64 // dropped by the client, read at close
}

// coreHandoff is the most the channel between the subscription's goroutine
// and Receive holds (never more than buffer_size); the buffering proper is
// nats.go's pending list.
const coreHandoff = 1024

func newCoreSource(ctx context.Context, set *sourceSettings, log *slog.Logger) (*coreSource, error) {
	c, err := dial(ctx, set.conn, log)
	if err != nil {
		return nil, err
	}
	s := &coreSource{
		conn: c, out: make(chan driver.Delivery, min(coreHandoff, set.bufferSize)), codec: newCodec(set.groupHeader, mapping.Options{}),
		set: set, log: log, closed: make(chan struct{}), undecodableLog: logpace.PerMessage(),
	}
	if set.queue != "" {
		s.sub, err = c.nc.QueueSubscribe(set.subject, set.queue, s.deliver)
	} else {
		s.sub, err = c.nc.Subscribe(set.subject, s.deliver)
	}
	if err == nil {
		err = s.sub.SetPendingLimits(set.bufferSize, set.bufferBytes)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("nats: subscribe %q: %w", set.subject, err)
	}
	if err := c.nc.FlushTimeout(set.conn.ConnectTimeout); err != nil {
		s.close()
		return nil, fmt.Errorf("nats: subscribe %q: %w", set.subject, err)
	}
	if set.autoBufferBytes {
		s.joined = true
		autoBuffers.join(s)
	}
	size, bytes, _ := s.sub.PendingLimits()
	log.Info("nats core source subscribed", "subject", set.subject, "queue_group", set.queue,
		"buffer_size", size, "buffer_bytes", bytes, "buffer_shared", set.autoBufferBytes)
	return s, nil
}

// deliver runs on the subscription's goroutine, one message at a time.
func (s *coreSource) deliver(m *nats.Msg) {
	d := s.wrap(m)
	select {
	case s.out <- d:
	case <-s.closed:
	}
}

func (s *coreSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	var first driver.Delivery
	select {
	case first = <-s.out:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, errors.New("nats: source closed")
	}
	out := make([]driver.Delivery, 1, min(max, 1+len(s.out)))
	out[0] = first
	for len(out) < max {
		select {
		case d := <-s.out:
			out = append(out, d)
		default:
			return out, nil
		}
	}
	return out, nil
}

// AckBatch settles nothing (core NATS has no acknowledgement); it lets the
// engine settle a whole batch in one step (driver.BatchAcker).
func (s *coreSource) AckBatch(_ context.Context, ds []driver.Delivery) []error {
	return make([]error, len(ds))
}

// Lost reports how many messages the client dropped because the pipeline
// did not keep up (driver.LossCounter): the subscription's pending limits
// were reached.
func (s *coreSource) Lost() uint64 {
	select {
	case <-s.closed:
		return s.lost.Load()
	default:
	}
	if n, err := s.sub.Dropped(); err == nil && n > 0 {
		return uint64(n)
	}
	return s.lost.Load()
}

// wrap decodes m. A message natsmap refuses still becomes a delivery, with
// what could be read and its DecodeError, so the engine dead-letters it.
func (s *coreSource) wrap(m *nats.Msg) *coreDelivery {
	d := coreDeliveries.Get().(*coreDelivery)
	d.log = s.log
	if d.decodeErr = s.codec.decodeInto(&d.msg, m); d.decodeErr != nil {
		s.undecodableLog.Do(func(leftOut int64) {
			s.log.Error("nats: received a message that cannot be decoded; it must be dead-lettered",
				"subject", m.Subject, "error", d.decodeErr, logpace.LeftOutKey, leftOut)
		})
		d.msg = *s.codec.decodeRaw(m, nil)
	}
	applySubjectGroup(&d.msg, m.Subject, s.set.groupToken)
	return d
}

// coreDeliveries are reused once the engine is done with them
// (driver.Recycler): a core subject is the busiest path there is, and
// allocating each decoded message was about a tenth of the daemon's CPU
// there (docs/benchmarks.md).
var coreDeliveries = sync.Pool{New: func() any { return new(coreDelivery) }}

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
		if s.sub != nil {
			if n, err := s.sub.Dropped(); err == nil && n > 0 {
				s.lost.Store(uint64(n))
			}
		}
		close(s.closed)
		if s.joined {
			autoBuffers.leave(s)
		}
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
		s.conn.close()
		if n := len(s.out); n > 0 {
			s.log.Warn("nats core source closed with buffered messages; they are lost (core NATS is at-most-once)", "count", n)
		}
	})
}

// Ready reports the connection status.
func (s *coreSource) Ready(ctx context.Context) error { return s.conn.ready() }

// Ping is a PING/PONG round trip with the server (driver.Pinger): a core
// subject keeps no count, and a stalled server keeps the connection open
// and silent.
func (s *coreSource) Ping(ctx context.Context) error {
	if err := s.conn.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats source: ping: %w", err)
	}
	return nil
}

// coreDelivery settles nothing: core NATS has no acknowledgement. It holds
// its message, one allocation for both, and is reused (Recycle).
type coreDelivery struct {
	msg       mapping.Message
	decodeErr error
	log       *slog.Logger
}

func (d *coreDelivery) Message() *mapping.Message                   { return &d.msg }
func (d *coreDelivery) Ack(context.Context) error                   { return nil }
func (d *coreDelivery) Extend(context.Context, time.Duration) error { return nil }

// DecodeError is why natsmap refused the message, or nil.
func (d *coreDelivery) DecodeError() error { return d.decodeErr }

// Recycle puts d back for a later message (driver.Recycler).
func (d *coreDelivery) Recycle() {
	*d = coreDelivery{}
	coreDeliveries.Put(d)
}

// Nack cannot hand the message back: core NATS has no redelivery, so the
// message is lost. It is logged so the loss is visible.
func (d *coreDelivery) Nack(_ context.Context, _ time.Duration) error {
	d.log.Warn("nats core source: a failed message cannot be redelivered and is lost (core NATS is at-most-once; use jetstream for at-least-once)",
		"subject", d.msg.Source.Address, "id", d.msg.ID)
	return nil
}
