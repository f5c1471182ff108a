package bridge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// lastOccurrenceInOrder checks what a consumer that keeps the last copy of
// each message sees: every one of n messages, in sequence order. Returns
// how many copies there were beyond one each.
func lastOccurrenceInOrder(t *testing.T, what string, ids []string, n int) (dups int) {
	t.Helper()
	last := map[string]int{}
	for i, id := range ids {
		last[id] = i
	}
	if len(last) != n {
		t.Errorf("%s: %d distinct messages at the sink, want %d", what, len(last), n)
	}
	prev := -1
	for i, id := range ids {
		if last[id] != i {
			continue // an earlier copy, sent again after a failure before it
		}
		if seq := seqOf(t, id); seq <= prev {
			t.Errorf("%s: %s after %d: order lost in %v", what, id, prev, ids)
			return
		} else {
			prev = seq
		}
	}
	return len(ids) - len(last)
}

// With a sink that keeps the order of a call, a group's consecutive
// messages share Send calls (pipelining) and every group still arrives in
// order, including when some sends fail and are retried: a lane resends
// from the failed message, so copies may arrive twice but the last copies
// are in order.
func TestPipeliningKeepsGroupOrder(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(map[bool]string{false: "no failures", true: "transient failures"}[failing], func(t *testing.T) {
			const groups, perGroup = 10, 60
			q := newQueue(t)
			next := make([]int, groups)
			var msgs []*mapping.Message
			for len(msgs) < groups*perGroup {
				if g := rand.IntN(groups); next[g] < perGroup {
					msgs = append(msgs, msg(fmt.Sprintf("g%d", g), next[g]))
					next[g]++
				}
			}
			q.push(msgs...)
			sink := newSink(t)
			sink.ordered = true
			if failing {
				sink.fail = func(m *mapping.Message, attempt int) error {
					if attempt == 1 && rand.IntN(10) == 0 {
						return errTransient
					}
					return nil
				}
			}
			opt := fastOptions()
			opt.Ordering = Ordering{MaxInFlight: 200, PerGroup: 1}
			opt.Batch = Batch{Size: 50, Concurrency: 4}
			h := start(t, Config{Options: opt}, q, sink)
			eventually(t, 30*time.Second, "every message acked", func() bool {
				return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) == int64(len(msgs))
			})
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			dups := 0
			for g := range groups {
				name := fmt.Sprintf("g%d", g)
				ids := sink.groupIDs(name)
				if !failing && len(ids) != perGroup {
					t.Errorf("group %s: %d copies without failures, want %d", name, len(ids), perGroup)
				}
				dups += lastOccurrenceInOrder(t, "group "+name, ids, perGroup)
			}
			if !sink.sameGroupIn {
				t.Error("no Send call carried two messages of one group: nothing was pipelined")
			}
			if nacks := q.count(func(d *memDelivery) int64 { return d.nacks.Load() }); nacks != 0 {
				t.Errorf("%d nacks, want 0", nacks)
			}
			t.Logf("%d messages sent twice after a failure earlier in their call", dups)
		})
	}
}

// Ungrouped messages keep source order by default when the sink keeps the
// order of a call; with ungrouped = "concurrent" they do not have to, and
// a sink that does not keep order leaves them concurrent.
func TestUngroupedSourceOrder(t *testing.T) {
	const n = 400
	run := func(t *testing.T, ordered bool, mode string, fail bool) *memSink {
		q := newQueue(t)
		for i := range n {
			q.push(msg("", i))
		}
		sink := newSink(t)
		sink.ordered = ordered
		// Later calls finish first unless the engine waits for the earlier.
		sink.delay = func(m *mapping.Message) time.Duration {
			return time.Duration(n-seqOfID(m.ID)) * 5 * time.Microsecond
		}
		if fail {
			sink.fail = func(m *mapping.Message, attempt int) error {
				if attempt == 1 && seqOfID(m.ID)%37 == 5 {
					return errTransient
				}
				return nil
			}
		}
		opt := fastOptions()
		opt.Ordering = Ordering{MaxInFlight: 100, PerGroup: 1, Ungrouped: mode}
		opt.Batch = Batch{Size: 10, Concurrency: 4}
		h := start(t, Config{Options: opt}, q, sink)
		eventually(t, 30*time.Second, "every message acked", func() bool {
			return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) == n
		})
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		return sink
	}
	t.Run("default keeps order", func(t *testing.T) {
		sink := run(t, true, UngroupedAuto, false)
		if ids := sink.groupIDs(""); len(ids) != n || lastOccurrenceInOrder(t, "ungrouped", ids, n) != 0 {
			t.Errorf("%d copies, want %d", len(ids), n)
		}
	})
	t.Run("default keeps order through failures", func(t *testing.T) {
		sink := run(t, true, UngroupedAuto, true)
		lastOccurrenceInOrder(t, "ungrouped", sink.groupIDs(""), n)
	})
	t.Run("concurrent", func(t *testing.T) {
		sink := run(t, true, UngroupedConcurrent, false)
		// Any order, each message once.
		ids := sink.groupIDs("")
		seen := map[string]bool{}
		for _, id := range ids {
			seen[id] = true
		}
		if len(ids) != n || len(seen) != n {
			t.Errorf("%d copies of %d messages, want %d once each", len(ids), len(seen), n)
		}
	})
	t.Run("source mode with a sink that does not keep order", func(t *testing.T) {
		sink := run(t, false, UngroupedSource, false)
		ids := sink.groupIDs("")
		if len(ids) != n || lastOccurrenceInOrder(t, "ungrouped", ids, n) != 0 {
			t.Errorf("%d copies, want %d", len(ids), n)
		}
		for _, size := range sink.batches() {
			if size != 1 {
				t.Fatalf("a call of %d messages: without KeepsOrder the source order allows one at a time", size)
			}
		}
	})
}

