package sqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/internal/wholebody"
)

// TestMain says, in one line go test does not swallow, when the fauxqs
// tests are about to skip (and fails under QBRIDGE_E2E_REQUIRED).
func TestMain(m *testing.M) {
	if !testenv.Check("adapters/sqs", "fauxqs (SQS)",
		"start it with e2e/brokers/up.sh, then `set -a; . $QBRIDGE_BROKERS_DIR/env; set +a`", "QBRIDGE_SQS_ENDPOINT") {
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// endpoint returns the fauxqs endpoint, or skips the test.
func endpoint(t *testing.T) string {
	t.Helper()
	ep := os.Getenv("QBRIDGE_SQS_ENDPOINT")
	if ep == "" {
		t.Skip("QBRIDGE_SQS_ENDPOINT is not set: start fauxqs with e2e/brokers/up.sh, then `set -a; . /tmp/qbridge-brokers/env; set +a`")
	}
	return ep
}

// adminClient is a plain SDK client for setting up queues and looking at
// them from outside the adapter.
func adminClient(t *testing.T) *awssqs.Client {
	ep := endpoint(t)
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(ep),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		// As the adapter does (internal/wholebody).
		HTTPClient: wholebody.Wrap(awshttp.NewBuildableClient()),
	})
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// createQueue creates a fresh queue named after the test.
func createQueue(t *testing.T, c *awssqs.Client, fifo bool, attrs map[string]string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := nonName.ReplaceAllString(t.Name(), "-")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	name += "-" + hex.EncodeToString(b[:])
	if attrs == nil {
		attrs = map[string]string{}
	}
	if fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return url
}

func queueArn(t *testing.T, c *awssqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

// conn is the adapter's connection block for a fauxqs queue.
func conn(t *testing.T, url string) ConnConfig {
	return ConnConfig{Endpoint: endpoint(t), Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", QueueURL: url}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// recorder wraps a real client, counting calls and keeping what
// ReceiveMessage returned. It changes nothing.
type recorder struct {
	api
	mu       sync.Mutex
	calls    map[string][]int // op -> entries per call
	received []types.Message
}

func newRecorder(inner api) *recorder { return &recorder{api: inner, calls: map[string][]int{}} }

func (r *recorder) note(op string, n int) {
	r.mu.Lock()
	r.calls[op] = append(r.calls[op], n)
	r.mu.Unlock()
}

func (r *recorder) count(op string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.calls[op]...)
}

func (r *recorder) rawReceived() []types.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]types.Message(nil), r.received...)
}

func (r *recorder) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, o ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	out, err := r.api.ReceiveMessage(ctx, in, o...)
	if err == nil {
		r.mu.Lock()
		r.received = append(r.received, out.Messages...)
		r.mu.Unlock()
		r.note("ReceiveMessage", len(out.Messages))
	}
	return out, err
}

func (r *recorder) DeleteMessageBatch(ctx context.Context, in *awssqs.DeleteMessageBatchInput, o ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error) {
	r.note("DeleteMessageBatch", len(in.Entries))
	return r.api.DeleteMessageBatch(ctx, in, o...)
}

func (r *recorder) ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, o ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error) {
	r.note("ChangeMessageVisibilityBatch", len(in.Entries))
	return r.api.ChangeMessageVisibilityBatch(ctx, in, o...)
}

func (r *recorder) SendMessage(ctx context.Context, in *awssqs.SendMessageInput, o ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error) {
	r.note("SendMessage", 1)
	return r.api.SendMessage(ctx, in, o...)
}

func (r *recorder) SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, o ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	r.note("SendMessageBatch", len(in.Entries))
	return r.api.SendMessageBatch(ctx, in, o...)
}

// startSource builds a source on a real client wrapped in a recorder.
func startSource(t *testing.T, cfg SourceConfig) (*Source, *recorder) {
	t.Helper()
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client, err := newClient(ctx, &cfg.ConnConfig, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(client)
	src, err := newSource(ctx, rec, &cfg.ConnConfig, set, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := src.Close(ctx); err != nil {
			t.Errorf("close source: %v", err)
		}
	})
	return src, rec
}

func startSink(t *testing.T, cfg SinkConfig) (*Sink, *recorder) {
	t.Helper()
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client, err := newClient(ctx, &cfg.ConnConfig, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(client)
	snk, err := newSink(ctx, rec, &cfg, set, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := snk.Close(ctx); err != nil {
			t.Errorf("close sink: %v", err)
		}
	})
	return snk, rec
}

// rawReceive polls the queue from outside the adapter.
func rawReceive(t *testing.T, c *awssqs.Client, url string, wait time.Duration) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatalf("raw receive: %v", err)
	}
	return out.Messages
}

// receiveN receives until n deliveries arrived or the timeout passed.
func receiveN(t *testing.T, src *Source, n int, timeout time.Duration) []*delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []*delivery
	for len(got) < n {
		ds, err := src.Receive(ctx, n-len(got))
		if err != nil {
			t.Fatalf("receive: got %d of %d: %v", len(got), n, err)
		}
		for _, d := range ds {
			got = append(got, d.(*delivery))
		}
	}
	return got
}
