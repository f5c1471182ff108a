// Package nats is qbridge's NATS adapter: a driver.Source and driver.Sink
// for core NATS and JetStream, and an optional in-process nats-server.
//
//   - Core source: a subscription (wildcards, optional queue group) feeding a
//     bounded buffer. At most once: no acks, no redelivery; a full buffer
//     drops messages and logs a slow-consumer warning. Ack, Nack and Extend
//     are no-ops.
//   - JetStream source: a durable pull consumer (created or bound) with
//     explicit acks. Ack is a double ack, Nack(delay) NakWithDelay, Extend
//     InProgress, DeadLetter TermWithReason; a failure on the consumer's last
//     allowed delivery (max_deliver) terminates the message. Stream
//     sequence, stored time, delivery count and subject fill Message.Source.
//   - Sink: core publish + flush, or JetStream asynchronous publish waiting
//     for every ack of a Send call, with per-message results (oversized
//     messages are driver.Permanent). The subject is a template
//     ({group}, {id}, {subject}, {attr.NAME}).
//   - Embedded: an in-process nats-server on 127.0.0.1 with JetStream,
//     shared by the source and sink of one process that name the same
//     store_dir, and shut down when the last of them closes.
//
// Messages are translated by mapping/natsmap; one it refuses is delivered
// with its DecodeError (driver.DecodeErrorer) for the engine to
// dead-letter. docs/adapter-nats.md lists every configuration field.
package nats
