package nats

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// What makes a sink stream drop stored messages while it accepts every
// publish: a migration is refused, or warned, on it.
func TestStreamLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       jetstream.StreamConfig
		consumers int
		limits    string
		keeps     int64
		none      bool
	}{
		{"none", jetstream.StreamConfig{MaxMsgs: -1, MaxBytes: -1}, 0, "", 0, false},
		{"max_msgs", jetstream.StreamConfig{MaxMsgs: 100, MaxBytes: -1}, 0, "max_msgs 100, discard old", 100, false},
		{"discard new refuses instead", jetstream.StreamConfig{MaxMsgs: 100, Discard: jetstream.DiscardNew}, 0, "", 0, false},
		{"max_age", jetstream.StreamConfig{MaxAge: time.Hour, Discard: jetstream.DiscardNew}, 0, "max_age 1h0m0s", 0, false},
		{"bytes and per subject", jetstream.StreamConfig{MaxBytes: 1 << 20, MaxMsgsPerSubject: 5}, 0, "max_bytes 1048576, max_msgs_per_subject 5, discard old", 0, false},
		{"interest, no consumer", jetstream.StreamConfig{Retention: jetstream.InterestPolicy}, 0, "interest retention with no consumer: a message is kept only for the consumers there are", 0, true},
		{"interest with a consumer", jetstream.StreamConfig{Retention: jetstream.InterestPolicy}, 1, "", 0, false},
		{"work queue", jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}, 0, "", 0, false},
	} {
		limits, keeps, none := streamLimits(tc.cfg, tc.consumers)
		if limits != tc.limits || keeps != tc.keeps || none != tc.none {
			t.Errorf("%s: %q, %d, %v; want %q, %d, %v", tc.name, limits, keeps, none, tc.limits, tc.keeps, tc.none)
		}
	}
}
