// Package sbrest maps Azure Service Bus messages sent and received over HTTPS
// (the REST data plane) to and from the mapping model.
//
// # Wire form
//
// A single message is an HTTP request or response: the body is the payload,
// Content-Type is ContentType, the broker properties are one JSON header
// named BrokerProperties, and every custom (user) property is its own HTTP
// header whose type Service Bus infers from the text (docs/wire-servicebus.md §7):
//
//	"…"  an RFC 2616 date inside → DateTime, else the unquoted text → String
//	true / false (case-sensitive)  → Boolean
//	an integer                     → Int64
//	a float                        → Double
//	anything else                  → rejected
//
// A batch send is one JSON array of elements
// {"Body": string, "BrokerProperties": {…}, "UserProperties": {…}} with
// content type application/vnd.microsoft.servicebus.json. In UserProperties a
// JSON string stands for a quoted header value (same date rule), true/false
// for Boolean, a JSON number for Int64 when it is written without fraction or
// exponent and fits, else Double. Null, arrays and objects are rejected.
//
// # JSON rendering
//
// ParseJSON and RenderJSON use one batch element as the JSON rendering of a
// message (`qbridge translate`). A Body that is not valid UTF-8 travels
// base64-encoded with the envelope's body marker (Encode policy).
//
// # What does not fit
//
// Values whose kind the inference cannot produce travel as their Text()
// (quoted) with the data type recorded in the carry envelope, the custom
// property qbridge.envelope; so do model fields Service Bus REST has no
// property for. See docs/mapping-servicebus-https.md for the tables.
package sbrest
