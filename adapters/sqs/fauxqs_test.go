package sqs

// Tests against a real SQS implementation (fauxqs, see
// docs/adapter-sqs.md). They skip only when QBRIDGE_SQS_ENDPOINT is unset.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

func mustValue(t *testing.T, dt, text string) mapping.Value {
	t.Helper()
	v, err := mapping.ParseValue(dt, text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sendAll(t *testing.T, snk *Sink, msgs []*mapping.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range snk.Send(ctx, msgs) {
		if err != nil {
			t.Fatalf("send message %d: %v", i, err)
		}
	}
}

// Typed attributes with custom labels and Unicode survive send → receive
// byte for byte, and the server's MD5OfMessageAttributes is sqsmap's.
func TestFauxqsAttributesRoundTrip(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, rec := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "30s"})

	png := []byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe, '\n'}
	m := &mapping.Message{
		// fauxqs refuses characters beyond U+FFFD in a body (real SQS takes
		// them): the emoji is in an attribute, which it takes.
		Body: []byte("héllo wörld — 世界 ✓ \u00e9\u0301 \uE000"),
		Attributes: []mapping.Attribute{
			{Name: "bin.png", Value: mustValue(t, "Binary.png", "iVBORwD//go=")},
			{Name: "f", Value: mustValue(t, "Number.float", "3.25")},
			{Name: "id", Value: mustValue(t, "String.uuid", "0f8fad5b-d9cb-469f-a165-70867728950e")},
			{Name: "n.big", Value: mustValue(t, "Number", "-12345678901234567890123456789012345.5")},
			{Name: "n.int", Value: mustValue(t, "Number.int", "42")},
			{Name: "s.label", Value: mustValue(t, "String.my-label_9", "x y z")},
			{Name: "s.uni", Value: mapping.String("Grüße, 世界! 🎉 \t tab")},
		},
	}
	if !bytes.Equal(m.Attributes[0].Value.Bytes(), png) {
		t.Fatalf("fixture: png bytes %x", m.Attributes[0].Value.Bytes())
	}
	want, err := sqsmap.Encode(m, snk.enc)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, snk, []*mapping.Message{m})

	ds := receiveN(t, src, 1, 10*time.Second)
	d := ds[0]
	if d.DecodeError() != nil {
		t.Fatalf("decode error: %v", d.DecodeError())
	}
	got := d.Message()
	if string(got.Body) != string(m.Body) {
		t.Errorf("body %q, want %q", got.Body, m.Body)
	}
	if len(got.Attributes) != len(m.Attributes) {
		t.Fatalf("attributes %v, want %v", got.Attributes, m.Attributes)
	}
	for i, a := range m.Attributes {
		if g := got.Attributes[i]; g.Name != a.Name || !g.Value.Equal(a.Value) || g.Value.DataType() != a.Value.DataType() {
			t.Errorf("attribute %d: got %s=%#v (%s), want %s=%#v (%s)", i, g.Name, g.Value, g.Value.DataType(), a.Name, a.Value, a.Value.DataType())
		}
	}
	// On the wire: exactly what was sent, and the server's digest is ours.
	raw := rec.rawReceived()[0]
	if aws.ToString(raw.MD5OfMessageAttributes) == "" {
		t.Fatal("server sent no MD5OfMessageAttributes")
	}
	if s, w := aws.ToString(raw.MD5OfMessageAttributes), sqsmap.MD5OfAttributes(want.Attributes); s != w {
		t.Errorf("server MD5OfMessageAttributes %s, sqsmap %s", s, w)
	}
	if s, w := aws.ToString(raw.MD5OfBody), sqsmap.MD5OfBody(want.Body); s != w {
		t.Errorf("server MD5OfBody %s, sqsmap %s", s, w)
	}
	for name, w := range want.Attributes {
		g, ok := raw.MessageAttributes[name]
		if !ok || aws.ToString(g.DataType) != aws.ToString(w.DataType) ||
			aws.ToString(g.StringValue) != aws.ToString(w.StringValue) || !bytes.Equal(g.BinaryValue, w.BinaryValue) {
			t.Errorf("wire attribute %s: got %+v, want %+v", name, g, w)
		}
	}
	if err := d.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// FIFO: 60 interleaved groups of 5 keep their order per group through
