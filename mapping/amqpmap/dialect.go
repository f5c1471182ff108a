package amqpmap

import (
	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// Wire is the RejectError wire name of plain AMQP 1.0.
const Wire = "amqp"

// TraceStateProperty is the application property carrying the W3C tracestate.
const TraceStateProperty = "tracestate"

// Native is the set of model fields plain AMQP 1.0 holds natively. The rest
// (DedupID, PartitionKey, ViaPartitionKey, ScheduledAt) rides in the envelope.
const Native = mapping.FieldID | mapping.FieldCorrelationID | mapping.FieldIDKinds |
	mapping.FieldContentType | mapping.FieldContentEncoding | mapping.FieldSubject |
	mapping.FieldTo | mapping.FieldReplyTo | mapping.FieldReplyToGroup | mapping.FieldGroupKey |
	mapping.FieldGroupSequence | mapping.FieldUserID | mapping.FieldTTL |
	mapping.FieldCreationTime | mapping.FieldAbsoluteExpiry | mapping.FieldDurable |
	mapping.FieldPriority | mapping.FieldFirstAcquirer | mapping.FieldAnnotations |
	mapping.FieldBodyType | mapping.FieldTraceW3C

// Dialect adapts the generic mapping to a broker that gives some AMQP
// properties a meaning of its own; package sbmap builds the Service Bus
// dialect on it. Plain is plain AMQP 1.0.
type Dialect struct {
	Wire     string // RejectError wire name
	Protocol string // Source.Protocol set on decode

	// TraceProperty names the application property holding the W3C
	// traceparent; ParseTrace parses it on decode. The tracestate rides in
	// TraceStateProperty next to it.
	TraceProperty string
	ParseTrace    func(string) (mapping.Trace, error)

	// Reserved names further application properties that the dialect
	// interprets on decode (Service Bus DeadLetterReason). A user attribute
	// with such a name (or a trace property name) is written with its type
	// recorded in the envelope, which tells the decoder to leave it alone.
	Reserved []string

	// Native is the set of model fields the dialect writes natively: the
	// generic AMQP ones are written here, the dialect's own (PartitionKey,
	// ScheduledAt...) by Encoded. Without FieldIDKinds, message-id and
	// correlation-id are written as strings; without FieldAnnotations the
	// annotations ride in the envelope only; without FieldBodyType the body
	// is always one data section.
	Native mapping.Field

	// Described writes URI, DateTimeOffset and TimeSpan values as the
	// com.microsoft described types; otherwise they travel as Text with the
	// type recorded.
	Described bool
	// PlainSymbols writes symbol application properties as strings (their
	// type recorded) for consumers that only know simple .NET types.
	PlainSymbols bool

	// Prepare may return a wire view of m (a copy with fields adjusted to
	// the broker's rules) and the fields whose original values the envelope
	// must carry because the wire view changed them. It applies opt.Policy.
	Prepare func(m *mapping.Message, opt *mapping.Options) (wire *mapping.Message, carry mapping.Field, err error)
	// Encoded writes the dialect's own fields of wire into msg, after the
	// generic sections and before the envelope is written.
	Encoded func(wire *mapping.Message, msg *amqp.Message) error
	// Over reports whether msg exceeds a limit of the broker other than
	// opt.MaxMessageSize (Service Bus: the property and header sizes), so
	// that Encode sheds the envelope until it does not, or nothing is left
	// to shed. The limits themselves are checked after Encode.
	Over func(msg *amqp.Message, opt *mapping.Options) bool
	// Decoded moves the dialect's own sections and properties into m after
	// the generic decode and before the envelope applies; env may be nil.
	Decoded func(msg *amqp.Message, m *mapping.Message, env *mapping.Envelope) error
}

// Plain is the plain AMQP 1.0 dialect used by Decode and Encode.
var Plain = &Dialect{
	Wire:          Wire,
	Protocol:      "amqp",
	TraceProperty: "traceparent",
	ParseTrace:    mapping.ParseTraceparent,
	Native:        Native,
}

// Decode maps a received AMQP message into the model.
func Decode(msg *amqp.Message) (*mapping.Message, error) { return Plain.Decode(msg) }

// Encode maps a model message onto an AMQP message.
func Encode(m *mapping.Message, opt mapping.Options) (*amqp.Message, error) {
	return Plain.Encode(m, opt)
}

func (d *Dialect) encoder() valueEncoder {
	return valueEncoder{described: d.Described, plainSymbols: d.PlainSymbols}
}

// reserved reports whether the decoder interprets an application property
// of this name.
func (d *Dialect) reserved(name string) bool {
	if name == d.TraceProperty || name == TraceStateProperty {
		return true
	}
	for _, r := range d.Reserved {
		if r == name {
			return true
		}
	}
	return false
}
