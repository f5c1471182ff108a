package sbconformance

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Send, peek-lock receive, complete (§1 broker annotations, §5.1, §5.4).
func TestSendReceiveComplete(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "basic"), "m0", "m1", "m2")
	r := newReceiver(t, c, "basic", nil)
	before := time.Now()
	msgs := receiveN(t, r, 3, 10*time.Second)
	if got := bodies(msgs); !slices.Equal(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("bodies %v, want m0 m1 m2 in order", got)
	}
	var last int64
	seen := map[[16]byte]bool{}
	for _, m := range msgs {
		if m.SequenceNumber == nil || *m.SequenceNumber <= last {
			t.Fatalf("sequence numbers must increase: %s after %d", fmtSeq(m), last)
		}
		last = *m.SequenceNumber
		mustEqual(t, "DeliveryCount", m.DeliveryCount, uint32(1))
		mustEqual(t, "State", m.State, azservicebus.MessageStateActive)
		if m.EnqueuedTime == nil || m.LockedUntil == nil || m.EnqueuedSequenceNumber == nil {
			t.Fatalf("broker annotations missing: enqueued %v locked-until %v enqueue-seq %v", m.EnqueuedTime, m.LockedUntil, m.EnqueuedSequenceNumber)
		}
		approx(t, "LockedUntil", *m.LockedUntil, before.Add(5*time.Second), 2*time.Second)
		if m.LockToken == ([16]byte{}) || seen[m.LockToken] {
			t.Fatalf("lock token must be set and unique: %x", m.LockToken)
		}
		seen[m.LockToken] = true
	}
	for _, m := range msgs {
		must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
	if left := peekAll(t, r); len(left) != 0 {
		t.Fatalf("queue not empty after completing: %d left", len(left))
	}
}

// Abandon: delivery count +1, redelivery, properties to modify (§5.1).
func TestAbandon(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "abandon"), "a")
	r := newReceiver(t, c, "abandon", nil)
	m1 := receiveN(t, r, 1, 10*time.Second)[0]
	mustEqual(t, "first DeliveryCount", m1.DeliveryCount, uint32(1))
	must(t, "abandon", r.AbandonMessage(ctxFor(t, 5*time.Second), m1, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"hello": "world", "n": int64(7)},
	}))
	m2 := receiveN(t, r, 1, 10*time.Second)[0]
	mustEqual(t, "redelivered DeliveryCount", m2.DeliveryCount, uint32(2))
	mustEqual(t, "same SequenceNumber", *m2.SequenceNumber, *m1.SequenceNumber)
	mustEqual(t, "hello", m2.ApplicationProperties["hello"], any("world"))
	mustEqual(t, "n", m2.ApplicationProperties["n"], any(int64(7)))
	if m2.LockToken == m1.LockToken {
		t.Fatal("a redelivery must carry a new lock token")
	}
	must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m2, nil))
}

// Dead-letter with reason and description, then read the DLQ (§1, §5.1).
func TestDeadLetter(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "deadletter"), "poison")
	r := newReceiver(t, c, "deadletter", nil)
	m := receiveN(t, r, 1, 10*time.Second)[0]
	must(t, "dead-letter", r.DeadLetterMessage(ctxFor(t, 5*time.Second), m, &azservicebus.DeadLetterOptions{
		Reason:             ptr("BadPayload"),
		ErrorDescription:   ptr("could not parse the body"),
		PropertiesToModify: map[string]any{"stage": "parse"},
	}))
	receiveNone(t, r, 300*time.Millisecond)
	dlq := newReceiver(t, c, "deadletter", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1, 10*time.Second)[0]
	mustEqual(t, "body", string(d.Body), "poison")
	mustEqual(t, "DeadLetterReason", str(d.DeadLetterReason), "BadPayload")
	mustEqual(t, "DeadLetterErrorDescription", str(d.DeadLetterErrorDescription), "could not parse the body")
	mustEqual(t, "DeadLetterSource", str(d.DeadLetterSource), "deadletter")
	mustEqual(t, "stage", d.ApplicationProperties["stage"], any("parse"))
	mustEqual(t, "SequenceNumber", *d.SequenceNumber, *m.SequenceNumber)
	// a message in the DLQ cannot be dead-lettered again
	if err := dlq.DeadLetterMessage(ctxFor(t, 5*time.Second), d, nil); err == nil {
		t.Fatal("dead-lettering a dead-lettered message must fail")
	}
	d2 := receiveN(t, dlq, 1, 10*time.Second)[0]
	must(t, "complete from DLQ", dlq.CompleteMessage(ctxFor(t, 5*time.Second), d2, nil))
	if left := peekAll(t, dlq); len(left) != 0 {
		t.Fatalf("DLQ not empty: %d", len(left))
	}
}

