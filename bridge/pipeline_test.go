package bridge

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

var errTransient = errors.New("broker busy")

// seqOf returns the sequence number of a msg() id.
func seqOf(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(id[strings.LastIndexByte(id, '/')+1:])
	if err != nil {
		t.Fatalf("bad id %q", id)
	}
	return n
}

// checkOrder asserts that every group reached the sink exactly once per
// message, in sequence order.
func checkOrder(t *testing.T, sink *memSink, groups, perGroup int) {
	t.Helper()
	for g := range groups {
		ids := sink.groupIDs(fmt.Sprintf("g%d", g))
		if len(ids) != perGroup {
			t.Errorf("group g%d: %d messages at the sink, want %d", g, len(ids), perGroup)
		}
		for i, id := range ids {
			if seqOf(t, id) != i {
				t.Errorf("group g%d: position %d holds %s: out of order %v", g, i, id, ids)
				break
			}
		}
	}
}

func TestOrderingManyGroupsConcurrently(t *testing.T) {
	const groups, perGroup, ungrouped = 40, 50, 200
	q := newQueue(t)
	// Interleave the groups randomly, keeping each group's own order.
	next := make([]int, groups)
	var msgs []*mapping.Message
	for grouped := 0; grouped < groups*perGroup; {
		g := rand.IntN(groups)
		if next[g] < perGroup {
			msgs = append(msgs, msg(fmt.Sprintf("g%d", g), next[g]))
			next[g]++
			grouped++
		}
		if rand.IntN(10) == 0 {
			msgs = append(msgs, msg("", len(msgs)))
		}
	}
	for i := range ungrouped {
		msgs = append(msgs, msg("", 100000+i))
	}
	q.push(msgs...)

	sink := newSink(t)
	sink.delay = func(*mapping.Message) time.Duration { return time.Duration(rand.IntN(300)) * time.Microsecond }
	var fails atomic.Int64
	sink.fail = func(m *mapping.Message, attempt int) error {
		if rand.IntN(20) == 0 { // 5% transient failures, retried in order
			fails.Add(1)
			return errTransient
		}
		return nil
	}
	opt := fastOptions()
	opt.Ordering = Ordering{MaxInFlight: 64, PerGroup: 1}
	opt.Batch = Batch{Size: 8, Concurrency: 4}
	h := start(t, Config{Options: opt}, q, sink)

	eventually(t, 30*time.Second, "every message acked", func() bool {
		return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) == int64(len(msgs))
	})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, sink, groups, perGroup)
	if n := sink.count(); n != len(msgs) {
		t.Errorf("sink confirmed %d messages, want %d", n, len(msgs))
	}
	if nacks := q.count(func(d *memDelivery) int64 { return d.nacks.Load() }); nacks != 0 {
		t.Errorf("%d nacks, want 0", nacks)
	}
	if _, maxOut := q.stats(); maxOut > 64 {
		t.Errorf("%d messages in flight at once, limit 64", maxOut)
	}
	if sink.maxInGroup > 1 || sink.sameGroupIn {
		t.Errorf("group had %d in flight (same group in one batch: %v), limit 1", sink.maxInGroup, sink.sameGroupIn)
	}
	if fails.Load() == 0 {
		t.Log("no transient failure was injected")
	}
}

func TestPerGroupAllowsN(t *testing.T) {
	q := newQueue(t)
	for i := range 60 {
		q.push(msg("g0", i))
	}
	sink := newSink(t)
	sink.delay = func(*mapping.Message) time.Duration { return 2 * time.Millisecond }
	opt := fastOptions()
	opt.Ordering = Ordering{MaxInFlight: 100, PerGroup: 3}
	opt.Batch = Batch{Size: 1, Concurrency: 8}
	start(t, Config{Options: opt}, q, sink)
	eventually(t, 10*time.Second, "all sent", func() bool { return sink.count() == 60 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.maxInGroup > 3 {
		t.Errorf("max in flight per group = %d, want <= 3", sink.maxInGroup)
	}
	if sink.maxInGroup < 2 {
		t.Errorf("max in flight per group = %d: per_group 3 never used", sink.maxInGroup)
	}
}

func TestFailingGroupBlocksOnlyItself(t *testing.T) {
	q := newQueue(t)
	for i := range 20 {
		for g := range 5 {
			q.push(msg(fmt.Sprintf("g%d", g), i))
		}
		q.push(msg("bad", i))
	}
	sink := newSink(t)
	heal := make(chan struct{})
	sink.fail = func(m *mapping.Message, attempt int) error {
		if m.GroupKey == "bad" {
			select {
			case <-heal:
			default:
				return errTransient
			}
		}
		return nil
	}
	opt := fastOptions()
	opt.Ordering.MaxInFlight = 50
	start(t, Config{Options: opt}, q, sink)

	// Every other group completes while "bad" keeps failing.
	eventually(t, 10*time.Second, "healthy groups delivered", func() bool { return sink.count() == 100 })
	if got := sink.groupIDs("bad"); len(got) != 0 {
		t.Fatalf("bad group delivered %v while failing", got)
	}
	if s := sinkAttempts(sink, "bad/1"); s != 0 {
		t.Errorf("bad/1 was tried %d times while bad/0 was failing", s)
	}
	close(heal)
	eventually(t, 10*time.Second, "bad group delivered", func() bool { return len(sink.groupIDs("bad")) == 20 })
	checkOrder(t, sink, 5, 20)
	for i, id := range sink.groupIDs("bad") {
		if seqOf(t, id) != i {
			t.Fatalf("bad group out of order: %v", sink.groupIDs("bad"))
		}
	}
}

func sinkAttempts(s *memSink, id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[id]
}

func TestRetryBackoff(t *testing.T) {
	q := newQueue(t)
	q.push(msg("g", 0))
	sink := newSink(t)
	var times []time.Time
	var mu sync.Mutex
	sink.fail = func(m *mapping.Message, attempt int) error {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if attempt == 2 {
			return driver.Throttled(errTransient) // a broker's "slow down": retried, counted apart
		}
		if attempt <= 3 {
			return errTransient
		}
		return nil
	}
	opt := fastOptions()
	opt.Retry.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 60 * time.Millisecond, Multiplier: 2}
	m := NewMetrics(nil)
	start(t, Config{Options: opt, Metrics: m}, q, sink)
	eventually(t, 5*time.Second, "sent", func() bool { return sink.count() == 1 })

	mu.Lock()
	defer mu.Unlock()
	if len(times) != 4 {
		t.Fatalf("%d attempts, want 4", len(times))
	}
	// No jitter: 20ms, 40ms, then capped at 60ms.
	for i, want := range []time.Duration{20, 40, 60} {
		got := times[i+1].Sub(times[i])
		if got < want*time.Millisecond || got > want*time.Millisecond+200*time.Millisecond {
			t.Errorf("gap %d = %v, want about %dms", i, got, want)
		}
	}
	if got := counterValue(t, m.retried, "test", "mem"); got != 3 {
		t.Errorf("retried = %v, want 3", got)
	}
	if got := counterValue(t, m.throttled, "test", "mem"); got != 1 {
		t.Errorf("throttled = %v, want 1", got)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 3}
	for n, want := range map[int]time.Duration{0: 100, 1: 100, 2: 300, 3: 900, 4: 1000, 100: 1000} {
		if got := b.Delay(n); got != want*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %vms", n, got, want)
		}
	}
	b.Jitter = 0.5
	for range 1000 {
		if d := b.Delay(2); d < 150*time.Millisecond || d > 450*time.Millisecond {
			t.Fatalf("jittered Delay(2) = %v, want 150ms..450ms", d)
		}
		if d := b.Delay(10); d > time.Second {
			t.Fatalf("jittered Delay(10) = %v exceeds Max", d)
		}
	}
}

