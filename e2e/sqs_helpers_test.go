package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/internal/wholebody"
)

// sqsEnv holds the fauxqs endpoint and region of the test brokers.
type sqsEnv struct {
	endpoint, region string
	c                *awssqs.Client
}

// sqsSetup returns a client for fauxqs (or skips the test, see requireEnv).
func sqsSetup(t testing.TB) *sqsEnv {
	t.Helper()
	ep := testenv.Require(t, "QBRIDGE_SQS_ENDPOINT")
	region := os.Getenv("QBRIDGE_SQS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	return &sqsEnv{endpoint: ep, region: region, c: sqsNewClient(ep, region)}
}

func sqsNewClient(endpoint, region string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		// As the adapter does (internal/wholebody): no response lost to the
		// SDK's early close of the request body.
		HTTPClient: wholebody.Wrap(awshttp.NewBuildableClient()),
	})
}

var sqsNonName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// createQueue creates a fresh queue named after the test plus suffix;
// deleted at cleanup.
func (e *sqsEnv) createQueue(t testing.TB, suffix string, fifo bool, attrs map[string]string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := sqsNonName.ReplaceAllString(strings.TrimPrefix(t.Name(), "TestSqs"), "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	name += "-" + suffix + "-" + hex.EncodeToString(b[:])
	a := map[string]string{}
	for k, v := range attrs {
		a[k] = v
	}
	if fifo {
		name += ".fifo"
		a["FifoQueue"] = "true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := e.c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = e.c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return url
}

func (e *sqsEnv) queueArn(t testing.TB, url string) string {
	t.Helper()
	out, err := e.c.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

// conn is the HCL body of an sqs source or sink block for url (static test
// credentials, the fauxqs endpoint) plus extra lines.
func (e *sqsEnv) conn(url string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    queue_url         = %q\n    endpoint          = %q\n    region            = %q\n", url, e.endpoint, e.region)
	b.WriteString("    access_key_id     = \"test\"\n    secret_access_key = \"test\"\n")
	for _, x := range extra {
		b.WriteString("    " + x + "\n")
	}
	return b.String()
}

// sendBatch sends entries in SendMessageBatch calls of at most 10, in order.
func (e *sqsEnv) sendBatch(t testing.TB, url string, entries []types.SendMessageBatchRequestEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < len(entries); i += 10 {
		chunk := entries[i:min(i+10, len(entries))]
		for j := range chunk {
			if chunk[j].Id == nil {
				chunk[j].Id = aws.String(strconv.Itoa(j))
			}
		}
		out, err := e.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: chunk})
		if err != nil {
			t.Fatalf("SendMessageBatch: %v", err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("SendMessageBatch: %d failed, first: %s %s", len(out.Failed), aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
		}
	}
}

// sqsBodies makes entries with the given bodies (no attributes).
func sqsBodies(bodies ...string) []types.SendMessageBatchRequestEntry {
	es := make([]types.SendMessageBatchRequestEntry, len(bodies))
	for i, b := range bodies {
		es[i] = types.SendMessageBatchRequestEntry{MessageBody: aws.String(b)}
	}
	return es
}

// receive long-polls url once (wait seconds) for up to 10 messages with all
// attributes, and deletes what it got when del is set.
func (e *sqsEnv) receive(t testing.TB, url string, wait int32, del bool) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(wait+10)*time.Second)
	defer cancel()
	out, err := e.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             wait,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if del && len(out.Messages) > 0 {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		out, err := e.c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatalf("DeleteMessageBatch: %v", err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("DeleteMessageBatch: %d failed, first: %s %s", len(out.Failed), aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
		}
	}
	return out.Messages
}

// collect receives (and deletes) from url until n messages arrived or the
// timeout passes; it returns what arrived, in arrival order.
func (e *sqsEnv) collect(t testing.TB, url string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, e.receive(t, url, 1, true)...)
	}
	return got
}

// approx returns ApproximateNumberOfMessages (visible) + NotVisible + Delayed.
func (e *sqsEnv) approx(t testing.TB, url string) (visible, notVisible, delayed int) {
	t.Helper()
	out, err := e.c.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(out.Attributes[k]); return n }
	return atoi("ApproximateNumberOfMessages"), atoi("ApproximateNumberOfMessagesNotVisible"), atoi("ApproximateNumberOfMessagesDelayed")
}

// sqsAttr returns the message attribute's value as text (binary in hex) with
// its type, for comparisons and messages.
func sqsAttr(a types.MessageAttributeValue) string {
	if a.BinaryValue != nil {
		return aws.ToString(a.DataType) + ":0x" + hex.EncodeToString(a.BinaryValue)
	}
	return aws.ToString(a.DataType) + ":" + aws.ToString(a.StringValue)
}

// sqsCreateStream creates a file stream on subjects.
func sqsCreateStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sqsStreamMsgs reads every message stored in the stream (ordered consumer,
// nothing acknowledged), waiting until it holds at least n or timeout.
func sqsStreamMsgs(t testing.TB, js jetstream.JetStream, stream string, n int, timeout time.Duration) []jetstream.Msg {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, stream)
		var have uint64
		if err == nil {
			var info *jetstream.StreamInfo
			info, err = s.Info(ctx)
			if err == nil {
				have = info.State.Msgs
			}
		}
		cancel()
		if err == nil && int(have) >= n || time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("stream %s: %v", stream, err)
			}
			return sqsReadStream(t, js, stream, int(have))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sqsReadStream(t testing.TB, js jetstream.JetStream, stream string, n int) []jetstream.Msg {
	t.Helper()
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for len(out) < n {
		batch, err := c.Fetch(min(n-len(out), 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			out = append(out, m)
			got++
		}
		if got == 0 {
			t.Fatalf("stream %s: read %d of %d messages: %v", stream, len(out), n, batch.Error())
		}
	}
	return out
}

// sqsProxy is a reverse proxy in front of fauxqs that records, per SQS
// action, the number of entries of each call (1 for single-message calls):
// a daemon whose endpoint is the proxy shows how it batches.
type sqsProxy struct {
	URL   string
	mu    sync.Mutex
	calls map[string][]int
}

func sqsStartProxy(t testing.TB, target string) *sqsProxy {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &sqsProxy{calls: map[string][]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
		var in struct{ Entries []json.RawMessage }
		n := 1
		if json.Unmarshal(body, &in) == nil && in.Entries != nil {
			n = len(in.Entries)
		}
		p.mu.Lock()
		p.calls[action] = append(p.calls[action], n)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Calls returns the entries of each call of action, in call order.
func (p *sqsProxy) Calls(action string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls[action])
}
