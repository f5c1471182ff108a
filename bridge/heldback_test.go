package bridge

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// holdingSource is a memSource whose Nack delay the source keeps itself
// while it goes on delivering (driver.NackHolder), as the AMQP source does.
type holdingSource struct{ *memSource }

func (holdingSource) HoldsNacks() bool { return true }

// A message the source holds for its Nack delay must not be overtaken by
// the messages of its group that arrive meanwhile: they go back behind it,
// with the rest of its delay, until it comes back; other groups go on.
// Before, with AMQP's credit issued as messages arrive, g/2 was written
// while g/0, ahead of it, was held.
func TestHeldNackKeepsGroupOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds bool
		bySeq bool // no message id: the redelivery is known by its source sequence (JetStream)
	}{
		{"source holds nacks", true, false},
		{"source holds nacks, messages without an id", true, true},
		{"source has a redelivery delay of its own", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			sink := newSink(t)
			var refuse atomic.Bool
			refuse.Store(true)
			sink.fail = func(m *mapping.Message, _ int) error {
				if label(m) == "g/0" && refuse.Load() {
					return mapping.Rejectf("sqs", `attribute "a b"`, "invalid name")
				}
				return nil
			}
			open := func(ctx context.Context) (driver.Source, error) {
				s := &memSource{q: q}
				if tc.holds {
					return holdingSource{s}, nil
				}
				return s, nil
			}
			o := fastOptions()
			// a delay no step of the test outlasts
			o.Retry.Backoff = Backoff{Initial: time.Minute, Max: time.Minute, Multiplier: 1}
			var behindMu sync.Mutex
			var behindIDs []string // Config.OnBehindUndeliverable
			onBehind := func(m *mapping.Message) {
				behindMu.Lock()
				behindIDs = append(behindIDs, label(m))
				behindMu.Unlock()
			}
			h := start(t, Config{Options: o, Source: open, OnBehindUndeliverable: onBehind}, q, sink)

			msg := func(g string, i int) *mapping.Message {
				m := msg(g, i)
				if tc.bySeq {
					m.ID, m.Source.SequenceNumber = "", m.ID
				}
				return m
			}
			poison := msg("g", 0)
			q.push(poison)
			first := q.deliveries()[0]
			eventually(t, 10*time.Second, "g/0 handed back", func() bool { return first.nacks.Load() == 1 })
			if d := first.delay(); d < 30*time.Second {
				t.Fatalf("g/0 nacked with delay %v, want the backoff's minute", d)
			}

			// g/1 arrives while g/0 is held; x/0 is of another group
			q.push(msg("g", 1), msg("x", 0))
			eventually(t, 10*time.Second, "x/0 written", func() bool { return slices.Contains(sink.groupIDs("x"), "x/0") })
			behind := q.deliveries()[1]
			if !tc.holds {
				eventually(t, 10*time.Second, "g/1 written", func() bool { return slices.Contains(sink.groupIDs("g"), "g/1") })
				return
			}
			eventually(t, 10*time.Second, "g/1 handed back", func() bool { return behind.nacks.Load() == 1 })
			if d := behind.delay(); d < 30*time.Second || d > time.Minute+time.Second {
				t.Errorf("g/1 handed back with delay %v, want the rest of g/0's", d)
			}
			if got := sink.groupIDs("g"); len(got) != 0 {
				t.Fatalf("group g written %v while g/0 was held", got)
			}
			behindMu.Lock()
			if !slices.Equal(behindIDs, []string{"g/1"}) {
				t.Errorf("OnBehindUndeliverable got %v, want g/1 (x/0 is of another group)", behindIDs)
			}
			behindMu.Unlock()

			// g/0 comes back (the same message id) and now goes through;
			// g/1 after it
			refuse.Store(false)
			q.push(msg("g", 0), msg("g", 1))
			eventually(t, 10*time.Second, "g/0 and g/1 written", func() bool { return len(sink.groupIDs("g")) == 2 })
			if got := sink.groupIDs("g"); !slices.Equal(got, []string{"g/0", "g/1"}) {
				t.Errorf("group g written as %v, want g/0, g/1", got)
			}
			h.stop()
		})
	}
}

func (d *memDelivery) delay() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nackDelay
}

// label names a test message: its id, else its source sequence.
func label(m *mapping.Message) string { return cmp.Or(m.ID, m.Source.SequenceNumber) }
