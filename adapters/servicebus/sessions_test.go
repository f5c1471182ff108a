package servicebus

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

func sessionMsg(session string, i int) *mapping.Message {
	m := textMsg(fmt.Sprintf("%s-%d", session, i))
	m.GroupKey = session
	return m
}

// Many sessions, at most max_concurrent at once: each session's messages
// come one at a time (the next only after the previous is settled) and in
// order; different sessions are processed concurrently; idle sessions are
// released so the others get their turn.
func TestSessionsOrderAndConcurrency(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("sess-order")
	const sessions, per = 8, 6
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	var msgs []*mapping.Message
	for i := range per {
		for s := range sessions {
			msgs = append(msgs, sessionMsg(fmt.Sprintf("s%d", s), i))
		}
	}
	sendAll(t, snk, msgs...)

	src, logs := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 3, IdleTimeout: "300ms"}})
	var mu sync.Mutex
	inFlight := map[string]bool{}
	got := map[string][]string{}
	maxInFlight, total := 0, 0
	var wg sync.WaitGroup
	ctx := ctxT(t, 60*time.Second)
	start := time.Now()
	for total < sessions*per {
		ds, err := src.Receive(ctx, 10)
		if err != nil {
			t.Fatalf("receive after %d: %v\n%s", total, err, logs.String())
		}
		mu.Lock()
		for _, d := range ds {
			m := d.Message()
			if inFlight[m.GroupKey] {
				t.Errorf("two messages of session %s in flight at once", m.GroupKey)
			}
			inFlight[m.GroupKey] = true
			got[m.GroupKey] = append(got[m.GroupKey], m.ID)
			maxInFlight = max(maxInFlight, len(inFlight))
			total++
			wg.Go(func() {
				// A handler's processing time: the session stays in flight
				// meanwhile, while the source serves the others.
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				delete(inFlight, m.GroupKey)
				mu.Unlock()
				if err := d.Ack(ctx); err != nil {
					t.Errorf("ack %s: %v", m.ID, err)
				}
			})
		}
		mu.Unlock()
	}
	wg.Wait()
	t.Logf("%d messages of %d sessions in %s, up to %d sessions at once", total, sessions, time.Since(start).Round(time.Millisecond), maxInFlight)
	for s := range sessions {
		key := fmt.Sprintf("s%d", s)
		var want []string
		for i := range per {
			want = append(want, fmt.Sprintf("%s-%d", key, i))
		}
		if !slices.Equal(got[key], want) {
			t.Errorf("session %s: %v, want %v", key, got[key], want)
		}
	}
	if maxInFlight < 2 || maxInFlight > 3 {
		t.Errorf("up to %d sessions in flight, want 2 or 3 (max_concurrent 3)", maxInFlight)
	}
	ss := src.(*sessionSource)
	if n := ss.accepted.Load(); n < sessions {
		t.Errorf("%d sessions accepted, want at least %d", n, sessions)
	}
	if n := ss.held.Load(); n > 3 {
		t.Errorf("%d sessions held", n)
	}
	expectNone(t, src, 300*time.Millisecond)
}

// An idle session is released after idle_timeout, so a single session
// slot moves on to another session.
func TestSessionIdleRelease(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("sess-idle")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, logs := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 1, IdleTimeout: "300ms"}})
	sendAll(t, snk, sessionMsg("A", 0))
	ack(t, receiveN(t, src, 1, 10*time.Second)...)
	sendAll(t, snk, sessionMsg("B", 0))
	start := time.Now()
	d := receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().GroupKey != "B" {
		t.Fatalf("got session %q", d.Message().GroupKey)
	}
	t.Logf("session B after %s", time.Since(start).Round(time.Millisecond))
	ack(t, d)
	if !strings.Contains(logs.String(), "releasing an idle session") {
		t.Errorf("no idle release logged:\n%s", logs.String())
	}
}

