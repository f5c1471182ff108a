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
		name   string
		cfg    jetstream.StreamConfig
		limits string
		keeps  int64
	}{
		{"none", jetstream.StreamConfig{MaxMsgs: -1, MaxBytes: -1}, "", 0},
		{"max_msgs", jetstream.StreamConfig{MaxMsgs: 100, MaxBytes: -1}, "max_msgs 100, discard old", 100},
		{"discard new refuses instead", jetstream.StreamConfig{MaxMsgs: 100, Discard: jetstream.DiscardNew}, "", 0},
		{"max_age", jetstream.StreamConfig{MaxAge: time.Hour, Discard: jetstream.DiscardNew}, "max_age 1h0m0s", 0},
		{"bytes and per subject", jetstream.StreamConfig{MaxBytes: 1 << 20, MaxMsgsPerSubject: 5}, "max_bytes 1048576, max_msgs_per_subject 5, discard old", 0},
		{"interest", jetstream.StreamConfig{Retention: jetstream.InterestPolicy}, "interest retention (a message is kept only for the consumers there are)", 0},
	} {
		limits, keeps := streamLimits(tc.cfg)
		if limits != tc.limits || keeps != tc.keeps {
			t.Errorf("%s: %q, %d; want %q, %d", tc.name, limits, keeps, tc.limits, tc.keeps)
		}
	}
}