// dlqSink is a dead-letter sink recording what it got.
func dlqOpener(s *memSink) SinkOpener { return s.open }

func TestDeadLetter(t *testing.T) {
	tooLarge := mapping.TooLargef("sqs", "body", "message of 300000 bytes is too large (limit 262144)")
	tests := []struct {
		name      string
		fail      error // from the sink, every attempt
		transform error
		corrupt   error  // the source could not decode g/0
		dest      string // "sink", "native", "none"
		reason    string
	}{
		{"permanent to sink", driver.Permanent(errors.New("unauthorized")), nil, nil, "sink", ReasonPermanent},
		{"reject to sink", mapping.Rejectf("sqs", `attribute "a b"`, "invalid name"), nil, nil, "sink", ReasonRejected},
		{"too large to native", tooLarge, nil, nil, "native", ReasonTooLarge},
		{"retries exhausted to sink", errTransient, nil, nil, "sink", ReasonRetriesExhausted},
		{"retries exhausted to native", errTransient, nil, nil, "native", ReasonRetriesExhausted},
		{"mapping failure to sink", nil, mapping.Rejectf("mapping", `attribute "tenant"`, "missing"), nil, "sink", ReasonMapping},
		{"mapping failure to native", nil, errors.New("boom"), nil, "native", ReasonMapping},
		{"corrupt to sink", nil, nil, mapping.Rejectf("sqs", "MD5OfBody", "mismatch"), "sink", ReasonCorrupt},
		{"corrupt to native", nil, nil, mapping.Rejectf("nats", "qbridge.envelope", "malformed"), "native", ReasonCorrupt},
		{"no destination nacks", driver.Permanent(errors.New("unauthorized")), nil, nil, "none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t)
			orig := msg("g", 0)
			orig.Attributes = []mapping.Attribute{{Name: "a", Value: mapping.String("1")}}
			q.push(orig, msg("g", 1))
			q.deliveries()[0].decodeErr = tt.corrupt
			sink := newSink(t)
			sink.fail = func(m *mapping.Message, attempt int) error {
				if m.ID == "g/0" {
					return tt.fail
				}
				return nil
			}
			opt := fastOptions()
			opt.Retry.MaxAttempts = 3
			cfg := Config{Options: opt, Metrics: NewMetrics(nil)}
			if tt.transform != nil {
				cfg.Transform = func(m *mapping.Message) error {
					if m.ID == "g/0" {
						m.Subject = "changed"
						return tt.transform
					}
					return nil
				}
			}
			dlq := newSink(t)
			switch tt.dest {
			case "sink":
				cfg.DeadLetter = DeadLetter{Sink: dlq.open, SinkKind: "mem"}
			case "native":
				cfg.DeadLetter = DeadLetter{Native: true}
			}
			start(t, cfg, q, sink)
			d0 := q.deliveries()[0]

			switch tt.dest {
			case "sink":
				eventually(t, 5*time.Second, "dead-lettered and acked", func() bool { return d0.acks.Load() == 1 })
				if dlq.count() != 1 {
					t.Fatalf("dead-letter sink got %d messages", dlq.count())
				}
				got := dlq.confirmed[0]
				if r, _ := got.Attr(AttrDeadLetterReason); r.Str() != tt.reason {
					t.Errorf("DeadLetterReason = %q, want %q", r.Str(), tt.reason)
				}
				desc, _ := got.Attr(AttrDeadLetterDescription)
				if desc.Str() == "" {
					t.Error("no DeadLetterErrorDescription")
				}
				if tt.corrupt != nil && sinkAttempts(sink, "g/0") != 0 {
					t.Error("an undecodable message was sent to the sink")
				}
				if got.Subject == "changed" || got == orig {
					t.Error("dead-letter sink must get a copy of the message as received")
				}
				if len(orig.Attributes) != 1 {
					t.Errorf("the source's message was modified: %v", orig.Attributes)
				}
			case "native":
				eventually(t, 5*time.Second, "dead-lettered", func() bool { return d0.deadLetters.Load() == 1 })
				d0.mu.Lock()
				if d0.dlReason != tt.reason || d0.dlDesc == "" {
					t.Errorf("DeadLetter(%q, %q), want reason %q", d0.dlReason, d0.dlDesc, tt.reason)
				}
				d0.mu.Unlock()
			case "none":
				eventually(t, 5*time.Second, "nacked", func() bool { return d0.nacks.Load() == 1 })
				d0.mu.Lock()
				if d0.nackDelay <= 0 {
					t.Errorf("nack delay = %v, want a backoff", d0.nackDelay)
				}
				d0.mu.Unlock()
			}
			// The rest of the group goes on after the dead letter, in order.
			if tt.dest != "none" {
				eventually(t, 5*time.Second, "g/1 sent", func() bool { return len(sink.groupIDs("g")) == 1 })
				if v := counterValue(t, cfg.Metrics.deadLettered, "test", tt.reason); v != 1 {
					t.Errorf("dead_lettered{reason=%q} = %v, want 1", tt.reason, v)
				}
			}
		})
	}
}

