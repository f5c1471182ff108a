package amqp

import (
	"fmt"
	"testing"

	"github.com/Azure/go-amqp"
)

// Which attach failures are the broker refusing this address: a link
// detached with invalid-field or not-found is; a session ended with one is
// only where its description names the address (RabbitMQ 3.x ends the
// session, failing the other attaches on it too); a lost connection never.
func TestAddressRefused(t *testing.T) {
	const addr = "/queue/orders-x/../../exchange/amq.topic"
	rabbit := `Attach rejected: {invalid_destination,queue,
                                      "/orders-x/../../exchange/amq.topic"}`
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"link detached, invalid-field", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondInvalidField}}, true},
		{"link detached, not-found", fmt.Errorf("attach: %w", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondNotFound}}), true},
		{"link detached, other condition", &amqp.LinkError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondResourceLimitExceeded}}, false},
		{"link lost", &amqp.LinkError{}, false},
		{"session ended naming this address", &amqp.SessionError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondInvalidField, Description: rabbit}}, true},
		{"session ended naming another", &amqp.SessionError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondInvalidField, Description: `Attach rejected: {invalid_destination,queue,"/other"}`}}, false},
		{"session lost", &amqp.SessionError{}, false},
		{"connection closed", &amqp.ConnError{RemoteErr: &amqp.Error{Condition: amqp.ErrCondInvalidField, Description: rabbit}}, false},
	} {
		if got := addressRefused(tc.err, addr); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
