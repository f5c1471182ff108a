package sqs

// Tests on a stubbed SQS API, only for what no server available here does:
// ReceiveRequestAttemptId (fauxqs ignores it), invalid receipt handles
// (fauxqs accepts any), per-entry failures SQS returns only under load
// (throttling, server faults), AWSTraceHeader (fauxqs drops it), corrupt
// digests, and BatchRequestTooLong accounting.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// stubAPI answers with the functions set; an unset ReceiveMessage blocks
// like an empty long poll.
type stubAPI struct {
	attrs       map[string]string
	attrsErr    error
	receive     func(n int, in *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error)
	deleteBatch func(n int, in *awssqs.DeleteMessageBatchInput) (*awssqs.DeleteMessageBatchOutput, error)
	visBatch    func(n int, in *awssqs.ChangeMessageVisibilityBatchInput) (*awssqs.ChangeMessageVisibilityBatchOutput, error)
	sendBatch   func(n int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error)
	send        func(n int, in *awssqs.SendMessageInput) (*awssqs.SendMessageOutput, error)

	mu                           sync.Mutex
	nReceive, nDelete, nVis      int
	nSendBatch, nSend            int
	receiveIn                    []*awssqs.ReceiveMessageInput
	visEntries                   [][]types.ChangeMessageVisibilityBatchRequestEntry
	sendBatchIn                  []*awssqs.SendMessageBatchInput
	sendIn                       []*awssqs.SendMessageInput
	deleteIn                     []*awssqs.DeleteMessageBatchInput
	receiveDone, receiveBlocking chan struct{}
	// visHang makes ChangeMessageVisibilityBatch wait until its ctx ends.
	visHang bool
}

func (s *stubAPI) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, _ ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	n := s.nReceive
	s.nReceive++
	s.receiveIn = append(s.receiveIn, in)
	s.mu.Unlock()
	if s.receive != nil {
		if out, err := s.receive(n, in); out != nil || err != nil {
			return out, err
		}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stubAPI) DeleteMessageBatch(_ context.Context, in *awssqs.DeleteMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error) {
	s.mu.Lock()
	n := s.nDelete
	s.nDelete++
	s.deleteIn = append(s.deleteIn, in)
	s.mu.Unlock()
	if s.deleteBatch != nil {
		return s.deleteBatch(n, in)
	}
	out := &awssqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (s *stubAPI) ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, _ ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	n := s.nVis
	s.nVis++
	s.visEntries = append(s.visEntries, in.Entries)
	s.mu.Unlock()
	if s.visHang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if s.visBatch != nil {
		return s.visBatch(n, in)
	}
	out := &awssqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (s *stubAPI) SendMessage(_ context.Context, in *awssqs.SendMessageInput, _ ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error) {
	s.mu.Lock()
	n := s.nSend
	s.nSend++
	s.sendIn = append(s.sendIn, in)
	s.mu.Unlock()
	if s.send != nil {
		return s.send(n, in)
	}
	return &awssqs.SendMessageOutput{MessageId: aws.String("m" + strconv.Itoa(n)), MD5OfMessageBody: aws.String(sqsmap.MD5OfBody(*in.MessageBody))}, nil
}

func (s *stubAPI) SendMessageBatch(_ context.Context, in *awssqs.SendMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	n := s.nSendBatch
	s.nSendBatch++
	s.sendBatchIn = append(s.sendBatchIn, in)
	s.mu.Unlock()
	if s.sendBatch != nil {
		return s.sendBatch(n, in)
	}
	return okBatch(in.Entries), nil
}

func okEntry(e types.SendMessageBatchRequestEntry) types.SendMessageBatchResultEntry {
	r := types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("id-" + *e.Id), MD5OfMessageBody: aws.String(sqsmap.MD5OfBody(*e.MessageBody))}
	if len(e.MessageAttributes) > 0 {
		r.MD5OfMessageAttributes = aws.String(sqsmap.MD5OfAttributes(e.MessageAttributes))
	}
	if len(e.MessageSystemAttributes) > 0 {
		r.MD5OfMessageSystemAttributes = aws.String(md5OfSystemAttributes(e.MessageSystemAttributes))
	}
	return r
}

func okBatch(entries []types.SendMessageBatchRequestEntry) *awssqs.SendMessageBatchOutput {
	out := &awssqs.SendMessageBatchOutput{}
	for _, e := range entries {
		out.Successful = append(out.Successful, okEntry(e))
	}
	return out
}

func (s *stubAPI) GetQueueAttributes(context.Context, *awssqs.GetQueueAttributesInput, ...func(*awssqs.Options)) (*awssqs.GetQueueAttributesOutput, error) {
	if s.attrsErr != nil {
		return nil, s.attrsErr
	}
	return &awssqs.GetQueueAttributesOutput{Attributes: s.attrs}, nil
}