func TestDeadLetterFailureNacksTheGroup(t *testing.T) {
	q := newQueue(t)
	q.push(msg("g", 0), msg("g", 1), msg("g", 2), msg("other", 0))
	sink := newSink(t)
	release := make(chan struct{})
	sink.fail = func(m *mapping.Message, attempt int) error {
		if m.ID == "g/0" {
			return driver.Permanent(errors.New("refused"))
		}
		return nil
	}
	dlq := newSink(t)
	dlq.fail = func(*mapping.Message, int) error { return errors.New("dlq down") }
	// Hold g/0's dead letter until its followers are queued behind it.
	dlq.gate = release
	opt := fastOptions()
	start(t, Config{Options: opt, DeadLetter: DeadLetter{Sink: dlq.open}}, q, sink)
	eventually(t, 5*time.Second, "all received", func() bool { out, _ := q.stats(); return out == 4 || sink.count() >= 1 })
	eventually(t, 5*time.Second, "other sent", func() bool { return len(sink.groupIDs("other")) == 1 })
	close(release)

	ds := q.deliveries()
	eventually(t, 5*time.Second, "group nacked", func() bool {
		return ds[0].nacks.Load() == 1 && ds[1].nacks.Load() == 1 && ds[2].nacks.Load() == 1
	})
	for _, d := range ds[:3] {
		if d.acks.Load() != 0 {
			t.Errorf("%s acked although its group was nacked", d.msg.ID)
		}
	}
	ds[0].mu.Lock()
	if ds[0].nackDelay <= 0 {
		t.Errorf("nack delay %v, want a backoff", ds[0].nackDelay)
	}
	ds[0].mu.Unlock()
	if got := sink.groupIDs("g"); len(got) != 0 {
		t.Errorf("followers sent out of order: %v", got)
	}
}

// TestDeadLetterSinkRefusesForGood: a message the dead-letter sink refuses
// for good (larger than the dead-letter queue takes) is nacked like any
// dead-letter failure, never acked, and the log says that only the source's
// redrive limit ends it.
func TestDeadLetterSinkRefusesForGood(t *testing.T) {
	q := newQueue(t)
	q.push(msg("g", 0))
	sink := newSink(t)
	sink.fail = func(*mapping.Message, int) error {
		return mapping.TooLargef("sqs", "message", "size 300000 bytes exceeds the limit of 262144")
	}
	dlq := newSink(t)
	dlq.fail = sink.fail
	var logs testlog.Buffer
	var mu sync.Mutex
	var told []string
	start(t, Config{Options: fastOptions(), DeadLetter: DeadLetter{Sink: dlq.open},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnUndeliverable: func(m *mapping.Message, reason string, err error) {
			mu.Lock()
			told = append(told, m.ID+" "+reason+" "+fmt.Sprint(err != nil))
			mu.Unlock()
		}}, q, sink)
	d := q.deliveries()[0]
	eventually(t, 5*time.Second, "nacked", func() bool { return d.nacks.Load() >= 1 })
	if d.acks.Load() != 0 {
		t.Error("acked although neither the sink nor the dead-letter sink took it")
	}
	mu.Lock()
	if len(told) == 0 || told[0] != "g/0 too-large true" {
		t.Errorf("OnUndeliverable calls %q, want g/0 too-large with the error", told)
	}
	mu.Unlock()
	if l := logs.String(); !strings.Contains(l, "the dead-letter sink refuses this message too") || !strings.Contains(l, "dlq_reason=too-large") {
		t.Errorf("log:\n%s", l)
	}
}

func TestNativeDeadLetterUnsupportedNacks(t *testing.T) {
	q := newQueue(t)
	q.noNative = true
	q.push(msg("g", 0))
	sink := newSink(t)
	sink.fail = func(*mapping.Message, int) error { return driver.Permanent(errors.New("no")) }
	start(t, Config{Options: fastOptions(), DeadLetter: DeadLetter{Native: true}}, q, sink)
	d := q.deliveries()[0]
	eventually(t, 5*time.Second, "nacked", func() bool { return d.nacks.Load() == 1 })
	if d.deadLetters.Load() != 0 || d.acks.Load() != 0 {
		t.Error("settled otherwise than by nack")
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	q := newQueue(t)
	for i := range 20 {
		q.push(msg(fmt.Sprintf("g%d", i%4), i/4))
	}
	sink := newSink(t)
	sink.delay = func(*mapping.Message) time.Duration { return 20 * time.Millisecond }
	opt := fastOptions()
	opt.ShutdownTimeout = 10 * time.Second
	h := start(t, Config{Options: opt}, q, sink)
	eventually(t, 5*time.Second, "all received", func() bool { return q.pendingLen() == 0 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// A group whose head had not gone to the sink yet when the stop came is
	// handed back whole (TestShutdownHandsBackUnsent); the others finish.
	acks := q.count(func(d *memDelivery) int64 { return d.acks.Load() })
	back := q.count(func(d *memDelivery) int64 { return d.releases.Load() })
	if acks+back != 20 || acks == 0 {
		t.Errorf("%d acked and %d handed back after a graceful stop, want 20 in all", acks, back)
	}
	if !sink.isClosed() || !h.src.allClosed() {
		t.Error("adapters not closed")
	}
	for g := range 4 {
		ids := sink.groupIDs(fmt.Sprintf("g%d", g))
		if len(ids) != 0 && len(ids) != 5 {
			t.Errorf("group g%d: %d of 5 sent: a group is finished or handed back whole", g, len(ids))
		}
		for i, id := range ids {
			if seqOf(t, id) != i {
				t.Errorf("group g%d out of order: %v", g, ids)
				break
			}
		}
	}
}

// On shutdown the messages received and never sent are handed back at once
// (Release, which costs no delivery attempt, where the delivery has it),
// except those queued behind a message at the sink: they follow it, so the
// group's order holds. The message at the sink finishes.
func TestShutdownHandsBackUnsent(t *testing.T) {
	q := newQueue(t)
	q.push(msg("a", 0), msg("a", 1), msg("b", 0), msg("b", 1), msg("", 0), msg("", 1))
	sink := newSink(t)
	gate := make(chan struct{})
	sink.gate = gate
	opt := fastOptions()
	opt.Batch = Batch{Size: 1, Concurrency: 1}
	opt.ShutdownTimeout = time.Minute
	h := start(t, Config{Options: opt}, q, sink)
	eventually(t, 5*time.Second, "a/0 at the sink, all received", func() bool {
		out, _ := q.stats()
		return sinkAttempts(sink, "a/0") == 1 && out == 6
	})
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	ds := q.deliveries()
	eventually(t, 5*time.Second, "hand-back", func() bool {
		return q.count(func(d *memDelivery) int64 { return d.releases.Load() }) == 4
	})
	// /readyz says what happens: it said "opening adapters or restarting
	// its source" while the pipeline drained.
	if err := h.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), `stopping (`) {
		t.Errorf("Ready while stopping: %v", err)
	}
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"ack", "ack", "release", "release", "release", "release"} {
		d := ds[i]
		got := map[[3]int64]string{{1, 0, 0}: "ack", {0, 1, 0}: "nack", {0, 0, 1}: "release"}[[3]int64{d.acks.Load(), d.nacks.Load(), d.releases.Load()}]
		if got != want {
			t.Errorf("%s: %s (acks %d nacks %d releases %d), want %s", d.msg.ID, got, d.acks.Load(), d.nacks.Load(), d.releases.Load(), want)
		}
	}
	if ids := sink.groupIDs("a"); len(ids) != 2 || ids[0] != "a/0" || ids[1] != "a/1" {
		t.Errorf("group a at the sink: %v, want a/0 a/1", ids)
	}
}

func TestShutdownDeadlineNacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		for i := range 10 {
			q.push(msg("", i))
		}
		sink := newSink(t)
		sink.gate = make(chan struct{}) // never opens: Send returns when its ctx ends
		opt := fastOptions()
		opt.ShutdownTimeout = 50 * time.Millisecond
		h := start(t, Config{Options: opt}, q, sink)
		// All at the sink, not just received: what a stop finds not yet sent
		// is handed back instead (TestShutdownHandsBackUnsent), which a loaded
		// machine made this test see.
		eventually(t, 5*time.Second, "all at the sink", func() bool {
			n := 0
			for i := range 10 {
				n += sinkAttempts(sink, fmt.Sprintf("/%d", i))
			}
			return n == 10
		})
		began := time.Now()
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(began); el > opt.ShutdownTimeout { // bubble time: the shutdown timeout, no more
			t.Errorf("stop took %v", el)
		}
		if nacks := q.count(func(d *memDelivery) int64 { return d.nacks.Load() }); nacks != 10 {
			t.Errorf("%d nacked, want 10", nacks)
		}
		if out, _ := q.stats(); out != 0 {
			t.Errorf("%d deliveries unsettled after stop", out)
		}
		if !sink.isClosed() || !h.src.allClosed() {
			t.Error("adapters not closed")
		}
	})
}

func TestShutdownNacksRetryingAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		q.push(msg("g", 0), msg("g", 1), msg("h", 0))
		sink := newSink(t)
		sink.fail = func(m *mapping.Message, attempt int) error {
			if m.GroupKey == "g" {
				return errTransient
			}
			return nil
		}
		opt := fastOptions()
		opt.Retry.Backoff = Backoff{Initial: 10 * time.Second, Max: 10 * time.Second, Multiplier: 1}
		h := start(t, Config{Options: opt}, q, sink)
		eventually(t, 5*time.Second, "g/0 tried, h sent", func() bool {
			return sinkAttempts(sink, "g/0") == 1 && sink.count() == 1
		})
		began := time.Now()
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(began); el >= opt.Retry.Backoff.Initial { // bubble time: not after a backoff
			t.Errorf("stop waited %v for a retry", el)
		}
		ds := q.deliveries()
		if ds[0].nacks.Load() != 1 || ds[1].nacks.Load() != 1 || ds[2].acks.Load() != 1 {
			t.Errorf("nacks g/0=%d g/1=%d, ack h/0=%d; want 1 1 1", ds[0].nacks.Load(), ds[1].nacks.Load(), ds[2].acks.Load())
		}
	})
}

func TestInFlightBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		for i := range 300 {
			q.push(msg(fmt.Sprintf("g%d", i%50), i/50))
		}
		sink := newSink(t)
		gate := make(chan struct{})
		sink.gate = gate
		opt := fastOptions()
		opt.Ordering.MaxInFlight = 20
		opt.Batch.Size = 7
		h := start(t, Config{Options: opt}, q, sink)
		// Everything that can move has moved once the bubble is blocked;
		// a minute later still nothing more has been taken.
		for _, after := range []time.Duration{0, time.Minute} {
			time.Sleep(after)
			synctest.Wait()
			if out, maxOut := q.stats(); out != 20 || maxOut != 20 {
				t.Fatalf("after %s: %d in flight (at most %d), want exactly 20 while the sink is stuck", after, out, maxOut)
			}
		}
		if s := h.p.Stats(); s.InFlight != 20 || !s.Running {
			t.Errorf("Stats = %+v", s)
		}
		sink.mu.Lock()
		sink.gate = nil
		sink.mu.Unlock()
		close(gate)
		eventually(t, 10*time.Second, "all sent", func() bool { return sink.count() == 300 })
		if _, maxOut := q.stats(); maxOut > 20 {
			t.Errorf("max in flight %d, limit 20", maxOut)
		}
		checkOrder(t, sink, 50, 6)
	})
}

func TestGroupBacklogStats(t *testing.T) {
	q := newQueue(t)
	for i := range 5 {
		q.push(msg("a", i))
	}
	q.push(msg("b", 0), msg("b", 1))
	sink := newSink(t)
	gate := make(chan struct{})
	sink.gate = gate
	h := start(t, Config{Options: fastOptions()}, q, sink)
	eventually(t, 5*time.Second, "backlog", func() bool {
		s := h.p.Stats()
		return s.InFlight == 7 && s.GroupsBacklogged == 2 && s.MaxGroupBacklog == 4
	})
	close(gate)
}

func TestSourceRestartsAfterReceiveError(t *testing.T) {
	q := newQueue(t)
	for i := range 10 {
		q.push(msg("g", i))
	}
	// The 2nd Receive fails; the engine drains, reopens and goes on.
	q.receiveErr = func(calls int) error {
		if calls == 2 {
			return errors.New("connection lost")
		}
		return nil
	}
	sink := newSink(t)
	opt := fastOptions()
	opt.Batch.Size = 3
	m := NewMetrics(nil)
	// Every open succeeds (failN 0), the reopen after the error too. src is
	// set up before the pipeline runs: its open reads failN concurrently.
	src := &sourceOpener{q: q}
	start(t, Config{Options: opt, Metrics: m, Source: src.open}, q, sink)
	eventually(t, 5*time.Second, "all sent", func() bool { return sink.count() == 10 })
	if n := src.opens.Load(); n != 2 {
		t.Errorf("source opened %d times, want 2", n)
	}
	if v := counterValue(t, m.restarts, "test", "mem"); v != 1 {
		t.Errorf("restarts = %v", v)
	}
	checkOrder(t, sink, 0, 0)
	for i, id := range sink.groupIDs("g") {
		if seqOf(t, id) != i {
			t.Fatalf("out of order after restart: %v", sink.groupIDs("g"))
		}
	}
}