// batched sends and concurrent pollers.
func TestFauxqsFIFOOrderPerGroup(t *testing.T) {
	t.Parallel()
	const groups, per = 60, 5
	admin := adminClient(t)
	url := createQueue(t, admin, true, nil)
	snk, rec := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	if !snk.queue.fifo || snk.enc.ContentBasedDedup {
		t.Fatalf("queue info %+v", snk.queue)
	}
	var msgs []*mapping.Message
	for k := range per {
		for g := range groups {
			msgs = append(msgs, &mapping.Message{
				Body:       []byte(fmt.Sprintf("g%d-%d", g, k)),
				ID:         fmt.Sprintf("id-%d-%d", g, k),
				GroupKey:   fmt.Sprintf("group-%02d", g),
				Attributes: []mapping.Attribute{{Name: "seq", Value: mapping.Int32(int32(k))}},
			})
		}
	}
	start := time.Now()
	sendAll(t, snk, msgs)
	t.Logf("sent %d FIFO messages in %s (%d batch calls, %d single)", len(msgs), time.Since(start),
		len(rec.count("SendMessageBatch")), len(rec.count("SendMessage")))

	src, _ := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "20s", Pollers: 3})
	next := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < len(msgs); {
		ds, err := src.Receive(ctx, 10)
		if err != nil {
			t.Fatalf("after %d messages: %v", n, err)
		}
		var wg sync.WaitGroup
		for _, d := range ds {
			m := d.Message()
			seq, _ := m.Attr("seq")
			if want := next[m.GroupKey]; int(seq.Int()) != want {
				t.Fatalf("group %s: got seq %d, want %d", m.GroupKey, seq.Int(), want)
			}
			next[m.GroupKey]++
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.Ack(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("received %d in order in %s", len(msgs), time.Since(start))
	if len(next) != groups {
		t.Fatalf("%d groups", len(next))
	}
}

// Extend keeps a slow consumer's message invisible past its visibility
// timeout.
func TestFauxqsExtendKeepsMessageInvisible(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	// Visibility 6 s, extended by 6 s every second: an extension may come
	// 5 s late (a loaded machine) before the message reappears; with 2 s
	// and every 500 ms, 1.5 s late failed it.
	src, rec := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "6s", Pollers: 1})
	sendAll(t, snk, []*mapping.Message{{Body: []byte("slow")}})
	d := receiveN(t, src, 1, 10*time.Second)[0]

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the slow consumer's heartbeat
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if err := d.Extend(context.Background(), 6*time.Second); err != nil {
				t.Errorf("extend: %v", err)
			}
		}
	}()
	deadline := time.Now().Add(13 * time.Second) // more than twice the visibility timeout
	for time.Now().Before(deadline) {
		if ms := rawReceive(t, admin, url, time.Second); len(ms) > 0 {
			t.Fatalf("message reappeared while extended: %s", aws.ToString(ms[0].Body))
		}
	}
	close(stop)
	wg.Wait()
	if err := d.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.count("ChangeMessageVisibilityBatch")); n < 4 {
		t.Errorf("%d ChangeMessageVisibilityBatch calls, want at least 4", n)
	}
}