func (s *stubAPI) GetQueueUrl(_ context.Context, in *awssqs.GetQueueUrlInput, _ ...func(*awssqs.Options)) (*awssqs.GetQueueUrlOutput, error) {
	return &awssqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/123456789012/" + *in.QueueName)}, nil
}

func stubURL(fifo bool) string {
	if fifo {
		return "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo"
	}
	return "https://sqs.us-east-1.amazonaws.com/123456789012/q"
}

func stubSource(t *testing.T, stub *stubAPI, fifo bool, cfg SourceConfig) *Source {
	t.Helper()
	cfg.QueueURL = stubURL(fifo)
	if stub.attrs == nil {
		stub.attrs = map[string]string{"FifoQueue": strconv.FormatBool(fifo), "VisibilityTimeout": "30"}
	}
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	src, err := newSource(context.Background(), stub, &cfg.ConnConfig, set, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	})
	return src
}

func stubSink(t *testing.T, stub *stubAPI, fifo bool, cfg SinkConfig) *Sink {
	t.Helper()
	cfg.QueueURL = stubURL(fifo)
	if stub.attrs == nil {
		stub.attrs = map[string]string{"FifoQueue": strconv.FormatBool(fifo), "ContentBasedDeduplication": "false"}
	}
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	snk, err := newSink(context.Background(), stub, &cfg, set, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = snk.Close(ctx)
	})
	return snk
}

// received builds what SQS hands out for a body, with correct digests.
func received(t *testing.T, body, handle string, attrs ...mapping.Attribute) types.Message {
	t.Helper()
	out, err := sqsmap.Encode(&mapping.Message{Body: []byte(body), Attributes: attrs}, sqsmap.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sqsmap.Deliver(out, "mid-"+handle, handle, time.Now())
}

func connReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
}

// A FIFO ReceiveMessage that failed with a retryable error is retried with
// the same ReceiveRequestAttemptId (docs/wire-sqs.md §4); a successful or a
// non-retryable call ends the attempt.
func TestStubFIFOReceiveAttemptIDReused(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		switch n {
		case 0, 3:
			return nil, connReset()
		case 1:
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "first", "h1")}}, nil
		case 2:
			return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "bad", Fault: smithy.FaultClient}
		case 4:
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "second", "h2")}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, true, SourceConfig{Pollers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := src.Receive(ctx, 10)
	if err != nil || len(ds) != 1 || string(ds[0].Message().Body) != "first" {
		t.Fatalf("first receive: %v %v", ds, err)
	}
	if _, err := src.Receive(ctx, 10); err == nil || !strings.Contains(err.Error(), "InvalidParameterValue") {
		t.Fatalf("second receive: %v, want the non-retryable error", err)
	}
	ds, err = src.Receive(ctx, 10)
	if err != nil || len(ds) != 1 || string(ds[0].Message().Body) != "second" {
		t.Fatalf("third receive: %v %v", ds, err)
	}
	stub.mu.Lock()
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = aws.ToString(stub.receiveIn[i].ReceiveRequestAttemptId)
	}
	stub.mu.Unlock()
	if ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("retry after a connection error: attempt ids %q, %q; want the same", ids[0], ids[1])
	}
	if ids[2] == ids[1] {
		t.Errorf("after a success the next call reused attempt id %q", ids[2])
	}
	if ids[3] == ids[2] || ids[3] != ids[4] {
		t.Errorf("attempt ids %q %q %q: want a new one after a non-retryable error, then the same on retry", ids[2], ids[3], ids[4])
	}
	for _, id := range ids {
		if len(id) > 128 {
			t.Errorf("attempt id %q too long", id)
		}
	}
}

func TestStubStandardReceiveHasNoAttemptID(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "x", "h")}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1, MessageAttributeNames: []string{"bar.*", "x"}, AttributeNames: []string{"SentTimestamp"}, VisibilityTimeout: "45s", WaitTime: "7s", MaxMessages: 4})
	if _, err := src.Receive(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	stub.mu.Lock()
	in := stub.receiveIn[0]
	stub.mu.Unlock()
	if in.ReceiveRequestAttemptId != nil || in.VisibilityTimeout != 45 || in.WaitTimeSeconds != 7 || in.MaxNumberOfMessages != 4 ||
		!slices.Equal(in.MessageAttributeNames, []string{"bar.*", "x", mapping.EnvelopeName}) ||
		!slices.Equal(in.MessageSystemAttributeNames, []types.MessageSystemAttributeName{"SentTimestamp"}) {
		t.Fatalf("request %+v", in)
	}
}