// Defer, receive deferred by sequence number, settle over $management (§4.4).
func TestDefer(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "defer"), "later")
	r := newReceiver(t, c, "defer", nil)
	m := receiveN(t, r, 1, 10*time.Second)[0]
	must(t, "defer", r.DeferMessage(ctxFor(t, 5*time.Second), m, &azservicebus.DeferMessageOptions{
		PropertiesToModify: map[string]any{"deferred": true},
	}))
	receiveNone(t, r, 300*time.Millisecond)
	p := peekAll(t, r)
	if len(p) != 1 || p[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek after defer: %d messages, state %v; want 1 deferred", len(p), p)
	}
	d, err := r.ReceiveDeferredMessages(ctxFor(t, 5*time.Second), []int64{*m.SequenceNumber}, nil)
	must(t, "receive deferred", err)
	if len(d) != 1 {
		t.Fatalf("deferred: got %d", len(d))
	}
	mustEqual(t, "deferred body", string(d[0].Body), "later")
	mustEqual(t, "deferred State", d[0].State, azservicebus.MessageStateDeferred)
	mustEqual(t, "deferred prop", d[0].ApplicationProperties["deferred"], any(true))
	if d[0].LockToken == ([16]byte{}) {
		t.Fatal("a deferred message received in peek-lock mode must carry a lock token")
	}
	// abandon keeps it deferred and counts a delivery
	must(t, "abandon deferred", r.AbandonMessage(ctxFor(t, 5*time.Second), d[0], nil))
	p = peekAll(t, r)
	if len(p) != 1 || p[0].State != azservicebus.MessageStateDeferred || p[0].DeliveryCount != d[0].DeliveryCount+1 {
		t.Fatalf("after abandoning the deferred message: %d messages (want 1, deferred, delivery count %d)", len(p), d[0].DeliveryCount+1)
	}
	d, err = r.ReceiveDeferredMessages(ctxFor(t, 5*time.Second), []int64{*m.SequenceNumber}, nil)
	must(t, "receive deferred again", err)
	must(t, "complete deferred", r.CompleteMessage(ctxFor(t, 5*time.Second), d[0], nil))
	if left := peekAll(t, r); len(left) != 0 {
		t.Fatalf("queue not empty: %d", len(left))
	}
	if _, err := r.ReceiveDeferredMessages(ctxFor(t, 5*time.Second), []int64{*m.SequenceNumber}, nil); err == nil {
		t.Fatal("receiving a completed deferred message must fail")
	}
}

// Renew lock extends LockedUntil; the message stays settleable (§5.3).
func TestRenewLock(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "renew"), "r")
	r := newReceiver(t, c, "renew", nil)
	m := receiveN(t, r, 1, 10*time.Second)[0]
	first := *m.LockedUntil // lock duration 4 s
	// The server's lock runs on its own clock: let part of it pass, so a
	// renewal that extends it shows.
	time.Sleep(1500 * time.Millisecond)
	must(t, "renew", r.RenewMessageLock(ctxFor(t, 5*time.Second), m, nil))
	if !m.LockedUntil.After(first.Add(time.Second)) {
		t.Fatalf("LockedUntil %s not extended beyond %s", m.LockedUntil, first)
	}
	approx(t, "renewed LockedUntil", *m.LockedUntil, time.Now().Add(4*time.Second), time.Second)
	time.Sleep(time.Until(first) + 500*time.Millisecond) // past the first expiry
	must(t, "complete after renewal", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
}

