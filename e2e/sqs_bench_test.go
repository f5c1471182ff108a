package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/internal/config"
)

// sqsBenchRound is how many messages each round moves.
const sqsBenchRound = 1000

// sqsBenchPipeline builds the one pipeline of an HCL configuration in
// process (internal/config, as `qbridge run` does) and runs it until the
// returned stop is called.
func sqsBenchPipeline(b *testing.B, hcl string) (stop func()) {
	b.Helper()
	cfg, diags := config.NewLoader().LoadBytes("bench.hcl", []byte(hcl))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	defs, err := cfg.Definitions(log)
	if err != nil || len(defs) != 1 {
		b.Fatalf("definitions: %v (%d)", err, len(defs))
	}
	c := defs[0].Config
	c.Logger = log
	p, err := bridge.New(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("pipeline: %v", err)
		}
	}
}

// sqsBenchEntries is n 100-byte messages with two typed attributes.
func sqsBenchEntries(n int) []types.SendMessageBatchRequestEntry {
	es := make([]types.SendMessageBatchRequestEntry, n)
	for i := range es {
		es[i] = types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i % 10)),
			MessageBody: aws.String(fmt.Sprintf("%-100d", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
				"qty":    {DataType: aws.String("Number.int"), StringValue: aws.String(strconv.Itoa(i))},
			},
		}
	}
	return es
}

// sqsBenchReport reports qbridge's and the baseline's throughput and their
// ratio.
func sqsBenchReport(b *testing.B, n int, qb, base time.Duration) {
	q := float64(n) / qb.Seconds()
	s := float64(n) / base.Seconds()
	b.ReportMetric(q, "msg/s")
	b.ReportMetric(s, "baseline-msg/s")
	b.ReportMetric(q/s, "ratio")
}

// BenchmarkSqsToNats: messages/second from an SQS queue (fauxqs) to a core
// NATS subject through qbridge (2 pollers, receive 10, DeleteMessageBatch),
// against the baseline of a plain aws-sdk-go-v2 loop on the same fauxqs
// doing ReceiveMessage (10) + DeleteMessageBatch until the queue is empty.
// Each round moves 1000 messages of 100 bytes and 2 attributes, queued
// beforehand (not timed).
func BenchmarkSqsToNats(b *testing.B) {
	e := sqsSetup(b)
	ns := startNATS(b)
	nc, _ := natsConnect(b, ns.ClientURL())
	var got atomic.Int64
	if _, err := nc.Subscribe("bench.out", func(*nats.Msg) { got.Add(1) }); err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	entries := sqsBenchEntries(sqsBenchRound)
	var qbTime, baseTime time.Duration
	var moved int
	for b.Loop() {
		// qbridge
		q := e.createQueue(b, "qb", false, nil)
		e.sendBatch(b, q, entries)
		got.Store(0)
		start := time.Now()
		stop := sqsBenchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "bench.out"
  }
}
`, e.conn(q, `wait_time = "1s"`), ns.ClientURL()))
		for got.Load() < sqsBenchRound {
			time.Sleep(time.Millisecond)
		}
		qbTime += time.Since(start)
		stop()

		// baseline
		q = e.createQueue(b, "base", false, nil)
		e.sendBatch(b, q, entries)
		start = time.Now()
		for n := 0; n < sqsBenchRound; {
			out, err := e.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
				// The queue is full: short polling is enough.
				QueueUrl: aws.String(q), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
				MessageAttributeNames:       []string{"All"},
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			})
			if err != nil {
				b.Fatal(err)
			}
			del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
			for i, m := range out.Messages {
				del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
			}
			if len(del) > 0 {
				if _, err := e.c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(q), Entries: del}); err != nil {
					b.Fatal(err)
				}
			}
			n += len(out.Messages)
		}
		baseTime += time.Since(start)
		moved += sqsBenchRound
	}
	sqsBenchReport(b, moved, qbTime, baseTime)
}

// BenchmarkNatsToSqs: messages/second from a JetStream stream (durable
// consumer) to an SQS queue (fauxqs) through qbridge (SendMessageBatch of
// 10, 4 senders), against the baseline of a plain aws-sdk-go-v2 loop sending
// the same messages with SendMessageBatch (10). Each round moves 1000
// messages of 100 bytes and 2 attributes, published to the stream beforehand
// (not timed); qbridge's round ends when the queue holds them all.
func BenchmarkNatsToSqs(b *testing.B) {
	e := sqsSetup(b)
	ns := startNATS(b)
	_, js := natsConnect(b, ns.ClientURL())
	sqsCreateStream(b, js, "BENCH_IN", "bench.in")
	ctx := context.Background()
	entries := sqsBenchEntries(sqsBenchRound)
	var qbTime, baseTime time.Duration
	var moved int
	for b.Loop() {
		// qbridge
		for i := range sqsBenchRound {
			m := nats.NewMsg("bench.in")
			m.Data = []byte(fmt.Sprintf("%-100d", i))
			m.Header.Set("tenant", "acme")
			m.Header.Set("qty", strconv.Itoa(i))
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("publishing to BENCH_IN timed out")
		}
		q := e.createQueue(b, "qb", false, nil)
		start := time.Now()
		stop := sqsBenchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "nats" {
    url     = %q
    subject = "bench.in"
    jetstream {
      stream  = "BENCH_IN"
      durable = "bench"
    }
  }
  sink "sqs" {
%s  }
}
`, ns.ClientURL(), e.conn(q)))
		for {
			v, nv, _ := e.approx(b, q)
			if v+nv >= sqsBenchRound {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		qbTime += time.Since(start)
		stop()

		// baseline
		q = e.createQueue(b, "base", false, nil)
		start = time.Now()
		for i := 0; i < len(entries); i += 10 {
			out, err := e.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: entries[i : i+10]})
			if err != nil || len(out.Failed) > 0 {
				b.Fatalf("SendMessageBatch: %v %v", err, out)
			}
		}
		baseTime += time.Since(start)
		moved += sqsBenchRound
	}
	sqsBenchReport(b, moved, qbTime, baseTime)
}