func TestOpenFailuresAreRetried(t *testing.T) {
	q := newQueue(t)
	q.push(msg("", 0))
	sink := newSink(t)
	src := &sourceOpener{q: q, failN: 3}
	h := start(t, Config{Options: fastOptions(), Source: src.open}, q, sink)
	if err := h.p.Ready(context.Background()); err == nil && sink.count() == 0 {
		// Ready may be true only once the source is open.
		t.Log("ready before open")
	}
	eventually(t, 5*time.Second, "sent", func() bool { return sink.count() == 1 })
	if n := src.opens.Load(); n != 4 {
		t.Errorf("opens = %d, want 4", n)
	}
	if err := h.p.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

func TestHeartbeatExtendsInFlight(t *testing.T) {
	q := newQueue(t)
	q.push(msg("g", 0), msg("g", 1), msg("", 0))
	sink := newSink(t)
	sink.delay = func(*mapping.Message) time.Duration { return 120 * time.Millisecond }
	opt := fastOptions()
	opt.Lock = Lock{ExtendEvery: 20 * time.Millisecond, ExtendBy: time.Second}
	start(t, Config{Options: opt}, q, sink)
	eventually(t, 5*time.Second, "all acked", func() bool {
		return q.count(func(d *memDelivery) int64 { return d.acks.Load() }) == 3
	})
	for _, d := range q.deliveries() {
		// g/1 waits behind g/0 and is extended while queued, too.
		if n := d.extends.Load(); n < 3 {
			t.Errorf("%s extended %d times, want >= 3", d.msg.ID, n)
		}
	}
}

func TestBatching(t *testing.T) {
	q := newQueue(t)
	sink := newSink(t)
	gate := make(chan struct{})
	sink.gate = gate
	opt := fastOptions()
	opt.Batch = Batch{Size: 10, Concurrency: 1}
	h := start(t, Config{Options: opt}, q, sink)
	q.push(msg("first", 0))
	eventually(t, 5*time.Second, "first batch in flight", func() bool { return sinkAttempts(sink, "first/0") == 1 })
	for i := range 25 {
		q.push(msg(fmt.Sprintf("g%d", i), 0))
	}
	sink.mu.Lock()
	sink.gate = nil
	sink.mu.Unlock()
	// Let the 25 queue up (ready) behind the stuck send.
	eventually(t, 5*time.Second, "26 in flight", func() bool { return h.p.Stats().InFlight == 26 })
	close(gate)
	eventually(t, 5*time.Second, "all sent", func() bool { return sink.count() == 26 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	want := []int{1, 10, 10, 5}
	if fmt.Sprint(sink.batchSizes) != fmt.Sprint(want) {
		t.Errorf("batch sizes %v, want %v", sink.batchSizes, want)
	}
}

func TestLingerFillsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		sink := newSink(t)
		opt := fastOptions()
		opt.Batch = Batch{Size: 4, Linger: 200 * time.Millisecond, Concurrency: 1}
		start(t, Config{Options: opt}, q, sink)
		synctest.Wait()
		// 4 messages 50 ms apart: within one linger (the bubble's clock
		// moves only when everything waits, so the gaps are exact).
		for i := range 4 {
			q.push(msg("", i))
			time.Sleep(50 * time.Millisecond)
		}
		eventually(t, 5*time.Second, "all sent", func() bool { return sink.count() == 4 })
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if fmt.Sprint(sink.batchSizes) != "[4]" {
			t.Errorf("batch sizes %v, want [4]", sink.batchSizes)
		}
	})
}

func TestTransformSetsGroupKey(t *testing.T) {
	q := newQueue(t)
	for i := range 30 {
		m := msg("", i)
		m.Attributes = []mapping.Attribute{{Name: "tenant", Value: mapping.String(fmt.Sprintf("t%d", i%3))}}
		m.ID = fmt.Sprintf("x/%d", i/3)
		q.push(m)
	}
	sink := newSink(t)
	sink.delay = func(*mapping.Message) time.Duration { return time.Duration(rand.IntN(500)) * time.Microsecond }
	opt := fastOptions()
	opt.Batch = Batch{Size: 4, Concurrency: 4}
	cfg := Config{Options: opt, Transform: func(m *mapping.Message) error {
		v, _ := m.Attr("tenant")
		m.GroupKey = strings.Replace(v.Str(), "t", "g", 1)
		return nil
	}}
	start(t, cfg, q, sink)
	eventually(t, 5*time.Second, "all sent", func() bool { return sink.count() == 30 })
	checkOrder(t, sink, 3, 10)
	for _, d := range q.deliveries() {
		if d.msg.GroupKey != "" {
			t.Fatal("Transform modified the source's message")
		}
	}
}

