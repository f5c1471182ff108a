// Package natsmap maps NATS messages (core NATS and JetStream) to and from
// the mapping model.
//
// # Wire form
//
// A NATS message is a subject, headers (names with one or more string
// values) and data (opaque bytes). The body is the data. Headers carry:
//
//	Nats-Msg-Id        DedupKey() (JetStream deduplicates on it); decodes into DedupID
//	Content-Type       ContentType
//	traceparent        Trace (W3C), with tracestate
//	Qbridge-Group      GroupKey (the header name is EncodeOptions/DecodeOptions.GroupHeader)
//	qbridge.envelope   the carry envelope (contract rule 3)
//	any other name     a user attribute: its Text(); a Strings value as several values
//
// A header with one value decodes as a String and one with several values
// as Strings, unless the envelope records the attribute's data type. Other
// Nats-* headers (set by JetStream or a publisher for the server) decode into
// Annotations, and travel only in the envelope.
//
// The subject a message came from is Source.Address; the encoder takes the
// target subject as a parameter. JetStream metadata (stream sequence, stored
// time, delivery count) is read from a $JS.ACK reply subject, or given in
// DecodeOptions.JetStream.
//
// # JSON rendering
//
//	{"subject": "orders.new", "headers": {"Name": ["v1", "v2"]}, "data": "text"}
//
// data is the UTF-8 text of the data; data that is not valid UTF-8 is base64
// with "dataEncoding": "base64". RenderJSON uses the message's To as the
// subject (the model has no target subject); ParseJSON sets Source.Address.
package natsmap