// A message whose digests do not match is handed over with a DecodeError
// and its raw body; it is counted.
func TestStubCorruptMessage(t *testing.T) {
	t.Parallel()
	good := received(t, "good", "h1", mapping.Attribute{Name: "a", Value: mapping.String("v")})
	badBody := received(t, "body", "h2")
	badBody.Body = aws.String("b0dy")
	badAttrs := received(t, "attrs", "h3", mapping.Attribute{Name: "a", Value: mapping.String("v")})
	badAttrs.MessageAttributes = map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("w")}}
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{good, badBody, badAttrs}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
	ds, err := src.Receive(context.Background(), 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("%v %v", ds, err)
	}
	if err := ds[0].(driver.DecodeErrorer).DecodeError(); err != nil {
		t.Errorf("good message: %v", err)
	}
	for i, field := range map[int]string{1: "MD5OfBody", 2: "MD5OfMessageAttributes"} {
		err := ds[i].(driver.DecodeErrorer).DecodeError()
		if err == nil || !mapping.IsReject(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("delivery %d: decode error %v, want a reject naming %s", i, err, field)
		}
		if m := ds[i].Message(); m == nil || m.ID == "" || len(m.Attributes) != 0 {
			t.Errorf("delivery %d: raw message %+v", i, m)
		}
	}
	if string(ds[1].Message().Body) != "b0dy" {
		t.Errorf("raw body %q", ds[1].Message().Body)
	}
	if c := src.Stats().Corrupt; c != 2 {
		t.Errorf("corrupt count %d", c)
	}
}

// AWSTraceHeader (dropped by fauxqs) comes out as the message's trace.
func TestStubTraceHeaderReceived(t *testing.T) {
	t.Parallel()
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	msg := received(t, "traced", "h1")
	msg.Attributes = map[string]string{"AWSTraceHeader": h, "SentTimestamp": "1700000000000", "ApproximateReceiveCount": "3"}
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{msg}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
	ds, err := src.Receive(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	m := ds[0].Message()
	if m.Trace.XRay() != h || m.Source.DeliveryCount != 3 || m.Source.EnqueuedTime.UnixMilli() != 1700000000000 {
		t.Fatalf("trace %q count %d sent %v", m.Trace.XRay(), m.Source.DeliveryCount, m.Source.EnqueuedTime)
	}
}

// The sink sends AWSTraceHeader as a message system attribute and checks
// the system attributes' digest.
func TestStubTraceHeaderSent(t *testing.T) {
	t.Parallel()
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	tr, err := mapping.ParseXRay(h)
	if err != nil {
		t.Fatal(err)
	}
	stub := &stubAPI{}
	stub.sendBatch = func(_ int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
		out := okBatch(in.Entries)
		out.Successful[1].MD5OfMessageSystemAttributes = aws.String("00000000000000000000000000000000")
		return out, nil
	}
	snk := stubSink(t, stub, false, SinkConfig{})
	errs := snk.Send(context.Background(), []*mapping.Message{{Body: []byte("a"), Trace: tr}, {Body: []byte("b"), Trace: tr}})
	if errs[0] != nil {
		t.Errorf("good digest: %v", errs[0])
	}
	if errs[1] == nil || driver.IsPermanent(errs[1]) || !strings.Contains(errs[1].Error(), "system attributes") {
		t.Errorf("bad digest: %v, want a retryable mismatch", errs[1])
	}
	e := stub.sendBatchIn[0].Entries[0]
	if v := e.MessageSystemAttributes["AWSTraceHeader"]; aws.ToString(v.StringValue) != h || aws.ToString(v.DataType) != "String" {
		t.Fatalf("AWSTraceHeader %+v", v)
	}
	if _, ok := e.MessageAttributes["AWSTraceHeader"]; ok {
		t.Fatal("trace header sent as a user attribute")
	}
}

// Partial DeleteMessageBatch failures reach exactly the delivery concerned;
// a server fault is retried; an invalid receipt handle is permanent.
func TestStubAckPartialFailure(t *testing.T) {
	t.Parallel()
	handles := []string{"ok1", "bad", "flaky", "ok2", "ok3"}
	var msgs []types.Message
	for _, h := range handles {
		msgs = append(msgs, received(t, "body-"+h, h))
	}
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: msgs}, nil
		}
		return nil, nil
	}
	var flakyFailed atomic.Bool
	stub.deleteBatch = func(_ int, in *awssqs.DeleteMessageBatchInput) (*awssqs.DeleteMessageBatchOutput, error) {
		out := &awssqs.DeleteMessageBatchOutput{}
		for _, e := range in.Entries {
			switch *e.ReceiptHandle {
			case "bad":
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"),
					Message: aws.String("The input receipt handle is invalid."), SenderFault: true})
			case "flaky":
				if flakyFailed.CompareAndSwap(false, true) {
					out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
					continue
				}
				fallthrough
			default:
				out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
			}
		}
		return out, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1, Linger: "50ms"})
	ds, err := src.Receive(context.Background(), 10)
	if err != nil || len(ds) != 5 {
		t.Fatalf("%v %v", ds, err)
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = d.Ack(context.Background()) }()
	}
	wg.Wait()
	for i, err := range errs {
		if handles[i] == "bad" {
			if err == nil || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "ReceiptHandleIsInvalid") || !strings.Contains(err.Error(), "mid-bad") {
				t.Errorf("bad handle: %v, want a permanent ReceiptHandleIsInvalid naming the message", err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", handles[i], err)
		}
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if len(stub.deleteIn) != 2 || len(stub.deleteIn[0].Entries) != 5 || len(stub.deleteIn[1].Entries) != 1 ||
		*stub.deleteIn[1].Entries[0].ReceiptHandle != "flaky" {
		t.Errorf("delete calls %d: want one of 5 and a retry of flaky", len(stub.deleteIn))
	}
}

// A whole DeleteMessageBatch failure reaches every delivery of the call;
// about the queue it is not permanent.
func TestStubAckCallFailure(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1"), received(t, "b", "h2")}}, nil
		}
		return nil, nil
	}
	stub.deleteBatch = func(int, *awssqs.DeleteMessageBatchInput) (*awssqs.DeleteMessageBatchOutput, error) {
		return nil, &types.QueueDoesNotExist{Message: aws.String("gone")}
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
	ds, _ := src.Receive(context.Background(), 10)
	for _, d := range ds {
		if err := d.Ack(context.Background()); err == nil || driver.IsPermanent(err) {
			t.Errorf("ack: %v, want a retryable error", err)
		}
	}
}

