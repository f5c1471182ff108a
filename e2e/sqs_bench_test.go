package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/e2etest"
)

// SQS ↔ NATS against a hand-written forwarder (bench_helpers_test.go);
// figures in docs/benchmarks.md.
//
//	go test -run '^$' -bench Sqs -benchtime 7x ./e2e/

// sqsBenchRound is how many messages each round moves.
const sqsBenchRound = 2000

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

// BenchmarkSqsToNats: an SQS queue (fauxqs) → core NATS. qbridge: 2
// pollers (receive 10, long poll), publish + flush, DeleteMessageBatch.
// Baseline: 2 goroutines of ReceiveMessage (10, long poll) → publish each
// with its attributes as headers → flush → DeleteMessageBatch. Each round
// moves sqsBenchRound messages of 100 bytes and 2 attributes, queued
// beforehand (not timed); a subscriber counts what arrives.
func BenchmarkSqsToNats(b *testing.B) {
	e := sqsSetup(b)
	ns := startNATS(b)
	nc, _ := e2etest.ConnectNATS(b, ns.ClientURL())
	out := subscribeArrivals(b, nc, "bench.out")
	// round queues a round's messages (not timed) and runs a side on them.
	round := func(run func(q string)) (time.Duration, time.Duration) {
		q := e.createQueue(b, "round", false, nil)
		e.sendBatch(b, q, sqsBenchEntries(sqsBenchRound))
		return out.round(b, sqsBenchRound, func() { run(q) })
	}
	var qb, base benchSide
	for b.Loop() {
		var stop, stopForwarder func()
		took, cpu := round(func(q string) {
			stop = benchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "bench.out"
  }
}
`, e.conn(q, `wait_time = "1s"`), ns.ClientURL()), nil)
		})
		stop()
		qb.add(sqsBenchRound, took, cpu)

		took, cpu = round(func(q string) {
			pub, _ := e2etest.ConnectNATS(b, ns.ClientURL())
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() { sqsForwardToNats(ctx, b, e.c, q, pub) })
			}
			stopForwarder = func() {
				cancel()
				wg.Wait()
			}
		})
		stopForwarder()
		base.add(sqsBenchRound, took, cpu)
	}
	reportSides(b, qb, base)
}

// sqsForwardToNats is the hand-written SQS → NATS forwarder of the
// baseline; it runs until ctx ends.
func sqsForwardToNats(ctx context.Context, b *testing.B, c *awssqs.Client, q string, nc *nats.Conn) {
	for ctx.Err() == nil {
		out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(q), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				b.Error(err)
			}
			return
		}
		del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			msg := nats.NewMsg("bench.out")
			msg.Data = []byte(aws.ToString(m.Body))
			for k, v := range m.MessageAttributes {
				msg.Header.Set(k, aws.ToString(v.StringValue))
			}
			if err := nc.PublishMsg(msg); err != nil {
				b.Error(err)
				return
			}
			del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		if len(del) == 0 {
			continue
		}
		if err := nc.Flush(); err != nil {
			b.Error(err)
			return
		}
		if _, err := c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(q), Entries: del}); err != nil && ctx.Err() == nil {
			b.Error(err)
			return
		}
	}
}

// BenchmarkNatsToSqs: a JetStream stream (durable pull consumer) → an SQS
// queue (fauxqs). qbridge: SendMessageBatch of 10 from 4 senders, the
// JetStream message acked once SQS confirmed it. Baseline: 4 goroutines of
// Fetch (10) → SendMessageBatch with the headers as attributes → Ack each.
// Each round moves sqsBenchRound messages of 100 bytes and 2 headers,
// published beforehand (not timed); each side is timed from its first
// send to its last confirmation.
func BenchmarkNatsToSqs(b *testing.B) {
	e := sqsSetup(b)
	ns := startNATS(b)
	_, js := e2etest.ConnectNATS(b, ns.ClientURL())
	ctx := context.Background()
	stream := 0
	fill := func() string {
		stream++
		name := fmt.Sprintf("BENCH_IN_%d", stream)
		subject := fmt.Sprintf("bench.in.%d", stream)
		sqsCreateStream(b, js, name, subject)
		for i := range sqsBenchRound {
			m := nats.NewMsg(subject)
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
			b.Fatal("publishing the round timed out")
		}
		return name
	}
	var qb, base benchSide
	for b.Loop() {
		name := fill()
		q := e.createQueue(b, "qb", false, nil)
		cs := &countingSink{}
		cpu := cpuNow(b)
		stop := benchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "nats" {
    url     = %q
    subject = "bench.in.%d"
    jetstream {
      stream  = %q
      durable = "bench"
    }
  }
  sink "sqs" {
%s  }
}
`, ns.ClientURL(), stream, name, e.conn(q)), func(s driver.Sink) driver.Sink { cs.Sink = s; return cs })
		for cs.ok.Load() < sqsBenchRound {
			time.Sleep(time.Millisecond)
		}
		qb.add(sqsBenchRound, cs.seen.took(), cpuNow(b)-cpu)
		stop()

		name = fill()
		q = e.createQueue(b, "base", false, nil)
		st, err := js.Stream(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "base", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			b.Fatal(err)
		}
		var sent atomic.Int64
		var seen span
		cpu = cpuNow(b)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { natsForwardToSqs(b, cons, e.c, q, &sent, &seen) })
		}
		wg.Wait()
		base.add(sqsBenchRound, seen.took(), cpuNow(b)-cpu)
	}
	reportSides(b, qb, base)
}

// natsForwardToSqs is the hand-written JetStream → SQS forwarder of the
// baseline; it runs until sqsBenchRound messages were sent.
func natsForwardToSqs(b *testing.B, cons jetstream.Consumer, c *awssqs.Client, q string, sent *atomic.Int64, seen *span) {
	ctx := context.Background()
	for sent.Load() < sqsBenchRound {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			b.Error(err)
			return
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			continue
		}
		entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
		for i, m := range msgs {
			attrs := map[string]types.MessageAttributeValue{}
			for k, v := range m.Headers() {
				attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v[0])}
			}
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(m.Data())), MessageAttributes: attrs}
		}
		seen.begin()
		out, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Errorf("SendMessageBatch: %v %v", err, out)
			return
		}
		seen.mark()
		for _, m := range msgs {
			if err := m.Ack(); err != nil {
				b.Error(err)
				return
			}
		}
		sent.Add(int64(len(msgs)))
	}
}
