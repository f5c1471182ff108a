package config

import (
	"fmt"
	"strings"

	"github.com/qbridge/qbridge/adapters/servicebus"
	"github.com/qbridge/qbridge/mapping"
)

func init() {
	Register(AdapterKind[servicebus.SourceConfig, servicebus.SinkConfig]{
		Name:      "servicebus",
		NewSource: servicebus.NewSource,
		NewSink:   servicebus.NewSink,
		Feeds:     servicebus.SinkFeedsSource,
		NoNativeDeadLetter: func(c servicebus.SourceConfig) string {
			switch {
			case c.SubQueue != "":
				return fmt.Sprintf("the source reads the sub-queue %q, which has no dead-letter queue of its own", c.SubQueue)
			case strings.EqualFold(c.Transport, "https"):
				return `the Service Bus REST API (transport = "https") cannot dead-letter a message`
			}
			return ""
		},
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
