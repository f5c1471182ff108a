package config

import (
	"github.com/qbridge/qbridge/adapters/servicebus"
	"github.com/qbridge/qbridge/mapping"
)

func init() {
	Register(AdapterKind[servicebus.SourceConfig, servicebus.SinkConfig]{
		Name:      "servicebus",
		NewSource: servicebus.NewSource,
		NewSink:   servicebus.NewSink,
		Feeds:     servicebus.SinkFeedsSource,
		// The sink block has its own max_message_size: the mapping block's
		// value applies only where it is set.
		SinkMapping: func(c *servicebus.SinkConfig, o mapping.Options) {
			c.Policy, c.Envelope = o.Policy, o.Envelope
			if o.MaxMessageSize != 0 {
				c.MaxMessageSize = o.MaxMessageSize
			}
			c.CarrySource = c.CarrySource || o.CarrySource
		},
		CountSource:      servicebus.CountSource,
		CountSink:        servicebus.CountSink,
		Browse:           servicebus.Browse,
		DeadLetterSource: servicebus.DeadLetterSource,
		NewDrySink:       servicebus.NewDrySink,

		// Copy checkpoints are kept with it (qbridge migrate -state).
		SourceIdentity: servicebus.SourceIdentity,
		SinkIdentity:   servicebus.SinkIdentity,
	})
}
