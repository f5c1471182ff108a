package nats

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
)

func TestPinnedConfigValidate(t *testing.T) {
	off := false
	tests := []struct {
		name string
		mod  func(*JetStreamSourceConfig)
		err  string
	}{
		{"default", nil, ""},
		{"pin timeout", func(j *JetStreamSourceConfig) { j.PinTimeout = "45s" }, ""},
		{"pin timeout too short", func(j *JetStreamSourceConfig) { j.PinTimeout = "1500ms" }, "jetstream.pin_timeout"},
		{"pin timeout not a duration", func(j *JetStreamSourceConfig) { j.PinTimeout = "soon" }, "jetstream.pin_timeout"},
		{"group", func(j *JetStreamSourceConfig) { j.PriorityGroup = "a/b_c=d-9" }, ""},
		{"group too long", func(j *JetStreamSourceConfig) { j.PriorityGroup = strings.Repeat("g", 17) }, "jetstream.priority_group"},
		{"group with a dot", func(j *JetStreamSourceConfig) { j.PriorityGroup = "a.b" }, "jetstream.priority_group"},
		{"not pinned", func(j *JetStreamSourceConfig) { j.Pinned = &off }, ""},
		{"not pinned with a timeout", func(j *JetStreamSourceConfig) { j.Pinned, j.PinTimeout = &off, "10s" }, "only used with pinned = true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &JetStreamSourceConfig{Stream: "S", Durable: "d"}
			if tt.mod != nil {
				tt.mod(j)
			}
			err := (&SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: j}).Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
	set, err := (&SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: &JetStreamSourceConfig{Stream: "S", Durable: "d", AckWait: "1s"}}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !set.js.pinned || set.js.priorityGroup != DefaultPriorityGroup || set.js.pinTimeout != MinPinTimeout {
		t.Errorf("defaults: pinned %v group %q pin timeout %s; want true, %q, %s (ack_wait 1s, raised to the minimum)",
			set.js.pinned, set.js.priorityGroup, set.js.pinTimeout, DefaultPriorityGroup, MinPinTimeout)
	}
}

// pinnedSource is a source on the fixture's durable "bridge" with a short
// pin timeout.
func (f *jsFixture) pinnedSource(t *testing.T, pinTimeout string, mod ...func(*SourceConfig)) (*jsSource, *logBuf) {
	t.Helper()
	src, logs := f.source(t, append([]func(*SourceConfig){func(c *SourceConfig) { c.JetStream.PinTimeout = pinTimeout }}, mod...)...)
	return src.(*jsSource), logs
}

// crash ends a source as kill -9 would: its connection drops, nothing is
// settled or handed back.
func crash(s *jsSource) {
	s.cancel()
	s.conn.nc.Close()
}

// collector receives and acks on its own goroutine until stopped, and
// records what it got.
type collector struct {
	mu     sync.Mutex
	got    []driver.Delivery
	first  chan struct{} // closed at the first delivery
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
}

func collect(t *testing.T, src driver.Source, ack bool) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{first: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			ds, err := src.Receive(ctx, 16)
			if err != nil && ctx.Err() == nil {
				t.Errorf("Receive: %v", err)
				return
			}
			for _, d := range ds {
				if ack {
					if err := d.Ack(context.Background()); err != nil {
						t.Errorf("Ack: %v", err)
					}
				}
				c.mu.Lock()
				c.got = append(c.got, d)
				c.mu.Unlock()
				c.once.Do(func() { close(c.first) })
			}
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *collector) stop() {
	c.cancel()
	<-c.done
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func (c *collector) waitCount(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d of %d deliveries within %s", c.count(), n, within)
		}
		time.Sleep(10 * time.Millisecond) // a poll of the collector's count
	}
}

func (c *collector) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.got))
	for i, d := range c.got {
		out[i] = string(d.Message().Body)
	}
	return out
}

// publishGroups publishes n messages per group, interleaved, with bodies
// "g<k>:<i>" and the group in the group header.
func (f *jsFixture) publishGroups(t *testing.T, groups, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		for g := range groups {
			f.publish(t, "orders.x", fmt.Sprintf("g%d:%d", g, i), DefaultGroupHeader, fmt.Sprintf("g%d", g))
		}
	}
}

// checkGroupOrder fails unless each group's messages (bodies "g<k>:<i>")
// arrived exactly as from..to-1: nothing missing, repeated or reordered.
func checkGroupOrder(t *testing.T, bodies []string, groups, from, to int) {
	t.Helper()
	next := make(map[string]int)
	for _, b := range bodies {
		g, n, _ := strings.Cut(b, ":")
		i, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("body %q", b)
		}
		want, ok := next[g]
		if !ok {
			want = from
		}
		if i != want {
			t.Errorf("group %s: got %d, want %d (order %v)", g, i, want, bodies)
			return
		}
		next[g] = i + 1
	}
	for g := range groups {
		if n := next[fmt.Sprintf("g%d", g)]; n != to {
			t.Errorf("group g%d ended at %d, want %d: %v", g, n, to, bodies)
		}
	}
}

