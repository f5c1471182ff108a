package config

import (
	"log/slog"

	"github.com/qbridge/qbridge/adapters/nats"
	"github.com/qbridge/qbridge/mapping"
)

// One file per adapter of the build, one entry each. The mapping function
// copies the pipeline's mapping block into the adapter's untagged option
// fields.
func init() {
	Register(AdapterKind[nats.SourceConfig, nats.SinkConfig]{
		Name:       "nats",
		NewSource:  nats.NewSource,
		NewSink:    nats.NewSink,
		Feeds:      nats.SinkFeedsSource,
		SourceLock: nats.SourceLock,
		NoNativeDeadLetter: func(c nats.SourceConfig) string {
			if c.JetStream == nil {
				return "a core NATS subject keeps no messages, so it has no dead-letter queue (a JetStream source has: it terminates the message)"
			}
			return ""
		},
		SinkMapping: func(c *nats.SinkConfig, o mapping.Options) {
			c.Policy, c.MaxMessageSize, c.CarrySource, c.Envelope = o.Policy, o.MaxMessageSize, o.CarrySource, o.Envelope
		},
		SourceServer: func(c nats.SourceConfig) (string, string, string, string) { return nats.EmbeddedServer(c.ConnConfig) },
		SinkServer:   func(c nats.SinkConfig) (string, string, string, string) { return nats.EmbeddedServer(c.ConnConfig) },
		HoldSourceServer: func(c nats.SourceConfig, log *slog.Logger) (string, func(), error) {
			return nats.HoldEmbeddedSource(c, log)
		},
		HoldSinkServer: func(c nats.SinkConfig, log *slog.Logger) (string, func(), error) {
			return nats.HoldEmbedded(c.ConnConfig, log)
		},
		CountSource:  nats.CountSource,
		CountSink:    nats.CountSink,
		Browse:       nats.Browse,
		ForMigration: nats.ForMigration,
		NewDrySink:   nats.NewDrySink,

		// Copy checkpoints are kept with it (qbridge migrate -state).
		SourceIdentity: nats.SourceIdentity,
		SinkIdentity:   nats.SinkIdentity,
	})
}
