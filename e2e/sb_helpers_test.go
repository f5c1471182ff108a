package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/qbridge/qbridge/internal/sbtestserver"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/mapping"
)

// Helpers of the Service Bus e2e tests (sb_e2e_test.go): the project's
// Service Bus test server (e2e/sbserver, Node and rhea) started per test,
// the official Go SDK (azservicebus) as the plain producer and consumer, and
// comparisons of what it sends and receives. Every name starts with "sb".

const (
	sbKeyName = "RootManageSharedAccessKey"
	sbKey     = "qbridge-e2e-sb-key-0123456789abcdef="
)

// sbServer is one running test server.
type sbServer struct {
	Port, HTTPPort int
	Conn           string // connection string (emulator form: plain AMQP)
	HTTP           string // REST endpoint, http://127.0.0.1:PORT
}

// sbRepoRoot is the repository root (this file is in e2e/).
func sbRepoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(here), ".."))
}

// sbNeedServer skips the test (fails it when QBRIDGE_E2E_REQUIRED is set)
// when node or the server's npm packages are missing.
func sbNeedServer(t testing.TB) {
	t.Helper()
	if msg := sbtestserver.Missing(sbRepoRoot()); msg != "" {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// sbStartServer starts the Service Bus test server with the entities of
// entitiesJSON (an object with "queues" and/or "topics", the format of
// docs/sbserver.md; namespace and key are filled in), REST on, on
// 127.0.0.1 with free ports. It is killed (by PID) at cleanup; its log is
// shown when the test failed.
func sbStartServer(t testing.TB, entitiesJSON string) *sbServer {
	t.Helper()
	sbNeedServer(t)
	cfg := map[string]any{}
	if err := json.Unmarshal([]byte(entitiesJSON), &cfg); err != nil {
		t.Fatalf("entities JSON: %v", err)
	}
	cfg["namespace"] = "qbridgee2e"
	// The test's own policies (a key with fewer rights) go beside the
	// full one every test uses.
	policies, _ := cfg["sharedAccessPolicies"].([]any)
	cfg["sharedAccessPolicies"] = append(policies, map[string]any{"name": sbKeyName, "key": sbKey, "rights": []string{"Manage", "Send", "Listen"}})
	logf, err := os.Create(filepath.Join(t.TempDir(), "sbserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sbtestserver.Start(sbRepoRoot(), cfg, logf, "--http-port", "0")
	if err != nil {
		logf.Close()
		t.Fatalf("sbserver: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				lines := strings.Split(string(b), "\n")
				if len(lines) > 80 {
					lines = lines[len(lines)-80:]
				}
				t.Logf("sbserver log, last %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
			}
		}
	})
	return &sbServer{Port: s.Port, HTTPPort: s.HTTPPort, HTTP: s.HTTP, Conn: s.ConnectionString(sbKeyName, sbKey)}
}

// sbClient is an SDK client of the server with quick retries; closed at
// cleanup.
func sbClient(t testing.TB, srv *sbServer) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(srv.Conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 3, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func sbCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sbSend sends msgs to queue one by one with the SDK.
func sbSend(t testing.TB, c *azservicebus.Client, queue string, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i, m := range msgs {
		if err := s.SendMessage(sbCtx(t, 10*time.Second), m, nil); err != nil {
			t.Fatalf("send %d to %s: %v", i, queue, err)
		}
	}
}

// sbReceive receives and completes n messages of queue (or its sub-queue)
// within d; it fails the test when fewer arrive.
func sbReceive(t testing.TB, c *azservicebus.Client, queue string, sub azservicebus.SubQueue, n int, d time.Duration) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		ms, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("%s: received %d of %d: %v", queue, len(out), n, err)
		}
		for _, m := range ms {
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete %s: %v", m.MessageID, err)
			}
		}
		out = append(out, ms...)
	}
	return out
}

