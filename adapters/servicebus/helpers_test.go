package servicebus

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

func testLog(t *testing.T) (*slog.Logger, *testlog.Buffer) {
	t.Helper()
	lb := &testlog.Buffer{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fastConn is the connection part of a test config: quick SDK retries.
func fastConn() ConnConfig {
	return ConnConfig{ConnectionString: brokerConn, MaxRetries: 2, RetryDelay: "50ms", RetryDelayMax: "500ms"}
}

func newTestSource(t *testing.T, cfg SourceConfig) (driver.Source, *testlog.Buffer) {
	t.Helper()
	if cfg.ConnectionString == "" && cfg.Namespace == "" {
		cfg.ConnConfig = fastConn()
	}
	log, lb := testLog(t)
	src, err := NewSource(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	})
	return src, lb
}

func newTestSink(t *testing.T, cfg SinkConfig) (driver.Sink, *testlog.Buffer) {
	t.Helper()
	if cfg.ConnectionString == "" && cfg.Namespace == "" {
		cfg.ConnConfig = fastConn()
	}
	log, lb := testLog(t)
	snk, err := NewSink(context.Background(), cfg, nil, log)
	if err != nil {
		t.Fatalf("NewSink: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = snk.Close(ctx)
	})
	return snk, lb
}

func sendAll(t *testing.T, s driver.Sink, msgs ...*mapping.Message) {
	t.Helper()
	for i, err := range s.Send(ctxT(t, 30*time.Second), msgs) {
		if err != nil {
			t.Fatalf("send message %d: %v", i, err)
		}
	}
}

// receiveN receives exactly n deliveries within d.
func receiveN(t *testing.T, s driver.Source, n int, d time.Duration) []driver.Delivery {
	t.Helper()
	ctx := ctxT(t, d)
	var out []driver.Delivery
	for len(out) < n {
		ds, err := s.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("receive: %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	if len(out) != n {
		t.Fatalf("received %d, want %d", len(out), n)
	}
	return out
}

// expectNone asserts that nothing arrives within d.
func expectNone(t *testing.T, s driver.Source, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := s.Receive(ctx, 10)
	if len(ds) > 0 {
		t.Fatalf("expected nothing, got %d (first id %q)", len(ds), ds[0].Message().ID)
	}
	if err != nil && ctx.Err() == nil {
		t.Fatalf("expected nothing, got error %v", err)
	}
}

func ack(t *testing.T, ds ...driver.Delivery) {
	t.Helper()
	for _, d := range ds {
		if err := d.Ack(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("ack %s: %v", d.Message().ID, err)
		}
	}
}

func textMsg(id string) *mapping.Message {
	return &mapping.Message{ID: id, Body: []byte("body of " + id)}
}

func ids(ds []driver.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Message().ID
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