// A message attribute filter (names, prefixes) still receives the carry
// envelope. AWS digests the attributes it returns (see the stub test);
// fauxqs 2.4.1 returns the digest of all the message's attributes, so there
// the adapter rightly flags the message as corrupt.
func TestFauxqsAttributeFilter(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, rec := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", MessageAttributeNames: []string{"bar.*"}})
	m := &mapping.Message{
		Body: []byte("filtered"), Subject: "carried in the envelope",
		Attributes: []mapping.Attribute{
			{Name: "bar.a", Value: mapping.Int32(1)}, {Name: "bar.b", Value: mapping.String("b")}, {Name: "other", Value: mapping.String("o")},
		},
	}
	out, err := sqsmap.Encode(m, snk.enc)
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, snk, []*mapping.Message{m})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	raw := rec.rawReceived()[0]
	names := slices.Sorted(maps.Keys(raw.MessageAttributes))
	if !slices.Equal(names, []string{"bar.a", "bar.b", mapping.EnvelopeName}) {
		t.Fatalf("wire attributes %v, want bar.* and the envelope", names)
	}
	if aws.ToString(raw.MD5OfMessageAttributes) == sqsmap.MD5OfAttributes(out.Attributes) {
		t.Logf("fauxqs gap: MD5OfMessageAttributes of all attributes for a filtered receive; decode error: %v", d.DecodeError())
		if d.DecodeError() == nil {
			t.Fatal("a digest that does not match the returned attributes was accepted")
		}
	} else {
		if err := d.DecodeError(); err != nil {
			t.Fatal(err)
		}
		if got := d.Message(); len(got.Attributes) != 2 || got.Subject != m.Subject {
			t.Fatalf("attributes %v subject %q", got.Attributes, got.Subject)
		}
	}
	if err := d.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Nack with backoff: the message comes back after the delay, not before.
func TestFauxqsNackBackoff(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, _ := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "30s", NackBackoff: "2s", Pollers: 1})
	sendAll(t, snk, []*mapping.Message{{Body: []byte("again")}})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	nacked := time.Now()
	if err := d.Nack(context.Background(), 0); err != nil { // raised to nack_backoff
		t.Fatal(err)
	}
	d2 := receiveN(t, src, 1, 10*time.Second)[0]
	after := time.Since(nacked)
	if after < 1500*time.Millisecond {
		t.Fatalf("message back after %s, before the 2s backoff", after)
	}
	if d2.Message().Source.DeliveryCount != 2 || d2.id != d.id {
		t.Fatalf("redelivery %s count %d, want %s count 2", d2.id, d2.Message().Source.DeliveryCount, d.id)
	}
	t.Logf("back after %s", after)
	if err := d2.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Acks of concurrent deliveries share DeleteMessageBatch calls of at most 10.
func TestFauxqsAckBatches(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, rec := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "3s", Linger: "50ms"})
	var msgs []*mapping.Message
	for i := range 23 {
		msgs = append(msgs, &mapping.Message{Body: []byte("m" + strconv.Itoa(i))})
	}
	sendAll(t, snk, msgs)
	ds := receiveN(t, src, len(msgs), 10*time.Second)
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Ack(context.Background()); err != nil {
				t.Errorf("ack: %v", err)
			}
		}()
	}
	wg.Wait()
	calls := rec.count("DeleteMessageBatch")
	total := 0
	for _, n := range calls {
		if n > 10 {
			t.Errorf("DeleteMessageBatch with %d entries", n)
		}
		total += n
	}
	if total != len(msgs) || len(calls) > 4 {
		t.Errorf("DeleteMessageBatch calls %v for %d acks", calls, len(msgs))
	}
	if err := ds[0].Ack(context.Background()); err != errSettled {
		t.Errorf("second ack: %v, want errSettled", err)
	}
	// An acked message is deleted, so it leaves the queue's counts at once;
	// one that was not would still count, in flight until its visibility
	// timeout and visible after it, whoever received it again (the source
	// keeps polling): no need to wait for the timeout to see it.
	if b, err := CountSource(context.Background(), SourceConfig{ConnConfig: conn(t, url)}, nil); err != nil || b.Ready+b.InFlight+b.Scheduled != 0 {
		t.Fatalf("after the acks the queue holds %+v (%v), want nothing", b, err)
	}
}

