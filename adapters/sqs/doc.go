// Package sqs is qbridge's Amazon SQS adapter (and for SQS-compatible
// services: ElasticMQ, LocalStack, fauxqs, Yandex Message Queue, VK Cloud).
//
// NewSource returns a driver.Source that long-polls a queue with several
// concurrent pollers and decodes every message with sqsmap.Decode (digests
// verified). Its deliveries batch Ack into DeleteMessageBatch and Nack /
// Extend into ChangeMessageVisibilityBatch calls of at most 10 entries. A
// message that cannot be decoded is handed over with a DecodeError (see
// driver.DecodeErrorer) so that the engine dead-letters it instead of forwarding it.
// SQS has no per-message dead-letter call, so deliveries do not implement
// driver.DeadLetterer: the queue's redrive policy is SQS's own.
//
// NewSink returns a driver.Sink that encodes with sqsmap.Encode and sends
// SendMessageBatch calls of up to 10 entries within max_message_size, shared
// by concurrent Send calls and flushed by count, size or a short linger.
// Per-entry failures become per-message errors (driver.Permanent when
// retrying cannot help). With FIFO queues a group's messages are never in two
// calls at once and a failure stops the later messages of its group.
//
// Both implement driver.ReadyChecker. See docs/adapter-sqs.md.
package sqs
