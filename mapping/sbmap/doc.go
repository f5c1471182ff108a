// Package sbmap maps Azure Service Bus messages sent and received over AMQP
// to and from the mapping model. It is a Dialect of package amqpmap: every
// amqpmap rule holds unless said otherwise here (docs/wire-servicebus.md §1, §2,
// §5.4, §6).
//
// # Broker properties
//
//	properties.message-id         ↔ ID; written as m.DedupKey() (Service Bus deduplicates
//	                                on MessageId), always a string; with a DedupID the
//	                                envelope carries ID and DedupID
//	properties.correlation-id     ↔ CorrelationID, always a string
//	properties.content-type       ↔ ContentType (a symbol on the wire)
//	properties.group-id           ↔ GroupKey (SessionId)
//	properties.absolute-expiry-time → Source.ExpiresAt (the broker's; ignored on input)
//	header.delivery-count         → Source.DeliveryCount (count+1)
//	x-opt-partition-key           ↔ PartitionKey
//	x-opt-via-partition-key       ↔ ViaPartitionKey
//	x-opt-scheduled-enqueue-time  ↔ ScheduledAt
//	x-opt-enqueued-time           → Source.EnqueuedTime
//	x-opt-sequence-number         → Source.SequenceNumber (decimal)
//	x-opt-enqueue-sequence-number → Source.EnqueuedSequence
//	x-opt-locked-until            → Source.LockedUntil
//	x-opt-deadletter-source       → Source.DeadLetterSource
//	x-opt-message-state           → Source.State
//	x-opt-partition-id            → Source.PartitionID (-1 when absent)
//	DeadLetterReason, DeadLetterErrorDescription (application properties)
//	                              → Source.DeadLetterReason, Source.DeadLetterDesc
//	delivery tag (.NET GUID bytes), overridden by delivery-annotation x-opt-lock-token
//	                              → Source.LockToken (canonical UUID; see LockToken)
//	Diagnostic-Id + tracestate    ↔ Trace
//
// Other message annotations decode into Annotations; on encode they ride in
// the envelope only (the x-opt-* namespace is the broker's). The body is
// always written as one data section (what the SDKs read); a BodyType other
// than data rides in the envelope. Decoding accepts every body section.
//
// # Values
//
// URI, DateTimeOffset and TimeSpan are the .NET described types
// com.microsoft:uri (string), com.microsoft:datetime-offset (long UTC ticks)
// and com.microsoft:timespan (long ticks), byte for byte as .NET writes
// them. go-amqp has no public constructor for described values; amqpmap
// builds its internal type by reflection. Other described values are
// refused on decode. Symbol application properties are written as strings
// with type String.symbol. A .NET decimal or char application property
// cannot be decoded by go-amqp at all: the receiving link closes (see
// amqpmap.UndecodableType).
//
// When the envelope records a data type T for an attribute, its value is
// mapping.ParseValue(T, native.Text()) (ParseBinary for binary natives),
// whatever native type the broker produced: a message sent over HTTPS
// (package sbrest), whose property types Service Bus infers from text,
// decodes to the same model as over AMQP.
//
// # Limits and policies
//
// MessageId, SessionId, ReplyToSessionId, PartitionKey and ViaPartitionKey
// hold at most 128 characters (UTF-16 code units): Reject; Drop leaves the field out; Encode sends
// "sha256:<hex>" of the value (equal keys stay equal) and carries the
// original. SessionId and PartitionKey must be equal when both are set:
// Reject; Drop leaves PartitionKey out; Encode sends PartitionKey=SessionId
// and carries the original. An application property larger than 32 KiB
// encoded, or all properties together larger than 64 KiB: Reject and Encode
// reject (the envelope is a property too); Drop leaves out the offending,
// respectively the largest, user attributes. A message larger than
// Options.MaxMessageSize (default 256 KiB; pass the link's max-message-size)
// is rejected.
//
// # JSON rendering
//
// ParseJSON and RenderJSON use amqpmap's JSON rendering of the AMQP message,
// with the Service Bus rules applied (deliveryTag and deliveryAnnotations
// give the lock token).
package sbmap
