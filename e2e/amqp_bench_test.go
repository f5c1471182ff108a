package e2e

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/mapping"
)

// Throughput of AMQP 1.0 pipelines against RabbitMQ 3.10, each measured
// together with a baseline in the same run: a plain go-amqp client doing the
// AMQP half of the work on the same broker, with the same credit (1: RabbitMQ
// 3.x stalls with more). b.N is the number of messages; 1 KiB bodies and
// three typed application properties. Reported: msg/s through qbridge,
// baseline-msg/s, and ratio = qbridge / baseline. Figures: docs/benchmarks.md.
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
			st, err := r.Wait(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := st.(*amqp.StateAccepted); !ok {
				b.Fatalf("outcome %T", st)
			}
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

// amqpBenchPipeline builds a pipeline from HCL through internal/config, as
// the daemon does, with a sink that counts confirmed messages.
func amqpBenchPipeline(b *testing.B, hcl string, sent *atomic.Int64) *bridge.Pipeline {
	b.Helper()
	cfg, diags := config.NewLoader().LoadBytes("bench.hcl", []byte(hcl))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	def, err := cfg.Pipelines[0].Definition(amqpDiscardLogger())
	if err != nil {
		b.Fatal(err)
	}
	c := def.Config
	c.Logger = amqpDiscardLogger()
	open := c.Sink
	c.Sink = func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		s, err := open(ctx, onDrop)
		if err != nil {
			return nil, err
		}
		return amqpCountingSink{s, sent}, nil
	}
	p, err := bridge.New(c)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

type amqpCountingSink struct {
	driver.Sink
	n *atomic.Int64
}

func (s amqpCountingSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := s.Sink.Send(ctx, msgs)
	for _, err := range errs {
		if err == nil {
			s.n.Add(1)
		}
	}
	return errs
}

// amqpRunUntil runs p until sent reaches n and returns the elapsed time
// (connecting included).
func amqpRunUntil(b *testing.B, p *bridge.Pipeline, sent *atomic.Int64, n int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for sent.Load() < int64(n) {
		if time.Now().After(deadline) {
			cancel()
			b.Fatalf("pipeline sent %d of %d", sent.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0)
	cancel()
	if err := <-done; err != nil {
		b.Logf("pipeline stop: %v", err)
	}
	return elapsed
}

func amqpReport(b *testing.B, n int, bridged, baseline time.Duration) {
	br, bl := float64(n)/bridged.Seconds(), float64(n)/baseline.Seconds()
	b.ReportMetric(br, "msg/s")
	b.ReportMetric(bl, "baseline-msg/s")
	b.ReportMetric(br/bl, "ratio")
}

func amqpBenchCleanupQueue(b *testing.B, name string) {
	b.Cleanup(func() {
		if os.Getenv("QBRIDGE_RABBITMQ_ENV") != "" {
			amqpRabbitctl(b, "delete_queue", name)
		}
	})
}

// AMQP → NATS (core). Baseline: a plain go-amqp receiver, credit 1,
// receiving and accepting the same number of messages from a queue of the
// same broker.
func BenchmarkAmqpToNATS(b *testing.B) {
	url := amqpURL(b)
	ns := startNATS(b)
	n := b.N
	qBase, qBridge := amqpQueueName(b, "base"), amqpQueueName(b, "bridge")
	amqpBenchCleanupQueue(b, qBase)
	amqpBenchCleanupQueue(b, qBridge)
	amqpPreload(b, amqpSender(b, url, "/queue/"+qBase), n)
	amqpPreload(b, amqpSender(b, url, "/queue/"+qBridge), n)

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	var got atomic.Int64
	sub, err := nc.Subscribe("bench.out", func(*nats.Msg) { got.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	nc.Flush()

	b.ResetTimer()
	// baseline
	rcv := amqpReceiver(b, url, "/queue/"+qBase)
	ctx := amqpCtx(b, 5*time.Minute)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	baseline := time.Since(t0)

	// through qbridge
	var sent atomic.Int64
	p := amqpBenchPipeline(b, fmt.Sprintf(`
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
`, url, "/queue/"+qBridge, ns.ClientURL()), &sent)
	bridged := amqpRunUntil(b, p, &sent, n)
	b.StopTimer()
	eventually(b, 10*time.Second, "every message at the NATS subscriber", func() bool { return got.Load() >= int64(n) })
	amqpReport(b, n, bridged, baseline)
}

// NATS (JetStream, pre-loaded stream) → AMQP. Baseline: a plain go-amqp
// sender putting the same number of messages on a queue of the same broker,
// pipelined as the sink does (up to 200 transfers awaiting their outcome).
func BenchmarkNATSToAmqp(b *testing.B) {
	url := amqpURL(b)
	ns := startNATS(b)
	n := b.N
	qBase, qBridge := amqpQueueName(b, "base"), amqpQueueName(b, "bridge")
	amqpBenchCleanupQueue(b, qBase)
	amqpBenchCleanupQueue(b, qBridge)

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := amqpCtx(b, 5*time.Minute)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_IN", Subjects: []string{"bench.in"}}); err != nil {
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
	snd := amqpSender(b, url, "/queue/"+qBase)

	b.ResetTimer()
	t0 := time.Now()
	amqpPreload(b, snd, n)
	baseline := time.Since(t0)

	var sent atomic.Int64
	p := amqpBenchPipeline(b, fmt.Sprintf(`
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
`, ns.ClientURL(), url, "/queue/"+qBridge), &sent)
	bridged := amqpRunUntil(b, p, &sent, n)
	b.StopTimer()
	amqpReport(b, n, bridged, baseline)
}
