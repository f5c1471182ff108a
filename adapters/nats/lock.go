package nats

import "time"

// SourceLock is how long JetStream waits for an ack before it redelivers
// (ack_wait): config refuses a pipeline whose lock heartbeat is not
// shorter. A core subscription has no lock.
func SourceLock(cfg SourceConfig) (name string, d time.Duration) {
	if cfg.JetStream == nil {
		return "", 0
	}
	set, err := cfg.resolve()
	if err != nil || set.js == nil {
		return "", 0 // the block's own validation reports it
	}
	return "jetstream.ack_wait", set.js.ackWait
}
