package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestSmokeCoreNATS: the daemon moves one typed message from a core NATS
// subject to another and exits 0 on SIGTERM.
func TestSmokeCoreNATS(t *testing.T) {
	s := startNATS(t)
	d := startDaemon(t, fmt.Sprintf(`
pipeline "smoke" {
  source "nats" {
    url     = %q
    subject = "smoke.in"
  }
  sink "nats" {
    url     = %q
    subject = "smoke.out"
  }
}
`, s.ClientURL(), s.ClientURL()))
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("smoke.out")
	if err != nil {
		t.Fatal(err)
	}
	in := nats.NewMsg("smoke.in")
	in.Data = []byte("hello")
	in.Header.Set("qty", "3")
	if err := nc.PublishMsg(in); err != nil {
		t.Fatal(err)
	}
	out, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no message: %v\n%s", err, d.Logs())
	}
	if string(out.Data) != "hello" || out.Header.Get("qty") != "3" {
		t.Fatalf("got %q %v", out.Data, out.Header)
	}
	// The message reaches the subscriber before the sink's flush returns
	// and the engine counts it: wait for the count, do not race it.
	eventually(t, 10*time.Second, "qbridge_messages_sent_total = 1", func() bool {
		return d.metric("qbridge_messages_sent_total") == 1
	})
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
