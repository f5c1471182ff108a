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
		// The sink block has its own max_message_size: the mapping block's
		// value applies only where it is set.
		SinkMapping: func(c *amqp.SinkConfig, o mapping.Options) {
			c.Policy, c.CarrySource, c.OnDrop = o.Policy, o.CarrySource, o.OnDrop
			if o.MaxMessageSize != 0 {
				c.MaxMessageSize = o.MaxMessageSize
			}
		},
		SourceMapping: func(c *amqp.SourceConfig, o mapping.Options) { c.Policy = o.Policy },
		// amqp.Browse is left out for now: whether a broker grants a copy
		// link shows only when the source opens, and migrate does not yet
		// fall back to a sample when that open fails with
		// driver.ErrCannotBrowse (a dry run on RabbitMQ 3.x would then fail
		// at -connect-timeout instead of sampling).
		NewDrySink: amqp.NewDrySink,
	})
}
