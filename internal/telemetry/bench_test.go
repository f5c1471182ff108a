package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

type nopSink struct{}

func (nopSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	return make([]error, len(msgs))
}
func (nopSink) Close(context.Context) error { return nil }

type oneSource struct{ m mapping.Message }

func (s *oneSource) Receive(context.Context, int) ([]driver.Delivery, error) {
	m := s.m
	return []driver.Delivery{&fakeDelivery{m: &m}}, nil
}
func (s *oneSource) Close(context.Context) error { return nil }

// BenchmarkMessage is what tracing adds per message: receive, send and
// ack through the wrappers with a sampling SDK (spans batched to a
// discarding exporter), against the same path unwrapped ("off": what the
// daemon runs without OTEL_* variables).
func BenchmarkMessage(b *testing.B) {
	tr, err := mapping.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, src driver.Source, sink driver.Sink) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			ds, _ := src.Receive(ctx, 1)
			_ = sink.Send(ctx, []*mapping.Message{ds[0].Message()})
			_ = ds[0].Nack(ctx, time.Second) // fakeDelivery's Ack closes a channel
		}
	}
	b.Run("off", func(b *testing.B) {
		run(b, &oneSource{m: mapping.Message{ID: "m", Trace: tr}}, nopSink{})
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer tp.Shutdown(context.Background())
		t := New(tp)
		ep := Endpoint{Kind: "nats", Destination: "in"}
		open := newOpenSpans()
		run(b, wrapSource(t, &oneSource{m: mapping.Message{ID: "m", Trace: tr}}, ep, open), wrapSink(t, nopSink{}, Endpoint{Kind: "servicebus", Destination: "out"}, open))
	})
}