// What the sink's encoder and the dead-letter sink's encoder leave out or
// encode is counted apart (role), each under its own sink's kind.
func TestDropCounted(t *testing.T) {
	q := newQueue(t)
	q.push(msg("", 0))
	sink, dl := newSink(t), newSink(t)
	m := NewMetrics(nil)
	cfg := Config{Options: fastOptions(), Metrics: m}
	cfg.DeadLetter.Sink, cfg.DeadLetter.SinkKind = dl.open, "memdl"
	start(t, cfg, q, sink)
	eventually(t, 5*time.Second, "sent", func() bool { return sink.count() == 1 })
	onDrop := func(s *memSink) func(field, reason string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.onDrop
	}
	onDrop(sink)(`attribute "x"`, "too many attributes")
	enc := &mapping.Options{OnDrop: onDrop(dl)}
	enc.Encoded(`attribute "y"`, "into the carry envelope")
	enc.Encoded(`attribute "z"`, "into the carry envelope")
	for _, c := range []struct {
		v      *prometheus.CounterVec
		labels []string
		want   float64
	}{
		{m.dropped, []string{"test", "mem", "sink"}, 1},
		{m.encoded, []string{"test", "mem", "sink"}, 0},
		{m.dropped, []string{"test", "memdl", "dead_letter"}, 0},
		{m.encoded, []string{"test", "memdl", "dead_letter"}, 2},
	} {
		if v := counterValue(t, c.v, c.labels...); v != c.want {
			t.Errorf("%v = %v, want %v", c.labels, v, c.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	src := func(context.Context) (driver.Source, error) { return nil, nil }
	snk := func(context.Context, func(string, string)) (driver.Sink, error) { return nil, nil }
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name", Config{Source: src, Sink: snk}, "needs a name"},
		{"no source", Config{Name: "x", Sink: snk}, "needs a source and a sink"},
		{"both dead letters", Config{Name: "x", Source: src, Sink: snk, DeadLetter: DeadLetter{Native: true, Sink: snk}}, "not both"},
		{"per group above max", Config{Name: "x", Source: src, Sink: snk, Options: Options{Ordering: Ordering{MaxInFlight: 2, PerGroup: 3}}}, "per_group cannot exceed"},
		{"lock lapses", Config{Name: "x", Source: src, Sink: snk, Options: Options{Lock: Lock{ExtendEvery: time.Minute, ExtendBy: time.Second}}}, "extend_by must be longer"},
		{"bad jitter", Config{Name: "x", Source: src, Sink: snk, Options: Options{Retry: Retry{Backoff: Backoff{Initial: 1, Max: 1, Multiplier: 1, Jitter: 2}}}}, "jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	q := newQueue(t)
	h := start(t, Config{Options: fastOptions()}, q, newSink(t))
	eventually(t, 5*time.Second, "running", func() bool { return h.p.Stats().Running })
	if err := h.p.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("ab€cd", 4); got != "ab" {
		t.Errorf("truncate = %q, want %q (cut at a rune boundary)", got, "ab")
	}
	if got := truncate("abc", 10); got != "abc" {
		t.Errorf("truncate = %q", got)
	}
}

// BenchmarkPipeline moves b.N grouped messages (100 groups) from the
// in-memory source to the in-memory sink through the engine, and reports
// the process's CPU per message (getrusage) next to a baseline measured in
// the same run: a plain loop over the same in-memory adapters (receive 100,
// send them, ack each), which is what the engine adds its work to.
// allocs/op is per message.
func BenchmarkPipeline(b *testing.B) {
	msgs := make([]*mapping.Message, b.N)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("g%d", i%100), i/100)
	}
	// Baseline: the loop a hand-written forwarder would run.
	bq, bsink := newQueue(b), newSink(b)
	bq.push(msgs...)
	cpu0 := cpuTime()
	for done := 0; done < b.N; {
		ds, err := bq.receive(context.Background(), 100)
		if err != nil {
			b.Fatal(err)
		}
		batch := make([]*mapping.Message, len(ds))
		for i, d := range ds {
			batch[i] = d.Message()
		}
		for i, err := range bsink.Send(context.Background(), batch) {
			if err == nil {
				_ = ds[i].Ack(context.Background())
			}
		}
		done += len(ds)
	}
	baseCPU := cpuTime() - cpu0

	q := newQueue(b)
	sink := newSink(b)
	q.push(msgs...) // before the measurement, as for the baseline
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 = cpuTime()
	start(b, Config{Options: fastOptions()}, q, sink)
	for sink.count() < b.N {
		time.Sleep(time.Millisecond)
	}
	for q.count(func(d *memDelivery) int64 { return d.acks.Load() }) < int64(b.N) {
		time.Sleep(time.Millisecond) // the last acks
	}
	b.StopTimer()
	qbCPU := cpuTime() - cpu0
	perMsg := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perMsg(qbCPU), "cpu-µs/msg")
	b.ReportMetric(perMsg(baseCPU), "baseline-cpu-µs/msg")
	b.ReportMetric(float64(qbCPU)/float64(max(baseCPU, 1)), "cpu-ratio")
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDryRunDeadLetterLogsWhatItDoes: a destination that only records (a
// migration's dry run) is not logged as a dead letter, and the line names
// where the pipeline would put it (it said "to=native", the recording
// stand-in, whatever the pipeline had), or that it has nowhere.
func TestDryRunDeadLetterLogsWhatItDoes(t *testing.T) {
	for _, tc := range []struct {
		to            string
		want, wantNot string
	}{
		{"sqs", `msg="message would be dead-lettered (dry run: nothing is written or settled)"`, "to=native"},
		{"native", "to=native", "would stay"},
		{"", "would not be dead-lettered: the pipeline has no dead_letter destination, so it would stay at the source", "to="},
	} {
		t.Run(tc.to, func(t *testing.T) {
			q := newQueue(t)
			q.push(msg("g", 0))
			sink := newSink(t)
			sink.fail = func(*mapping.Message, int) error { return driver.Permanent(errors.New("no")) }
			var logs testlog.Buffer
			start(t, Config{Options: fastOptions(), DeadLetter: DeadLetter{Native: true, DryRun: true, DryRunTo: tc.to},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, q, sink)
			d := q.deliveries()[0]
			eventually(t, 5*time.Second, "recorded", func() bool { return d.deadLetters.Load() == 1 })
			eventually(t, 5*time.Second, "logged", func() bool { return strings.Contains(logs.String(), "dry run: nothing is written") })
			l := logs.String()
			if strings.Contains(l, `msg="message dead-lettered"`) || !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, tc.want) || strings.Contains(l, tc.wantNot) {
				t.Errorf("want %q, not %q; log:\n%s", tc.want, tc.wantNot, l)
			}
			if tc.to != "" && !strings.Contains(l, "to="+tc.to) {
				t.Errorf("want to=%s; log:\n%s", tc.to, l)
			}
		})
	}
}

// TestRetriesExhaustedIsNotUndeliverable: a message whose retries ran out
// on transient failures is handed back, and is no undeliverable one: its
// next delivery goes through once the sink recovers.
func TestRetriesExhaustedIsNotUndeliverable(t *testing.T) {
	q := newQueue(t)
	q.redeliver = true
	q.push(msg("g", 0))
	sink := newSink(t)
	var down atomic.Bool
	down.Store(true)
	sink.fail = func(*mapping.Message, int) error {
		if down.Load() {
			return errTransient
		}
		return nil
	}
	var calls atomic.Int64
	opt := fastOptions()
	opt.Retry.MaxAttempts = 2
	start(t, Config{Options: opt, OnUndeliverable: func(*mapping.Message, string, error) { calls.Add(1) }}, q, sink)
	d := q.deliveries()[0]
	eventually(t, 5*time.Second, "handed back", func() bool { return d.nacks.Load() >= 1 })
	down.Store(false)
	eventually(t, 5*time.Second, "sent on its next delivery", func() bool { return sink.count() == 1 })
	if n := calls.Load(); n != 0 {
		t.Errorf("OnUndeliverable called %d times for a transient failure", n)
	}
}

// TestUndeliverableWithoutDestination: with no dead-letter destination a
// permanently refused message is handed back for good, and said so.
func TestUndeliverableWithoutDestination(t *testing.T) {
	q := newQueue(t)
	q.push(msg("g", 0))
	sink := newSink(t)
	sink.fail = func(*mapping.Message, int) error { return mapping.Rejectf("sqs", `attribute "a b"`, "invalid name") }
	var calls atomic.Int64
	start(t, Config{Options: fastOptions(), OnUndeliverable: func(m *mapping.Message, reason string, err error) {
		if m.ID == "g/0" && reason == ReasonRejected && err != nil {
			calls.Add(1)
		}
	}}, q, sink)
	eventually(t, 5*time.Second, "told", func() bool { return calls.Load() >= 1 })
}

// The sink gets the time to live a message has left (its TTL less its time
// at the source, AMQP's reduced ttl), and one that expired on the way the
// least there is; the dead-letter sink gets the message as it came.
func TestSinkGetsTheTTLLeft(t *testing.T) {
	q := newQueue(t)
	waited := msg("g", 0)
	waited.TTL, waited.Source.EnqueuedTime = time.Minute, time.Now().Add(-45*time.Second)
	expired := msg("g", 1)
	expired.TTL, expired.Source.EnqueuedTime = time.Minute, time.Now().Add(-2*time.Minute)
	fresh := msg("g", 2)
	fresh.TTL = time.Minute
	q.push(waited, expired, fresh)
	var mu sync.Mutex
	sent := map[string]time.Duration{}
	sink := newSink(t)
	sink.fail = func(m *mapping.Message, attempt int) error {
		mu.Lock()
		sent[m.ID] = m.TTL
		mu.Unlock()
		if m.ID == "g/0" {
			return driver.Permanent(errors.New("refused"))
		}
		return nil
	}
	dlq := newSink(t)
	cfg := Config{Options: fastOptions(), Metrics: NewMetrics(nil), DeadLetter: DeadLetter{Sink: dlq.open, SinkKind: "mem"}}
	start(t, cfg, q, sink)
	eventually(t, 5*time.Second, "g/2 sent", func() bool { return len(sink.groupIDs("g")) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if got := sent["g/0"]; got > 15*time.Second || got < 10*time.Second {
		t.Errorf("g/0 (45 s of its minute gone) sent with TTL %v, want about 15s", got)
	}
	if got := sent["g/1"]; got != mapping.MinTTLLeft {
		t.Errorf("g/1 (expired on the way) sent with TTL %v, want %v", got, mapping.MinTTLLeft)
	}
	if got := sent["g/2"]; got > time.Minute || got < 55*time.Second {
		t.Errorf("g/2 sent with TTL %v, want about a minute", got)
	}
	if dlq.count() != 1 || dlq.confirmed[0].TTL != time.Minute {
		t.Errorf("the dead-letter sink got %d messages, TTL %v; want g/0 as it came (1m)", dlq.count(), dlq.confirmed[0].TTL)
	}
	if waited.TTL != time.Minute {
		t.Errorf("the source's message was modified: TTL %v", waited.TTL)
	}
}

// A sink that confirms nothing while messages wait for it makes the
// pipeline not ready after StallAfter, with the figures; the broker of a
// stalled sink (a process stopped, its connection open) looks connected to
// its client for minutes, so /readyz said ok throughout. It is ready again
// once the sink confirms.
func TestStalledSinkMakesThePipelineNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		sink := newSink(t)
		gate := make(chan struct{})
		sink.gate = gate
		opt := fastOptions()
		opt.StallAfter = time.Minute
		h := start(t, Config{Options: opt}, q, sink)
		ctx := context.Background()
		synctest.Wait()
		q.push(msg("", 0), msg("", 1))
		synctest.Wait()
		if err := h.p.Ready(ctx); err != nil {
			t.Fatalf("before StallAfter: %v", err)
		}
		time.Sleep(30 * time.Second)
		if err := h.p.Ready(ctx); err != nil {
			t.Fatalf("half way: %v", err)
		}
		time.Sleep(31 * time.Second)
		err := h.p.Ready(ctx)
		if err == nil || !strings.Contains(err.Error(), "the sink has confirmed nothing for 1m1s while 2 messages wait (the oldest for 1m1s)") {
			t.Fatalf("after StallAfter: %v", err)
		}
		close(gate)
		synctest.Wait()
		if err := h.p.Ready(ctx); err != nil {
			t.Fatalf("after the sink confirmed: %v", err)
		}
		// Quiet afterwards (nothing waits) is not a stall.
		time.Sleep(2 * time.Minute)
		if err := h.p.Ready(ctx); err != nil {
			t.Fatalf("quiet: %v", err)
		}
	})
}

// A stop whose drain deadline passes, and whose adapters' closes hang,
// ends within shutdown_timeout + one opTimeout: the last settlements and
// the closes of source, sink and dead-letter sink share it. Each had its
// own, shutdown_timeout + 60 s at worst, above the grace period the
// manifests give (an SRE audit added it up).
func TestStopIsBoundedAsAWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t)
		q.hangClose = true
		sink := newSink(t)
		sink.hangClose = true
		sink.gate = make(chan struct{}) // a send that never ends
		dlq := newSink(t)
		dlq.hangClose = true
		opt := fastOptions()
		opt.ShutdownTimeout = 5 * time.Second
		h := start(t, Config{Options: opt, DeadLetter: DeadLetter{Sink: dlq.open}}, q, sink)
		q.push(msg("g", 0))
		synctest.Wait()
		began := time.Now()
		h.cancel()
		select {
		case <-h.done:
			close(h.done) // for the harness's own stop at cleanup
		case <-time.After(5 * time.Minute):
			t.Fatal("the pipeline did not stop")
		}
		if took := time.Since(began); took > opt.ShutdownTimeout+opTimeout {
			t.Errorf("the stop took %v, want at most %v", took, opt.ShutdownTimeout+opTimeout)
		}
	})
}

