package nats

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

// startServer runs a real nats-server in the test binary.
func startServer(t testing.TB, mod ...func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	for _, m := range mod {
		m(opts)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// logBuf collects log lines; safe after the test ends.
type logBuf struct{ testlog.Buffer }

func (l *logBuf) waitFor(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("log never contained %q; log:\n%s", s, l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testLog() (*slog.Logger, *logBuf) {
	b := &logBuf{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustSource(t testing.TB, cfg SourceConfig) (driver.Source, *logBuf) {
	t.Helper()
	log, buf := testLog()
	src, err := NewSource(ctxT(t, 10*time.Second), cfg, log)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src, buf
}

func mustSink(t testing.TB, cfg SinkConfig) (driver.Sink, *logBuf) {
	t.Helper()
	log, buf := testLog()
	snk, err := NewSink(ctxT(t, 10*time.Second), cfg, nil, log)
	if err != nil {
		t.Fatalf("NewSink: %v", err)
	}
	t.Cleanup(func() { _ = snk.Close(context.Background()) })
	return snk, buf
}

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// receiveN receives until n deliveries arrived.
func receiveN(t testing.TB, src driver.Source, n int, within time.Duration) []driver.Delivery {
	t.Helper()
	ctx := ctxT(t, within)
	var out []driver.Delivery
	for len(out) < n {
		ds, err := src.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// receiveNone checks that nothing arrives within d.
func receiveNone(t testing.TB, src driver.Source, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := src.Receive(ctx, 10)
	if len(ds) > 0 {
		t.Fatalf("unexpected delivery: %q (delivery %d)", ds[0].Message().Body, ds[0].Message().Source.DeliveryCount)
	}
	if err == nil {
		t.Fatal("Receive returned no delivery and no error")
	}
}

func msg(body string, attrs ...string) *mapping.Message {
	m := &mapping.Message{Body: []byte(body)}
	for i := 0; i+1 < len(attrs); i += 2 {
		m.SetAttr(attrs[i], mapping.String(attrs[i+1]))
	}
	return m
}

func sendOK(t testing.TB, snk driver.Sink, msgs ...*mapping.Message) {
	t.Helper()
	for i, err := range snk.Send(ctxT(t, 10*time.Second), msgs) {
		if err != nil {
			t.Fatalf("Send message %d: %v", i, err)
		}
	}
}

func ackAll(t testing.TB, ds []driver.Delivery) {
	t.Helper()
	for _, d := range ds {
		if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}
