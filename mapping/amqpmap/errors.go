package amqpmap

import (
	"strings"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// undecodable are the AMQP types go-amqp v1.7.0 cannot decode. A received
// message holding one (a .NET producer's decimal or char application
// property, say) fails in the receiver, which closes the link with
// amqp:internal-error "<type> not implemented"; the message is redelivered
// until the broker dead-letters it.
var undecodable = []string{"decimal32", "decimal64", "decimal128", "char"}

// UndecodableType reports whether err (typically the *amqp.LinkError of a
// closed receiver) says that go-amqp met an AMQP type it cannot decode, and
// which. Adapters use it to tell this poison-message case from a transient
// link failure.
func UndecodableType(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	s := err.Error()
	for _, t := range undecodable {
		if strings.Contains(s, t+" not implemented") {
			return t, true
		}
	}
	return "", false
}

// UnmarshalMessage is amqp.Message.UnmarshalBinary that returns an error
// where go-amqp v1.7.0 panics: an annotations map whose key is a map or a
// list ("hash of unhashable type") panics inside go-amqp. Adapters that
// decode AMQP bytes themselves (Service Bus peek and receive-by-sequence
// return messages as binary) use it. A receiving link cannot be protected
// this way: go-amqp decodes transfers in its own goroutine.
func UnmarshalMessage(data []byte) (msg *amqp.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, mapping.Rejectf(Wire, "message", "go-amqp cannot decode it: %v", r)
		}
	}()
	msg = new(amqp.Message)
	if err := msg.UnmarshalBinary(data); err != nil {
		return nil, mapping.Rejectf(Wire, "message", "%v", err)
	}
	return msg, nil
}
