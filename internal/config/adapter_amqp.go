package config

import (
	"github.com/qbridge/qbridge/adapters/amqp"
	"github.com/qbridge/qbridge/mapping"
)

func init() {
	Register(AdapterKind[amqp.SourceConfig, amqp.SinkConfig]{
		Name:      "amqp",
		NewSource: amqp.NewSource,
		NewSink:   amqp.NewSink,
		Feeds:     amqp.SinkFeedsSource,
		// The sink block has its own max_message_size: the mapping block's
		// value applies only where it is set.
		SinkMapping: func(c *amqp.SinkConfig, o mapping.Options) {
			c.Policy, c.CarrySource, c.Envelope = o.Policy, o.CarrySource, o.Envelope
			if o.MaxMessageSize != 0 {
				c.MaxMessageSize = o.MaxMessageSize
			}
		},
		SourceMapping: func(c *amqp.SourceConfig, o mapping.Options) { c.Policy = o.Policy },
		// Whether a broker grants a copy link shows only when the source
		// opens: migrate then samples a dry run, and fails a copy at once.
		Browse:       amqp.Browse,
		ForMigration: amqp.ForMigration,
		NewDrySink:   amqp.NewDrySink,

		// Copy checkpoints are kept with it (qbridge migrate -state).
		SourceIdentity: amqp.SourceIdentity,
		SinkIdentity:   amqp.SinkIdentity,
	})
}