// A queue with RedrivePolicy maxReceiveCount 2: after two nacks SQS moves
// the message to the dead-letter queue.
func TestFauxqsRedriveToDLQ(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	dlq := createQueue(t, admin, false, nil)
	policy, _ := json.Marshal(map[string]string{"deadLetterTargetArn": queueArn(t, admin, dlq), "maxReceiveCount": "2"})
	url := createQueue(t, admin, false, map[string]string{"RedrivePolicy": string(policy)})
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, _ := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "30s", NackBackoff: "0s", Pollers: 1})
	sendAll(t, snk, []*mapping.Message{{Body: []byte("poison")}})
	var id string
	for i := 1; i <= 2; i++ {
		d := receiveN(t, src, 1, 10*time.Second)[0]
		if c := d.Message().Source.DeliveryCount; c != i {
			t.Fatalf("receive %d: count %d", i, c)
		}
		id = d.id
		if err := d.Nack(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The pollers' next receive moves it; it must arrive in the DLQ.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ms := rawReceive(t, admin, dlq, time.Second); len(ms) > 0 {
			if aws.ToString(ms[0].MessageId) != id || aws.ToString(ms[0].Body) != "poison" {
				t.Fatalf("DLQ got %s %q", aws.ToString(ms[0].MessageId), aws.ToString(ms[0].Body))
			}
			if src.Stats().Received != 2 {
				t.Errorf("source received %d times, want 2", src.Stats().Received)
			}
			return
		}
	}
	t.Fatal("message did not reach the DLQ")
}

// A scheduled message goes out with DelaySeconds and is not visible before.
func TestFauxqsDelaySeconds(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, _ := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", Pollers: 1})
	sent := time.Now()
	sendAll(t, snk, []*mapping.Message{
		{Body: []byte("later"), ScheduledAt: sent.Add(2 * time.Second)},
		{Body: []byte("now")},
	})
	got := map[string]time.Duration{}
	for _, d := range receiveN(t, src, 2, 10*time.Second) {
		got[string(d.Message().Body)] = time.Since(sent)
		if err := d.Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got["later"] < 1500*time.Millisecond {
		t.Fatalf("received after %v; want the delayed one after about 2s", got)
	}
	t.Logf("received after %v", got)
}

// 11 messages in one Send go out as a batch of 10 plus one SendMessage; an
// oversized message is refused alone (permanent) while the others go.
func TestFauxqsBatchEdges(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, rec := startSink(t, SinkConfig{ConnConfig: conn(t, url), MaxMessageSize: 4096})
	var msgs []*mapping.Message
	for i := range 11 {
		msgs = append(msgs, &mapping.Message{Body: []byte("m" + strconv.Itoa(i))})
	}
	sendAll(t, snk, msgs)
	if b, s := rec.count("SendMessageBatch"), rec.count("SendMessage"); len(b) != 1 || b[0] != 10 || len(s) != 1 {
		t.Errorf("batches %v, singles %v; want [10] and one single", b, s)
	}

	// Size: 3 × 1500 bytes do not fit one 4096-byte batch; 5000 bytes do not
	// fit the limit at all.
	big := strings.Repeat("x", 1500)
	msgs = []*mapping.Message{{Body: []byte(big)}, {Body: []byte(strings.Repeat("y", 5000))}, {Body: []byte(big)}, {Body: []byte(big)}}
	errs := snk.Send(context.Background(), msgs)
	if errs[1] == nil || !driver.IsPermanent(errs[1]) {
		t.Errorf("oversized message: %v, want a permanent error", errs[1])
	}
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
	}
	if b := rec.count("SendMessageBatch"); len(b) != 2 || b[1] != 2 {
		t.Errorf("batches %v, want [10 2] (the third 1500-byte message in its own call)", b)
	}
	if n := len(rec.count("SendMessage")); n != 2 {
		t.Errorf("%d singles, want 2", n)
	}
}

// The queue's own MaximumMessageSize below the sink's setting: the sink
// encodes for the queue's (read at open) and refuses the message as too
// large itself, the rest of the batch goes.
func TestFauxqsServerRefusesTooLarge(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, map[string]string{"MaximumMessageSize": "1024"})
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url), MaxMessageSize: 8192})
	errs := snk.Send(context.Background(), []*mapping.Message{
		{Body: []byte("small")}, {Body: []byte(strings.Repeat("z", 2000))}, {Body: []byte("small too")},
	})
	t.Logf("errors: %v", errs)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("small messages: %v, %v", errs[0], errs[2])
	}
	if rej := (*mapping.RejectError)(nil); !errors.As(errs[1], &rej) || !rej.TooLarge {
		t.Errorf("too large: %v, want a too-large refusal", errs[1])
	}
}

