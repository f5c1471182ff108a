package sbconformance

import (
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A released delivery is not counted (§5.1): Service Bus does not
// increment DeliveryCount on the AMQP released outcome. The Go SDK releases
// the messages that reach a peek-lock receiver between two ReceiveMessages
// calls; counting them as abandons dead-lettered a message of a busy test
// after ten such calls (MaxDeliveryCountExceeded), which the service would
// not do.
//
// Not parallel: the SDK's log listener, which tells that a release
// happened, is process-wide.
func TestReleaseKeepsDeliveryCount(t *testing.T) {
	requireServer(t)
	var released atomic.Int64
	releasedRe := regexp.MustCompile(`Released (\d+) messages`)
	azlog.SetEvents(azservicebus.EventReceiver)
	azlog.SetListener(func(_ azlog.Event, msg string) {
		if m := releasedRe.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			released.Add(int64(n))
		}
	})
	t.Cleanup(func() { azlog.SetListener(nil) })

	c := newClient(t)
	s := newSender(t, c, "release")
	r := newReceiver(t, c, "release", nil)
	// ReceiveMessages returns right after its first message; what its
	// credit brings in after that is released. A round where every message
	// came in time releases nothing: then try again.
	const n = 20
	for round := 1; released.Load() == 0; round++ {
		if round > 5 {
			t.Fatal("in five rounds the SDK released nothing: the test could not exercise a release")
		}
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = strconv.Itoa(i)
		}
		sendBodies(t, s, bodies...)
		got := 0
		ctx := ctxFor(t, 30*time.Second)
		for got < n {
			ms, err := r.ReceiveMessages(ctx, n, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: time.Nanosecond})
			if err != nil {
				t.Fatalf("round %d: received %d of %d: %v", round, got, n, err)
			}
			for _, m := range ms {
				if m.DeliveryCount != 1 {
					t.Errorf("round %d: message %s has DeliveryCount %d after %d released, want 1", round, m.Body, m.DeliveryCount, released.Load())
				}
				must(t, "complete", r.CompleteMessage(ctx, m, nil))
			}
			got += len(ms)
		}
		t.Logf("round %d: %d messages, %d released by the SDK so far", round, n, released.Load())
	}
}
