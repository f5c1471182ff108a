package nats

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/qbridge/qbridge/bridge/driver"
)

// Compile-time checks of the driver contract.
var (
	_ driver.Source        = (*coreSource)(nil)
	_ driver.ReadyChecker  = (*coreSource)(nil)
	_ driver.Pinger        = (*coreSource)(nil)
	_ driver.Delivery      = (*coreDelivery)(nil)
	_ driver.DecodeErrorer = (*coreDelivery)(nil)
	_ driver.Source        = (*jsSource)(nil)
	_ driver.ReadyChecker  = (*jsSource)(nil)
	_ driver.Delivery      = (*jsDelivery)(nil)
	_ driver.DeadLetterer  = (*jsDelivery)(nil)
	_ driver.DecodeErrorer = (*jsDelivery)(nil)
	_ driver.Sink          = (*sink)(nil)
	_ driver.ReadyChecker  = (*sink)(nil)
)

// NewSource connects and subscribes: a core subscription, or with a
// jetstream block a durable pull consumer (created or bound).
func NewSource(ctx context.Context, cfg SourceConfig, log *slog.Logger) (driver.Source, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("nats source: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.browse && set.js != nil {
		return newBrowseSource(ctx, set, cfg.browseAfter, log)
	}
	if set.js != nil {
		return newJSSource(ctx, set, log)
	}
	return newCoreSource(ctx, set, log)
}

// NewSink connects (and with jetstream.create_stream creates the stream).
// onDrop (may be nil) is told about each item the Drop policy leaves out.
func NewSink(ctx context.Context, cfg SinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
	set, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("nats sink: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return newSink(ctx, set, &cfg, onDrop, log)
}
