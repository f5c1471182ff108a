// Package mapping holds qbridge's normalized message model and the rules that
// every wire form shares: typed values and their type spelling, the trace
// context, the mapping policies and the carry envelope through which a wire
// form keeps what it cannot hold natively. The per-protocol codecs live in
// the sub-packages (sqsmap, amqpmap, sbmap, natsmap).
package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Message is the normalized message. Every codec decodes into it and encodes
// from it; the zero value is an empty message.
type Message struct {
	// Body is the payload, passed through untouched. For BodyText it is
	// UTF-8 text; for BodyValue, BodySequence and BodyMultiData it is the
	// typed JSON of the AMQP body (see BodyType).
	Body     []byte
	BodyType BodyType

	ID              string // message id (SB MessageId, AMQP message-id, SQS MessageId)
	IDKind          Kind   // AMQP type of ID when not a string: KindUint64, KindUUID or KindBinary (ID is then base64)
	CorrelationID   string
	CorrelationKind Kind // as IDKind
	ContentType     string
	ContentEncoding string // AMQP content-encoding
	Subject         string // AMQP subject, Service Bus Label/Subject
	To              string
	ReplyTo         string
	ReplyToGroup    string // AMQP reply-to-group-id, Service Bus ReplyToSessionId

	// GroupKey orders messages: SQS MessageGroupId, Service Bus SessionId,
	// AMQP group-id. Messages with the same key are delivered in order.
	GroupKey        string
	GroupSequence   uint32 // AMQP group-sequence; 0 when unset
	PartitionKey    string // Service Bus PartitionKey
	ViaPartitionKey string // Service Bus ViaPartitionKey (send-via transactions)

	// DedupID is the explicit deduplication id: SQS MessageDeduplicationId,
	// JetStream Nats-Msg-Id. Service Bus deduplicates on MessageId, so its
	// codec uses DedupKey.
	DedupID string

	UserID []byte // AMQP user-id

	TTL            time.Duration // time to live; 0 means unset (the entity default)
	ScheduledAt    time.Time     // scheduled enqueue time; zero means now
	CreationTime   time.Time     // AMQP creation-time
	AbsoluteExpiry time.Time     // AMQP absolute-expiry-time

	Durable       bool   // AMQP header durable
	Priority      *uint8 // AMQP header priority; nil means the default (4)
	FirstAcquirer bool   // AMQP header first-acquirer

	// Annotations are AMQP message-annotations that no model field stands for
	// (the broker-owned x-opt-* ones that have fields are moved there).
	Annotations []Attribute

	Trace Trace

	// Attributes are the user's typed attributes: SQS message attributes,
	// AMQP application-properties, Service Bus user properties, NATS headers.
	Attributes []Attribute

	// Source holds read-only facts of the message's origin. Encoders do not
	// write them unless the pipeline asks to carry them.
	Source Source
}

// BodyType says how an AMQP body was carried, so AMQP-to-AMQP keeps it.
type BodyType uint8

const (
	BodyData      BodyType = iota // opaque bytes (one AMQP data section)
	BodyText                      // AMQP amqp-value holding a string; Body is its UTF-8
	BodyValue                     // AMQP amqp-value of another type; Body is its typed JSON
	BodySequence                  // AMQP amqp-sequence sections; Body is the typed JSON of a list of lists
	BodyMultiData                 // several AMQP data sections; Body is the typed JSON of a list of binaries
)

var bodyTypeNames = [...]string{"data", "text", "value", "sequence", "multi-data"}

func (t BodyType) String() string {
	if int(t) < len(bodyTypeNames) {
		return bodyTypeNames[t]
	}
	return "invalid"
}

// BodyTypeByName is the inverse of BodyType.String.
func BodyTypeByName(s string) (BodyType, bool) {
	for i, n := range bodyTypeNames {
		if n == s {
			return BodyType(i), true
		}
	}
	return 0, false
}

// Attribute is one named, typed value.
type Attribute struct {
	Name  string `json:"name"`
	Value Value  `json:"value"`
}

// Source holds what the source broker says about a message. All of it is
// read-only on the wire: encoders never set these as broker properties.
type Source struct {
	Protocol         string    // "sqs", "servicebus", "amqp", "nats"
	MessageID        string    // the id the source broker assigned (SQS MessageId), where it assigns one
	EnqueuedTime     time.Time // SQS SentTimestamp, SB EnqueuedTimeUtc, JetStream timestamp
	SequenceNumber   string    // SQS FIFO SequenceNumber (128-bit decimal), SB SequenceNumber, JetStream stream sequence
	EnqueuedSequence int64     // SB EnqueuedSequenceNumber
	DeliveryCount    int       // deliveries including this one: SQS ApproximateReceiveCount, SB DeliveryCount
	FirstReceiveTime time.Time // SQS ApproximateFirstReceiveTimestamp
	SenderID         string    // SQS SenderId
	LockToken        string    // SB lock token (canonical UUID) or SQS receipt handle
	LockedUntil      time.Time
	ExpiresAt        time.Time // SB ExpiresAtUtc
	State            int       // SB message state: StateActive, StateDeferred, StateScheduled
	PartitionID      int       // SB x-opt-partition-id; -1 when absent (decoders set it; 0 is a partition)
	DeadLetterSource string
	DeadLetterReason string
	DeadLetterDesc   string
	Address          string // the queue, subject or entity it was read from
}

