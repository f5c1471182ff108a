package amqp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

// TestMain says, in one line go test does not swallow, when the RabbitMQ
// tests are about to skip (and fails under QBRIDGE_E2E_REQUIRED).
func TestMain(m *testing.M) {
	if !testenv.Check("adapters/amqp", "RabbitMQ 3.10 (AMQP 1.0)",
		"start it with e2e/brokers/up.sh, then `set -a; . $QBRIDGE_BROKERS_DIR/env; set +a`", "QBRIDGE_AMQP_URL") {
		os.Exit(1)
	}
	os.Exit(m.Run())
}

const skipHelp = "QBRIDGE_AMQP_URL is not set: start RabbitMQ 3.10 (AMQP 1.0) with e2e/brokers/up.sh, then `set -a; . /tmp/qbridge-brokers/env; set +a`"

// brokerURL returns the RabbitMQ URL, skipping the test when none is set.
func brokerURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("QBRIDGE_AMQP_URL")
	if u == "" {
		t.Skip(skipHelp)
	}
	return u
}

// queue returns a fresh RabbitMQ queue address for the test.
func queue(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "/queue/qb-" + name + "-" + hex.EncodeToString(b[:])
}

// logBuf collects an adapter's log lines; printed when the test fails.
type logBuf = testlog.Buffer

func testLog(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("adapter log:\n%s", lb.String())
		}
	})
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newTestSource(t *testing.T, cfg SourceConfig) (*source, *logBuf) {
	t.Helper()
	log, lb := testLog(t)
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSource(ctxT(t, 30*time.Second), set, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, lb
}

func newTestSink(t *testing.T, cfg SinkConfig) (*sink, *logBuf) {
	t.Helper()
	log, lb := testLog(t)
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSink(ctxT(t, 30*time.Second), set, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, lb
}

// sendAll sends msgs through the sink and fails on any error.
func sendAll(t *testing.T, s driver.Sink, msgs []*mapping.Message) {
	t.Helper()
	for i, err := range s.Send(ctxT(t, 60*time.Second), msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// receiveN receives n deliveries (settling none) or fails after d.
func receiveN(t *testing.T, s driver.Source, n int, d time.Duration) []driver.Delivery {
	t.Helper()
	ctx := ctxT(t, d)
	var out []driver.Delivery
	for len(out) < n {
		ds, err := s.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("after %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// expectNone checks that nothing arrives within d.
func expectNone(t *testing.T, s driver.Source, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ds, err := s.Receive(ctx, 10)
	if err == nil {
		t.Fatalf("unexpected delivery: %+v", ds[0].Message())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive: %v", err)
	}
}

func textMsg(id string) *mapping.Message {
	return &mapping.Message{ID: id, Body: []byte("body of " + id), ContentType: "text/plain"}
}

// rewriteConn replaces byte patterns in what go-amqp writes: the only way
// to put types go-amqp cannot encode (decimals, char) on the wire with it.
type rewriteConn struct {
	net.Conn
	from, to [][]byte
}

func (r *rewriteConn) Write(b []byte) (int, error) {
	for i := range r.from {
		if j := bytes.Index(b, r.from[i]); j >= 0 {
			b = append([]byte(nil), b...)
			copy(b[j:], r.to[i])
		}
	}
	return r.Conn.Write(b)
}

// rawSender opens a plain go-amqp sender to addr, optionally over a
// rewriting connection.
func rawSender(t *testing.T, rawURL, addr string, rw *rewriteConn) *amqp.Sender {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	var c net.Conn = nc
	if rw != nil {
		rw.Conn = nc
		c = rw
	}
	pass, _ := u.User.Password()
	conn, err := amqp.NewConn(ctxT(t, 10*time.Second), c, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(u.User.Username(), pass), HostName: u.Hostname()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sess.NewSender(ctxT(t, 10*time.Second), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

// rawReceive reads one message with a plain go-amqp receiver (accepting
// it), or returns nil after d.
func rawReceive(t *testing.T, rawURL, addr string, d time.Duration) *amqp.Message {
	t.Helper()
	conn, err := amqp.Dial(ctxT(t, 10*time.Second), rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctxT(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctxT(t, 10*time.Second), addr, &amqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		return nil
	}
	if err := rcv.AcceptMessage(ctxT(t, 5*time.Second), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// rabbitctl runs rabbitmqctl against node (testenv.SharedRabbitMQ, or
// testenv.RabbitMQForRestart for the test that restarts it); safe to call
// from any goroutine (it reports with t.Error).
func rabbitctl(t *testing.T, node testenv.RabbitMQ, args ...string) bool {
	t.Helper()
	if _, err := node.Ctl(args...); err != nil {
		t.Error(err)
		return false
	}
	return true
}