func seqOfID(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '/')+1:])
	return n
}

// Batch.Size 0 is automatic: 100 per call, or up to 1000 (at most
// max_in_flight) where the sink keeps the order of a call, so a pipelined
// lane, one call at a time, is not held to 100 messages per round trip.
func TestAutomaticBatchSize(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		q := newQueue(t)
		for i := range 900 {
			q.push(msg("", i))
		}
		sink := newSink(t)
		sink.ordered = ordered
		gate := make(chan struct{})
		sink.gate = gate
		opt := fastOptions()
		opt.Batch = Batch{Concurrency: 1}
		start(t, Config{Options: opt}, q, sink)
		eventually(t, 5*time.Second, "all received", func() bool { out, _ := q.stats(); return out == 900 })
		close(gate)
		eventually(t, 10*time.Second, "all sent", func() bool { return sink.count() == 900 })
		largest := 0
		for _, n := range sink.batches() {
			largest = max(largest, n)
		}
		if want := map[bool]int{false: DefaultBatchSize, true: 900}[ordered]; largest != want {
			t.Errorf("ordered sink %v: largest call %d, want %d (calls %v)", ordered, largest, want, sink.batches())
		}
	}
}

// With a sink that says when a call is on the wire (driver.WriteSignaller),
// a lane's next call starts before the previous one is confirmed, and
// order holds as it does within one call: confirmations that come back
// out of call order are routed in call order, and after a failure the
// lane's later calls go again after it, so a consumer keeping the last
// copy of each message sees every one in order. A sink that does not
// signal never has two calls of a lane out.
func TestOverlappingCalls(t *testing.T) {
	for _, tc := range []struct {
		name            string
		groups          int // 0: ungrouped
		writes, failing bool
	}{
		{"grouped", 10, true, false},
		{"grouped, transient failures", 10, true, true},
		{"ungrouped", 0, true, false},
		{"ungrouped, transient failures", 0, true, true},
		{"a sink that does not signal", 10, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 1200
			q := newQueue(t)
			var msgs []*mapping.Message
			next := map[string]int{}
			for range n {
				g := ""
				if tc.groups > 0 {
					g = fmt.Sprintf("g%d", rand.IntN(tc.groups))
				}
				msgs = append(msgs, msg(g, next[g]))
				next[g]++
			}
			q.push(msgs...)
			sink := newSink(t)
			sink.ordered, sink.writes = true, tc.writes
			// Confirmations come back in any order.
			sink.delay = func(*mapping.Message) time.Duration { return time.Duration(rand.IntN(300)) * time.Microsecond }
			if tc.failing {
				sink.fail = func(m *mapping.Message, attempt int) error {
					if attempt == 1 && rand.IntN(15) == 0 {
						return errTransient
					}
					return nil
				}
			}
			opt := fastOptions()
			opt.Ordering = Ordering{MaxInFlight: 200, PerGroup: 1}
			opt.Batch = Batch{Size: 20, Concurrency: 4}
			h := start(t, Config{Options: opt}, q, sink)
			eventually(t, 30*time.Second, "every message acked", func() bool {
				return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) == n
			})
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			for g, count := range next {
				ids := sink.wireIDs(g)
				if dups := lastOccurrenceInOrder(t, "group "+g, ids, count); dups != 0 && !tc.failing {
					t.Errorf("group %q: %d copies beyond one each without failures", g, dups)
				}
			}
			if nacks := q.count(func(d *memDelivery) int64 { return d.nacks.Load() }); nacks != 0 {
				t.Errorf("%d nacks, want 0", nacks)
			}
			sink.mu.Lock()
			overlapped := sink.overlapped
			sink.mu.Unlock()
			if overlapped != tc.writes {
				t.Errorf("two calls of one lane out at once: %v, want %v", overlapped, tc.writes)
			}
		})
	}
}

// A stop while a lane's calls overlap and fail hands every message not
// confirmed back once, and in order per group: a broker redelivers in
// the order of the nacks.
func TestOverlappingCallsDrain(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "failures before the stop", true: "failures during the drain"}[during], func(t *testing.T) {
			overlappingDrain(t, during)
		})
	}
}

