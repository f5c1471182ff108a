package sqs

import "time"

// SourceLock is the visibility timeout the source sets on what it
// receives, when the configuration sets one (otherwise the queue's, known
// only at start): config refuses a pipeline whose lock heartbeat is not
// shorter.
func SourceLock(cfg SourceConfig) (name string, d time.Duration) {
	set, err := cfg.resolve()
	if err != nil || !set.hasVisibility {
		return "", 0
	}
	return "visibility_timeout", set.visibility
}