// Service Bus message states (Source.State, x-opt-message-state).
const (
	StateActive    = 0
	StateDeferred  = 1
	StateScheduled = 2 // enqueued with a time in the future, not yet due
)

// TTLLeft is the time to live m has left at now, for a message passed on:
// the TTL less the time since it was enqueued at its source, where the
// source says when it expires (Source.ExpiresAt: Service Bus) or when it
// was enqueued (Source.EnqueuedTime: SQS SentTimestamp, JetStream, Service
// Bus), as AMQP 1.0 §3.2.1 asks of an intermediary ("the reduced ttl"), so
// a message does not live longer at the target than at its source. A
// message that expired on the way gets MinTTLLeft: the target's expiry
// (and its dead-lettering on expiry, if set) applies at once. ok is false
// when there is nothing to reduce: no TTL, no source time, or a message
// read from a dead-letter queue, where its TTL no longer runs.
func (m *Message) TTLLeft(now time.Time) (ttl time.Duration, ok bool) {
	if m.TTL <= 0 || m.Source.DeadLetterReason != "" || m.Source.DeadLetterSource != "" {
		return m.TTL, false
	}
	exp := m.Source.ExpiresAt
	if exp.IsZero() {
		if m.Source.EnqueuedTime.IsZero() {
			return m.TTL, false
		}
		exp = m.Source.EnqueuedTime.Add(m.TTL)
	}
	left := exp.Sub(now)
	switch {
	case left >= m.TTL: // a clock ahead of ours: never more than it had
		return m.TTL, false
	case left < MinTTLLeft:
		return MinTTLLeft, true
	}
	return left.Truncate(time.Millisecond), true
}

// MinTTLLeft is the TTL a message that expired on the way is sent with:
// the smallest every target takes (AMQP and Service Bus count in ms).
const MinTTLLeft = time.Millisecond

// DedupKey is the id a sink deduplicates on: DedupID when set, else ID.
func (m *Message) DedupKey() string {
	if m.DedupID != "" {
		return m.DedupID
	}
	return m.ID
}

// SourceKey names the message at its source, the same on every delivery
// of it: its protocol and address with the id the broker assigned
// (Source.MessageID: SQS MessageId) or else its sequence number there
// (JetStream stream sequence, Service Bus SequenceNumber). It is "" where
// the source gives neither (an AMQP message without message-id, core
// NATS). Sinks that must send a deduplication id use it when the message
// has none of its own (DedupKey).
func (m *Message) SourceKey() string {
	s := &m.Source
	id := s.MessageID
	if id == "" {
		id = s.SequenceNumber
	}
	if id == "" || s.Protocol == "" {
		return ""
	}
	return s.Protocol + "\x00" + s.Address + "\x00" + id
}

// MadeUpIDPrefix starts an id an encoder made up for a message that has
// none of its own (IDFromSourceKey; SQS also for a unique dedup id).
const MadeUpIDPrefix = "qbridge-"

// IDFromSourceKey is a stable id for a message that has none of its own,
// made from its SourceKey (key): the same on every delivery of it, so that
// a sink deduplicating on ids (Service Bus duplicate detection, SQS FIFO)
// drops the copy a resumed migration writes again. "" for an empty key.
func IDFromSourceKey(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return MadeUpIDPrefix + hex.EncodeToString(sum[:])
}

// IsMadeUpID reports whether id is one IDFromSourceKey made: an encoder's,
// which decoders drop (the message had no id of its own).
func IsMadeUpID(id string) bool {
	return len(id) == len(MadeUpIDPrefix)+sha256.Size*2 && strings.HasPrefix(id, MadeUpIDPrefix)
}

// Attr returns the attribute with the given name.
func (m *Message) Attr(name string) (Value, bool) {
	for _, a := range m.Attributes {
		if a.Name == name {
			return a.Value, true
		}
	}
	return Value{}, false
}

// SetAttr replaces the attribute with the given name or appends it.
func (m *Message) SetAttr(name string, v Value) {
	setAttr(&m.Attributes, Attribute{Name: name, Value: v})
}

func setAttr(attrs *[]Attribute, a Attribute) {
	for i := range *attrs {
		if (*attrs)[i].Name == a.Name {
			(*attrs)[i].Value = a.Value
			return
		}
	}
	*attrs = append(*attrs, a)
}

// sortAttributes orders attributes by name, the stable order decoders of
// map-shaped wire forms produce.
func sortAttributes(attrs []Attribute) {
	slices.SortStableFunc(attrs, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) })
}

// DeleteAttr removes the attribute with the given name, if any.
func (m *Message) DeleteAttr(name string) {
	for i := range m.Attributes {
		if m.Attributes[i].Name == name {
			m.Attributes = append(m.Attributes[:i], m.Attributes[i+1:]...)
			return
		}
	}
}

// Clone returns a deep copy of the parts of m that codecs and mapping rules
// modify (attribute and annotation slices); byte payloads are shared, as
// they are never modified in place.
func (m *Message) Clone() *Message {
	c := *m
	c.Attributes = append([]Attribute(nil), m.Attributes...)
	c.Annotations = append([]Attribute(nil), m.Annotations...)
	if m.Priority != nil {
		p := *m.Priority
		c.Priority = &p
	}
	return &c
}