func overlappingDrain(t *testing.T, during bool) {
	const groups, n = 5, 2000
	q := newQueue(t)
	q.redeliver = true
	var msgs []*mapping.Message
	next := map[string]int{}
	for i := range n {
		g := fmt.Sprintf("g%d", i%groups)
		msgs = append(msgs, msg(g, next[g]))
		next[g]++
	}
	q.push(msgs...)
	sink := newSink(t)
	sink.ordered, sink.writes = true, true
	var failing atomic.Bool
	var failures atomic.Int64
	sink.delay = func(*mapping.Message) time.Duration { return time.Duration(rand.IntN(500)) * time.Microsecond }
	sink.fail = func(m *mapping.Message, attempt int) error {
		if failing.Load() && rand.IntN(3) == 0 {
			failures.Add(1)
			return errTransient
		}
		return nil
	}
	opt := fastOptions()
	opt.Ordering = Ordering{MaxInFlight: 400, PerGroup: 1}
	opt.Batch = Batch{Size: 40, Concurrency: 4}
	opt.Retry.Backoff = Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 1} // failures wait: the drain nacks them
	h := start(t, Config{Options: opt}, q, sink)
	eventually(t, 30*time.Second, "some messages acked", func() bool {
		return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) > n/10
	})
	failing.Store(true)
	if !during {
		eventually(t, 30*time.Second, "failures", func() bool { return failures.Load() >= 3 })
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	last := map[string]int{}
	handedBack := 0
	for _, d := range q.pending {
		if d.nacks.Load() == 0 && d.releases.Load() == 0 {
			continue // never received
		}
		handedBack++
		g, seq := d.msg.GroupKey, seqOfID(d.msg.ID)
		if prev, ok := last[g]; ok && seq <= prev {
			t.Errorf("group %s: %s handed back after %d: redelivery would reorder it", g, d.msg.ID, prev)
		}
		last[g] = seq
	}
	for _, d := range q.all {
		if settled := d.acks.Load() + d.nacks.Load() + d.releases.Load(); d.received.Load() > 0 && settled != 1 {
			t.Errorf("%s received and settled %d times, want once", d.msg.ID, settled)
		}
	}
	if handedBack == 0 {
		t.Error("nothing was handed back: the stop did not meet a failing lane")
	}
}

// The automatic bound on messages in flight is OverlapMaxInFlight where a
// lane's calls overlap, room for laneCalls full calls; a configured
// max_in_flight, or a sink whose calls do not overlap, keeps its own.
func TestOverlapMaxInFlight(t *testing.T) {
	for _, tc := range []struct {
		name         string
		writes, auto bool
		bound        int // the source's MaxUnsettled; 0: none
		want         int
	}{
		{"overlapping calls", true, true, 0, OverlapMaxInFlight},
		{"a source that holds back fewer", true, true, 1500, 1500},
		{"max_in_flight configured", true, false, 0, 1000},
		{"a sink that does not signal", false, true, 0, 1000},
		{"large messages", true, true, 0, 1000}, // the room beyond max_in_flight is for small ones
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "large messages" {
				// Restored by a cleanup registered before start's, so after
				// the pipeline has stopped: a defer ran while it still read
				// the value (a race -race caught in CI).
				n := overlapMaxBytes
				t.Cleanup(func() { overlapMaxBytes = n })
				overlapMaxBytes = 10 * (itemOverhead + 4) // ten messages weigh more
			}
			q := newQueue(t)
			for i := range OverlapMaxInFlight + 500 {
				q.push(msg("", i))
			}
			sink := newSink(t)
			sink.ordered, sink.writes = true, tc.writes
			gate := make(chan struct{})
			sink.gate = gate
			opt := fastOptions()
			opt.Ordering.MaxInFlightAuto = tc.auto
			cfg := Config{Options: opt}
			if tc.bound > 0 {
				src := &sourceOpener{q: q}
				cfg.Source = func(ctx context.Context) (driver.Source, error) {
					s, err := src.open(ctx)
					return boundedSource{s, tc.bound}, err
				}
			}
			start(t, cfg, q, sink)
			eventually(t, 10*time.Second, "the bound reached", func() bool { out, _ := q.stats(); return out >= tc.want })
			close(gate)
			eventually(t, 30*time.Second, "all sent", func() bool { return sink.count() >= OverlapMaxInFlight+500 })
			// Large messages: max_in_flight, plus the few the byte budget
			// left room for when a receive began.
			slack := 0
			if tc.name == "large messages" {
				slack = 10
			}
			if _, most := q.stats(); most < tc.want || most > tc.want+slack {
				t.Errorf("at most %d in flight, want %d (+%d)", most, tc.want, slack)
			}
		})
	}
}

// boundedSource says it holds back at most max unsettled messages
// (driver.UnsettledBound).
type boundedSource struct {
	driver.Source
	max int
}

func (b boundedSource) MaxUnsettled() int { return b.max }