// sbPeekAll returns what queue holds (active messages), without locking.
func sbPeekAll(t testing.TB, c *azservicebus.Client, queue string, sub azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ms, err := r.PeekMessages(sbCtx(t, 10*time.Second), 1000, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptrTo(int64(0))})
	if err != nil {
		t.Fatalf("peek %s: %v", queue, err)
	}
	return ms
}

func ptrTo[T any](v T) *T { return &v }

// sbUUID is the uuid application property of sbAllProps.
var sbUUID = amqp.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07}

// sbAllProps are application properties of every type the Go SDK (go-amqp)
// sends and receives as itself, with the SQS data type each one gets
// (docs/mapping-sqs.md, README's type table).
func sbAllProps() (props map[string]any, sqsTypes map[string]string) {
	props = map[string]any{
		"s": "text ünïcødé ✓", "b": true,
		"i8": int8(-8), "i16": int16(-1600), "i32": int32(-320000), "i64": int64(-6_400_000_000),
		"u8": uint8(250), "u16": uint16(65000), "u32": uint32(4_000_000_000), "u64": uint64(18446744073709551615),
		"f32": float32(1.5), "f64": 2.25, "bin": []byte{0, 1, 0xfe, 0xff},
		"at": time.UnixMilli(1_700_000_000_456).UTC(), "id": sbUUID, "none": nil,
	}
	sqsTypes = map[string]string{
		"s": "String", "b": "String.bool",
		"i8": "Number.byte", "i16": "Number.short", "i32": "Number.int", "i64": "Number.long",
		"u8": "Number.ubyte", "u16": "Number.ushort", "u32": "Number.uint", "u64": "Number.ulong",
		"f32": "Number.float32", "f64": "Number.double", "bin": "Binary",
		"at": "Number.timestamp", "id": "String.uuid", "none": "String.null",
	}
	return props, sqsTypes
}

// sbFullMessage is a message with every property the SDK lets a producer
// set on a plain (session-less) queue, and every application property type.
func sbFullMessage(id string, scheduled time.Time) *azservicebus.Message {
	props, _ := sbAllProps()
	m := &azservicebus.Message{
		MessageID:             ptrTo(id),
		CorrelationID:         ptrTo("corr-" + id),
		ContentType:           ptrTo("application/json; charset=utf-8"),
		Subject:               ptrTo("subject " + id),
		To:                    ptrTo("to-" + id),
		ReplyTo:               ptrTo("reply-queue"),
		ReplyToSessionID:      ptrTo("reply-session-" + id),
		PartitionKey:          ptrTo("pk-" + id),
		TimeToLive:            ptrTo(90 * time.Minute),
		ApplicationProperties: props,
		Body:                  []byte(`{"id":"` + id + `","text":"ünïcødé ✓"}`),
	}
	if !scheduled.IsZero() {
		m.ScheduledEnqueueTime = &scheduled
	}
	return m
}

// sbNorm makes application property values comparable (times in UTC).
func sbNorm(v any) any {
	if tm, ok := v.(time.Time); ok {
		return tm.UTC()
	}
	return v
}

// sbCompareProps reports every application property of got that differs
// from want in value or Go type, and every one missing or extra.
func sbCompareProps(t testing.TB, what string, want, got map[string]any) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: application property %q missing", what, k)
			continue
		}
		if w := want[k]; !reflect.DeepEqual(sbNorm(g), sbNorm(w)) {
			t.Errorf("%s: application property %q = %#v (%T), want %#v (%T)", what, k, g, g, w, w)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: extra application property %q = %#v", what, k, v)
		}
	}
}

func sbStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// sbCompareMessage checks that a received message carries exactly what was
// sent: broker properties, body and application properties with their Go
// types.
func sbCompareMessage(t testing.TB, what string, sent *azservicebus.Message, got *azservicebus.ReceivedMessage) {
	t.Helper()
	if got.MessageID != sbStr(sent.MessageID) {
		t.Errorf("%s: MessageID %q, want %q", what, got.MessageID, sbStr(sent.MessageID))
	}
	for _, f := range []struct {
		name      string
		want, got *string
	}{
		{"CorrelationID", sent.CorrelationID, got.CorrelationID},
		{"ContentType", sent.ContentType, got.ContentType},
		{"Subject", sent.Subject, got.Subject},
		{"To", sent.To, got.To},
		{"ReplyTo", sent.ReplyTo, got.ReplyTo},
		{"ReplyToSessionID", sent.ReplyToSessionID, got.ReplyToSessionID},
		{"PartitionKey", sent.PartitionKey, got.PartitionKey},
		{"SessionID", sent.SessionID, got.SessionID},
	} {
		if sbStr(f.want) != sbStr(f.got) {
			t.Errorf("%s: %s %q, want %q", what, f.name, sbStr(f.got), sbStr(f.want))
		}
	}
	// Each hop passes on what the message has left (the reduced ttl of
	// AMQP 1.0 §3.2.1): the TTL less its time in the queues, never more.
	if sent.TimeToLive != nil && (got.TimeToLive == nil || *got.TimeToLive > *sent.TimeToLive || *got.TimeToLive < *sent.TimeToLive-time.Minute) {
		t.Errorf("%s: TimeToLive %v, want %v less the time it waited", what, got.TimeToLive, *sent.TimeToLive)
	}
	if sent.ScheduledEnqueueTime != nil {
		if got.ScheduledEnqueueTime == nil || !got.ScheduledEnqueueTime.Equal(sent.ScheduledEnqueueTime.Truncate(time.Millisecond)) {
			t.Errorf("%s: ScheduledEnqueueTime %v, want %v", what, got.ScheduledEnqueueTime, *sent.ScheduledEnqueueTime)
		}
	}
	if string(got.Body) != string(sent.Body) {
		t.Errorf("%s: body %q, want %q", what, got.Body, sent.Body)
	}
	sbCompareProps(t, what, sent.ApplicationProperties, got.ApplicationProperties)
}

// sbEnvelope parses a carry envelope and applies it to an empty message.
func sbEnvelope(t testing.TB, text string) *mapping.Message {
	t.Helper()
	env, err := mapping.ParseEnvelope(text)
	if err != nil {
		t.Fatalf("envelope %s: %v", text, err)
	}
	var m mapping.Message
	if err := env.Apply(&m); err != nil {
		t.Fatalf("envelope %s: apply: %v", text, err)
	}
	return &m
}

// sbConn is the connection part of an HCL servicebus block: the server's
// connection string and quick SDK retries, plus extra lines.
func sbConn(srv *sbServer, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    connection_string = %q\n    max_retries       = 3\n    retry_delay       = \"100ms\"\n    retry_delay_max   = \"1s\"\n", srv.Conn)
	for _, x := range extra {
		b.WriteString("    " + x + "\n")
	}
	return b.String()
}

// sbSetAWSEnv gives daemons started by the test static fauxqs credentials.
func sbSetAWSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// sbSQSToServiceBusEnv sets what configs/sqs-to-servicebus.hcl reads from
// the environment: queues src and dlq on e, the namespace srv, and its
// management endpoint mgmt ("" for none). It returns the two queues' URLs.
func sbSQSToServiceBusEnv(t *testing.T, e *sqsEnv, srv *sbServer, mgmt string) (src, dlq string) {
	t.Helper()
	src = e.createQueue(t, "src", false, nil)
	dlq = e.createQueue(t, "dlq", false, nil)
	sbSetAWSEnv(t)
	t.Setenv("QBRIDGE_SERVICEBUS_CONNECTION_STRING", srv.Conn)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_QUEUE_URL", src)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_DLQ_URL", dlq)
	t.Setenv("QBRIDGE_SQS_TO_SERVICEBUS_ENDPOINT", e.endpoint)
	t.Setenv("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", mgmt)
	return src, dlq
}

// sbConfigFile returns the content of configs/NAME.
func sbConfigFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sbRepoRoot(), "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sbMain names an entity itself, not a sub-queue.
const sbMain azservicebus.SubQueue = 0