// Nack raises the delay to nack_backoff, Extend rounds up to whole seconds
// within SQS's limits, and concurrent calls share batches of at most 10.
func TestStubVisibilitySeconds(t *testing.T) {
	t.Parallel()
	var msgs []types.Message
	for i := range 20 {
		msgs = append(msgs, received(t, "m", "h"+strconv.Itoa(i)))
	}
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n < 2 {
			return &awssqs.ReceiveMessageOutput{Messages: msgs[n*10 : n*10+10]}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1, Linger: "30ms"})
	ds := receiveN(t, src, 20, 5*time.Second)
	ctx := context.Background()
	cases := []struct {
		run  func(d *delivery) error
		want int32
	}{
		{func(d *delivery) error { return d.Nack(ctx, 0) }, 1},
		{func(d *delivery) error { return d.Nack(ctx, 2500*time.Millisecond) }, 3},
		{func(d *delivery) error { return d.Extend(ctx, 100*time.Millisecond) }, 1},
		{func(d *delivery) error { return d.Extend(ctx, 13*time.Hour) }, 43200},
	}
	for i, c := range cases {
		if err := c.run(ds[i]); err != nil {
			t.Fatal(err)
		}
		stub.mu.Lock()
		got := stub.visEntries[len(stub.visEntries)-1][0]
		stub.mu.Unlock()
		if got.VisibilityTimeout != c.want || *got.ReceiptHandle != ds[i].handle {
			t.Errorf("case %d: visibility %d for %s, want %d", i, got.VisibilityTimeout, *got.ReceiptHandle, c.want)
		}
	}
	if err := ds[0].Nack(ctx, time.Second); err != errSettled {
		t.Errorf("second nack: %v", err)
	}
	if err := ds[0].Extend(ctx, time.Second); err != nil {
		t.Errorf("extend after settle: %v, want nil", err)
	}
	stub.mu.Lock()
	before := len(stub.visEntries)
	stub.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range ds[4:] { // 16 concurrent extends
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Extend(ctx, 5*time.Second); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	stub.mu.Lock()
	calls := stub.visEntries[before:]
	stub.mu.Unlock()
	total := 0
	for _, c := range calls {
		if len(c) > 10 {
			t.Errorf("batch of %d", len(c))
		}
		total += len(c)
	}
	if total != 16 || len(calls) > 3 {
		t.Errorf("%d extends in %d calls", total, len(calls))
	}
}

func TestStubNackBackoffZero(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1")}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1, NackBackoff: "0s"})
	ds, _ := src.Receive(context.Background(), 1)
	if err := ds[0].Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if v := stub.visEntries[0][0].VisibilityTimeout; v != 0 {
		t.Fatalf("visibility %d, want 0", v)
	}
}

// Close makes prefetched messages that the engine never took visible again.
func TestStubCloseReleasesPrefetched(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1"), received(t, "b", "h2"), received(t, "c", "h3")}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
	ds, err := src.Receive(context.Background(), 1)
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, c := range stub.visEntries {
		for _, e := range c {
			if e.VisibilityTimeout != 0 {
				t.Errorf("release with visibility %d", e.VisibilityTimeout)
			}
			released = append(released, *e.ReceiptHandle)
		}
	}
	if !slices.Equal(released, []string{"h2", "h3"}) {
		t.Fatalf("released %v", released)
	}
	if err := ds[0].Ack(context.Background()); !errors.Is(err, errClosed) {
		t.Fatalf("ack after close: %v", err)
	}
	if _, err := src.Receive(context.Background(), 1); !errors.Is(err, errClosed) {
		t.Fatalf("receive after close: %v", err)
	}
}

