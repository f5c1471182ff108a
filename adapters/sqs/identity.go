package sqs

import "fmt"

// SourceIdentity names the queue a source reads (no credentials), for
// qbridge migrate's copy checkpoints: the queue URL normalized, or the
// queue name with the region, account and endpoint that locate it.
func SourceIdentity(cfg SourceConfig) string { return queueIdentity(cfg.ConnConfig) }

// SinkIdentity names the queue a sink writes to, as SourceIdentity does:
// two pipelines of one migration with the same identity do not run at
// once, so that each one's count of the queue brackets its own writes.
func SinkIdentity(cfg SinkConfig) string { return queueIdentity(cfg.ConnConfig) }

func queueIdentity(c ConnConfig) string {
	if c.QueueURL != "" {
		if u, ok := normalizeHTTPURL(c.QueueURL); ok {
			return "queue " + u
		}
		return "queue " + c.QueueURL
	}
	id := fmt.Sprintf("queue %q in region %q", c.QueueName, c.Region)
	if c.AccountID != "" {
		id += ", account " + c.AccountID
	}
	if e, ok := normalizeHTTPURL(c.Endpoint); ok && e != "" {
		id += ", endpoint " + e
	}
	return id
}
