package amqp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/faultproxy"
	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/mapping"
)

// stream runs a producer (sink, paced at ~400 msg/s, retrying every failed
// message) and a consumer (source, acking) over n messages; fault() runs
// concurrently once the consumer has seen faultAt messages (faultAt < n/2).
// The producer sends the second half of the messages only once fault()
// returned, so both sides meet the fault however slow the machine is (a
// fault that took longer than the whole stream used to hit nobody). It
// returns how many deliveries were duplicates; it fails the test if any
// message is missing.
func stream(t *testing.T, snk *sink, src *source, n, faultAt int, fault func()) int {
	t.Helper()
	if faultAt >= n/2 {
		t.Fatalf("faultAt %d must be below half of %d", faultAt, n)
	}
	ctx := ctxT(t, 80*time.Second)
	faultDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		all := make([]*mapping.Message, n)
		for i := range all {
			all[i] = textMsg(fmt.Sprintf("s%05d", i))
		}
		pending, later := all[:n/2], all[n/2:]
		for (len(pending) > 0 || len(later) > 0) && ctx.Err() == nil {
			if len(pending) == 0 {
				select {
				case <-faultDone:
				case <-ctx.Done():
					return
				}
				pending, later = later, nil
			}
			batch := pending[:min(20, len(pending))]
			errs := snk.Send(ctx, batch)
			var retry []*mapping.Message
			for i, err := range errs {
				if err != nil {
					retry = append(retry, batch[i])
				}
			}
			pending = append(retry, pending[len(batch):]...)
			// paced so that the fault hits the producer too
			time.Sleep(50 * time.Millisecond)
		}
	}()
	seen := map[string]int{}
	faulted := false
	dups := 0
	for len(seen) < n {
		ds, err := src.Receive(ctx, 50)
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", len(seen), n, err)
		}
		for _, d := range ds {
			id := d.Message().ID
			seen[id]++
			if seen[id] > 1 {
				dups++
			}
			_ = d.Ack(ctx) // a failed ack is redelivered: a duplicate, never a loss
		}
		if !faulted && len(seen) >= faultAt {
			faulted = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				fault()
				close(faultDone)
			}()
		}
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if seen[fmt.Sprintf("s%05d", i)] == 0 {
			t.Fatalf("message s%05d lost", i)
		}
	}
	return dups
}

// The broker restarted in the middle of a stream (rabbitmqctl stop_app /
// start_app: connections are closed, the listener goes away, durable
// queues and persistent messages survive). On the restart node, so that
// the tests of other packages running now never see the restart.
func TestBrokerRestartMidStream(t *testing.T) {
	node := testenv.RabbitMQForRestart(t)
	url := node.URL
	name := strings.TrimPrefix(queue(t), "/queue/")
	node.DeclareQueue(t, name, false)
	addr := "/amq/queue/" + name // the existing durable queue
	cfg := SourceConfig{ConnConfig: ConnConfig{URL: url, ReconnectBackoff: "100ms", ReconnectBackoffM: "1s"}, Address: addr}
	src, slog := newTestSource(t, cfg)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url, ReconnectBackoff: "100ms", ReconnectBackoffM: "1s"}, Address: addr})
	t0 := time.Now()
	var down time.Duration
	dups := stream(t, snk, src, 1000, 100, func() {
		t1 := time.Now()
		if rabbitctl(t, node, "stop_app") {
			time.Sleep(500 * time.Millisecond) // the outage lasts at least this long
		}
		rabbitctl(t, node, "start_app")
		down = time.Since(t1)
	})
	t.Logf("1000 messages across a broker restart (down %v) in %v, %d duplicates, %d source reconnects, %d sink connections",
		down.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), dups, src.reconnects.Load(), snk.connects.Load())
	if src.reconnects.Load() == 0 || snk.connects.Load() < 2 {
		t.Fatalf("the source never reconnected:\n%s", slog)
	}
	if err := src.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := snk.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Network faults: every connection cut twice and new connections refused
