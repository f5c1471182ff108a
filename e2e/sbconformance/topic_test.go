package sbconformance

import (
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A send to a topic is copied to every subscription (default TrueFilter);
// each subscription settles its own copy and has its own DLQ (§0).
func TestTopicFanOut(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	sendBodies(t, newSender(t, c, "fanout"), "t0", "t1")
	ra, err := c.NewReceiverForSubscription("fanout", "a", nil)
	must(t, "receiver a", err)
	rb, err := c.NewReceiverForSubscription("fanout", "b", nil)
	must(t, "receiver b", err)
	ma := receiveN(t, ra, 2, 5*time.Second)
	mb := receiveN(t, rb, 2, 5*time.Second)
	if !slices.Equal(bodies(ma), []string{"t0", "t1"}) || !slices.Equal(bodies(mb), []string{"t0", "t1"}) {
		t.Fatalf("a got %v, b got %v", bodies(ma), bodies(mb))
	}
	must(t, "complete a0", ra.CompleteMessage(ctxFor(t, 5*time.Second), ma[0], nil))
	must(t, "dead-letter a1", ra.DeadLetterMessage(ctxFor(t, 5*time.Second), ma[1], &azservicebus.DeadLetterOptions{Reason: ptr("r")}))
	for _, m := range mb {
		must(t, "complete b", rb.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	}
	dlq, err := c.NewReceiverForSubscription("fanout", "a", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	must(t, "dlq a", err)
	d := receiveN(t, dlq, 1, 5*time.Second)[0]
	mustEqual(t, "DLQ body", string(d.Body), "t1")
	mustEqual(t, "DeadLetterSource", str(d.DeadLetterSource), "fanout/Subscriptions/a")
	must(t, "complete dlq", dlq.CompleteMessage(ctxFor(t, 5*time.Second), d, nil))
	receiveNone(t, rb, 300*time.Millisecond)
	// receiving from the topic itself is refused
	rt, err := c.NewReceiverForQueue("fanout", nil)
	must(t, "receiver", err)
	ctx := ctxFor(t, 5*time.Second)
	if _, err := rt.ReceiveMessages(ctx, 1, nil); err == nil {
		t.Fatal("receiving from a topic must fail")
	}
}