// An expired lock makes the message available again with DeliveryCount +1;
// the stale lock can no longer settle (docs/wire-servicebus.md §5.2).
func TestLockExpiry(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "lockexp"), "x")
	r := newReceiver(t, c, "lockexp", nil)
	m1 := receiveN(t, r, 1, 10*time.Second)[0]
	start := time.Now()
	m2 := receiveN(t, r, 1, 10*time.Second)[0]
	if waited := time.Since(start); waited < 1500*time.Millisecond {
		t.Fatalf("redelivered after %s, before the 2 s lock expired", waited)
	}
	mustEqual(t, "DeliveryCount", m2.DeliveryCount, uint32(2))
	err := r.CompleteMessage(ctxFor(t, 5*time.Second), m1, nil)
	if err == nil {
		t.Fatal("completing with an expired lock must fail")
	}
	mustEqual(t, "error code", sbCode(err), azservicebus.CodeLockLost)
	must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m2, nil))
}

// MaxDeliveryCount: the last failed delivery moves the message to the DLQ
// with reason MaxDeliveryCountExceeded (§1, [DLQ]).
func TestMaxDeliveryCount(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "maxdc"), "bad")
	r := newReceiver(t, c, "maxdc", nil)
	for i := 1; i <= 3; i++ {
		m := receiveN(t, r, 1, 10*time.Second)[0]
		mustEqual(t, "DeliveryCount", m.DeliveryCount, uint32(i))
		must(t, "abandon", r.AbandonMessage(ctxFor(t, 5*time.Second), m, nil))
	}
	receiveNone(t, r, 300*time.Millisecond)
	dlq := newReceiver(t, c, "maxdc", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1, 10*time.Second)[0]
	mustEqual(t, "DeadLetterReason", str(d.DeadLetterReason), "MaxDeliveryCountExceeded")
	if d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription == "" {
		t.Fatal("DeadLetterErrorDescription must be set")
	}
	mustEqual(t, "DeadLetterSource", str(d.DeadLetterSource), "maxdc")
	must(t, "complete", dlq.CompleteMessage(ctxFor(t, 5*time.Second), d, nil))
}

// Scheduling by $management and by the annotation on a plain send (§6.1).
func TestScheduledMessages(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "sched")
	at := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctxFor(t, 5*time.Second), []*azservicebus.Message{
		{Body: []byte("keep")}, {Body: []byte("cancel")},
	}, at, nil)
	must(t, "schedule", err)
	if len(seqs) != 2 || seqs[0] == seqs[1] {
		t.Fatalf("sequence numbers %v", seqs)
	}
	must(t, "cancel", s.CancelScheduledMessages(ctxFor(t, 5*time.Second), []int64{seqs[1]}, nil))
	plainAt := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	must(t, "send with ScheduledEnqueueTime", s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{
		Body: []byte("annotated"), ScheduledEnqueueTime: &plainAt,
	}, nil))
	r := newReceiver(t, c, "sched", nil)
	p := peekAll(t, r)
	if len(p) != 2 || p[0].State != azservicebus.MessageStateScheduled || *p[0].SequenceNumber != seqs[0] {
		t.Fatalf("peek: %d messages; want 2 scheduled, the first with sequence number %d", len(p), seqs[0])
	}
	receiveNone(t, r, 800*time.Millisecond)
	got := receiveN(t, r, 2, 10*time.Second)
	now := time.Now()
	for _, m := range got {
		want := at
		if string(m.Body) == "annotated" {
			want = plainAt
		} else if string(m.Body) != "keep" {
			t.Fatalf("unexpected message %q (a cancelled message arrived?)", m.Body)
		}
		if m.EnqueuedTime.Before(want) {
			t.Fatalf("%q enqueued at %s, before its scheduled time %s", m.Body, m.EnqueuedTime, want)
		}
		if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(want) {
			t.Fatalf("%q ScheduledEnqueueTime %v, want %s", m.Body, m.ScheduledEnqueueTime, want)
		}
		if *m.SequenceNumber == seqs[0] {
			t.Fatalf("an activated message gets a new sequence number (§6.1)")
		}
		must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
	_ = now
	receiveNone(t, r, 300*time.Millisecond)
}

