package bridge

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

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
