package sbconformance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func sendToSession(t *testing.T, s *azservicebus.Sender, session string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		must(t, "send", s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: []byte(b), SessionID: ptr(session)}, nil))
	}
}

// A specific session: its messages only, in order; one receiver per
// session; the lock is released when the receiver closes (§4.1).
func TestSessionAcceptSpecific(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "sess")
	for i := range 5 {
		sendToSession(t, s, "alpha", fmt.Sprintf("a%d", i))
		if i < 3 {
			sendToSession(t, s, "beta", fmt.Sprintf("b%d", i))
		}
	}
	// a message without a session id is refused by a session-enabled queue
	if err := s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: []byte("no session")}, nil); err == nil {
		t.Fatal("sending without SessionID to a session-enabled queue must fail")
	}
	before := time.Now()
	sr, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess", "alpha", nil)
	must(t, "accept alpha", err)
	mustEqual(t, "SessionID", sr.SessionID(), "alpha")
	approx(t, "session LockedUntil", sr.LockedUntil(), before.Add(3*time.Second), 1500*time.Millisecond)

	// one receiver per session
	_, err = c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess", "alpha", nil)
	if err == nil {
		t.Fatal("a second receiver for a locked session must be refused")
	}

	got := receiveN(t, sr, 5, 5*time.Second)
	if b := bodies(got); !slices.Equal(b, []string{"a0", "a1", "a2", "a3", "a4"}) {
		t.Fatalf("session alpha bodies %v, want a0..a4 in order", b)
	}
	for _, m := range got {
		mustEqual(t, "SessionID", str(m.SessionID), "alpha")
		must(t, "complete", sr.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
	receiveNone(t, sr, 300*time.Millisecond)
	must(t, "close", sr.Close(ctxFor(t, 5*time.Second)))

	// closing released the lock: accept alpha again at once
	sr2, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess", "alpha", nil)
	must(t, "re-accept alpha", err)
	must(t, "close", sr2.Close(ctxFor(t, 5*time.Second)))

	sb, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess", "beta", nil)
	must(t, "accept beta", err)
	got = receiveN(t, sb, 3, 5*time.Second)
	if b := bodies(got); !slices.Equal(b, []string{"b0", "b1", "b2"}) {
		t.Fatalf("session beta bodies %v", b)
	}
	// abandon inside a session: redelivered first, in order
	must(t, "abandon", sb.AbandonMessage(ctxFor(t, 5*time.Second), got[0], nil))
	again := receiveN(t, sb, 1, 5*time.Second)[0]
	mustEqual(t, "redelivered", string(again.Body), "b0")
	mustEqual(t, "DeliveryCount", again.DeliveryCount, uint32(2))
	for _, m := range []*azservicebus.ReceivedMessage{again, got[1], got[2]} {
		must(t, "complete", sb.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
}

// Next available session (null session filter), and the timeout when none is.
func TestSessionAcceptNext(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "sess-next")
	sendToSession(t, s, "first", "f0", "f1")
	sendToSession(t, s, "second", "s0")
	seen := map[string][]string{}
	for range 2 {
		sr, err := c.AcceptNextSessionForQueue(ctxFor(t, 5*time.Second), "sess-next", nil)
		must(t, "accept next", err)
		id := sr.SessionID()
		if _, dup := seen[id]; dup {
			t.Fatalf("session %q handed out twice", id)
		}
		want := map[string]int{"first": 2, "second": 1}[id]
		if want == 0 {
			t.Fatalf("unexpected session %q", id)
		}
		msgs := receiveN(t, sr, want, 5*time.Second)
		seen[id] = bodies(msgs)
		for _, m := range msgs {
			must(t, "complete", sr.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
		}
		// keep it open (locked) while accepting the next one
		t.Cleanup(func() { _ = sr.Close(context.Background()) })
	}
	if !slices.Equal(seen["first"], []string{"f0", "f1"}) || !slices.Equal(seen["second"], []string{"s0"}) {
		t.Fatalf("sessions %v", seen)
	}
	start := time.Now()
	_, err := c.AcceptNextSessionForQueue(ctxFor(t, 2*time.Second), "sess-next", nil)
	if err == nil {
		t.Fatal("accept next with no available session must fail")
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("accept next took %s to time out", time.Since(start))
	}
}

// Session lock renewal extends LockedUntil; without it the lock is lost (§4.3).
func TestSessionLockRenew(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendToSession(t, newSender(t, c, "sess-lock"), "L", "l0", "l1")
	sr, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess-lock", "L", nil)
	must(t, "accept", err)
	first := sr.LockedUntil() // lock duration 4 s
	m := receiveN(t, sr, 1, 5*time.Second)[0]
	// The server's lock runs on its own clock: let part of it pass, so a
	// renewal that extends it shows.
	time.Sleep(1500 * time.Millisecond)
	must(t, "renew session lock", sr.RenewSessionLock(ctxFor(t, 5*time.Second), nil))
	if !sr.LockedUntil().After(first.Add(time.Second)) {
		t.Fatalf("session LockedUntil %s not extended beyond %s", sr.LockedUntil(), first)
	}
	time.Sleep(time.Until(first) + 500*time.Millisecond) // past the first expiry
	must(t, "complete after renewal", sr.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	// stop renewing: the session lock expires and another receiver can take
	// the session (the SDK would otherwise re-attach the same session on
	// its link recovery)
	time.Sleep(time.Until(sr.LockedUntil()) + 300*time.Millisecond)
	sr2, err := newClient(t).AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess-lock", "L", nil)
	must(t, "accept after expiry", err)
	if err := sr.RenewSessionLock(ctxFor(t, 5*time.Second), nil); err == nil {
		t.Fatal("renewing a lost session lock must fail")
	}
	rest := receiveN(t, sr2, 1, 5*time.Second)[0]
	mustEqual(t, "body", string(rest.Body), "l1")
	must(t, "complete", sr2.CompleteMessage(ctxFor(t, 5*time.Second), rest, nil))
}

// Session state get/set, kept across receivers (§4.3); list sessions.
func TestSessionState(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendToSession(t, newSender(t, c, "sess-state"), "S1", "x")
	sr, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess-state", "S1", nil)
	must(t, "accept", err)
	st, err := sr.GetSessionState(ctxFor(t, 5*time.Second), nil)
	must(t, "get", err)
	if st != nil {
		t.Fatalf("initial state %q, want nil", st)
	}
	want := []byte{0, 1, 2, 'h', 'i', 0xff}
	must(t, "set", sr.SetSessionState(ctxFor(t, 5*time.Second), want, nil))
	st, err = sr.GetSessionState(ctxFor(t, 5*time.Second), nil)
	must(t, "get", err)
	if !bytes.Equal(st, want) {
		t.Fatalf("state %x, want %x", st, want)
	}
	must(t, "close", sr.Close(ctxFor(t, 5*time.Second)))

	pager := c.NewListSessionsForQueuePager("sess-state", nil)
	var ids []string
	for pager.More() {
		page, err := pager.NextPage(ctxFor(t, 5*time.Second))
		must(t, "list sessions", err)
		ids = append(ids, page.Sessions...)
	}
	if !slices.Contains(ids, "S1") {
		t.Fatalf("list sessions %v, want S1", ids)
	}

	sr2, err := c.AcceptSessionForQueue(ctxFor(t, 5*time.Second), "sess-state", "S1", nil)
	must(t, "re-accept", err)
	st, err = sr2.GetSessionState(ctxFor(t, 5*time.Second), nil)
	must(t, "get", err)
	if !bytes.Equal(st, want) {
		t.Fatalf("state after re-accept %x, want %x", st, want)
	}
	must(t, "clear", sr2.SetSessionState(ctxFor(t, 5*time.Second), nil, nil))
	st, err = sr2.GetSessionState(ctxFor(t, 5*time.Second), nil)
	must(t, "get", err)
	if st != nil {
		t.Fatalf("cleared state %q, want nil", st)
	}
	m := receiveN(t, sr2, 1, 5*time.Second)[0]
	must(t, "complete", sr2.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	// a session receiver can peek its session
	sendToSession(t, newSender(t, c, "sess-state"), "S1", "y")
	p, err := sr2.PeekMessages(ctxFor(t, 5*time.Second), 10, nil)
	must(t, "peek session", err)
	if len(p) != 1 || string(p[0].Body) != "y" {
		t.Fatalf("session peek: %v", bodies(p))
	}
}