// TTL: dead-lettered with TTLExpiredException when configured, dropped
// otherwise; the entity default caps a longer TTL (§6.4).
func TestTimeToLive(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	ttl := time.Second
	must(t, "send", newSender(t, c, "ttl-dlq").SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: []byte("old"), TimeToLive: &ttl}, nil))
	must(t, "send", newSender(t, c, "ttl-drop").SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: []byte("old"), TimeToLive: &ttl}, nil))
	long := time.Hour
	def := newSender(t, c, "ttl-default")
	must(t, "send", def.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: []byte("capped"), TimeToLive: &long}, nil))
	rd := newReceiver(t, c, "ttl-default", nil)
	m := receiveN(t, rd, 1, 5*time.Second)[0]
	if m.TimeToLive == nil || *m.TimeToLive != time.Second {
		t.Fatalf("TimeToLive %v, want the entity default 1s as the ceiling", m.TimeToLive)
	}
	if m.ExpiresAt == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(time.Second)) {
		t.Fatalf("ExpiresAt %v, want EnqueuedTime + 1s", m.ExpiresAt)
	}
	must(t, "complete", rd.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))

	// Past the 1 s TTL on the server's clock: what is tested is what the
	// server does with an expired message.
	time.Sleep(1500 * time.Millisecond)
	r1 := newReceiver(t, c, "ttl-dlq", nil)
	receiveNone(t, r1, 300*time.Millisecond)
	d := receiveN(t, newReceiver(t, c, "ttl-dlq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}), 1, 5*time.Second)[0]
	mustEqual(t, "DeadLetterReason", str(d.DeadLetterReason), "TTLExpiredException")
	mustEqual(t, "body", string(d.Body), "old")
	r2 := newReceiver(t, c, "ttl-drop", nil)
	receiveNone(t, r2, 300*time.Millisecond)
	receiveNone(t, newReceiver(t, c, "ttl-drop", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}), 300*time.Millisecond)
}

// Duplicate detection on MessageId: the duplicate is accepted and dropped (§6.2).
func TestDuplicateDetection(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "dedup")
	for _, id := range []string{"id-1", "id-1", "id-2", "id-1"} {
		must(t, "send "+id, s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{MessageID: ptr(id), Body: []byte(id)}, nil))
	}
	r := newReceiver(t, c, "dedup", nil)
	got := receiveN(t, r, 2, 5*time.Second)
	if b := bodies(got); !slices.Equal(b, []string{"id-1", "id-2"}) {
		t.Fatalf("bodies %v, want id-1 id-2", b)
	}
	receiveNone(t, r, 300*time.Millisecond)
}

// Size limit: 256 KB (§6.3). The SDK checks against the link's
// max-message-size that the server advertises on attach.
func TestMessageTooLarge(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "big")
	err := s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: bytes.Repeat([]byte("x"), 300*1024)}, nil)
	if err == nil {
		t.Fatal("a 300 KB message must be refused")
	}
	b, err := s.NewMessageBatch(ctxFor(t, 5*time.Second), nil)
	must(t, "batch", err)
	if err := b.AddMessage(&azservicebus.Message{Body: bytes.Repeat([]byte("x"), 300*1024)}, nil); !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Fatalf("batch.AddMessage: %v, want ErrMessageTooLarge", err)
	}
	// just under the limit passes
	must(t, "send 200 KB", s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{Body: bytes.Repeat([]byte("y"), 200*1024)}, nil))
	r := newReceiver(t, c, "big", nil)
	m := receiveN(t, r, 1, 5*time.Second)[0]
	mustEqual(t, "size", len(m.Body), 200*1024)
	must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
}