// Close returns by its ctx's deadline when releasing the prefetched
// messages hangs: the release ran on a 5 s context of its own.
func TestStubCloseReleaseKeepsTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubAPI{visHang: true}
		stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
			if n == 0 {
				return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1"), received(t, "b", "h2")}}, nil
			}
			return nil, nil
		}
		src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
		if ds, err := src.Receive(t.Context(), 1); err != nil || len(ds) != 1 {
			t.Fatal(ds, err)
		}
		const grace = time.Second
		ctx, cancel := context.WithTimeout(t.Context(), grace)
		defer cancel()
		began := time.Now()
		_ = src.Close(ctx)
		if took := time.Since(began); took > grace {
			t.Fatalf("Close took %s with a %s deadline", took, grace)
		}
	})
}

// A prefetched message whose visibility ended before the engine asked (its
// extensions failed) is not handed over.
func TestStubExpiredPrefetchDropped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stub := &stubAPI{}
		stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
			if n == 0 {
				return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1")}}, nil
			}
			return nil, nil
		}
		stub.visBatch = func(int, *awssqs.ChangeMessageVisibilityBatchInput) (*awssqs.ChangeMessageVisibilityBatchOutput, error) {
			return nil, errors.New("throttled")
		}
		src := stubSource(t, stub, false, SourceConfig{Pollers: 1, VisibilityTimeout: "1s"})
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if ds, err := src.Receive(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v %v, want nothing", ds, err)
		}
		if n := src.Stats().Expired; n != 1 {
			t.Fatalf("expired %d", n)
		}
		stub.mu.Lock()
		defer stub.mu.Unlock()
		if stub.nVis == 0 {
			t.Fatal("no extension was tried")
		}
	})
}

// Deliveries waiting in the source for the engine are extended by the
// visibility timeout, so they do not expire; from handover on, only the
// engine's Extend calls extend them.
func TestStubKeepsPrefetched(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stub := &stubAPI{}
		stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
			if n == 0 {
				return &awssqs.ReceiveMessageOutput{Messages: []types.Message{received(t, "a", "h1"), received(t, "b", "h2")}}, nil
			}
			return nil, nil
		}
		src := stubSource(t, stub, false, SourceConfig{Pollers: 1, VisibilityTimeout: "3s"})
		synctest.Wait()             // the poller holds the batch, nobody takes it
		time.Sleep(7 * time.Second) // more than twice the visibility timeout
		synctest.Wait()
		ds, err := src.Receive(context.Background(), 10)
		if err != nil || len(ds) != 2 {
			t.Fatal(ds, err)
		}
		if n := src.Stats().Expired; n != 0 {
			t.Fatalf("%d expired while prefetched", n)
		}
		stub.mu.Lock()
		extended := map[string]int{}
		for _, c := range stub.visEntries {
			for _, e := range c {
				if e.VisibilityTimeout != 3 {
					t.Errorf("entry %s extends by %d s, want 3", *e.ReceiptHandle, e.VisibilityTimeout)
				}
				extended[*e.ReceiptHandle]++
			}
		}
		handedOver := len(stub.visEntries)
		stub.mu.Unlock()
		// A beat each second from 1 s on; each extends a message aged a beat.
		if extended["h1"] < 2 || extended["h2"] < 2 {
			t.Fatalf("extensions while prefetched: %v", extended)
		}

		time.Sleep(10 * time.Second)
		synctest.Wait()
		stub.mu.Lock()
		defer stub.mu.Unlock()
		if after := stub.visEntries[handedOver:]; len(after) != 0 {
			t.Fatalf("the source extended handed-over messages: %v", after)
		}
	})
}

