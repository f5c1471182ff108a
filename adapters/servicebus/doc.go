// Package servicebus is qbridge's Azure Service Bus adapter: a source
// (queue or subscription, peek-lock, optionally session by session) and a
// sink (queue or topic), over AMQP with the official Go SDK (azservicebus)
// or over HTTPS with the REST API. See docs/adapter-servicebus.md.
//
// Over AMQP the SDK does the connection, CBS authorization (shared access
// key or signature, or Microsoft Entra ID through azidentity), retries and
// settlement; messages travel as the SDK's raw AMQP messages
// (AMQPAnnotatedMessage), converted field by field to go-amqp's
// amqp.Message and mapped by package sbmap, so no section is lost. The
// adapter dials the AMQP connection itself (the SDK's NewWebSocketConn
// hook) to put internal/amqpguard between the socket and go-amqp:
// messages go-amqp cannot decode (.NET decimal and char properties) or
// the SDK cannot take are dead-lettered instead of closing the link.
//
// Over HTTPS the adapter speaks the REST data plane with net/http, maps
// messages with package sbrest, and signs its own SAS tokens (or sends
// Entra ID bearer tokens). REST has no session receiver and no
// dead-letter call: HTTPS deliveries are not driver.DeadLetterers.
package servicebus
