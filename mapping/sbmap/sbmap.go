package sbmap

import (
	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// Wire is the RejectError wire name of Service Bus over AMQP.
const Wire = "servicebus"

// Application properties with a Service Bus meaning.
const (
	DiagnosticIDProperty          = "Diagnostic-Id" // the trace: a W3C traceparent (older SDKs: |trace.span.)
	DeadLetterReasonProperty      = "DeadLetterReason"
	DeadLetterDescriptionProperty = "DeadLetterErrorDescription"
)

// Broker properties carried as message annotations (docs/wire-servicebus.md §1),
// and the lock token's delivery annotation.
const (
	AnnotationPartitionKey           = "x-opt-partition-key"
	AnnotationViaPartitionKey        = "x-opt-via-partition-key"
	AnnotationScheduledEnqueueTime   = "x-opt-scheduled-enqueue-time"
	AnnotationEnqueuedTime           = "x-opt-enqueued-time"
	AnnotationSequenceNumber         = "x-opt-sequence-number"
	AnnotationEnqueuedSequenceNumber = "x-opt-enqueue-sequence-number"
	AnnotationLockedUntil            = "x-opt-locked-until"
	AnnotationDeadLetterSource       = "x-opt-deadletter-source"
	AnnotationMessageState           = "x-opt-message-state"
	AnnotationPartitionID            = "x-opt-partition-id"
	DeliveryAnnotationLockToken      = "x-opt-lock-token"
)

// Service Bus limits (docs/wire-servicebus.md §6.3).
const (
	MaxIDLength           = 128       // MessageId, SessionId, PartitionKey, ViaPartitionKey, in UTF-16 code units
	MaxPropertySize       = 32 * 1024 // one application property, encoded
	MaxHeaderSize         = 64 * 1024 // message-annotations + properties + application-properties, encoded
	DefaultMaxMessageSize = 256 * 1024
)

// Native is the set of model fields Service Bus over AMQP holds natively.
// Not held: DedupID (Service Bus deduplicates on MessageId), the AMQP types
// of the ids (the SDKs read string ids only), AbsoluteExpiry (the broker's
// ExpiresAtUtc on output, ignored on input), the remaining message
// annotations (the x-opt-* namespace is the broker's) and the body type
// (the SDKs read one data section only); those ride in the envelope.
const Native = amqpmap.Native&^(mapping.FieldIDKinds|mapping.FieldAbsoluteExpiry|
	mapping.FieldAnnotations|mapping.FieldBodyType) |
	mapping.FieldPartitionKey | mapping.FieldViaPartitionKey | mapping.FieldScheduledAt

// Dialect is the Service Bus dialect of the AMQP mapping.
var Dialect = &amqpmap.Dialect{
	Wire:          Wire,
	Protocol:      "servicebus",
	TraceProperty: DiagnosticIDProperty,
	ParseTrace:    mapping.ParseDiagnosticID,
	Reserved:      []string{DeadLetterReasonProperty, DeadLetterDescriptionProperty},
	Native:        Native,
	Described:     true,
	PlainSymbols:  true,
}

func init() {
	// Set here: the hooks use Dialect themselves.
	Dialect.Prepare, Dialect.Encoded, Dialect.Decoded, Dialect.Over = prepare, encoded, decoded, over
}

// Decode maps a message received from Service Bus over AMQP into the model.
func Decode(msg *amqp.Message) (*mapping.Message, error) { return Dialect.Decode(msg) }

// ParseJSON parses the JSON rendering of a Service Bus AMQP message (the
// shape of amqpmap's) and decodes it.
func ParseJSON(data []byte) (*mapping.Message, error) { return Dialect.ParseJSON(data) }

// RenderJSON encodes m for Service Bus and renders the AMQP message as JSON.
func RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	msg, err := Encode(m, opt)
	if err != nil {
		return nil, err
	}
	return Dialect.MessageJSON(msg)
}
