package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// The hooks of qbridge migrate (docs/adapter-amqp.md, "Counting, browsing
// and dead-letter queues"). AMQP 1.0 has no message count; a broker may
// let a link browse (distribution-mode copy, part 3 §3.5.3 std-dist-mode)
// and says in its attach whether it does.

var (
	_ driver.Source  = (*browseSource)(nil)
	_ driver.Browser = (*browseSource)(nil)
	_ driver.Sink    = (*drySink)(nil)
)

// Browse returns cfg changed so that its source attaches with
// distribution-mode copy. AMQP has no position to start after: after must
// be 0 (a copy starts where the broker's copy link starts).
func Browse(cfg SourceConfig, after uint64) (SourceConfig, error) {
	if after != 0 {
		return cfg, fmt.Errorf("amqp: a copy link cannot start after position %d (AMQP 1.0 has no such position): %w", after, driver.ErrCannotBrowse)
	}
	cfg.browse = true
	return cfg, nil
}

// ForMigration returns cfg changed so that its source does not create the
// queue it reads: RabbitMQ 3.x declares /queue/NAME when a link attaches
// to it, so a mistyped address "completed" empty and left a new queue.
func ForMigration(cfg SourceConfig) SourceConfig {
	cfg.migrating = true
	return cfg
}

// attachAddress is the address a source link attaches to. In a migration
// on RabbitMQ 3.x, /queue/NAME becomes /amq/queue/NAME: the same queue,
// which the broker does not declare (an attach to a missing one fails
// with amqp:not-found; tried on 3.10 in TestMigrateSourceDoesNotCreateQueue).
// Other brokers, which create nodes on attach only when asked
// (dynamic), keep the address.
func (s *source) attachAddress(d *dialed) string {
	if s.set.noCreate && d.rabbit3 && strings.HasPrefix(s.set.address, "/queue/") {
		return "/amq" + s.set.address
	}
	return s.set.address
}

// isNotFound reports an attach the broker refused with amqp:not-found.
func isNotFound(err error) bool { return refusedWith(err, amqp.ErrCondNotFound) }

// refusedWith reports an error the peer gave with condition cond.
func refusedWith(err error, cond amqp.ErrCond) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Condition == cond
}

var senderSettled = amqp.SenderSettleModeSettled

// browsable refuses, before any link exists, a broker known to echo
// distribution-mode copy in its attach and still consume: RabbitMQ before
// 4.0 (its AMQP 1.0 plugin; tried on 3.10 in TestBrowseRabbitMQ, the
// messages read were gone from the queue).
func browsable(d *dialed) error {
	if d.rabbit3 {
		return fmt.Errorf("amqp: %s answers distribution-mode copy but still consumes what it sends: %w", d.product, driver.ErrCannotBrowse)
	}
	return nil
}

// checkCopyGranted fails, wrapping driver.ErrCannotBrowse, unless the
// broker's attach reply for l's link carries distribution-mode copy: a
// broker that does not know copy consumes what it sends (AMQP 1.0 part 3
// §3.5.3: the terminus may override the requested mode).
func checkCopyGranted(tap *attachTap, l *rlink, d *dialed) error {
	broker := d.product
	if broker == "" {
		broker = "the broker"
	}
	if tap == nil {
		return fmt.Errorf("amqp: cannot see what %s granted: %w", broker, driver.ErrCannotBrowse)
	}
	mode, ok := tap.mode(l.rcv.LinkName())
	switch {
	case !ok:
		return fmt.Errorf("amqp: %s's attach reply for link %q was not seen: %w", broker, l.rcv.LinkName(), driver.ErrCannotBrowse)
	case mode != string(amqp.SourceDistributionModeCopy):
		granted := mode
		if granted == "" {
			granted = "none (the default, move)"
		}
		return fmt.Errorf("amqp: %s did not grant distribution-mode copy (it answered %s), so reading would consume: %w", broker, granted, driver.ErrCannotBrowse)
	}
	return nil
}

// browseIdle is how long a receive on a copy link may yield nothing
// before the source counts as drained.
const browseIdle = time.Second

// browseSource reads a copy link: settlement does nothing (the broker sends
// settled copies), and it is drained once a receive waited browseIdle for
// nothing.
type browseSource struct {
	*source
	drained atomic.Bool
}

// Receive returns the next copies; a wait of browseIdle without any marks
// the source drained, and it goes on waiting until ctx ends.
func (s *browseSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	for {
		ictx, cancel := context.WithTimeout(ctx, browseIdle)
		ds, err := s.source.Receive(ictx, max)
		cancel()
		switch {
		case len(ds) > 0:
			s.reissue(len(ds))
			out := make([]driver.Delivery, len(ds))
			for i, d := range ds {
				out[i] = browseDelivery{d}
			}
			return out, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			s.drained.Store(true)
		default:
			return nil, err
		}
	}
}

// reissue gives the link back the credit n copies used: they are not
// settled.
func (s *browseSource) reissue(n int) {
	s.mu.Lock()
	l := s.cur
	s.mu.Unlock()
	if l == nil {
		return // connect issues a new link's credit
	}
	if err := l.credits.issue(n); err != nil {
		s.log.Warn("amqp source: issuing credit on the copy link failed", "error", err)
	}
}

// Drained reports whether a receive found nothing for browseIdle.
func (s *browseSource) Drained() bool { return s.drained.Load() }

// browseDelivery is a copy: nothing to settle.
type browseDelivery struct{ driver.Delivery }

func (browseDelivery) Ack(context.Context) error                        { return nil }
func (browseDelivery) Nack(context.Context, time.Duration) error        { return nil }
func (browseDelivery) Extend(context.Context, time.Duration) error      { return nil }
func (browseDelivery) DeadLetter(context.Context, string, string) error { return nil }

func (d browseDelivery) DecodeError() error {
	if de, ok := d.Delivery.(driver.DecodeErrorer); ok {
		return de.DecodeError()
	}
	return nil
}

// NewDrySink returns a sink that encodes each message as NewSink's would
// (address template, amqpmap, policy, durable) and sends nothing. Without
// a link there is no broker max-message-size: max_message_size, when set,
// is the only limit.
func NewDrySink(_ context.Context, cfg SinkConfig, onDrop func(field, reason string), _ *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("amqp sink: %w", err)
	}
	set.opt.OnDrop = onDrop
	return &drySink{sink: &sink{set: set}}, nil
}

type drySink struct{ *sink }

// Send returns the address template's and the encoder's verdict.
func (s *drySink) Send(_ context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if _, err := s.address(m); err != nil {
			errs[i] = err
			continue
		}
		if _, err := encodeFor(&s.set, m, 0); err != nil {
			errs[i] = driver.Permanent(err)
		}
	}
	return errs
}

func (s *drySink) Close(context.Context) error { return nil }

// Ready: a dry sink has no connection to be ready (the sink's Ready
// reads the redialer it never had: the engine's watch panicked).
func (s *drySink) Ready(context.Context) error { return nil }