// Per-entry SendMessageBatch failures map to per-message errors: the
// sender's fault is permanent, throttling, server faults and queue-level
// faults are retryable, a missing result or a digest mismatch too.
func TestStubSinkEntryErrors(t *testing.T) {
	t.Parallel()
	fail := map[string]types.BatchResultErrorEntry{
		"invalid":   {Code: aws.String("InvalidParameterValue"), Message: aws.String("Message must be shorter than 262144 bytes."), SenderFault: true},
		"throttled": {Code: aws.String("RequestThrottled"), SenderFault: true},
		"server":    {Code: aws.String("InternalError"), SenderFault: false},
		"kms":       {Code: aws.String("KmsDisabled"), SenderFault: true},
	}
	stub := &stubAPI{}
	stub.sendBatch = func(_ int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
		out := &awssqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			body := *e.MessageBody
			switch {
			case body == "missing":
			case body == "corrupt":
				r := okEntry(e)
				r.MD5OfMessageBody = aws.String(sqsmap.MD5OfBody("other"))
				out.Successful = append(out.Successful, r)
			case fail[body].Code != nil:
				f := fail[body]
				f.Id = e.Id
				out.Failed = append(out.Failed, f)
			default:
				out.Successful = append(out.Successful, okEntry(e))
			}
		}
		return out, nil
	}
	snk := stubSink(t, stub, false, SinkConfig{})
	bodies := []string{"ok", "invalid", "throttled", "server", "kms", "missing", "corrupt", "ok2"}
	var msgs []*mapping.Message
	for _, b := range bodies {
		msgs = append(msgs, &mapping.Message{Body: []byte(b), Attributes: []mapping.Attribute{{Name: "k", Value: mapping.Int64(7)}}})
	}
	errs := snk.Send(context.Background(), msgs)
	for i, b := range bodies {
		err := errs[i]
		switch b {
		case "ok", "ok2":
			if err != nil {
				t.Errorf("%s: %v", b, err)
			}
		case "invalid":
			if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "InvalidParameterValue") {
				t.Errorf("%s: %v, want permanent", b, err)
			}
		default:
			if err == nil || driver.IsPermanent(err) {
				t.Errorf("%s: %v, want a retryable error", b, err)
			}
		}
	}
}

// A whole SendMessageBatch failure: a client fault about the request is
// permanent for each entry, throttling is not.
func TestStubSinkCallErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err       error
		permanent bool
	}{
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Fault: smithy.FaultClient}, true},
		{&smithy.GenericAPIError{Code: "RequestThrottled", Fault: smithy.FaultClient}, false},
		{&smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, false},
		{&types.QueueDoesNotExist{}, false},
		{connReset(), false},
	} {
		stub := &stubAPI{}
		stub.sendBatch = func(int, *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) { return nil, c.err }
		snk := stubSink(t, stub, false, SinkConfig{})
		for _, err := range snk.Send(context.Background(), []*mapping.Message{{Body: []byte("a")}, {Body: []byte("b")}}) {
			if err == nil || driver.IsPermanent(err) != c.permanent {
				t.Errorf("%v: %v, permanent %v", c.err, err, c.permanent)
			}
		}
	}
}

// FIFO: when an entry of a group fails, the later entries of that group in
// the same Send call are not sent (they would overtake it).
func TestStubSinkFIFOFailureStopsGroup(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.sendBatch = func(_ int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
		out := &awssqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			if *e.MessageGroupId == "g1" {
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
				continue
			}
			out.Successful = append(out.Successful, okEntry(e))
		}
		return out, nil
	}
	snk := stubSink(t, stub, true, SinkConfig{})
	var msgs []*mapping.Message
	for g := 1; g <= 10; g++ {
		msgs = append(msgs, &mapping.Message{Body: []byte("first"), ID: "a" + strconv.Itoa(g), GroupKey: "g" + strconv.Itoa(g)})
	}
	msgs = append(msgs,
		&mapping.Message{Body: []byte("second"), ID: "b1", GroupKey: "g1"},
		// an encode failure stops its group too
		&mapping.Message{Body: []byte("x"), ID: "c1", GroupKey: "g11", Attributes: []mapping.Attribute{{Name: "AWS.bad", Value: mapping.String("v")}}},
		&mapping.Message{Body: []byte("y"), ID: "c2", GroupKey: "g11"},
		&mapping.Message{Body: []byte("z"), ID: "c3", GroupKey: "g12"},
	)
	errs := snk.Send(context.Background(), msgs)
	if errs[0] == nil || driver.IsPermanent(errs[0]) {
		t.Errorf("g1 first: %v", errs[0])
	}
	for i := 1; i < 10; i++ {
		if errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
	}
	if errs[10] == nil || driver.IsPermanent(errs[10]) || !strings.Contains(errs[10].Error(), "earlier message") {
		t.Errorf("g1 second: %v, want a retryable 'earlier message failed'", errs[10])
	}
	if !driver.IsPermanent(errs[11]) {
		t.Errorf("reserved attribute name: %v, want permanent", errs[11])
	}
	if errs[12] == nil || driver.IsPermanent(errs[12]) {
		t.Errorf("g11 second: %v", errs[12])
	}
	if errs[13] != nil {
		t.Errorf("g12: %v", errs[13])
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	for _, in := range stub.sendBatchIn {
		for _, e := range in.Entries {
			if id := aws.ToString(e.MessageDeduplicationId); id == "b1" || id == "c2" {
				t.Errorf("sent %s although an earlier message of its group failed", id)
			}
		}
	}
	for _, in := range stub.sendIn {
		if id := aws.ToString(in.MessageDeduplicationId); id == "b1" || id == "c2" {
			t.Errorf("sent %s although an earlier message of its group failed", id)
		}
	}
}

