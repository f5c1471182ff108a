// Package amqpmap maps AMQP 1.0 messages (github.com/Azure/go-amqp) to and
// from the mapping model, every section in both directions. The Service Bus
// codec (package sbmap) is a Dialect of this one.
//
// # Sections
//
//	header                 durable, priority (4 = nil), ttl, first-acquirer ↔ the same fields;
//	                       delivery-count → Source.DeliveryCount (count+1; never written)
//	delivery-annotations   hop-by-hop: not in the model (a dialect hook may read them)
//	message-annotations    ↔ Annotations (symbol keys, typed values, sorted by name)
//	properties             message-id / correlation-id ↔ ID / CorrelationID with IDKind /
//	                       CorrelationKind (string, ulong, uuid, binary as base64); user-id,
//	                       to, subject, reply-to, content-type, content-encoding,
//	                       absolute-expiry-time, creation-time, group-id (GroupKey),
//	                       group-sequence, reply-to-group-id ↔ the same fields
//	application-properties ↔ Attributes (sorted by name); traceparent/tracestate ↔ Trace;
//	                       qbridge.envelope is the carry envelope
//	body                   one data section ↔ BodyData, several ↔ BodyMultiData,
//	                       amqp-value string ↔ BodyText, other amqp-value ↔ BodyValue,
//	                       amqp-sequence sections ↔ BodySequence (see mapping.BodyType)
//	footer                 integrity data over the bare message, void once re-encoded:
//	                       not in the model
//
// DedupID, PartitionKey, ViaPartitionKey and ScheduledAt have no AMQP 1.0
// field and ride in the envelope.
//
// # Values
//
// Every kind travels as its natural AMQP type: int8..uint64, float, double,
// bool, string, symbol, binary, uuid, timestamp, null; in annotations and
// bodies also lists, maps and string arrays (KindStrings). go-amqp decodes
// any other array as a list and symbols as strings. Where the receiver
// cannot get the same value back from the wire alone:
//
//   - application-properties (simple types only, AMQP 1.0 §3.2.5) carry the
//     value's Text with its data type in the envelope: Number (written as a
//     long, double or string without losing a digit), decimal32/64/128 and
//     char (go-amqp can neither encode nor decode them), uri,
//     datetime-offset, timespan (Service Bus described types, not generic
//     AMQP), strings, list, map, labelled values, and symbols (written as
//     symbols, typed String.symbol since they decode as strings).
//   - message annotations are written as well as they can be and carried
//     exactly in the envelope as well; the decoder prefers the carried one.
//   - a body that the sections cannot hold exactly (text that is not UTF-8,
//     a value with such a kind, a BodyValue holding a string or null, a
//     malformed typed JSON) is one data section with its body type in the
//     envelope. Symbols inside an amqp-value come back as strings.
//
// Map entries decode sorted by key (kind, then text): go-amqp keeps no order.
//
// # TTL and timestamps
//
// The header TTL is a uint of milliseconds. A TTL that is not whole
// milliseconds is rounded up and the exact TTL is carried. Above
// math.MaxUint32 ms (49.7 days; go-amqp would wrap) the policy applies:
// Reject; Drop leaves the TTL out (reported); Encode writes the maximum and
// carries the exact TTL. Timestamps hold milliseconds; a finer creation or
// expiry time is carried exactly.
//
// # Policies
//
// A user attribute named qbridge.envelope, or a second attribute of one
// name: Reject; Drop; Encode carries it in the envelope. Invalid UTF-8 in a
// name or string: Reject or Drop (JSON cannot carry it). A user attribute
// named traceparent or tracestate is written with its type recorded, which
// tells the decoder it is not the trace; a trace of the same message then
// rides in the envelope. Options.MaxMessageSize, when set, rejects a larger message.
//
// # JSON rendering
//
// ParseJSON and RenderJSON use a typed JSON rendering of the AMQP message
// (MessageJSON, MessageFromJSON), every AMQP value in mapping's typed value
// JSON ({"type":"int","value":42}):
//
//	{
//	  "format": 0,                              message format, omitted when 0
//	  "deliveryTag": "<base64>",
//	  "header": {"durable": true, "priority": 4, "ttl": 60000,  (milliseconds)
//	             "firstAcquirer": false, "deliveryCount": 0},
//	  "deliveryAnnotations": [{"key": "x-opt-lock-token", "value": {"type": "uuid", "value": "…"}}],
//	  "messageAnnotations":  [{"key": "x-opt-k", "value": {"type": "long", "value": 1}}],
//	  "properties": {"messageId": {typed}, "userId": "<base64>", "to": "…", "subject": "…",
//	                 "replyTo": "…", "correlationId": {typed}, "contentType": "…",
//	                 "contentEncoding": "…", "absoluteExpiryTime": "RFC 3339",
//	                 "creationTime": "RFC 3339", "groupId": "…", "groupSequence": 1,
//	                 "replyToGroupId": "…"},
//	  "applicationProperties": [{"key": "a", "value": {"type": "int", "value": 42}}],
//	  "body": {"data": ["<base64>", …]} | {"value": {typed}} | {"sequence": [[{typed}, …], …]},
//	  "footer": [{"key": …, "value": {typed}}]
//	}
//
// Every member is optional; entries render sorted by key. Unknown members
// are errors naming the member. Types with no go-amqp encoding (number,
// decimal32/64/128, char) and labels are errors; uri, datetime-offset and
// timespan are the Service Bus described types.
package amqpmap
