// Package wire lists qbridge's wire forms by name, each with its JSON
// rendering, for `qbridge translate` and for the cross-form round-trip tests.
package wire

import (
	"fmt"
	"sort"
	"strings"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
	"github.com/qbridge/qbridge/mapping/natsmap"
	"github.com/qbridge/qbridge/mapping/sbmap"
	"github.com/qbridge/qbridge/mapping/sbrest"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// Form is one wire form's JSON rendering. Parse goes JSON → wire → model
// through the form's decoder; Render goes model → wire → JSON through its
// encoder, so both apply every rule of the form.
type Form struct {
	Name   string
	Doc    string
	Parse  func(data []byte) (*mapping.Message, error)
	Render func(m *mapping.Message, opt mapping.Options) ([]byte, error)
}

var forms = []Form{
	{"sqs", "the AWS JSON shape of a received SQS message", sqsmap.ParseJSON, sqsmap.RenderJSON},
	{"servicebus", "Service Bus over AMQP: typed JSON of the AMQP sections", sbmap.ParseJSON, sbmap.RenderJSON},
	{"servicebus-https", "Service Bus REST batch element {Body, BrokerProperties, UserProperties}", sbrest.ParseJSON, sbrest.RenderJSON},
	{"amqp", "AMQP 1.0: typed JSON of the message sections", amqpmap.ParseJSON, amqpmap.RenderJSON},
	{"nats", "NATS: {subject, headers, data}", natsmap.ParseJSON, natsmap.RenderJSON},
}

// All returns every wire form.
func All() []Form { return append([]Form(nil), forms...) }

// Lookup finds a wire form by name.
func Lookup(name string) (Form, error) {
	for _, f := range forms {
		if f.Name == name {
			return f, nil
		}
	}
	return Form{}, fmt.Errorf("unknown wire form %q: want one of %s", name, strings.Join(Names(), ", "))
}

// Names lists the wire form names, sorted.
func Names() []string {
	n := make([]string, len(forms))
	for i, f := range forms {
		n[i] = f.Name
	}
	sort.Strings(n)
	return n
}