// FIFO: one group's entries never travel in two calls at once, and keep
// their order across batches.
func TestStubSinkFIFOGroupSerialized(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var inGroup atomic.Int32
		var order []string
		var mu sync.Mutex
		stub := &stubAPI{}
		record := func(group, dedup string) {
			mu.Lock()
			if group == "one" {
				order = append(order, dedup)
			}
			mu.Unlock()
		}
		stub.sendBatch = func(_ int, in *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
			has := slices.ContainsFunc(in.Entries, func(e types.SendMessageBatchRequestEntry) bool { return *e.MessageGroupId == "one" })
			if has && inGroup.Add(1) > 1 {
				t.Error("two calls with group one in flight")
			}
			for _, e := range in.Entries {
				record(*e.MessageGroupId, *e.MessageDeduplicationId)
			}
			// In the bubble, the other senders run before this call ends:
			// any overlap in group one shows.
			time.Sleep(20 * time.Millisecond)
			if has {
				inGroup.Add(-1)
			}
			return okBatch(in.Entries), nil
		}
		stub.send = func(_ int, in *awssqs.SendMessageInput) (*awssqs.SendMessageOutput, error) {
			record(*in.MessageGroupId, *in.MessageDeduplicationId)
			return &awssqs.SendMessageOutput{MD5OfMessageBody: aws.String(sqsmap.MD5OfBody(*in.MessageBody))}, nil
		}
		snk := stubSink(t, stub, true, SinkConfig{Senders: 4})
		var msgs []*mapping.Message
		var want []string
		for i := range 25 {
			id := "one-" + strconv.Itoa(i)
			want = append(want, id)
			msgs = append(msgs, &mapping.Message{Body: []byte("x"), ID: id, GroupKey: "one"})
			msgs = append(msgs, &mapping.Message{Body: []byte("y"), ID: "other-" + strconv.Itoa(i), GroupKey: "g" + strconv.Itoa(i)})
		}
		for i, err := range snk.Send(context.Background(), msgs) {
			if err != nil {
				t.Fatalf("%d: %v", i, err)
			}
		}
		if !slices.Equal(order, want) {
			t.Fatalf("group order %v", order)
		}
	})
}

