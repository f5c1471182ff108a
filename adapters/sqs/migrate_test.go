package sqs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// Counts on fauxqs: visible, not visible (received, unsettled) and delayed
// messages land in their own fields, for a source and a sink block.
func TestCountQueueFauxqs(t *testing.T) {
	t.Parallel()
	c := adminClient(t)
	url := createQueue(t, c, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		in := &awssqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprint("m", i))}
		if i == 4 {
			in.DelaySeconds = 600
		}
		if _, err := c.SendMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 600})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
	}
	// Entity is the QueueArn, the same whether the queue is named by URL
	// or by name (migrate finds a sink that writes into its source so).
	// Every receive counts (ReceivesCounted): a dry run records what it
	// raised.
	want := driver.Backlog{Ready: 3, InFlight: 1, Scheduled: 1, Entity: "arn:aws:sqs:us-east-1:000000000000:" + queueNameOf(url), ReceivesCounted: true}

	src, err := CountSource(ctx, SourceConfig{ConnConfig: conn(t, url)}, testLogger(t))
	if err != nil || src != want {
		t.Errorf("CountSource = %+v, %v; want %+v", src, err, want)
	}
	sc := conn(t, "")
	sc.QueueName = queueNameOf(url)
	snk, err := CountSink(ctx, SinkConfig{ConnConfig: sc}, testLogger(t))
	if err != nil || snk != want {
		t.Errorf("CountSink (by name) = %+v, %v; want %+v", snk, err, want)
	}
	// A FIFO queue deduplicates and keeps each group in order.
	fifo := createQueue(t, c, true, nil)
	if got, err := CountSource(ctx, SourceConfig{ConnConfig: conn(t, fifo)}, testLogger(t)); err != nil || !got.Ordered || !got.Deduplicates {
		t.Errorf("CountSource of a FIFO queue = %+v, %v", got, err)
	}
}

// The dead-letter queue: the configured URL, else the RedrivePolicy's
// target, else ErrNoDeadLetterQueue.
func TestDeadLetterSourceFauxqs(t *testing.T) {
	t.Parallel()
	c := adminClient(t)
	dlq := createQueue(t, c, false, nil)
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, queueArn(t, c, dlq))
	withPolicy := createQueue(t, c, false, map[string]string{"RedrivePolicy": redrive})
	plain := createQueue(t, c, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name    string
		cfg     SourceConfig
		wantURL string
		wantErr error
	}{
		{"redrive policy", SourceConfig{ConnConfig: conn(t, withPolicy), MaxMessages: 3}, dlq, nil},
		{"configured", SourceConfig{ConnConfig: conn(t, plain), DeadLetterQueueURL: dlq}, dlq, nil},
		{"none", SourceConfig{ConnConfig: conn(t, plain)}, "", driver.ErrNoDeadLetterQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DeadLetterSource(ctx, tc.cfg, testLogger(t))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.QueueURL != tc.wantURL || got.DeadLetterQueueURL != "" || got.MaxMessages != tc.cfg.MaxMessages {
				t.Fatalf("got queue %q (dlq %q, max %d), want %q with the rest kept", got.QueueURL, got.DeadLetterQueueURL, got.MaxMessages, tc.wantURL)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Counts on the stub: a service without the counters cannot be counted
// (errors.ErrUnsupported), a bad value is an error, a queue name is
// resolved first.
func TestStubCountQueue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		attrs   map[string]string
		want    driver.Backlog
		wantErr error
		anyErr  bool
	}{
		{"all", map[string]string{"ApproximateNumberOfMessages": "7", "ApproximateNumberOfMessagesNotVisible": "2", "ApproximateNumberOfMessagesDelayed": "1"},
			driver.Backlog{Ready: 7, InFlight: 2, Scheduled: 1, ReceivesCounted: true}, nil, false},
		{"missing counter", map[string]string{"ApproximateNumberOfMessages": "7"}, driver.Backlog{}, errors.ErrUnsupported, true},
		{"not a number", map[string]string{"ApproximateNumberOfMessages": "x", "ApproximateNumberOfMessagesNotVisible": "0", "ApproximateNumberOfMessagesDelayed": "0"},
			driver.Backlog{}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubAPI{attrs: tc.attrs}
			got, err := countQueue(context.Background(), stub, &ConnConfig{QueueName: "q"})
			if tc.anyErr != (err != nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v (any: %v)", err, tc.wantErr, tc.anyErr)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBrowseRefused(t *testing.T) {
	t.Parallel()
	_, err := Browse(SourceConfig{ConnConfig: ConnConfig{QueueName: "q"}}, 0)
	if !errors.Is(err, driver.ErrCannotBrowse) || !strings.Contains(err.Error(), "without receiving") {
		t.Fatalf("Browse: %v", err)
	}
}

// Throttling answers, whole-call or per entry, are marked driver.Throttled
// and stay retryable; other failures are not marked.
func TestStubSinkThrottled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		callErr   error
		entryCode string
		throttled bool
	}{
		{"OverLimit typed", &types.OverLimit{Message: aws.String("too many in flight")}, "", true},
		{"RequestThrottled typed", &types.RequestThrottled{}, "", true},
		{"ThrottlingException", &smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}, "", true},
		{"query-compatible code", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.RequestThrottled", Fault: smithy.FaultClient}, "", true},
		{"server fault", &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, "", false},
		{"entry RequestThrottled", nil, "RequestThrottled", true},
		{"entry KmsThrottled", nil, "KmsThrottled", true},
		{"entry InternalError", nil, "InternalError", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubAPI{}
			stub.sendBatch = func(_ int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
				if tc.callErr != nil {
					return nil, tc.callErr
				}
				out := &awssqs.SendMessageBatchOutput{}
				for _, e := range in.Entries {
					out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(tc.entryCode), SenderFault: true})
				}
				return out, nil
			}
			snk := stubSink(t, stub, false, SinkConfig{})
			for i, err := range snk.Send(context.Background(), []*mapping.Message{{Body: []byte("a")}, {Body: []byte("b")}}) {
				if err == nil || driver.IsPermanent(err) || driver.IsThrottled(err) != tc.throttled {
					t.Errorf("message %d: %v: throttled %v, want %v (and retryable)", i, err, driver.IsThrottled(err), tc.throttled)
				}
			}
		})
	}
}

