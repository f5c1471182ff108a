package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/bridge/driver"
)

func TestAKind(t *testing.T) {
	for kind, want := range map[string]string{
		"sqs": "an SQS", "amqp": "an AMQP", "servicebus": "a Service Bus", "nats": "a NATS",
		"memq": "a memq", "other": "an other",
	} {
		if got := AKind(kind); got != want {
			t.Errorf("%s: %q, want %q", kind, got, want)
		}
	}
}

// A migration of a source kind without a dead-letter queue says so with the
// kind as it is said ("an AMQP source", not "a amqp source").
func TestWithDeadLetterSourceNamesTheKind(t *testing.T) {
	for kind, want := range map[string]string{"amqp": "an AMQP source keeps none", "nats": "a NATS source keeps none"} {
		p := &Pipeline{Name: "p", Spec: Spec{Source: Adapter{Kind: kind}}}
		_, err := p.WithDeadLetterSource(context.Background(), nil)
		if !errors.Is(err, driver.ErrNoDeadLetterQueue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrNoDeadLetterQueue and %q", kind, err, want)
		}
	}
}