// A batch SQS finds too long as a whole is sent one message at a time.
func TestStubSinkBatchTooLong(t *testing.T) {
	t.Parallel()
	stub := &stubAPI{}
	stub.sendBatch = func(int, *awssqs.SendMessageBatchInput) (*awssqs.SendMessageBatchOutput, error) {
		return nil, &types.BatchRequestTooLong{Message: aws.String("too long")}
	}
	snk := stubSink(t, stub, false, SinkConfig{})
	msgs := []*mapping.Message{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}
	for i, err := range snk.Send(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	stub.mu.Lock()
	defer stub.mu.Unlock()
	if len(stub.sendIn) != 3 || *stub.sendIn[0].MessageBody != "a" || *stub.sendIn[2].MessageBody != "c" {
		t.Fatalf("%d singles", len(stub.sendIn))
	}
}

// A cancelled Send reports the cancellation for what it did not confirm,
// and keeps the result of what was confirmed.
func TestStubSinkSendCancelled(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	fast, slow := strings.Repeat("f", 3000), strings.Repeat("s", 3000)
	stub := &stubAPI{}
	stub.send = func(_ int, in *awssqs.SendMessageInput) (*awssqs.SendMessageOutput, error) {
		if *in.MessageBody == slow {
			<-release
			return nil, errors.New("late")
		}
		return &awssqs.SendMessageOutput{MD5OfMessageBody: aws.String(sqsmap.MD5OfBody(*in.MessageBody))}, nil
	}
	// 4096 bytes: the two messages go in two calls.
	snk := stubSink(t, stub, false, SinkConfig{MaxMessageSize: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	errs := snk.Send(ctx, []*mapping.Message{{Body: []byte(fast)}, {Body: []byte(slow)}})
	close(release)
	if errs[0] != nil {
		t.Errorf("stored message: %v", errs[0])
	}
	if !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Errorf("unconfirmed message: %v", errs[1])
	}
	if err := snk.Send(ctx, []*mapping.Message{{Body: []byte("late")}})[0]; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("send on an ended context: %v", err)
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{connReset(), true},
		{&smithy.GenericAPIError{Code: "RequestThrottled", Fault: smithy.FaultClient}, true},
		{&smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, true},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Fault: smithy.FaultClient}, false},
		{&types.QueueDoesNotExist{}, false},
		{context.Canceled, false},
		{&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},
		{errors.New("unexpected EOF"), true},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A filtered receive (message_attribute_names = ["bar.*"]) asks for the
// envelope too and, with AWS's digest of the returned attributes, decodes
// the envelope's fields.
func TestStubAttributeFilterKeepsEnvelope(t *testing.T) {
	t.Parallel()
	m := &mapping.Message{Body: []byte("b"), Subject: "subj", Attributes: []mapping.Attribute{
		{Name: "bar.a", Value: mapping.Int32(1)}, {Name: "other", Value: mapping.String("o")},
	}}
	out, err := sqsmap.Encode(m, sqsmap.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := sqsmap.Deliver(out, "mid", "h", time.Now())
	delete(msg.MessageAttributes, "other")
	msg.MD5OfMessageAttributes = aws.String(sqsmap.MD5OfAttributes(msg.MessageAttributes)) // as AWS does
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{msg}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1, MessageAttributeNames: []string{"bar.*"}})
	ds, err := src.Receive(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	stub.mu.Lock()
	names := stub.receiveIn[0].MessageAttributeNames
	stub.mu.Unlock()
	if !slices.Equal(names, []string{"bar.*", mapping.EnvelopeName}) {
		t.Fatalf("requested %v", names)
	}
	got := ds[0].Message()
	if err := ds[0].(driver.DecodeErrorer).DecodeError(); err != nil || got.Subject != "subj" || len(got.Attributes) != 1 {
		t.Fatalf("decode %v: %+v", err, got)
	}
}

// Without permission to read the queue's attributes the adapter starts and
// judges FIFO by the name; an unreachable service or a missing queue is a
// start error.
func TestStubQueueAttributesAtStart(t *testing.T) {
	t.Parallel()
	c := ConnConfig{QueueURL: stubURL(true)}
	set, _ := (&SinkConfig{ConnConfig: c}).resolve()
	denied := &stubAPI{attrsErr: &smithy.GenericAPIError{Code: "AccessDenied", Fault: smithy.FaultClient}}
	snk, err := newSink(context.Background(), denied, &SinkConfig{ConnConfig: c}, set, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close(context.Background())
	if !snk.queue.fifo || snk.enc.ContentBasedDedup || !snk.enc.FIFO {
		t.Fatalf("queue %+v", snk.queue)
	}
	for _, e := range []error{connReset(), &types.QueueDoesNotExist{}} {
		if _, err := newSink(context.Background(), &stubAPI{attrsErr: e}, &SinkConfig{ConnConfig: c}, set, nil, testLogger(t)); err == nil {
			t.Errorf("%v: started", e)
		}
	}
}

// The deprecated heartbeat setting still loads, with a warning.
func TestStubHeartbeatDeprecated(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := SourceConfig{Pollers: 1, VisibilityTimeout: "30s", Heartbeat: "10s"}
	cfg.QueueURL = stubURL(false)
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	src, err := newSource(context.Background(), &stubAPI{attrs: map[string]string{"FifoQueue": "false"}}, &cfg.ConnConfig, set, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	if !strings.Contains(buf.String(), "heartbeat is deprecated and ignored") {
		t.Errorf("no deprecation warning in %q", buf.String())
	}
}

// A message whose digests match but whose carry envelope cannot be read is
// dead-lettered with its message attributes, and the envelope's text as
// mapping.RefusedEnvelopeAttr (they were all left out: only the body and
// the system attributes reached the dead-letter sink).
func TestStubCorruptEnvelopeKeepsAttributes(t *testing.T) {
	t.Parallel()
	out, err := sqsmap.Encode(&mapping.Message{Body: []byte("b"), Attributes: []mapping.Attribute{
		{Name: "tenant", Value: mapping.String("t")}, {Name: "qty", Value: mapping.Int32(3)}}}, sqsmap.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out.Attributes[mapping.EnvelopeName] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("oops")}
	msg := sqsmap.Deliver(out, "mid-1", "h1", time.Now())
	stub := &stubAPI{}
	stub.receive = func(n int, _ *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if n == 0 {
			return &awssqs.ReceiveMessageOutput{Messages: []types.Message{msg}}, nil
		}
		return nil, nil
	}
	src := stubSource(t, stub, false, SourceConfig{Pollers: 1})
	ds, err := src.Receive(context.Background(), 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("%v %v", ds, err)
	}
	if err := ds[0].(driver.DecodeErrorer).DecodeError(); err == nil || !mapping.IsReject(err) {
		t.Fatalf("decode error %v, want a reject", err)
	}
	m := ds[0].Message()
	if v, ok := m.Attr("tenant"); !ok || v.Str() != "t" {
		t.Errorf("tenant = %v %v", v, ok)
	}
	if _, ok := m.Attr("qty"); !ok {
		t.Error("qty left out")
	}
	if v, ok := m.Attr(mapping.RefusedEnvelopeAttr); !ok || v.Str() != "oops" {
		t.Errorf("%s = %v %v, want the refused text", mapping.RefusedEnvelopeAttr, v, ok)
	}
	if m.ID != "mid-1" || string(m.Body) != "b" {
		t.Errorf("id %q body %q", m.ID, m.Body)
	}
}