func TestJetStreamPinnedConsumerCreated(t *testing.T) {
	f := newJSFixture(t)
	_, logs := f.pinnedSource(t, "3s")
	cfg := f.consumerInfo(t, "bridge").Config
	if cfg.PriorityPolicy != jetstream.PriorityPolicyPinned || len(cfg.PriorityGroups) != 1 ||
		cfg.PriorityGroups[0] != DefaultPriorityGroup || cfg.PinnedTTL != 3*time.Second {
		t.Errorf("consumer priority settings: %v %v %s", cfg.PriorityPolicy, cfg.PriorityGroups, cfg.PinnedTTL)
	}
	if !strings.Contains(logs.String(), "consumer is pinned") {
		t.Errorf("log:\n%s", logs)
	}
}

// TestJetStreamPinnedStandbyAndRelease: while one source receives, the
// other gets nothing; a source that closes releases its pin, so the
// standby takes over at once rather than after the pin timeout.
func TestJetStreamPinnedStandbyAndRelease(t *testing.T) {
	f := newJSFixture(t)
	f.publishGroups(t, 3, 0, 10)
	a, _ := f.pinnedSource(t, "30s")
	ca := collect(t, a, true)
	ca.waitCount(t, 1, 5*time.Second) // a holds the pin
	b, blogs := f.pinnedSource(t, "30s")
	cb := collect(t, b, true)
	ca.waitCount(t, 30, 10*time.Second)
	ca.stop()
	if n := cb.count(); n != 0 {
		t.Fatalf("the standby got %d messages while the pinned source received", n)
	}
	start := time.Now()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.publishGroups(t, 3, 10, 12)
	cb.waitCount(t, 6, 10*time.Second)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the standby took over after %s; the pin was not released (pin timeout 30s)", el)
	}
	checkGroupOrder(t, cb.bodies(), 3, 10, 12)
	if !strings.Contains(blogs.String(), "the server pinned this client") {
		t.Errorf("log:\n%s", blogs)
	}
}

// TestJetStreamPinnedFailoverAfterCrash: a pinned source dies with
// unacknowledged messages; after the pin timeout the standby is pinned and
// delivers every group in order, the dead one's messages first.
func TestJetStreamPinnedFailoverAfterCrash(t *testing.T) {
	f := newJSFixture(t)
	f.publishGroups(t, 3, 0, 10)
	// ack_wait longer than the pin timeout: the standby is pinned before
	// the dead source's messages come back, and must wait for them.
	a, _ := f.pinnedSource(t, "2s", func(c *SourceConfig) { c.JetStream.AckWait = "4s" })
	held := receiveN(t, a, 12, 5*time.Second) // never settled
	_ = held
	b, blogs := f.pinnedSource(t, "2s", func(c *SourceConfig) { c.JetStream.AckWait = "4s" })
	cb := collect(t, b, true)
	crash(a)
	start := time.Now()
	cb.waitCount(t, 30, 20*time.Second)
	if el := time.Since(start); el < time.Second {
		t.Errorf("the standby delivered %s after the crash, before the pin timeout", el)
	}
	checkGroupOrder(t, cb.bodies(), 3, 0, 10)
	if b := cb.bodies()[0]; b != "g0:0" {
		t.Errorf("first after the failover: %s, want g0:0", b)
	}
	if !strings.Contains(blogs.String(), "the server pinned this client") {
		t.Errorf("log:\n%s", blogs)
	}
}

// TestJetStreamPinnedStall: a pinned source whose engine holds its
// messages and stops pulling loses the pin; the new pinned source hands
// out nothing until the stalled one settled what it holds, then every
// group goes on in order. The stalled source stands by afterwards.
func TestJetStreamPinnedStall(t *testing.T) {
	f := newJSFixture(t)
	f.publishGroups(t, 2, 0, 10)
	a, alogs := f.pinnedSource(t, "2s")
	stalled := receiveN(t, a, 6, 5*time.Second) // g0:0..2, g1:0..2
	stop := make(chan struct{})
	extended := make(chan struct{})
	go func() { // the stalled engine keeps its messages locked
		defer close(extended)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for _, d := range stalled {
				_ = d.Extend(context.Background(), time.Second)
			}
		}
	}()
	b, blogs := f.pinnedSource(t, "2s")
	cb := collect(t, b, true)
	blogs.waitFor2(t, "unacknowledged messages of a previous pinned client", 15*time.Second)
	if n := cb.count(); n != 0 {
		t.Fatalf("the new pinned source handed out %d messages while the stalled one holds the earlier ones", n)
	}
	close(stop)
	<-extended
	ackAll(t, stalled)
	cb.waitCount(t, 14, 10*time.Second)
	checkGroupOrder(t, cb.bodies(), 2, 3, 10)
	receiveNone(t, a, 1500*time.Millisecond)
	if !strings.Contains(alogs.String(), "no longer the pinned client") {
		t.Errorf("the stalled source did not stand by:\n%s", alogs)
	}
}

