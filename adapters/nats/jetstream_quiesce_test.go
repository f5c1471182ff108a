package nats

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestJetStreamQuiesceHandsOutLeftovers: once quiesced, the source pulls no
// more and hands out what the pull a cancelled Receive left brought (for a
// migration to record), and leftovers given back in any order are NAKed by
// Close in stream order, so the next source gets them first, in order.
func TestJetStreamQuiesceHandsOutLeftovers(t *testing.T) {
	f := newJSFixture(t)
	cfg := f.sourceConfig()
	cfg.JetStream.FetchWait = "1s"
	cfg.JetStream.FilterSubjects = []string{"orders.>"}
	src, _ := mustSource(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	ds, _ := src.Receive(ctx, 10) // nothing there: cancelled while its pull waits
	cancel()
	if len(ds) != 0 {
		t.Fatalf("unexpected deliveries: %d", len(ds))
	}
	const n = 5
	for i := range n {
		f.publish(t, "orders.a", fmt.Sprint(i)) // into the waiting pull
	}
	js := src.(*jsSource)
	select {
	case <-js.Quiesce():
	case <-time.After(10 * time.Second):
		t.Fatal("Quiesce did not say drained")
	}
	left, err := src.Receive(ctxT(t, 5*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	// The left pull waited for one message (Receive fetches the rest of
	// a batch after it); the others were never delivered.
	if len(left) != 1 || string(left[0].Message().Body) != "0" {
		t.Fatalf("quiesced Receive handed out %d, want the first message, which the left pull brought", len(left))
	}
	if more, err := src.Receive(ctxT(t, 5*time.Second), 10); len(more) != 0 || err != nil {
		t.Fatalf("a second quiesced Receive: %d, %v; want nothing, at once", len(more), err)
	}
	for _, d := range slices.Backward(left) { // as a parallel hand-back may
		if err := d.Nack(ctxT(t, 5*time.Second), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	src2, _ := mustSource(t, cfg)
	back := receiveN(t, src2, n, 10*time.Second)
	for i, d := range back {
		if got := string(d.Message().Body); got != fmt.Sprint(i) {
			t.Fatalf("message %d after the hand-back is %q, want %d", i, got, i)
		}
	}
	ackAll(t, back)
}
