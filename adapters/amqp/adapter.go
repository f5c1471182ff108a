// Package amqp is qbridge's AMQP 1.0 adapter (go-amqp v1.7.0) for any AMQP
// 1.0 broker: RabbitMQ, ActiveMQ Artemis, Qpid, Solace, IBM MQ. Messages
// are mapped by mapping/amqpmap; the package adds links, credit,
// settlement, recovery and the broker quirks. See docs/adapter-amqp.md.
//
// Source: a receiver link with configurable credit, filters (selector and
// generic described filters) and optional durable, named terminus.
// Ack → Accept, Nack → Modify(delivery-failed) or Release, DeadLetter →
// Reject with an error. A decode guard (internal/amqpguard) keeps messages go-amqp
// cannot decode (decimal32/64/128, char, ...) from killing the link over
// and over: they come out as driver.DecodeErrorer deliveries holding their
// raw AMQP bytes (RawMessageContentType), which the engine dead-letters.
//
// Sink: sender links per target address (a template), pipelined transfers,
// each confirmed by the broker's Accepted outcome before Send returns.
package amqp

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/qbridge/qbridge/bridge/driver"
)

// Compile-time checks of the driver contract.
var (
	_ driver.Source       = (*source)(nil)
	_ driver.ReadyChecker = (*source)(nil)
	_ driver.Pinger       = (*source)(nil)
	_ driver.Delivery     = (*delivery)(nil)
	_ driver.DeadLetterer = (*delivery)(nil)
	_ driver.Sink         = (*sink)(nil)
	_ driver.ReadyChecker = (*sink)(nil)
)

// NewSource validates cfg, connects (trying each URL) and attaches the
// receiver link; later failures are recovered inside Receive.
func NewSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Source, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("amqp source: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	s, err := newSource(ctx, set, log)
	if err != nil {
		return nil, atOpen(err) // not a typed nil in the interface
	}
	if set.browse {
		return &browseSource{source: s}, nil
	}
	return s, nil
}

// NewSink validates cfg and connects; with a fixed address it also attaches
// the sender link, so a refused address fails here. onDrop (may be nil) is
// told about each item the Drop policy leaves out.
func NewSink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("amqp sink: %w", err)
	}
	set.opt.OnDrop = onDrop
	if log == nil {
		log = slog.Default()
	}
	s, err := newSink(ctx, set, log)
	if err != nil {
		return nil, atOpen(err)
	}
	return s, nil
}