// Ready answers from GetQueueAttributes; a missing queue fails at start.
func TestFauxqsReadyAndMissingQueue(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	src, _ := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s"})
	if err := src.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := conn(t, "")
	c.QueueURL, c.QueueName = "", "no-such-queue-"+strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := NewSource(context.Background(), SourceConfig{ConnConfig: c}, nil); err == nil {
		t.Fatal("source on a missing queue started")
	}
	// By name: GetQueueUrl.
	c.QueueName = queueNameOf(url)
	s, err := NewSink(context.Background(), SinkConfig{ConnConfig: c}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if got := s.(*Sink).queue.url; got != url {
		t.Fatalf("url by name %s, want %s", got, url)
	}
	if err := s.(driver.ReadyChecker).Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// AckBatch (the engine's batched acknowledgement) deletes 23 messages in
// three full-or-rest DeleteMessageBatch calls without waiting for the
// coalescer's linger, reports a delivery settled before as errSettled, and
// nothing comes back after the visibility timeout.
func TestAckBatchDeletes(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, false, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	src, rec := startSource(t, SourceConfig{ConnConfig: conn(t, url), WaitTime: "1s", VisibilityTimeout: "2s", Linger: "1s"})
	var msgs []*mapping.Message
	for i := range 23 {
		msgs = append(msgs, &mapping.Message{Body: []byte("m" + strconv.Itoa(i))})
	}
	sendAll(t, snk, msgs)
	got := receiveN(t, src, len(msgs), 10*time.Second)
	if err := got[0].Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	ds := make([]driver.Delivery, len(got))
	for i, d := range got {
		ds[i] = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := src.AckBatch(ctx, ds)
	if len(errs) != len(ds) || errs[0] != errSettled {
		t.Fatalf("results %v", errs)
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("ack %d: %v", i+1, err)
		}
	}
	calls := rec.count("DeleteMessageBatch")
	slices.Sort(calls)
	if !slices.Equal(calls, []int{2, 10, 10}) {
		t.Errorf("DeleteMessageBatch calls %v, want 10, 10 and 2 entries", calls)
	}
	// Only the nacked message is left: received once more, it is the only one.
	again := receiveN(t, src, 1, 10*time.Second)
	if again[0].id != got[0].id {
		t.Errorf("redelivered %s, want the nacked %s", again[0].id, got[0].id)
	}
	if err := again[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if ms := rawReceive(t, admin, url, 3*time.Second); len(ms) > 0 {
		t.Fatalf("%d acked messages came back", len(ms))
	}
}

// A FIFO queue with content-based deduplication merges equal bodies: the
// sink sends each message's own name (its id, or the source's for it) so
// distinct messages with one body all arrive (a migration had deleted five
// at the source and one arrived). What nothing names is left to the queue.
func TestFauxqsContentBasedDedupKeepsDistinctMessages(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, true, map[string]string{"ContentBasedDeduplication": "true"})
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	if !snk.enc.ContentBasedDedup {
		t.Fatalf("the sink did not read ContentBasedDeduplication: %+v", snk.queue)
	}
	msgs := []*mapping.Message{
		{Body: []byte("same"), ID: "sqs-id-1", GroupKey: "g"},
		{Body: []byte("same"), ID: "sqs-id-2", GroupKey: "g"},
		{Body: []byte("same"), GroupKey: "g", Source: mapping.Source{Protocol: "nats", Address: "S", SequenceNumber: "3"}},
		{Body: []byte("same"), GroupKey: "g", Source: mapping.Source{Protocol: "nats", Address: "S", SequenceNumber: "4"}},
		{Body: []byte("same"), GroupKey: "g"}, // nothing names it: SQS's hash of the body
		{Body: []byte("same"), GroupKey: "g"}, // merged with the one before, as the queue asks
	}
	sendAll(t, snk, msgs)
	var got []types.Message
	for len(got) < 5 {
		batch := rawReceive(t, admin, url, 2*time.Second)
		if len(batch) == 0 {
			break
		}
		got = append(got, batch...)
		for _, m := range batch {
			if _, err := admin.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if extra := rawReceive(t, admin, url, time.Second); len(got) != 5 || len(extra) != 0 {
		t.Fatalf("the queue held %d + %d messages, want 5 (four named, two unnamed merged)", len(got), len(extra))
	}
}

// A FIFO queue drops a send whose deduplication id it saw within its
// window and answers with the first message's id: the sink counts it
// (driver.DuplicateReporter), so a migration that merged distinct messages
// sharing an id says so (it exited 0 with them lost).
func TestFauxqsFIFODuplicatesCounted(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, true, nil)
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	msg := func(id, dedup string) *mapping.Message {
		return &mapping.Message{Body: []byte(id), ID: id, DedupID: dedup, GroupKey: "g"}
	}
	sendAll(t, snk, []*mapping.Message{msg("a", "d1"), msg("b", "d2")})
	sendAll(t, snk, []*mapping.Message{msg("c", "d1")})                 // alone: SendMessage
	sendAll(t, snk, []*mapping.Message{msg("d", "d2"), msg("e", "d3")}) // in a batch
	if got := snk.Duplicates(); got != 2 {
		t.Errorf("Duplicates = %d, want 2", got)
	}
}

// Messages handed back right before Close are visible after it. The
// shutdown's hand-back comes before the source closes, while its pollers
// still receive: one of them gets the messages, and Close used to cancel
// its call with the answer on its way, which the client then drops, so
// they stayed invisible for their visibility timeout (an interrupted
// migrate's rerun waited that long for each FIFO group's head). The
// wrapper holds each answer with messages until it is told to go on, and
// drops it, as the HTTP client does, when the call was cancelled meanwhile.
func TestFauxqsReleaseBeforeCloseLeavesThemVisible(t *testing.T) {
	t.Parallel()
	admin := adminClient(t)
	url := createQueue(t, admin, true, map[string]string{"ContentBasedDeduplication": "true"})
	snk, _ := startSink(t, SinkConfig{ConnConfig: conn(t, url)})
	var msgs []*mapping.Message
	for g := range 3 {
		msgs = append(msgs, &mapping.Message{Body: []byte(fmt.Sprintf("g%d", g)), GroupKey: fmt.Sprintf("g%d", g)})
	}
	sendAll(t, snk, msgs)
	cfg := SourceConfig{ConnConfig: conn(t, url), WaitTime: "0s", VisibilityTimeout: "5m", Pollers: 1}
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClient(context.Background(), &cfg.ConnConfig, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	held := &heldAnswers{api: client, got: make(chan struct{}, 1), goOn: make(chan struct{})}
	src, err := newSource(context.Background(), held, &cfg.ConnConfig, set, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	close(held.goOn) // the first receive goes through
	ds := receiveN(t, src, len(msgs), 30*time.Second)
	held.hold()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range ds {
		if err := d.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	<-held.got  // a poller's answer holds them
	go func() { // on its way once Close has begun
		<-src.closed
		close(held.goOn)
	}()
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Visible at once: well within the 5 minutes a lost answer holds them.
	got := map[string]bool{}
	for len(got) < len(msgs) && ctx.Err() == nil {
		for _, m := range rawReceive(t, admin, url, time.Second) {
			got[aws.ToString(m.Body)] = true
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("after Close, %d of the %d handed-back messages are visible (%v)", len(got), len(msgs), got)
	}
}

// heldAnswers is an SQS client whose answers with messages wait for goOn
// once hold was called (got says one is waiting), and are dropped when
// the caller's context ended meanwhile.
type heldAnswers struct {
	api
	mu   sync.Mutex
	got  chan struct{}
	goOn chan struct{}
}

func (h *heldAnswers) hold() {
	h.mu.Lock()
	h.goOn = make(chan struct{})
	h.mu.Unlock()
	select { // what an earlier answer said
	case <-h.got:
	default:
	}
}

func (h *heldAnswers) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, o ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	out, err := h.api.ReceiveMessage(context.WithoutCancel(ctx), in, o...)
	if err != nil || len(out.Messages) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return out, err
	}
	h.mu.Lock()
	goOn := h.goOn
	h.mu.Unlock()
	select {
	case h.got <- struct{}{}:
	default:
	}
	<-goOn
	if ctx.Err() != nil {
		return nil, ctx.Err() // the answer is lost with the cancelled call
	}
	return out, nil
}
