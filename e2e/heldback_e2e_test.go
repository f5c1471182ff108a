package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/internal/e2etest"
)

// A JetStream consumer goes on delivering while a message of a group waits
// out its Nack delay (NakWithDelay): the group's messages that arrive
// meanwhile must not overtake it. Here t1/2 is one SQS refuses (a reserved
// attribute name) and the pipeline has no dead_letter, so it is handed
// back for ever; t1/3..t1/7, published while it is held, stay behind it,
// and t2, another group, flows. Before, t1/3..t1/7 were written.
func TestJetStreamHeldNackKeepsGroupOrder(t *testing.T) {
	env := sqsSetup(t)
	queue := env.createQueue(t, "out", false, nil)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "HB", "in.>")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "hb" {
  source "nats" {
    url     = %q
    subject = "in.>"
    jetstream {
      stream     = "HB"
      durable    = "hb"
      ack_wait   = "30s"
      fetch_wait = "200ms"
    }
  }
  sink "sqs" {
%s  }
  mapping {
    group_key = "{attr.tenant}"
  }
  retry {
    initial = "2s"
    max     = "2s"
  }
}
`, ns.URL(), env.conn(queue)))

	publish := func(tenant string, i int, bad bool) {
		m := nats.NewMsg("in.x")
		m.Data = fmt.Appendf(nil, "%s/%d", tenant, i)
		m.Header.Set("tenant", tenant)
		if bad {
			m.Header.Set("AWS.internal", "reserved by SQS")
		}
		if _, err := js.PublishMsg(natsCtx(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		publish("t1", i, i == 2)
	}
	eventually(t, 15*time.Second, "t1/2 handed back", func() bool { return d.metric("qbridge_messages_nacked_total") >= 1 })
	for i := 3; i < 8; i++ {
		publish("t1", i, false)
	}
	for i := range 5 {
		publish("t2", i, false)
	}
	// t1/2 and the five behind it handed back at least once each
	eventually(t, 15*time.Second, "t1/3..t1/7 handed back", func() bool { return d.metric("qbridge_messages_nacked_total") >= 6 })

	var got []string
	ms := env.collect(t, queue, 7, 30*time.Second)
	ms = append(ms, env.collect(t, queue, 1, 2*time.Second)...) // nothing more
	for _, m := range ms {
		got = append(got, aws.ToString(m.Body))
	}
	slices.Sort(got)
	want := []string{"t1/0", "t1/1", "t2/0", "t2/1", "t2/2", "t2/3", "t2/4"}
	if !slices.Equal(got, want) {
		t.Errorf("SQS queue holds %v, want %v: what is behind t1/2 stays behind it", got, want)
	}
}
