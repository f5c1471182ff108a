package sbconformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func ptr[T any](v T) *T { return &v }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T) *azservicebus.Client {
	t.Helper()
	return newClientWith(t, connStr(keyVal))
}

func newClientWith(t *testing.T, cs string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func newSender(t *testing.T, c *azservicebus.Client, entity string) *azservicebus.Sender {
	t.Helper()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("sender %s: %v", entity, err)
	}
	return s
}

func sendBodies(t *testing.T, s *azservicebus.Sender, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := s.SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatalf("send %q: %v", b, err)
		}
	}
}

func newReceiver(t *testing.T, c *azservicebus.Client, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatalf("receiver %s: %v", queue, err)
	}
	return r
}

type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN receives exactly n messages within the timeout.
func receiveN(t *testing.T, r messageReceiver, n int, timeout time.Duration) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx := ctxFor(t, timeout)
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatalf("receive: got %d of %d messages: %v", len(got), n, err)
		}
		got = append(got, msgs...)
	}
	if len(got) != n {
		t.Fatalf("receive: got %d messages, want %d", len(got), n)
	}
	return got
}

// receiveNone asserts that no message arrives within d.
func receiveNone(t *testing.T, r messageReceiver, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if len(msgs) > 0 {
		t.Fatalf("expected no message, got %d (first body %q, err %v)", len(msgs), msgs[0].Body, err)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expected no message, got error %v", err)
	}
}

func peekAll(t *testing.T, r interface {
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}) []*azservicebus.ReceivedMessage {
	t.Helper()
	from := int64(0)
	msgs, err := r.PeekMessages(ctxFor(t, 10*time.Second), 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	return msgs
}

func sbCode(err error) azservicebus.Code {
	var e *azservicebus.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func bodies(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func approx(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	d := got.Sub(want)
	if d < -tol || d > tol {
		t.Fatalf("%s = %s, want %s ± %s (off by %s)", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), tol, d)
	}
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func fmtSeq(m *azservicebus.ReceivedMessage) string {
	if m.SequenceNumber == nil {
		return "<nil>"
	}
	return fmt.Sprint(*m.SequenceNumber)
}
