package config

import (
	"github.com/qbridge/qbridge/adapters/sqs"
	"github.com/qbridge/qbridge/mapping"
)

func init() {
	Register(AdapterKind[sqs.SourceConfig, sqs.SinkConfig]{
		Name:       "sqs",
		NewSource:  sqs.NewSource,
		NewSink:    sqs.NewSink,
		Feeds:      sqs.SinkFeedsSource,
		SourceLock: sqs.SourceLock,
		NoNativeDeadLetter: func(sqs.SourceConfig) string {
			return "SQS has no call that dead-letters a message (a queue's redrive policy moves it after maxReceiveCount receives, which the engine's nacks count toward)"
		},
		// The sink block has its own max_message_size and carry_source: the
		// mapping block's values apply only where they are set.
		SinkMapping: func(c *sqs.SinkConfig, o mapping.Options) {
			c.Policy, c.Envelope = o.Policy, o.Envelope
			if o.MaxMessageSize != 0 {
				c.MaxMessageSize = o.MaxMessageSize
			}
			c.CarrySource = c.CarrySource || o.CarrySource
		},
		CountSource:      sqs.CountSource,
		CountSink:        sqs.CountSink,
		Browse:           sqs.Browse,
		DeadLetterSource: sqs.DeadLetterSource,
		NewDrySink:       sqs.NewDrySink,

		// Copy checkpoints are kept with it (qbridge migrate -state).
		SourceIdentity: sqs.SourceIdentity,
		SinkIdentity:   sqs.SinkIdentity,
	})
}