// TestJetStreamPinIDNotAnAnnotation: the pin header belongs to the
// delivery; it does not travel on with the message.
func TestJetStreamPinIDNotAnAnnotation(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "x")
	src, _ := f.pinnedSource(t, "5s")
	d := receiveN(t, src, 1, 5*time.Second)[0]
	for _, a := range d.Message().Annotations {
		if strings.EqualFold(a.Name, pinIDHeader) {
			t.Errorf("annotation %s = %v", a.Name, a.Value)
		}
	}
	ackAll(t, []driver.Delivery{d})
}

// TestJetStreamExistingConsumerWithoutPinning: a consumer someone created
// without a priority group is used as it is, with a warning.
func TestJetStreamExistingConsumerWithoutPinning(t *testing.T) {
	f := newJSFixture(t)
	st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
	if _, err := st.CreateConsumer(ctxT(t, 5*time.Second), jetstream.ConsumerConfig{
		Durable: "bridge", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	f.publish(t, "orders.a", "x")
	src, logs := f.source(t)
	ackAll(t, receiveN(t, src, 1, 5*time.Second))
	if !strings.Contains(logs.String(), "has no pinned priority group") {
		t.Errorf("log:\n%s", logs)
	}
	if src.(*jsSource).pinnedMode() {
		t.Error("pinned mode on a consumer without priority group")
	}
}

// waitFor2 is waitFor with a longer bound.
func (l *logBuf) waitFor2(t testing.TB, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("log never contained %q; log:\n%s", s, l.String())
		}
		time.Sleep(10 * time.Millisecond) // a poll, as waitFor's
	}
}

// TestJetStreamPinnedRecoveryRedeliveryOfAckedMessage: a source the server
// pins again holds a redelivery of a message whose first delivery its
// engine still has (A: the server forgot an InProgress over a restart, or
// the engine was slow). The engine then acks that first delivery: the
// server forgets A whichever delivery the ack names, so the held copy is
// no longer part of the consumer's pending messages. Counting it as ours
// made the recovery end while a previous pinned client still had B (g:0)
// out, and C (g:1) went to the engine before it (the chaos run's g10:37
// after g10:42). Nothing of group g may come before B.
func TestJetStreamPinnedRecoveryRedeliveryOfAckedMessage(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "a:0", DefaultGroupHeader, "a")
	src, logs := f.pinnedSource(t, "2s")
	first := receiveN(t, src, 1, 5*time.Second)[0] // A/1: the engine holds it, unextended
	f.publish(t, "orders.g", "g:0", DefaultGroupHeader, "g")
	f.publish(t, "orders.g", "g:1", DefaultGroupHeader, "g")

	// A previous pinned client (another replica) takes B and keeps it
	// locked, as a stalled one does.
	st, err := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UnpinConsumer(ctxT(t, 5*time.Second), "bridge", DefaultPriorityGroup); err != nil {
		t.Fatal(err)
	}
	other := connect(t, f.srv.ClientURL())
	ojs, err := jetstream.New(other)
	if err != nil {
		t.Fatal(err)
	}
	ocons, err := ojs.Consumer(ctxT(t, 5*time.Second), "ORDERS", "bridge")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := ocons.Fetch(1, jetstream.FetchPriorityGroup(DefaultPriorityGroup), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var b jetstream.Msg
	for m := range mb.Messages() {
		b = m
	}
	if b == nil || string(b.Data()) != "g:0" {
		t.Fatalf("the other client got %v (%v), want g:0", b, mb.Error())
	}
	stopB := make(chan struct{})
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopB:
				return
			case <-tk.C:
				_ = b.InProgress()
			}
		}
	}()
	defer func() {
		select {
		case <-stopB:
		default:
			close(stopB)
		}
		<-bDone
	}()
	if err := st.UnpinConsumer(ctxT(t, 5*time.Second), "bridge", DefaultPriorityGroup); err != nil {
		t.Fatal(err)
	}

	// A's ack_wait (1s) lapses: the server redelivers it to the source,
	// which it pins again, ahead of everything else.
	time.Sleep(1500 * time.Millisecond)
	c := collect(t, src, true)
	logs.waitFor2(t, "unacknowledged messages of a previous pinned client", 10*time.Second)
	if err := first.Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a recovery that ends early hands out g:1 at once
	for _, body := range c.bodies() {
		if strings.HasPrefix(body, "g:") {
			t.Fatalf("%s handed out while g:0 is still with the previous pinned client (got %v)", body, c.bodies())
		}
	}
	// The previous pinned client dies: B comes back after ack_wait, then C.
	close(stopB)
	<-bDone
	other.Close()
	deadline := time.Now().Add(10 * time.Second)
	var gs []string
	for {
		gs = gs[:0]
		for _, body := range c.bodies() {
			if strings.HasPrefix(body, "g:") {
				gs = append(gs, body)
			}
		}
		if len(gs) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // a poll of the collector
	}
	if len(gs) < 2 || gs[0] != "g:0" || gs[1] != "g:1" {
		t.Fatalf("group g arrived as %v, want [g:0 g:1] (all: %v)", gs, c.bodies())
	}
}
