package nats

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// StreamLimitsConfig is what a stream that create_stream makes keeps: the
// jetstream block's stream_* attributes (source and sink alike). Without
// them the stream keeps every message for ever (limits retention, no
// limit), so a sidecar's spool grew with all the traffic it ever carried
// until its volume filled. A stream that exists keeps its own settings.
type StreamLimitsConfig struct {
	// Retention: "limits" (the default: kept until a limit drops them),
	// "workqueue" (removed once a consumer acknowledges them; one
	// consumer per subject) or "interest" (kept while a consumer has not
	// acknowledged them; with none, not at all).
	Retention string `hcl:"stream_retention,optional"`
	MaxMsgs   int64  `hcl:"stream_max_msgs,optional"`
	MaxBytes  int64  `hcl:"stream_max_bytes,optional"`
	MaxAge    string `hcl:"stream_max_age,optional"`
	// Discard is what a full stream does: "old" (the default) drops its
	// oldest messages to take a new one, "new" refuses the publish.
	Discard string `hcl:"stream_discard,optional"`
}

func (c StreamLimitsConfig) set() bool { return c != StreamLimitsConfig{} }

// apply checks the limits and puts them in cfg; create says whether the
// block creates its stream (they are refused otherwise: they would do
// nothing).
func (c StreamLimitsConfig) apply(create bool, cfg *jetstream.StreamConfig) error {
	if !create {
		if c.set() {
			return adaptercfg.Errorf("jetstream."+c.firstSet(), "only used with create_stream = true (a stream that exists keeps its own limits)")
		}
		return nil
	}
	switch strings.ToLower(c.Retention) {
	case "", "limits":
		cfg.Retention = jetstream.LimitsPolicy
	case "workqueue":
		cfg.Retention = jetstream.WorkQueuePolicy
	case "interest":
		cfg.Retention = jetstream.InterestPolicy
	default:
		return adaptercfg.Errorf("jetstream.stream_retention", "%q: want limits, workqueue or interest", c.Retention)
	}
	switch strings.ToLower(c.Discard) {
	case "", "old":
		cfg.Discard = jetstream.DiscardOld
	case "new":
		cfg.Discard = jetstream.DiscardNew
	default:
		return adaptercfg.Errorf("jetstream.stream_discard", "%q: want old or new", c.Discard)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"stream_max_msgs", c.MaxMsgs}, {"stream_max_bytes", c.MaxBytes}} {
		if n.v < 0 {
			return adaptercfg.Errorf("jetstream."+n.name, "%d must be positive", n.v)
		}
	}
	cfg.MaxMsgs, cfg.MaxBytes = orUnlimited(c.MaxMsgs), orUnlimited(c.MaxBytes)
	if c.MaxAge != "" {
		age, err := adaptercfg.PositiveDuration("jetstream.stream_max_age", c.MaxAge, 0)
		if err != nil {
			return err
		}
		cfg.MaxAge = age
	}
	return nil
}

// withLimits is cfg with the retention and limits of limits.
func withLimits(cfg, limits jetstream.StreamConfig) jetstream.StreamConfig {
	cfg.Retention, cfg.Discard = limits.Retention, limits.Discard
	cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxAge = limits.MaxMsgs, limits.MaxBytes, limits.MaxAge
	return cfg
}

// orUnlimited is the server's "no limit" (-1) for 0.
func orUnlimited(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

func (c StreamLimitsConfig) firstSet() string {
	switch {
	case c.Retention != "":
		return "stream_retention"
	case c.MaxMsgs != 0:
		return "stream_max_msgs"
	case c.MaxBytes != 0:
		return "stream_max_bytes"
	case c.MaxAge != "":
		return "stream_max_age"
	}
	return "stream_discard"
}
