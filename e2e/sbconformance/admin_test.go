package sbconformance

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// The official admin client reads runtime properties (CountDetails) from
// the management API. It always addresses https://<namespace>/, so its
// transport sends the requests to the server's plain HTTP port, as
// qbridge's Service Bus adapter does with management_endpoint.

type toHTTPPort struct{}

func (toHTTPPort) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "http", fmt.Sprintf("127.0.0.1:%d", httpPort), ""
	return http.DefaultClient.Do(r)
}

func newAdminHTTP(t *testing.T, key string) *admin.Client {
	t.Helper()
	opts := &admin.ClientOptions{}
	opts.Transport = toHTTPPort{}
	ac, err := admin.NewClientFromConnectionString(connStr(key), opts)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return ac
}

func TestAdminRuntimeProperties(t *testing.T) {
	requireServer(t)
	t.Parallel()
	// Counts are compared with those before, so the test can run again
	// on the same server (go test -count=N).
	ac := newAdminHTTP(t, keyVal)
	q0, err := ac.GetQueueRuntimeProperties(ctxFor(t, 10*time.Second), "admin-counts", nil)
	must(t, "GetQueueRuntimeProperties", err)
	if q0 == nil {
		t.Fatal("GetQueueRuntimeProperties: no queue")
	}
	sub0, err := ac.GetSubscriptionRuntimeProperties(ctxFor(t, 10*time.Second), "admin-topic", "s", nil)
	must(t, "GetSubscriptionRuntimeProperties", err)
	if sub0 == nil {
		t.Fatal("GetSubscriptionRuntimeProperties: no subscription")
	}
	c := newClient(t)
	s := newSender(t, c, "admin-counts")
	sendBodies(t, s, "dead", "a", "b")
	_, err = s.ScheduleMessages(ctxFor(t, 10*time.Second), []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Hour), nil)
	must(t, "schedule", err)
	r := newReceiver(t, c, "admin-counts", nil)
	m := receiveN(t, r, 1, 5*time.Second)[0]
	must(t, "dead-letter", r.DeadLetterMessage(ctxFor(t, 10*time.Second), m, nil))

	q, err := ac.GetQueueRuntimeProperties(ctxFor(t, 10*time.Second), "admin-counts", nil)
	must(t, "GetQueueRuntimeProperties", err)
	if q == nil {
		t.Fatal("GetQueueRuntimeProperties: no queue")
	}
	mustEqual(t, "ActiveMessageCount", q.ActiveMessageCount, q0.ActiveMessageCount+2)
	mustEqual(t, "ScheduledMessageCount", q.ScheduledMessageCount, q0.ScheduledMessageCount+1)
	mustEqual(t, "DeadLetterMessageCount", q.DeadLetterMessageCount, q0.DeadLetterMessageCount+1)
	mustEqual(t, "TotalMessageCount", q.TotalMessageCount, q0.TotalMessageCount+4)
	if q.CreatedAt.IsZero() {
		t.Error("CreatedAt is zero")
	}

	ts := newSender(t, c, "admin-topic")
	sendBodies(t, ts, "x", "y")
	sub, err := ac.GetSubscriptionRuntimeProperties(ctxFor(t, 10*time.Second), "admin-topic", "s", nil)
	must(t, "GetSubscriptionRuntimeProperties", err)
	if sub == nil {
		t.Fatal("GetSubscriptionRuntimeProperties: no subscription")
	}
	mustEqual(t, "subscription ActiveMessageCount", sub.ActiveMessageCount, sub0.ActiveMessageCount+2)

	// An entity that does not exist: the SDK answers nil, nil.
	none, err := ac.GetQueueRuntimeProperties(ctxFor(t, 10*time.Second), "no-such-queue", nil)
	must(t, "GetQueueRuntimeProperties of a missing queue", err)
	if none != nil {
		t.Fatalf("a missing queue has properties: %+v", none)
	}

	// Management needs the Manage right.
	if _, err := newAdminHTTP(t, "wrong-key").GetQueueRuntimeProperties(ctxFor(t, 10*time.Second), "admin-counts", nil); err == nil {
		t.Fatal("a wrong key read the counts")
	}
}