// A delivery that its adapter reuses (driver.Recycler) is recycled once,
// after the ack batch that settled it, and never when it was dead-lettered
// or its ack failed: reuse before then would hand the engine another
// message's fields.
func TestRecycleOnlyAfterAck(t *testing.T) {
	q := newQueue(t)
	q.recycle = true
	var msgs []*mapping.Message
	for i := range 20 {
		for _, g := range []string{"a", "b", "c"} {
			msgs = append(msgs, msg(g, i))
		}
	}
	msgs = append(msgs, msg("bad", 0), msg("retried", 0), msg("ackfails", 0))
	ids := make([]string, len(msgs)) // Recycle scribbles over the messages
	for i, m := range msgs {
		ids[i] = m.ID
	}
	q.push(msgs...)
	ackFails := q.deliveries()[len(msgs)-1]
	ackFails.ackErr = errors.New("ack refused")
	sink := newSink(t)
	sink.fail = func(m *mapping.Message, attempt int) error {
		switch {
		case m.ID == "bad/0":
			return driver.Permanent(errors.New("refused for good"))
		case m.ID == "retried/0" && attempt == 1:
			return errTransient
		}
		return nil
	}
	dlq := newSink(t)
	cfg := Config{Options: fastOptions(), DeadLetter: DeadLetter{Sink: dlq.open, SinkKind: "mem"}}
	start(t, cfg, q, sink)
	eventually(t, 10*time.Second, "every message settled", func() bool {
		out, _ := q.stats()
		return out == 0 && q.pendingLen() == 0
	})
	h := q.deliveries()
	eventually(t, 10*time.Second, "the acked ones recycled", func() bool {
		n := int64(0)
		for _, d := range h {
			n += d.recycles.Load()
		}
		return n >= int64(len(msgs)-2)
	})
	for i, d := range h {
		want := int64(1)
		if id := ids[i]; id == "bad/0" || id == "ackfails/0" {
			want = 0 // dead-lettered (and acked by the dead-letter path), or its ack failed
		}
		if got := d.recycles.Load(); got != want {
			t.Errorf("delivery %d (%s): recycled %d times, want %d", i, ids[i], got, want)
		}
	}
	if n := sinkAttempts(sink, "recycled"); n != 0 {
		t.Errorf("the sink got a recycled message %d times", n)
	}
	for _, g := range []string{"a", "b", "c"} {
		ids := sink.groupIDs(g)
		if len(ids) != 20 {
			t.Fatalf("group %s: sink has %d messages, want 20", g, len(ids))
		}
		for i, id := range ids {
			if want := fmt.Sprintf("%s/%d", g, i); id != want {
				t.Fatalf("group %s: message %d is %s, want %s", g, i, id, want)
			}
		}
	}
	if dlq.count() != 1 {
		t.Errorf("dead-letter sink got %d messages, want 1", dlq.count())
	}
}

