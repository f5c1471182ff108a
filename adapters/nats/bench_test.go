package nats

import (
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// benchBatch is 100 messages of 1 KiB with 10 attributes.
func benchBatch() []*mapping.Message {
	body := []byte(strings.Repeat("x", 1024))
	msgs := make([]*mapping.Message, 100)
	for i := range msgs {
		m := &mapping.Message{Body: body, GroupKey: "g"}
		for a := range 10 {
			m.SetAttr("attr"+string(rune('a'+a)), mapping.String("value"))
		}
		msgs[i] = m
	}
	return msgs
}

func benchSend(b *testing.B, cfg SinkConfig) {
	snk, _ := mustSink(b, cfg)
	msgs := benchBatch()
	ctx := ctxT(b, time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, err := range snk.Send(ctx, msgs) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkCoreSinkSend100(b *testing.B) {
	srv := startServer(b)
	benchSend(b, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "bench.{group}"})
}

func BenchmarkJetStreamSinkSend100(b *testing.B) {
	srv := startServer(b)
	benchSend(b, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "bench.{group}",
		JetStream: &JetStreamSinkConfig{Stream: "BENCH", CreateStream: true}})
}

func BenchmarkJetStreamReceiveAck(b *testing.B) {
	srv := startServer(b)
	snk, _ := mustSink(b, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "bench.{group}",
		JetStream: &JetStreamSinkConfig{Stream: "BENCH", CreateStream: true}})
	src, _ := mustSource(b, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "bench.>",
		JetStream: &JetStreamSourceConfig{Stream: "BENCH", Durable: "b", FetchBatch: 100, MaxAckPending: 10000}})
	msgs := benchBatch()
	ctx := ctxT(b, 5*time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		snk.Send(ctx, msgs)
		b.StartTimer()
		var got []driver.Delivery
		for len(got) < len(msgs) {
			ds, err := src.Receive(ctx, len(msgs)-len(got))
			if err != nil {
				b.Fatal(err)
			}
			got = append(got, ds...)
		}
		for _, d := range got {
			if err := d.Ack(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
}