// Peek is non-destructive and pages by sequence number (§4.4).
func TestPeek(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "peek"), "p0", "p1", "p2")
	r := newReceiver(t, c, "peek", nil)
	first, err := r.PeekMessages(ctxFor(t, 5*time.Second), 2, nil)
	must(t, "peek", err)
	if b := bodies(first); !slices.Equal(b, []string{"p0", "p1"}) {
		t.Fatalf("first peek %v", b)
	}
	next, err := r.PeekMessages(ctxFor(t, 5*time.Second), 2, nil)
	must(t, "peek next", err)
	if b := bodies(next); !slices.Equal(b, []string{"p2"}) {
		t.Fatalf("second peek %v, want [p2]", b)
	}
	if first[0].LockToken != ([16]byte{}) || first[0].LockedUntil != nil {
		t.Fatal("a peeked message has no lock")
	}
	got := receiveN(t, r, 3, 5*time.Second)
	for _, m := range got {
		mustEqual(t, "DeliveryCount after peek", m.DeliveryCount, uint32(1))
		must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
}

// Receive-and-delete: the message is gone on delivery and is not settleable.
func TestReceiveAndDelete(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "rnd"), "gone")
	r := newReceiver(t, c, "rnd", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	m := receiveN(t, r, 1, 5*time.Second)[0]
	mustEqual(t, "body", string(m.Body), "gone")
	if left := peekAll(t, r); len(left) != 0 {
		t.Fatalf("receive-and-delete left %d messages", len(left))
	}
	if err := r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil); err == nil {
		t.Fatal("settling a receive-and-delete message must fail")
	}
}

// Batch send: message-format 0x80013700, inner messages in data sections (§1.1).
func TestBatchSend(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "batch")
	b, err := s.NewMessageBatch(ctxFor(t, 5*time.Second), nil)
	must(t, "batch", err)
	for i := range 5 {
		must(t, "add", b.AddMessage(&azservicebus.Message{
			Body: []byte(fmt.Sprintf("b%d", i)), Subject: ptr(fmt.Sprintf("subj-%d", i)),
			ApplicationProperties: map[string]any{"i": int32(i)},
		}, nil))
	}
	must(t, "send batch", s.SendMessageBatch(ctxFor(t, 5*time.Second), b, nil))
	r := newReceiver(t, c, "batch", nil)
	got := receiveN(t, r, 5, 5*time.Second)
	for i, m := range got {
		mustEqual(t, "body", string(m.Body), fmt.Sprintf("b%d", i))
		mustEqual(t, "subject", str(m.Subject), fmt.Sprintf("subj-%d", i))
		mustEqual(t, "i", m.ApplicationProperties["i"], any(int32(i)))
		if m.MessageID == "" {
			t.Fatal("the Go SDK sets a MessageID on every batched message (§1.1)")
		}
		must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
}

// Locks belong to the entity, not the link: a message received on a closed
// connection is completed through another client's $management link
// (update-disposition, §5.1 management-link fallback).
func TestSettleAfterConnectionClosed(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c1 := newClient(t)
	sendBodies(t, newSender(t, c1, "settle-mgmt"), "s")
	old := newClient(t)
	r1 := newReceiver(t, old, "settle-mgmt", nil)
	m := receiveN(t, r1, 1, 5*time.Second)[0]
	must(t, "close old client", old.Close(ctxFor(t, 5*time.Second)))
	r2 := newReceiver(t, c1, "settle-mgmt", nil)
	must(t, "complete through another connection", r2.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	receiveNone(t, r2, 500*time.Millisecond)
}