// The dry-run sink reaches the real sink's verdicts without any call: the
// stub counts none.
func TestStubDrySinkMatchesSink(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 2000)
	msgs := func() []*mapping.Message {
		return []*mapping.Message{
			{Body: []byte("fine")},
			{Body: []byte(big)},
			{Body: []byte("grouped"), GroupKey: "g1"},
			{Body: []byte("bad attr"), Attributes: []mapping.Attribute{{Name: "AWS.reserved", Value: mapping.String("v")}}},
		}
	}
	for _, tc := range []struct {
		name   string
		fifo   bool
		policy mapping.Policy
	}{
		{"standard reject", false, mapping.Reject},
		{"fifo reject", true, mapping.Reject},
		{"standard drop", false, mapping.Drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := SinkConfig{MaxMessageSize: 1024, Policy: tc.policy}
			stub := &stubAPI{}
			real := stubSink(t, stub, tc.fifo, cfg)
			want := real.Send(context.Background(), msgs())

			cfg.QueueURL = stubURL(tc.fifo)
			dry, err := NewDrySink(context.Background(), cfg, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			stub.mu.Lock()
			before := stub.nSend + stub.nSendBatch
			stub.mu.Unlock()
			got := dry.Send(context.Background(), msgs())
			for i := range want {
				if (want[i] == nil) != (got[i] == nil) || driver.IsPermanent(want[i]) != driver.IsPermanent(got[i]) {
					t.Errorf("message %d: dry %v, real %v", i, got[i], want[i])
				}
			}
			if got[1] == nil {
				t.Errorf("a 2000-byte body passed a 1024-byte limit")
			}
			stub.mu.Lock()
			after := stub.nSend + stub.nSendBatch
			stub.mu.Unlock()
			if after != before {
				t.Errorf("the dry sink made %d send calls", after-before)
			}
			if err := dry.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A queue that does not exist is a permanent count error: a migration
// fails at once on it instead of retrying until -connect-timeout.
func TestCountMissingQueueFauxqs(t *testing.T) {
	t.Parallel()
	c := adminClient(t)
	url := createQueue(t, c, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	missing := url + "-ordres"
	_, err := CountSource(ctx, SourceConfig{ConnConfig: conn(t, missing)}, testLogger(t))
	if !driver.IsPermanent(err) || !isQueueMissing(err) || !strings.Contains(err.Error(), "the queue does not exist") {
		t.Fatalf("CountSource of a missing queue: %v; want a permanent queue-does-not-exist error", err)
	}
	byName := conn(t, "")
	byName.QueueName = queueNameOf(missing)
	if _, err := CountSource(ctx, SourceConfig{ConnConfig: byName}, testLogger(t)); !driver.IsPermanent(err) {
		t.Fatalf("CountSource of a missing queue by name: %v; want a permanent error", err)
	}
	// A queue that exists is not affected.
	if _, err := CountSource(ctx, SourceConfig{ConnConfig: conn(t, url)}, testLogger(t)); err != nil {
		t.Fatal(err)
	}
}

// Credentials the service refuses are a permanent count error too (a
// migration fails at once), where access denied by a policy is not: a
// policy may refuse GetQueueAttributes and allow the move, which then runs
// as for a broker that cannot count (it never finished, waiting for a
// count). The answers are
// AWS's for the JSON protocol, with the query-compatible code SQS sends.
func TestCountRefusedCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		queryCode, typ string
		permanent      bool
	}{
		{"InvalidClientTokenId", "com.amazon.coral.service#UnrecognizedClientException", true},
		{"SignatureDoesNotMatch", "com.amazon.coral.service#InvalidSignatureException", true},
		{"AccessDenied", "com.amazon.coral.service#AccessDeniedException", false},
	} {
		t.Run(tc.queryCode, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("x-amzn-query-error", tc.queryCode+";Sender")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"__type":%q,"message":"refused by the test"}`, tc.typ)
			}))
			defer srv.Close()
			cfg := ConnConfig{Endpoint: srv.URL, Region: "us-east-1", AccessKeyID: "wrong", SecretAccessKey: "wrong",
				QueueURL: srv.URL + "/000000000000/q"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := CountSource(ctx, SourceConfig{ConnConfig: cfg}, testLogger(t))
			if err == nil {
				t.Fatal("CountSource succeeded against a refusal")
			}
			if got := driver.IsPermanent(err); got != tc.permanent {
				t.Fatalf("IsPermanent = %v, want %v: %v", got, tc.permanent, err)
			}
			if tc.permanent && !strings.Contains(err.Error(), "the credentials are refused") {
				t.Fatalf("error does not say why: %v", err)
			}
			// Access denied to the count leaves the queue usable: it
			// cannot be counted, and the move goes on without counts.
			if !tc.permanent && !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("a count the policy refuses: %v; want errors.ErrUnsupported", err)
			}
			// The open of a sink (a dead-letter sink, which migrate does
			// not count) says so too.
			snk, err := NewSink(ctx, SinkConfig{ConnConfig: cfg}, nil, testLogger(t))
			if err == nil {
				_ = snk.Close(ctx)
			}
			if got := driver.IsPermanent(err); got != tc.permanent {
				t.Fatalf("NewSink: IsPermanent = %v, want %v: %v", got, tc.permanent, err)
			}
		})
	}
}

// The sink encodes for the queue's own MaximumMessageSize where it can
// read it (at most max_message_size when set), and a message SQS refuses
// as too long is dead-lettered as too-large, not as a plain permanent
// refusal (migration audit: a queue of 1,024 bytes).
func TestStubSinkTakesTheQueuesSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured int
		queue      string
		want       int
	}{
		{"the queue's, max_message_size unset", 0, "1024", 1024},
		{"the smaller of the two", 4096, "2048", 2048},
		{"max_message_size below the queue's", 2048, "1048576", 2048},
		{"the default where the queue does not say", 0, "", DefaultMaxMessageSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubAPI{attrs: map[string]string{"FifoQueue": "false", "ContentBasedDeduplication": "false"}}
			if tc.queue != "" {
				stub.attrs["MaximumMessageSize"] = tc.queue
			}
			snk := stubSink(t, stub, false, SinkConfig{MaxMessageSize: tc.configured})
			if got := snk.enc.MaxMessageSize; got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
	err := entryError("SendMessageBatch", types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"),
		Message: aws.String("One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."), SenderFault: true})
	if rej := (*mapping.RejectError)(nil); !errors.As(err, &rej) || !rej.TooLarge || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "shorter than 1024") {
		t.Errorf("a message SQS refuses as too long: %v, want a permanent too-large refusal that keeps SQS's words", err)
	}
}

// A machine without AWS credentials fails the open at once with an error
// that says so (a migration then fails instead of waiting out
// -connect-timeout): the SDK's chain ends at the EC2 instance role, here an
// IMDS that has no role, and a profile that does not exist is as final. Not
// parallel: the SDK reads the environment.
func TestNoCredentialsArePermanent(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			fmt.Fprint(w, "token")
			return
		}
		http.NotFound(w, r) // no role under /latest/meta-data/iam/security-credentials/
	}))
	defer imds.Close()
	// Nothing on SQS's side answers: the open must end before its first call.
	var sqsCalls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sqsCalls.Add(1)
		http.Error(w, "no call expected", http.StatusInternalServerError)
	}))
	defer srv.Close()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_EC2_METADATA_DISABLED": "", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
	} {
		t.Setenv(k, v)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, profile, want string
	}{
		{"no credentials anywhere", "", "no credentials found"},
		{"a profile that does not exist", "nosuch", "nosuch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ConnConfig{Endpoint: srv.URL, Region: "us-east-1", Profile: tc.profile, QueueURL: srv.URL + "/000000000000/q"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := CountSource(ctx, SourceConfig{ConnConfig: cfg}, testLogger(t))
			if !driver.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CountSource: %v; want a permanent error that says %q", err, tc.want)
			}
			src, err := NewSource(ctx, SourceConfig{ConnConfig: cfg}, testLogger(t))
			if err == nil {
				_ = src.Close(ctx)
			}
			if !driver.IsPermanent(err) {
				t.Fatalf("NewSource: %v; want a permanent error", err)
			}
		})
	}
	if n := sqsCalls.Load(); n != 0 {
		t.Errorf("%d SQS calls without credentials; want none", n)
	}
}