// retryLogHandler holds the first "sink failed; retrying" record until
// release is closed, and records the ids of every such record.
type retryLogHandler struct {
	release <-chan struct{}
	mu      sync.Mutex
	held    bool
	ids     []string
}

func (h *retryLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *retryLogHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *retryLogHandler) WithGroup(string) slog.Handler            { return h }
func (h *retryLogHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sink failed; retrying" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "id" {
			h.mu.Lock()
			h.ids = append(h.ids, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	h.mu.Lock()
	first := !h.held
	h.held = true
	h.mu.Unlock()
	if first {
		select {
		case <-h.release:
		case <-time.After(10 * time.Second):
		}
	}
	return nil
}

// A sender logs its retries after it scheduled them; by then another sender
// may have sent, acked and recycled one of them. The log must not read the
// message then: here the first retry's log line is held until both retried
// messages were recycled, so a late read sees the recycled message.
func TestRetryLogDoesNotReadARecycledMessage(t *testing.T) {
	q := newQueue(t)
	q.recycle = true
	q.push(msg("x", 0), msg("y", 0))
	sink := newSink(t)
	sink.fail = func(m *mapping.Message, attempt int) error {
		if attempt == 1 {
			return errTransient
		}
		return nil
	}
	opt := fastOptions()
	opt.Batch.Size, opt.Batch.Linger = 2, time.Minute // both in one call
	release := make(chan struct{})
	h := &retryLogHandler{release: release}
	start(t, Config{Options: opt, Logger: slog.New(h)}, q, sink)
	ds := q.deliveries()
	eventually(t, 10*time.Second, "both retried, acked and recycled", func() bool {
		return ds[0].recycles.Load() == 1 && ds[1].recycles.Load() == 1
	})
	close(release)
	eventually(t, 10*time.Second, "both retries logged", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.ids) == 2
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.Sort(h.ids)
	if !slices.Equal(h.ids, []string{"x/0", "y/0"}) {
		t.Errorf("retries logged with ids %q, want x/0 and y/0", h.ids)
	}
}

// A message nothing takes, handed back again and again with no dead_letter
// (a broker without a redelivery delay sends it straight back), is logged
// about once a second with the number left out, not once per return: an
// AMQP migration wrote 20,627 error lines in 6.6 s.
func TestUndeliverableLogIsPaced(t *testing.T) {
	q := newQueue(t)
	q.redeliver = true // straight back, as AMQP does
	q.push(msg("g", 0))
	sink := newSink(t)
	sink.fail = func(*mapping.Message, int) error { return mapping.Rejectf("sqs", `attribute "a b"`, "invalid name") }
	var calls atomic.Int64
	var logs syncLog
	began := time.Now()
	o := fastOptions()
	o.Retry.Backoff = Backoff{Initial: time.Microsecond, Max: time.Microsecond, Multiplier: 1}
	h := start(t, Config{Options: o, Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnUndeliverable: func(*mapping.Message, string, error) { calls.Add(1) }}, q, sink)
	eventually(t, 10*time.Second, "50 returns", func() bool { return calls.Load() >= 50 })
	h.stop()
	elapsed := time.Since(began)
	lines := strings.Count(logs.String(), "no dead_letter is configured")
	if lines < 1 || lines > int(elapsed/time.Second)+2 {
		t.Errorf("%d lines for %d returns in %v", lines, calls.Load(), elapsed)
	}
	if lines < int(calls.Load()) && !strings.Contains(logs.String(), "like_it_since_the_last_line=") {
		t.Error("the lines do not say how many were left out")
	}
}

// Dead letters are logged one by one for the first ten, then about once a
// second with the number left out: a migration whose sink refused a whole
// backlog printed a warning per message.
func TestDeadLetterLogIsPaced(t *testing.T) {
	q := newQueue(t)
	for i := range 200 {
		q.push(msg(fmt.Sprintf("g%d", i%10), i))
	}
	sink := newSink(t)
	sink.fail = func(*mapping.Message, int) error { return driver.Permanent(errors.New("refused")) }
	dlq := newSink(t)
	var logs syncLog
	began := time.Now()
	h := start(t, Config{Options: fastOptions(), Logger: slog.New(slog.NewTextHandler(&logs, nil)), DeadLetter: DeadLetter{Sink: dlq.open}}, q, sink)
	eventually(t, 10*time.Second, "200 dead letters", func() bool { return dlq.count() == 200 })
	h.stop()
	elapsed := time.Since(began)
	lines := strings.Count(logs.String(), "message dead-lettered")
	if lines < 10 || lines > 10+int(elapsed/time.Second)+1 {
		t.Errorf("%d lines for 200 dead letters in %v", lines, elapsed)
	}
	if !strings.Contains(logs.String(), "like_it_since_the_last_line=") {
		t.Error("the lines do not say how many were left out")
	}
}

// syncLog is a log destination written from the pipeline's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
