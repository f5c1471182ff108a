package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/qbridge/qbridge/internal/testenv"
)

// Helpers of the AMQP 1.0 e2e tests (amqp_e2e_test.go, amqp_bench_test.go):
// plain go-amqp clients, raw (undecodable) senders, rabbitmqctl on the
// test brokers' RabbitMQ nodes, a NATS server that can be restarted on its port,
// and a plain SQS client. Every name starts with "amqp".

// amqpURL is the RabbitMQ 3.10 (AMQP 1.0 plugin) URL from e2e/brokers/up.sh.
func amqpURL(t testing.TB) string {
	t.Helper()
	return testenv.Require(t, "QBRIDGE_AMQP_URL")
}

var amqpNonName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// amqpQueueName returns a fresh queue name for the test (without /queue/).
func amqpQueueName(t testing.TB, suffix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := amqpNonName.ReplaceAllString(t.Name(), "-")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "qb-e2e-" + name + "-" + suffix + "-" + hex.EncodeToString(b[:])
}

func amqpCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// amqpConn opens a plain go-amqp connection and session; both close with
// the test.
func amqpConn(t testing.TB, rawURL string) *amqp.Session {
	t.Helper()
	conn, err := amqp.Dial(amqpCtx(t, 10*time.Second), rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(amqpCtx(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// amqpSender attaches a plain go-amqp sender to addr.
func amqpSender(t testing.TB, rawURL, addr string) *amqp.Sender {
	t.Helper()
	snd, err := amqpConn(t, rawURL).NewSender(amqpCtx(t, 10*time.Second), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

// amqpReceiver attaches a plain go-amqp receiver with credit 1 (RabbitMQ
// 3.x stalls on a backlog with more).
func amqpReceiver(t testing.TB, rawURL, addr string) *amqp.Receiver {
	t.Helper()
	rcv, err := amqpConn(t, rawURL).NewReceiver(amqpCtx(t, 10*time.Second), addr, &amqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return rcv
}

// amqpSendAll sends msgs in order with a plain sender, each confirmed.
func amqpSendAll(t testing.TB, snd *amqp.Sender, msgs ...*amqp.Message) {
	t.Helper()
	for i, m := range msgs {
		if err := snd.Send(amqpCtx(t, 10*time.Second), m, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// amqpReceiveN receives and accepts n messages within d.
func amqpReceiveN(t testing.TB, rcv *amqp.Receiver, n int, d time.Duration) []*amqp.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := make([]*amqp.Message, 0, n)
	for len(out) < n {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("received %d of %d: %v", len(out), n, err)
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// amqpExpectNone checks that nothing arrives at rcv within d.
func amqpExpectNone(t testing.TB, rcv *amqp.Receiver, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := rcv.Receive(ctx, nil); err == nil {
		t.Fatalf("unexpected message: properties %+v application properties %v", m.Properties, m.ApplicationProperties)
	}
}

// amqpID returns a message's message-id as text.
func amqpID(m *amqp.Message) string {
	if m.Properties == nil || m.Properties.MessageID == nil {
		return ""
	}
	return fmt.Sprint(m.Properties.MessageID)
}

func amqpText(id, body string) *amqp.Message {
	return &amqp.Message{Properties: &amqp.MessageProperties{MessageID: id}, Data: [][]byte{[]byte(body)}}
}

// Poison messages. go-amqp cannot encode decimal128 or char, so the raw
// sender writes a uuid and an int whose bytes amqpRewriteConn patches on the
// wire into a decimal128 (constructor 0x94, same 16 bytes) and a char (0x73,
// same 4 bytes): exactly what a .NET producer's decimal or char property
// looks like.
var (
	amqpMagicUUID = amqp.UUID{0xde, 0xc1, 0x28, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}
	amqpMagicInt  = int32(0x0c4a0c4a)
)

type amqpRewriteConn struct {
	net.Conn
	from, to [][]byte
}

func (r *amqpRewriteConn) Write(b []byte) (int, error) {
	for i := range r.from {
		if j := bytes.Index(b, r.from[i]); j >= 0 {
			b = append([]byte(nil), b...)
			copy(b[j:], r.to[i])
		}
	}
	return r.Conn.Write(b)
}

// amqpPoisonSender opens a go-amqp sender whose connection turns the magic
// uuid into a decimal128 and the magic int into a char.
func amqpPoisonSender(t testing.TB, rawURL, addr string) *amqp.Sender {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	rw := &amqpRewriteConn{
		Conn: nc,
		from: [][]byte{append([]byte{0x98}, amqpMagicUUID[:]...), {0x71, 0x0c, 0x4a, 0x0c, 0x4a}},
		to:   [][]byte{append([]byte{0x94}, amqpMagicUUID[:]...), {0x73, 0x0c, 0x4a, 0x0c, 0x4a}},
	}
	pass, _ := u.User.Password()
	conn, err := amqp.NewConn(amqpCtx(t, 10*time.Second), rw, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(u.User.Username(), pass), HostName: u.Hostname()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(amqpCtx(t, 10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sess.NewSender(amqpCtx(t, 10*time.Second), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

// amqpRabbitctl runs rabbitmqctl against node (testenv.SharedRabbitMQ, or
// testenv.RabbitMQForRestart for the test that restarts it) and returns
// its output; safe from any goroutine (reports with t.Error).
func amqpRabbitctl(t testing.TB, node testenv.RabbitMQ, args ...string) (string, bool) {
	out, err := node.Ctl(args...)
	if err != nil {
		t.Error(err)
		return out, false
	}
	return out, true
}

// amqpSQSClient is a plain aws-sdk-go-v2 client of fauxqs.
func amqpSQSClient(t testing.TB) *awssqs.Client {
	return sqsNewClient(testenv.Require(t, "QBRIDGE_SQS_ENDPOINT"), "us-east-1")
}

// amqpCreateSQSQueue creates a fresh standard queue and returns its URL.
func amqpCreateSQSQueue(t testing.TB, c *awssqs.Client, suffix string) string {
	t.Helper()
	name := amqpQueueName(t, suffix)
	out, err := c.CreateQueue(amqpCtx(t, 10*time.Second), &awssqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	u := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(u)})
	})
	return u
}

// amqpSetSQSEnv sets what the AWS SDK inside the daemon needs for fauxqs.
func amqpSetSQSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// amqpConfigFile returns the content of configs/NAME.
func amqpConfigFile(t testing.TB, name string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// amqpLogHas reports whether the daemon logged every given fragment (in
// one line).
func amqpLogHas(d *daemon, frags ...string) bool {
	for _, line := range strings.Split(d.Logs(), "\n") {
		ok := true
		for _, f := range frags {
			if !strings.Contains(line, f) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// amqpDiscardLogger is for in-process adapters in benchmarks and producers.
func amqpDiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