// for a while; the first URL is dead, so every (re)connect fails over to
// the second.
func TestNetworkFaultsAndFailover(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	p := faultproxy.New(t, strings.TrimPrefix(strings.SplitN(url, "@", 2)[1], "/"))
	dead := "amqp://guest:guest@127.0.0.1:1"
	urls := []string{dead, p.URL(t, url)}
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URLs: urls, ReconnectBackoff: "50ms", ReconnectBackoffM: "500ms"}, Address: q})
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URLs: urls, ReconnectBackoff: "50ms", ReconnectBackoffM: "500ms"}, Address: q})
	t0 := time.Now()
	dups := stream(t, snk, src, 500, 150, func() {
		// The fault's shape is the scenario: a cut, 100 ms of service, a
		// second cut and 400 ms of refused connections.
		p.Cut()
		time.Sleep(100 * time.Millisecond)
		p.SetDown(true)
		p.Cut()
		time.Sleep(400 * time.Millisecond)
		p.SetDown(false)
	})
	t.Logf("500 messages across network faults in %v, %d duplicates, %d source reconnects, %d sink connections",
		time.Since(t0).Round(time.Millisecond), dups, src.reconnects.Load(), snk.connects.Load())
	if src.reconnects.Load() == 0 || snk.connects.Load() < 2 {
		t.Fatal("the source never reconnected")
	}
}

// Close returns promptly on RabbitMQ 3.x (no link detach that would hang
// until its deadline) and unsettled deliveries come back.
func TestCloseIsPromptAndReturnsUnsettled(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	// A close that hung would wait CloseTimeout: 30 s here, far over the
	// bounds below, which a loaded machine stays well under.
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url, CloseTimeout: "30s"}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("held")})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url, CloseTimeout: "30s"}, Address: q})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	t0 := time.Now()
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el > 10*time.Second { // a hang waits CloseTimeout (30 s)
		t.Fatalf("Close took %v", el)
	}
	if err := d.Ack(context.Background()); err == nil {
		t.Fatal("ack after close succeeded")
	}
	if _, err := src.Receive(context.Background(), 1); err == nil {
		t.Fatal("Receive after Close succeeded")
	}
	if err := src.Ready(context.Background()); err == nil {
		t.Fatal("ready after close")
	}
	t0 = time.Now()
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el > 10*time.Second { // a hang waits CloseTimeout (30 s)
		t.Fatalf("sink Close took %v", el)
	}
	if m := rawReceive(t, url, q, 5*time.Second); m == nil || m.Properties.MessageID != "held" {
		t.Fatal("the unsettled message did not come back")
	}
}

// A black-holed connection (open, silent: a network partition or a frozen
// broker) is detected by the idle timeout and replaced.
func TestSilentConnectionIdleTimeout(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	p := faultproxy.New(t, strings.TrimPrefix(strings.SplitN(url, "@", 2)[1], "/"))
	purl := p.URL(t, url)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: purl, IdleTimeout: "1s", ReconnectBackoff: "50ms", ReconnectBackoffM: "200ms"}, Address: q})
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: purl, IdleTimeout: "1s", ReconnectBackoff: "50ms", ReconnectBackoffM: "200ms"}, Address: q, SendTimeout: "10s"})
	t0 := time.Now()
	dups := stream(t, snk, src, 400, 100, p.Freeze)
	t.Logf("400 messages across a silent connection in %v, %d duplicates, %d source reconnects, %d sink connections",
		time.Since(t0).Round(time.Millisecond), dups, src.reconnects.Load(), snk.connects.Load())
	if src.reconnects.Load() == 0 || snk.connects.Load() < 2 {
		t.Fatal("the silent connection was not replaced")
	}
}

// Ready never waits for the broker (it is /readyz's and /metrics' answer):
// during an outage it says so at once, and an idle sink reconnects in the
// background once the broker is back, without a send. It waited out the
// reconnect backoff and a dial, seconds per probe and scrape.
func TestSinkReadyNeverWaitsForTheBroker(t *testing.T) {
	url := brokerURL(t)
	p := faultproxy.New(t, strings.TrimPrefix(strings.SplitN(url, "@", 2)[1], "/"))
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: p.URL(t, url), ReconnectBackoff: "6s", ReconnectBackoffM: "6s"}, Address: queue(t)})
	if err := snk.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.SetDown(true)
	p.Cut()
	deadline := time.Now().Add(20 * time.Second)
	for {
		start := time.Now()
		err := snk.Ready(context.Background())
		if took := time.Since(start); took > 3*time.Second { // the backoff alone is 6 s
			t.Fatalf("Ready took %s during the outage", took)
		}
		if err != nil {
			break // the connection's loss is seen
		}
		if time.Now().After(deadline) {
			t.Fatal("Ready still says connected 20 s into the outage")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.SetDown(false)
	deadline = time.Now().Add(60 * time.Second)
	for snk.Ready(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the idle sink did not reconnect within 60 s of the broker's return")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
