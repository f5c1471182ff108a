package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testenv"
)

// AMQP 1.0 (RabbitMQ 3.10) ↔ NATS against a hand-written forwarder
// (bench_helpers_test.go) with the same credit (1: RabbitMQ 3.x stalls with
// more) and the same window of transfers awaiting their outcome (200). b.N
// is the number of messages; 1 KiB bodies and three typed application
// properties. Figures: docs/benchmarks.md.
//
//	go test -run '^$' -bench Amqp -benchtime 5000x ./e2e/

var amqpBenchBody = make([]byte, 1024)

func amqpBenchMessage(i int) *amqp.Message {
	return &amqp.Message{
		Header:     &amqp.MessageHeader{Durable: true},
		Properties: &amqp.MessageProperties{MessageID: fmt.Sprintf("b%07d", i)},
		ApplicationProperties: map[string]any{
			"tenant": "acme", "qty": int32(i), "at": time.UnixMilli(1_700_000_000_000).UTC(),
		},
		Data: [][]byte{amqpBenchBody},
	}
}

// amqpPreload puts n messages on addr with a pipelined plain sender (up to
// 200 transfers awaiting their outcome).
func amqpPreload(b *testing.B, snd *amqp.Sender, n int) {
	b.Helper()
	ctx := amqpCtx(b, 5*time.Minute)
	var window []amqp.SendReceipt
	flush := func() {
		for _, r := range window {
			amqpAccepted(b, ctx, r)
		}
		window = window[:0]
	}
	for i := 0; i < n; i++ {
		r, err := snd.SendWithReceipt(ctx, amqpBenchMessage(i), nil)
		if err != nil {
			b.Fatal(err)
		}
		if window = append(window, r); len(window) == 200 {
			flush()
		}
	}
	flush()
}

// amqpAccepted waits for a transfer's outcome and fails the benchmark
// unless the broker accepted it.
func amqpAccepted(b *testing.B, ctx context.Context, r amqp.SendReceipt) {
	b.Helper()
	st, err := r.Wait(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, ok := st.(*amqp.StateAccepted); !ok {
		b.Fatalf("outcome %T", st)
	}
}

func amqpBenchCleanupQueue(b *testing.B, name string) {
	node := testenv.SharedRabbitMQ(b)
	b.Cleanup(func() { amqpRabbitctl(b, node, "delete_queue", name) })
}

// AMQP → NATS (core). qbridge: credit 1, publish + flush, then accept.
// Baseline: a go-amqp receiver with credit 1 → publish with the
// application properties as headers → flush → accept. A subscriber counts
// what arrives on both sides.
func BenchmarkAmqpToNATS(b *testing.B) {
	url := amqpURL(b)
	ns := startNATS(b)
	n := b.N
	qBase, qBridge := amqpQueueName(b, "base"), amqpQueueName(b, "bridge")
	amqpBenchCleanupQueue(b, qBase)
	amqpBenchCleanupQueue(b, qBridge)
	amqpPreload(b, amqpSender(b, url, "/queue/"+qBase), n)
	amqpPreload(b, amqpSender(b, url, "/queue/"+qBridge), n)

	nc, _ := e2etest.ConnectNATS(b, ns.ClientURL())
	out := subscribeArrivals(b, nc, "bench.out")

	b.ResetTimer()
	var qb, base benchSide
	took, cpu := out.round(b, n, func() {
		rcv := amqpReceiver(b, url, "/queue/"+qBase)
		pub, _ := e2etest.ConnectNATS(b, ns.ClientURL())
		ctx := amqpCtx(b, 5*time.Minute)
		for range n {
			m, err := rcv.Receive(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			out := nats.NewMsg("bench.out")
			out.Data = m.GetData()
			for k, v := range m.ApplicationProperties {
				out.Header.Set(k, fmt.Sprint(v))
			}
			if err := pub.PublishMsg(out); err != nil {
				b.Fatal(err)
			}
			if err := pub.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := rcv.AcceptMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	base.add(n, took, cpu)

	var stop func()
	took, cpu = out.round(b, n, func() {
		stop = benchPipeline(b, fmt.Sprintf(`
pipeline "bench-amqp-to-nats" {
  source "amqp" {
    url     = %q
    address = %q
    credit  = 1
  }
  sink "nats" {
    url     = %q
    subject = "bench.out"
  }
}
`, url, "/queue/"+qBridge, ns.ClientURL()), nil)
	})
	stop()
	b.StopTimer()
	qb.add(n, took, cpu)
	reportSides(b, qb, base)
}

// NATS (JetStream, pre-loaded stream) → AMQP. qbridge: a durable pull
// consumer, pipelined transfers (each waiting for Accepted), the JetStream
// message acked after its outcome. Baseline: a durable pull consumer,
// Fetch (200) → SendWithReceipt each, the 200 outcomes awaited → Ack each.
func BenchmarkNATSToAmqp(b *testing.B) {
	url := amqpURL(b)
	ns := startNATS(b)
	n := b.N
	qBase, qBridge := amqpQueueName(b, "base"), amqpQueueName(b, "bridge")
	amqpBenchCleanupQueue(b, qBase)
	amqpBenchCleanupQueue(b, qBridge)

	_, js := e2etest.ConnectNATS(b, ns.ClientURL())
	ctx := amqpCtx(b, 5*time.Minute)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_IN", Subjects: []string{"bench.in"}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		m := nats.NewMsg("bench.in")
		m.Data = amqpBenchBody
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("b%07d", i))
		m.Header.Set("tenant", "acme")
		m.Header.Set("qty", fmt.Sprint(i))
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("pre-loading the stream timed out")
	}

	b.ResetTimer()
	var qb, base benchSide
	// Both read the whole stream, each through its own durable consumer.
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "base", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	snd := amqpSender(b, url, "/queue/"+qBase)
	var seen span
	cpu := cpuNow(b)
	for sent := 0; sent < n; {
		batch, err := cons.Fetch(min(200, n-sent), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var msgs []jetstream.Msg
		var receipts []amqp.SendReceipt
		for m := range batch.Messages() {
			props := map[string]any{}
			for k, v := range m.Headers() {
				props[k] = v[0]
			}
			seen.begin()
			r, err := snd.SendWithReceipt(ctx, &amqp.Message{Header: &amqp.MessageHeader{Durable: true}, ApplicationProperties: props, Data: [][]byte{m.Data()}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			msgs, receipts = append(msgs, m), append(receipts, r)
		}
		for i, r := range receipts {
			amqpAccepted(b, ctx, r)
			if err := msgs[i].Ack(); err != nil {
				b.Fatal(err)
			}
		}
		if len(msgs) > 0 {
			seen.mark()
		}
		sent += len(msgs)
	}
	base.add(n, seen.took(), cpuNow(b)-cpu)

	cs := &countingSink{}
	cpu = cpuNow(b)
	stop := benchPipeline(b, fmt.Sprintf(`
pipeline "bench-nats-to-amqp" {
  source "nats" {
    url     = %q
    subject = "bench.in"
    jetstream {
      stream  = "BENCH_IN"
      durable = "bench"
    }
  }
  sink "amqp" {
    url     = %q
    address = %q
  }
}
`, ns.ClientURL(), url, "/queue/"+qBridge), func(s driver.Sink) driver.Sink { cs.Sink = s; return cs })
	eventually(b, 5*time.Minute, "every message confirmed by the sink", func() bool { return cs.ok.Load() >= int64(n) })
	qb.add(n, cs.seen.took(), cpuNow(b)-cpu)
	stop()
	b.StopTimer()
	reportSides(b, qb, base)
}