// The session lock (3 s) is renewed for as long as the session is held:
// a message kept 7 s without Extend is still completed, and no other
// receiver gets the session meanwhile. Nack inside a session hands the
// same message back first, in order.
func TestSessionLockAndNack(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("sess")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, logs := newTestSource(t, SourceConfig{Queue: q, LockRenewal: "500ms", Sessions: &SessionsConfig{MaxConcurrent: 1, IdleTimeout: "20s"}})
	sendAll(t, snk, sessionMsg("S", 0), sessionMsg("S", 1), sessionMsg("S", 2))
	d := receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "S-0" {
		t.Fatalf("first %s", d.Message().ID)
	}
	other, _ := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 1}, ReceiveWait: "1s"})
	expectNone(t, other, 7*time.Second)
	ack(t, d)

	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "S-1" {
		t.Fatalf("second %s", d.Message().ID)
	}
	expectNone(t, src, 200*time.Millisecond) // one at a time per session
	if err := d.Nack(ctxT(t, 5*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if m := d.Message(); m.ID != "S-1" || m.Source.DeliveryCount != 2 {
		t.Fatalf("after abandon: %s count %d", m.ID, m.Source.DeliveryCount)
	}
	start := time.Now()
	if err := d.Nack(ctxT(t, 5*time.Second), time.Second); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if m := d.Message(); m.ID != "S-1" || time.Since(start) < 950*time.Millisecond {
		t.Fatalf("after a 1 s Nack: %s after %s", m.ID, time.Since(start))
	}
	if err := d.Extend(ctxT(t, 5*time.Second), time.Minute); err != nil {
		t.Fatalf("extend (session lock): %v", err)
	}
	ack(t, d)
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "S-2" {
		t.Fatalf("third %s", d.Message().ID)
	}
	ack(t, d)
	if strings.Contains(logs.String(), "renewing a session lock failed") {
		t.Errorf("renewal failed:\n%s", logs.String())
	}
}

// A sink on a session-enabled queue: default_session stands for a
// missing group key; without it such a message is refused.
func TestDefaultSession(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("sess-default")
	snk, _ := newTestSink(t, SinkConfig{Queue: q, DefaultSession: "fallback"})
	src, _ := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 2}})
	grouped := textMsg("grouped")
	grouped.GroupKey = "g"
	sendAll(t, snk, textMsg("loose"), grouped)
	got := map[string]string{}
	for _, d := range receiveN(t, src, 2, 15*time.Second) {
		got[d.Message().ID] = d.Message().GroupKey
		ack(t, d)
	}
	if got["loose"] != "fallback" || got["grouped"] != "g" {
		t.Fatalf("sessions %v", got)
	}
	plain, _ := newTestSink(t, SinkConfig{Queue: q})
	err := plain.Send(ctxT(t, 15*time.Second), []*mapping.Message{textMsg("no-session")})[0]
	if err == nil {
		t.Fatal("a message without SessionId on a session-enabled queue must fail")
	}
	t.Logf("without default_session: %v (permanent %v)", err, driver.IsPermanent(err))
}

// Quiesce: a message handed back afterwards is not received again by the
// source about to close. A closing session returns a locked message with
// one more delivery, so a dry run's held sample, handed back and received
// again, cost two deliveries per run (an audit saw Service Bus dead-letter
// sampled messages after a few dry runs); now the next receiver sees one.
func TestSessionQuiesce(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("sess-quiet")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, _ := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 1, IdleTimeout: "20s"}})
	sendAll(t, snk, sessionMsg("Q", 0))
	d := receiveN(t, src, 1, 10*time.Second)[0]
	src.(interface{ Quiesce() <-chan struct{} }).Quiesce()
	if err := d.Nack(ctxT(t, 5*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	expectNone(t, src, time.Second)
	if err := src.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	next, _ := newTestSource(t, SourceConfig{Queue: q, Sessions: &SessionsConfig{MaxConcurrent: 1}})
	d = receiveN(t, next, 1, 10*time.Second)[0]
	if m := d.Message(); m.ID != "Q-0" || m.Source.DeliveryCount != 2 {
		t.Errorf("%s: delivery count %d, want 2 (the first delivery and one hand-back)", m.ID, m.Source.DeliveryCount)
	}
	ack(t, d)
}
