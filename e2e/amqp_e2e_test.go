package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	amqpadapter "github.com/qbridge/qbridge/adapters/amqp"
	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/mapping"
)

// End-to-end tests of the AMQP 1.0 adapter through the real qbridge daemon,
// configured in HCL, against RabbitMQ 3.10 (AMQP 1.0 plugin), fauxqs and an
// embedded nats-server. What goes in and what comes out is looked at with
// plain clients only (go-amqp, nats.go, aws-sdk-go-v2).

func amqpStr(s string) *string { return &s }

// amqpAllSections is a message using every section and every common
// application-property type a go-amqp producer can send.
func amqpAllSections(id string) *amqp.Message {
	created := time.UnixMilli(1_700_000_000_123).UTC()
	expiry := created.Add(2 * time.Hour)
	seq := uint32(3)
	return &amqp.Message{
		Header: &amqp.MessageHeader{Durable: true, Priority: 7, TTL: time.Hour},
		Annotations: amqp.Annotations{
			"x-opt-custom": "annotated",
			"x-opt-num":    int64(99),
			"x-opt-flag":   true,
		},
		Properties: &amqp.MessageProperties{
			MessageID:          id,
			UserID:             []byte("guest"), // RabbitMQ checks user-id against the login
			To:                 amqpStr("/queue/elsewhere"),
			Subject:            amqpStr("order.created"),
			ReplyTo:            amqpStr("/queue/replies"),
			CorrelationID:      uint64(77),
			ContentType:        amqpStr("application/json"),
			ContentEncoding:    amqpStr("identity"),
			AbsoluteExpiryTime: &expiry,
			CreationTime:       &created,
			GroupID:            amqpStr("customer-7"),
			GroupSequence:      &seq,
			ReplyToGroupID:     amqpStr("reply-group"),
		},
		ApplicationProperties: map[string]any{
			"a-string":    "héllo",
			"b-int32":     int32(-42),
			"c-int64":     int64(1 << 40),
			"d-double":    3.25,
			"e-bool":      true,
			"f-timestamp": time.UnixMilli(1_700_000_000_456).UTC(),
			"g-uuid":      amqp.UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
			"h-binary":    []byte{0, 1, 2, 0xff},
			"i-ubyte":     uint8(200),
			"j-ushort":    uint16(60000),
			"k-uint":      uint32(4_000_000_000),
			"l-ulong":     uint64(1 << 63),
			"m-byte":      int8(-7),
			"n-short":     int16(-30000),
			"o-float":     float32(1.5),
			"p-symbol":    amqp.Symbol("a-symbol"),
			"q-null":      nil,
			"traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01",
			"tracestate":  "vendor=x",
		},
		Data: [][]byte{[]byte(`{"order":42}`)},
	}
}

// amqpSections is what a receiver sees of a message, for comparison.
type amqpSections struct {
	Header                *amqp.MessageHeader
	Annotations           amqp.Annotations
	Properties            *amqp.MessageProperties
	ApplicationProperties map[string]any
	Data                  [][]byte
	Value                 any
	Sequence              [][]any
	Footer                amqp.Annotations
}

// amqpSectionsOf copies m's sections, with times in UTC (go-amqp decodes
// timestamps in the local zone) and without the delivery facts.
func amqpSectionsOf(m *amqp.Message) amqpSections {
	s := amqpSections{Data: m.Data, Value: amqpUTC(m.Value), Sequence: m.Sequence}
	if m.Header != nil {
		h := *m.Header
		h.DeliveryCount, h.FirstAcquirer = 0, false // delivery facts, not the message
		s.Header = &h
	}
	if m.Properties != nil {
		p := *m.Properties
		for _, tp := range []**time.Time{&p.AbsoluteExpiryTime, &p.CreationTime} {
			if *tp != nil {
				u := (*tp).UTC()
				*tp = &u
			}
		}
		s.Properties = &p
	}
	if m.ApplicationProperties != nil {
		s.ApplicationProperties = map[string]any{}
		for k, v := range m.ApplicationProperties {
			s.ApplicationProperties[k] = amqpUTC(v)
		}
	}
	for _, a := range []struct{ from, to *amqp.Annotations }{{&m.Annotations, &s.Annotations}, {&m.Footer, &s.Footer}} {
		if *a.from != nil {
			*a.to = amqp.Annotations{}
			for k, v := range *a.from {
				(*a.to)[k] = amqpUTC(v)
			}
		}
	}
	return s
}

// amqpUTC returns v with every time.Time in it in UTC.
func amqpUTC(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = amqpUTC(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = amqpUTC(e)
		}
		return c
	}
	return v
}

func amqpReversed[T any](s []T) []T {
	if s == nil {
		return nil
	}
	c := make([]T, len(s))
	for i, e := range s {
		c[len(s)-1-i] = e
	}
	return c
}

// 1. Every section and every common application-property type survives
// AMQP → qbridge → AMQP unchanged: what a plain go-amqp receiver gets from
// queue B (filled by the daemon from queue A) equals what the same receiver
// gets from queue C, to which the same message was sent directly, and
// equals what the sender put on A (up to go-amqp's own decoding: a symbol
// application property decodes as a string, shown by C too).
func TestAmqpAllSectionsThroughDaemon(t *testing.T) {
	url := amqpURL(t)
	a, b, c := "/queue/"+amqpQueueName(t, "a"), "/queue/"+amqpQueueName(t, "b"), "/queue/"+amqpQueueName(t, "c")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "amqp-sections" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "amqp" {
    url     = %q
    address = %q
  }
}
`, url, a, url, b))
	msgs := []*amqp.Message{
		amqpAllSections("all-sections"),
		{Properties: &amqp.MessageProperties{MessageID: "value-text"}, Header: &amqp.MessageHeader{Durable: true}, Value: "an amqp-value string"},
		{Properties: &amqp.MessageProperties{MessageID: "value-map"}, Header: &amqp.MessageHeader{Durable: true},
			Value: map[string]any{"k": int64(5), "list": []any{int32(1), "two"}}},
		{Properties: &amqp.MessageProperties{MessageID: "sequence"}, Header: &amqp.MessageHeader{Durable: true},
			Sequence: [][]any{{int32(1), "a"}, {true}}},
		{Properties: &amqp.MessageProperties{MessageID: "multi-data"}, Header: &amqp.MessageHeader{Durable: true},
			Data: [][]byte{[]byte("part 1"), {0, 0xff}}},
		{Properties: &amqp.MessageProperties{MessageID: uint64(12345)}, Header: &amqp.MessageHeader{Durable: true}, Data: [][]byte{[]byte("ulong id")}},
		{Properties: &amqp.MessageProperties{MessageID: amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, CorrelationID: []byte{9, 8, 7}},
			Header: &amqp.MessageHeader{Durable: true}, Data: [][]byte{[]byte("uuid id, binary correlation id")}},
	}
	amqpSendAll(t, amqpSender(t, url, a), msgs...)
	amqpSendAll(t, amqpSender(t, url, c), msgs...)

	viaBridge := amqpReceiveN(t, amqpReceiver(t, url, b), len(msgs), 20*time.Second)
	direct := amqpReceiveN(t, amqpReceiver(t, url, c), len(msgs), 10*time.Second)
	for i := range msgs {
		got, base, sent := amqpSectionsOf(viaBridge[i]), amqpSectionsOf(direct[i]), amqpSectionsOf(msgs[i])
		if len(sent.Data) > 1 || len(sent.Sequence) > 1 {
			// RabbitMQ 3.10 reverses the order of several body sections on
			// each hop (go-amqp keeps it: checked in memory). Through the
			// bridge the message passes two queues, so it comes out in the
			// sent order; sent directly it comes out reversed.
			if !reflect.DeepEqual(base.Data, amqpReversed(sent.Data)) || !reflect.DeepEqual(base.Sequence, amqpReversed(sent.Sequence)) {
				t.Logf("message %d: RabbitMQ no longer reverses body sections: %q %v", i, base.Data, base.Sequence)
			}
			base.Data, base.Sequence = amqpReversed(base.Data), amqpReversed(base.Sequence)
		}
		if !reflect.DeepEqual(got, base) {
			t.Errorf("message %d (%v) differs from the same message sent directly:\n bridged %s\n  direct %s",
				i, msgs[i].Properties.MessageID, amqpJSON(got), amqpJSON(base))
			for k, v := range base.ApplicationProperties {
				if g := got.ApplicationProperties[k]; !reflect.DeepEqual(g, v) {
					t.Errorf("  application property %s: bridged %#v (%T), direct %#v (%T)", k, g, g, v, v)
				}
			}
			for k := range got.ApplicationProperties {
				if _, ok := base.ApplicationProperties[k]; !ok {
					t.Errorf("  extra application property %s = %v", k, got.ApplicationProperties[k])
				}
			}
		}
		// and against what was sent: every type is the sender's
		for k, v := range sent.ApplicationProperties {
			if sym, ok := v.(amqp.Symbol); ok {
				v = string(sym) // go-amqp decodes symbols as strings
			}
			if g, ok := got.ApplicationProperties[k]; !ok || !reflect.DeepEqual(g, v) {
				t.Errorf("message %d: application property %s: got %#v (%T), sent %#v (%T)", i, k, g, g, v, v)
			}
		}
		if !reflect.DeepEqual(got.Properties, sent.Properties) {
			t.Errorf("message %d: properties\n got %s\nsent %s", i, amqpJSON(got.Properties), amqpJSON(sent.Properties))
		}
		if !reflect.DeepEqual(got.Header, sent.Header) {
			t.Errorf("message %d: header got %+v sent %+v", i, got.Header, sent.Header)
		}
		for k, v := range sent.Annotations {
			if g := got.Annotations[k]; !reflect.DeepEqual(g, v) {
				t.Errorf("message %d: annotation %v: got %#v sent %#v", i, k, g, v)
			}
		}
		if !reflect.DeepEqual(got.Data, sent.Data) || !reflect.DeepEqual(got.Value, sent.Value) || !reflect.DeepEqual(got.Sequence, sent.Sequence) {
			t.Errorf("message %d: body got %q %#v %#v, sent %q %#v %#v", i, got.Data, got.Value, got.Sequence, sent.Data, sent.Value, sent.Sequence)
		}
	}
	n := float64(len(msgs))
	if r, s, a := d.metricReaches(n, "qbridge_messages_received_total"), d.metricReaches(n, "qbridge_messages_sent_total"), d.metricReaches(n, "qbridge_messages_acked_total"); r != n || s != n || a != n {
		t.Errorf("received %v, sent %v, acked %v; want %v", r, s, a, n)
	}
}

func amqpJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// 2a. AMQP → NATS → AMQP with the example configurations
// (configs/amqp-to-nats.hcl, configs/nats-to-amqp.hcl, chained through a
// JetStream stream): typed application properties as NATS headers (type in
// the envelope), and back as the same AMQP types.
func TestAmqpNATSRoundTripExampleConfigs(t *testing.T) {
	url := amqpURL(t)
	ns := startNATS(t)
	a, b := "/queue/"+amqpQueueName(t, "a"), "/queue/"+amqpQueueName(t, "b")
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// made here, so that neither pipeline races the other to create it
	if _, err := js.CreateStream(amqpCtx(t, 10*time.Second), jetstream.StreamConfig{Name: "E2E_AMQP", Subjects: []string{"e2e.from-amqp"}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QBRIDGE_NATS_URL", ns.ClientURL())
	t.Setenv("QBRIDGE_AMQP_TO_NATS_SOURCE", a)
	t.Setenv("QBRIDGE_AMQP_TO_NATS_SUBJECT", "e2e.from-amqp")
	t.Setenv("QBRIDGE_AMQP_TO_NATS_STREAM", "E2E_AMQP")
	t.Setenv("QBRIDGE_NATS_TO_AMQP_STREAM", "E2E_AMQP")
	t.Setenv("QBRIDGE_NATS_TO_AMQP_SUBJECT", "e2e.from-amqp")
	t.Setenv("QBRIDGE_NATS_TO_AMQP_DURABLE", "e2e-back")
	t.Setenv("QBRIDGE_NATS_TO_AMQP_TARGET", b)
	d := startDaemon(t, amqpConfigFile(t, "amqp-to-nats.hcl")+amqpConfigFile(t, "nats-to-amqp.hcl"))

	sent := &amqp.Message{
		Header:     &amqp.MessageHeader{Durable: true},
		Properties: &amqp.MessageProperties{MessageID: "typed-1", GroupID: amqpStr("tenant-a"), ContentType: amqpStr("text/plain")},
		ApplicationProperties: map[string]any{
			"qty": int32(42), "big": int64(1 << 40), "price": 19.5, "ok": true, "small": uint8(7),
			"at": time.UnixMilli(1_700_000_000_456).UTC(), "id": amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
			"raw": []byte{0, 1, 0xfe}, "f32": float32(0.25), "s": "text",
		},
		Data: [][]byte{[]byte("hello nats")},
	}
	amqpSendAll(t, amqpSender(t, url, a), sent)

	// on NATS, as a plain consumer reads the stream
	cons, err := js.OrderedConsumer(amqpCtx(t, 10*time.Second), "E2E_AMQP", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	nm, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil {
		t.Fatalf("nothing on NATS: %v\n%s", err, d.Logs())
	}
	h := nm.Headers()
	if string(nm.Data()) != "hello nats" || h.Get("qty") != "42" || h.Get("Qbridge-Group") != "tenant-a" || h.Get("Content-Type") != "text/plain" {
		t.Errorf("on NATS: %q %v", nm.Data(), h)
	}
	if env := h.Get(mapping.EnvelopeName); !strings.Contains(env, "Number.int") {
		t.Errorf("the envelope header does not record qty's type Number.int: %q", env)
	}

	// back on AMQP: the same Go types as sent
	got := amqpReceiveN(t, amqpReceiver(t, url, b), 1, 20*time.Second)[0]
	for k, v := range sent.ApplicationProperties {
		if g := got.ApplicationProperties[k]; !reflect.DeepEqual(amqpUTC(g), v) {
			t.Errorf("application property %s: got %#v (%T), sent %#v (%T)", k, g, g, v, v)
		}
	}
	if _, ok := got.ApplicationProperties[mapping.EnvelopeName]; ok {
		t.Errorf("the envelope leaked back to AMQP: %v", got.ApplicationProperties)
	}
	if amqpID(got) != "typed-1" || got.Properties.GroupID == nil || *got.Properties.GroupID != "tenant-a" || string(got.GetData()) != "hello nats" {
		t.Errorf("properties %+v body %q", got.Properties, got.GetData())
	}
	if s := d.metricReaches(1, "qbridge_messages_sent_total", "pipeline=nats-to-amqp"); s != 1 {
		t.Errorf("nats-to-amqp sent %v", s)
	}
}

// 2b. AMQP → SQS with configs/amqp-to-sqs.hcl: an int32 arrives as
// Number.int (plain SDK receive), and the SQS message, put back on another
// queue as received, comes back to AMQP as an int32 through a second
// pipeline (SQS → AMQP).
func TestAmqpSQSRoundTripTypedAttributes(t *testing.T) {
	url := amqpURL(t)
	sc := amqpSQSClient(t)
	amqpSetSQSEnv(t)
	q1, q2 := amqpCreateSQSQueue(t, sc, "out"), amqpCreateSQSQueue(t, sc, "back")
	a, b := "/queue/"+amqpQueueName(t, "a"), "/queue/"+amqpQueueName(t, "b")
	dlq := "/queue/" + amqpQueueName(t, "dlq")
	t.Setenv("QBRIDGE_AMQP_TO_SQS_SOURCE", a)
	t.Setenv("QBRIDGE_AMQP_TO_SQS_QUEUE_URL", q1)
	t.Setenv("QBRIDGE_AMQP_TO_SQS_ENDPOINT", testenv.Require(t, "QBRIDGE_SQS_ENDPOINT"))
	t.Setenv("QBRIDGE_AMQP_TO_SQS_DLQ", dlq)
	d := startDaemon(t, amqpConfigFile(t, "amqp-to-sqs.hcl")+fmt.Sprintf(`
pipeline "sqs-to-amqp" {
  source "sqs" {
    queue_url = %q
    endpoint  = %q
    wait_time = "1s"
  }
  sink "amqp" {
    url     = %q
    address = %q
  }
}
`, q2, testenv.Require(t, "QBRIDGE_SQS_ENDPOINT"), url, b))

	sent := map[string]any{
		"qty": int32(42), "big": int64(-5), "small": uint16(9), "price": 19.5, "ok": true,
		"id": amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, "raw": []byte{0, 1, 0xfe},
		"at": time.UnixMilli(1_700_000_000_456).UTC(), "s": "text",
	}
	amqpSendAll(t, amqpSender(t, url, a), &amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: "sqs-1"},
		ApplicationProperties: sent, Data: [][]byte{[]byte("hello sqs")},
	})

	var m types.Message
	eventually(t, 20*time.Second, "the message in SQS", func() bool {
		out, err := sc.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
			QueueUrl: aws.String(q1), MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
			WaitTimeSeconds: 1, MaxNumberOfMessages: 1,
		})
		if err != nil || len(out.Messages) == 0 {
			return false
		}
		m = out.Messages[0]
		return true
	})
	wantTypes := map[string]string{"qty": "Number.int", "big": "Number.long", "small": "Number.ushort", "price": "Number.double",
		"ok": "String.bool", "id": "String.uuid", "raw": "Binary", "at": "Number.timestamp", "s": "String"}
	for name, want := range wantTypes {
		if got := aws.ToString(m.MessageAttributes[name].DataType); got != want {
			t.Errorf("SQS attribute %s: DataType %q, want %q", name, got, want)
		}
	}
	if v := aws.ToString(m.MessageAttributes["qty"].StringValue); v != "42" {
		t.Errorf("qty = %q", v)
	}
	if aws.ToString(m.Body) != "hello sqs" {
		t.Errorf("body %q", aws.ToString(m.Body))
	}
	// back: the message as SQS delivered it, to the second queue
	if _, err := sc.SendMessage(context.Background(), &awssqs.SendMessageInput{
		QueueUrl: aws.String(q2), MessageBody: m.Body, MessageAttributes: m.MessageAttributes,
	}); err != nil {
		t.Fatal(err)
	}
	got := amqpReceiveN(t, amqpReceiver(t, url, b), 1, 20*time.Second)[0]
	if q, ok := got.ApplicationProperties["qty"].(int32); !ok || q != 42 {
		t.Errorf("qty came back as %#v (%T), want int32 42", got.ApplicationProperties["qty"], got.ApplicationProperties["qty"])
	}
	for k, v := range sent {
		if g := got.ApplicationProperties[k]; !reflect.DeepEqual(amqpUTC(g), v) {
			t.Errorf("application property %s: got %#v (%T), sent %#v (%T)", k, g, g, v, v)
		}
	}
	if string(got.GetData()) != "hello sqs" && got.Value != "hello sqs" {
		t.Errorf("body %q %#v", got.GetData(), got.Value)
	}
	if s := d.metricReaches(1, "qbridge_messages_sent_total", "pipeline=sqs-to-amqp"); s != 1 {
		t.Errorf("sqs-to-amqp sent %v", s)
	}
}

// 3a. A transient sink failure: the NATS server behind the sink is stopped
// while messages flow and started again (same port, same JetStream store).
// Sends are retried; every message arrives, nothing is dead-lettered.
func TestAmqpTransientSinkOutageRetried(t *testing.T) {
	url := amqpURL(t)
	ns := e2etest.StartNATS(t)
	a := "/queue/" + amqpQueueName(t, "a")
	_, js0 := e2etest.ConnectNATS(t, ns.URL())
	if _, err := js0.CreateStream(amqpCtx(t, 10*time.Second), jetstream.StreamConfig{Name: "E2E_OUTAGE", Subjects: []string{"e2e.outage"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, fmt.Sprintf(`
pipeline "outage" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "nats" {
    url            = %q
    subject        = "e2e.outage"
    reconnect_wait = "100ms"
    jetstream {
      stream      = "E2E_OUTAGE"
      ack_timeout = "1s"
    }
  }
  retry {
    initial = "100ms"
    max     = "500ms"
  }
  dead_letter { native = true }
}
`, url, a, ns.URL()))
	const n = 60
	snd := amqpSender(t, url, a)
	for i := 0; i < n/2; i++ {
		amqpSendAll(t, snd, amqpText(fmt.Sprintf("o%03d", i), "x"))
	}
	eventually(t, 15*time.Second, "the first half sent", func() bool { return d.metric("qbridge_messages_sent_total") >= n/2 })
	ns.Stop()
	for i := n / 2; i < n; i++ {
		amqpSendAll(t, snd, amqpText(fmt.Sprintf("o%03d", i), "x"))
	}
	eventually(t, 15*time.Second, "retries while NATS is down", func() bool { return d.metric("qbridge_messages_retried_total") > 0 })
	// NATS stays down until the engine has retried again (it keeps trying,
	// rather than giving up after the first failure).
	retried := d.metric("qbridge_messages_retried_total")
	eventually(t, 15*time.Second, "a later retry while NATS is down", func() bool { return d.metric("qbridge_messages_retried_total") > retried })
	ns.Start()
	eventually(t, 30*time.Second, "every message sent", func() bool { return d.metric("qbridge_messages_sent_total") >= n })

	_, js := e2etest.ConnectNATS(t, ns.URL())
	seen := amqpDrainStream(t, js, "E2E_OUTAGE", n)
	for i := 0; i < n; i++ {
		if seen[fmt.Sprintf("o%03d", i)] == 0 {
			t.Errorf("o%03d lost", i)
		}
	}
	if dl := d.metric("qbridge_messages_dead_lettered_total"); dl != 0 {
		t.Errorf("%v dead-lettered", dl)
	}
	t.Logf("%d messages across a NATS outage: %v sink attempts retried, %v acked", n, d.metric("qbridge_messages_retried_total"), d.metric("qbridge_messages_acked_total"))
}

// amqpDrainStream reads a whole stream with an ordered consumer and counts
// messages by Nats-Msg-Id (the AMQP message-id); it stops at n messages or
// when nothing more comes.
func amqpDrainStream(t testing.TB, js jetstream.JetStream, stream string, n int) map[string]int {
	t.Helper()
	cons, err := js.OrderedConsumer(amqpCtx(t, 10*time.Second), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for total := 0; total < n; total++ {
		m, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second))
		if err != nil {
			break
		}
		seen[m.Headers().Get("Nats-Msg-Id")]++
	}
	return seen
}

// 3b. Permanent failures go to the dead-letter sink with the reason: a
// group_key template whose attribute is missing (reason "mapping"), and a
// binary body SQS refuses under policy reject (reason "rejected"). The
// messages around them flow on.
func TestAmqpPermanentFailuresDeadLetterSink(t *testing.T) {
	url := amqpURL(t)
	sc := amqpSQSClient(t)
	amqpSetSQSEnv(t)
	ns := startNATS(t)
	a1, a2 := "/queue/"+amqpQueueName(t, "a1"), "/queue/"+amqpQueueName(t, "a2")
	dlq := "/queue/" + amqpQueueName(t, "dlq")
	sq := amqpCreateSQSQueue(t, sc, "out")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "mapping-dl" {
  source "amqp" {
    url     = %[1]q
    address = %[2]q
  }
  sink "nats" {
    url     = %[3]q
    subject = "e2e.tenant.{group}"
  }
  mapping { group_key = "{attr.x}" }
  dead_letter {
    sink "amqp" {
      url     = %[1]q
      address = %[4]q
    }
  }
}
pipeline "sqs-reject" {
  source "amqp" {
    url     = %[1]q
    address = %[5]q
  }
  sink "sqs" {
    queue_url = %[6]q
    endpoint  = %[7]q
  }
  mapping { policy = "reject" }
  dead_letter {
    sink "amqp" {
      url     = %[1]q
      address = %[4]q
    }
  }
}
`, url, a1, ns.ClientURL(), dlq, a2, sq, testenv.Require(t, "QBRIDGE_SQS_ENDPOINT")))
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("e2e.tenant.*")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	withX := func(id, x string) *amqp.Message {
		m := amqpText(id, "body of "+id)
		m.ApplicationProperties = map[string]any{"x": x, "n": int32(1)}
		return m
	}
	amqpSendAll(t, amqpSender(t, url, a1), withX("m1", "acme"), amqpText("no-x", "lacks x"), withX("m2", "globex"))
	binary := &amqp.Message{Properties: &amqp.MessageProperties{MessageID: "binary-body"}, Data: [][]byte{{0xff, 0xfe, 0, 1}}}
	amqpSendAll(t, amqpSender(t, url, a2), amqpText("text-1", "fine"), binary, amqpText("text-2", "fine too"))

	for _, want := range []string{"e2e.tenant.acme", "e2e.tenant.globex"} {
		m, err := sub.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("NATS: %v", err)
		}
		if m.Subject != want {
			t.Errorf("subject %s, want %s", m.Subject, want)
		}
	}
	dead := amqpReceiveN(t, amqpReceiver(t, url, dlq), 2, 20*time.Second)
	byID := map[string]*amqp.Message{}
	for _, m := range dead {
		byID[amqpID(m)] = m
	}
	for id, want := range map[string][2]string{"no-x": {"mapping", `"x"`}, "binary-body": {"rejected", "body"}} {
		m := byID[id]
		if m == nil {
			t.Errorf("%s not dead-lettered (got %v)", id, byID)
			continue
		}
		reason, _ := m.ApplicationProperties["DeadLetterReason"].(string)
		desc, _ := m.ApplicationProperties["DeadLetterErrorDescription"].(string)
		if reason != want[0] || !strings.Contains(desc, want[1]) {
			t.Errorf("%s: DeadLetterReason %q, DeadLetterErrorDescription %q; want %q and a description naming %s", id, reason, desc, want[0], want[1])
		}
		t.Logf("%s dead-lettered: %s: %s", id, reason, desc)
	}
	if b := byID["binary-body"]; b != nil && !reflect.DeepEqual(b.Data, binary.Data) {
		t.Errorf("the dead letter lost the binary body: %q", b.Data)
	}
	if got := d.metricReaches(1, "qbridge_messages_dead_lettered_total", "pipeline=mapping-dl", "reason=mapping"); got != 1 {
		t.Errorf("dead_lettered{mapping} = %v", got)
	}
	if got := d.metricReaches(1, "qbridge_messages_dead_lettered_total", "pipeline=sqs-reject", "reason=rejected"); got != 1 {
		t.Errorf("dead_lettered{rejected} = %v", got)
	}
	eventually(t, 10*time.Second, "both text messages in SQS", func() bool {
		return d.metric("qbridge_messages_sent_total", "pipeline=sqs-reject") == 2 && d.metric("qbridge_messages_acked_total", "pipeline=sqs-reject") == 3
	})
}

// 3c. dead_letter { native = true } on an AMQP source is a Reject: the
// message leaves the source queue, and RabbitMQ moves it to the queue's
// dead-letter exchange (here the default exchange, routing to a DLQ, set by
// a policy).
func TestAmqpNativeDeadLetterReject(t *testing.T) {
	url := amqpURL(t)
	node := testenv.SharedRabbitMQ(t)
	ns := startNATS(t)
	src, dlx := amqpQueueName(t, "src"), amqpQueueName(t, "dlx")
	policy := "qb-e2e-dlx-" + src
	if _, ok := amqpRabbitctl(t, node, "set_policy", policy, "^"+src+"$",
		fmt.Sprintf(`{"dead-letter-exchange":"","dead-letter-routing-key":"%s"}`, dlx), "--apply-to", "queues"); !ok {
		t.FailNow()
	}
	t.Cleanup(func() { amqpRabbitctl(t, node, "clear_policy", policy) })
	dlxRcv := amqpReceiver(t, url, "/queue/"+dlx) // declares the DLQ
	d := startDaemon(t, fmt.Sprintf(`
pipeline "native-dl" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "nats" {
    url     = %q
    subject = "e2e.native.{group}"
  }
  mapping { group_key = "{attr.x}" }
  dead_letter { native = true }
}
`, url, "/queue/"+src, ns.ClientURL()))
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, _ := nc.SubscribeSync("e2e.native.*")
	nc.Flush()
	good := amqpText("good", "ok")
	good.ApplicationProperties = map[string]any{"x": "acme"}
	amqpSendAll(t, amqpSender(t, url, "/queue/"+src), amqpText("no-x", "lacks x"), good)
	if m, err := sub.NextMsg(15 * time.Second); err != nil || m.Subject != "e2e.native.acme" {
		t.Fatalf("good message: %v %v", m, err)
	}
	dead := amqpReceiveN(t, dlxRcv, 1, 15*time.Second)[0]
	if amqpID(dead) != "no-x" || string(dead.GetData()) != "lacks x" {
		t.Errorf("dead-lettered by RabbitMQ: %v %q", dead.Properties, dead.GetData())
	}
	t.Logf("RabbitMQ's dead letter: annotations %v application properties %v", dead.Annotations, dead.ApplicationProperties)
	if got := d.metricReaches(1, "qbridge_messages_dead_lettered_total", "reason=mapping"); got != 1 {
		t.Errorf("dead_lettered{mapping} = %v", got)
	}
	if !amqpLogHas(d, "no-x") && !amqpLogHas(d, "dead") {
		t.Log("no log line names the dead letter")
	}
	// gone from the source queue: nothing comes back after the daemon stops
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	amqpExpectNone(t, amqpReceiver(t, url, "/queue/"+src), 300*time.Millisecond)
}

// 4. RabbitMQ restarted (stop_app / start_app) in the middle of 1,000
// messages flowing AMQP → NATS: nothing lost; duplicates (at-least-once)
// are counted and reported. On the restart node, so that the tests of
// other packages running now never see the restart.
func TestAmqpBrokerRestartMidStream(t *testing.T) {
	node := testenv.RabbitMQForRestart(t)
	url := node.URL
	ns := startNATS(t)
	name := amqpQueueName(t, "durable")
	node.DeclareQueue(t, name, false)
	addr := "/amq/queue/" + name
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("e2e.restart")
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	nc.Flush()
	d := startDaemon(t, fmt.Sprintf(`
pipeline "restart" {
  source "amqp" {
    url                   = %q
    address               = %q
    reconnect_backoff     = "100ms"
    reconnect_backoff_max = "1s"
  }
  sink "nats" {
    url     = %q
    subject = "e2e.restart"
  }
}
`, url, addr, ns.ClientURL()))

	const n = 1000
	// The producer: qbridge's own AMQP sink adapter (it reconnects), paced
	// at ~400 msg/s, retrying every failed message.
	snk, err := amqpadapter.NewSink(amqpCtx(t, 15*time.Second), amqpadapter.SinkConfig{ConnConfig: amqpadapter.ConnConfig{URL: url, ReconnectBackoff: "100ms", ReconnectBackoffM: "1s"}, Address: addr}, nil, amqpDiscardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close(context.Background())
	ctx := amqpCtx(t, 90*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		pending := make([]*mapping.Message, n)
		for i := range pending {
			pending[i] = &mapping.Message{ID: fmt.Sprintf("r%04d", i), Body: []byte("x")}
		}
		for len(pending) > 0 && ctx.Err() == nil {
			batch := pending[:min(20, len(pending))]
			var retry []*mapping.Message
			for i, err := range snk.Send(ctx, batch) {
				if err != nil {
					retry = append(retry, batch[i])
				}
			}
			pending = append(retry, pending[len(batch):]...)
			// Paced, so that the broker's restart hits the producer too
			// (part of the scenario, not a wait).
			time.Sleep(50 * time.Millisecond)
		}
	})
	seen := map[string]int{}
	dups := 0
	restarted := false
	var down time.Duration
	t0 := time.Now()
	for len(seen) < n {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("after %d of %d: %v", len(seen), n, err)
		}
		id := m.Header.Get("Nats-Msg-Id")
		if seen[id]++; seen[id] > 1 {
			dups++
		}
		if !restarted && len(seen) >= 150 {
			restarted = true
			wg.Go(func() {
				t1 := time.Now()
				if _, ok := amqpRabbitctl(t, node, "stop_app"); ok {
					time.Sleep(500 * time.Millisecond) // the outage lasts at least this long
				}
				amqpRabbitctl(t, node, "start_app")
				down = time.Since(t1)
			})
		}
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if seen[fmt.Sprintf("r%04d", i)] == 0 {
			t.Errorf("r%04d lost", i)
		}
	}
	// late duplicates
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		if id := m.Header.Get("Nats-Msg-Id"); seen[id] > 0 {
			dups++
		}
	}
	if c := strings.Count(d.Logs(), `"msg":"amqp source: connected"`); c < 2 {
		t.Errorf("the source connected %d times: the restart did not reach it", c)
	}
	restarts := d.metric("qbridge_source_restarts_total")
	t.Logf("%d messages across a RabbitMQ restart (stop_app..start_app %v) in %v: %d duplicates, %v source restarts, %v received, %v sent, %v acked",
		n, down.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), dups, restarts,
		d.metric("qbridge_messages_received_total"), d.metric("qbridge_messages_sent_total"), d.metric("qbridge_messages_acked_total"))
	d.waitReady(30 * time.Second)
}

// 5. Poison messages: application properties of type decimal128 and char
// (raw AMQP bytes, as a .NET producer writes them) between good messages.
// The source's decode guard hands exactly those deliveries to the engine as
// undecodable: they reach the dead-letter sink (raw bytes, reason corrupt,
// a description naming the type) and are counted; the good ones flow on
// in order.
func TestAmqpPoisonMessages(t *testing.T) {
	url := amqpURL(t)
	a, b := "/queue/"+amqpQueueName(t, "a"), "/queue/"+amqpQueueName(t, "b")
	dlq := "/queue/" + amqpQueueName(t, "dlq")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "poison" {
  source "amqp" {
    url     = %[1]q
    address = %[2]q
  }
  sink "amqp" {
    url     = %[1]q
    address = %[3]q
  }
  dead_letter {
    sink "amqp" {
      url     = %[1]q
      address = %[4]q
    }
  }
}
`, url, a, b, dlq))
	good := amqpSender(t, url, a)
	raw := amqpPoisonSender(t, url, a)
	amqpSendAll(t, good, amqpText("good-1", "one"))
	amqpSendAll(t, raw,
		&amqp.Message{Properties: &amqp.MessageProperties{MessageID: "poison-decimal"}, ApplicationProperties: map[string]any{"price": amqpMagicUUID}, Data: [][]byte{[]byte("x")}},
		&amqp.Message{Properties: &amqp.MessageProperties{MessageID: "poison-char"}, ApplicationProperties: map[string]any{"grade": amqpMagicInt}, Data: [][]byte{[]byte("y")}})
	amqpSendAll(t, good, amqpText("good-2", "two"))

	got := amqpReceiveN(t, amqpReceiver(t, url, b), 2, 20*time.Second)
	if amqpID(got[0]) != "good-1" || amqpID(got[1]) != "good-2" {
		t.Fatalf("got %s, %s", amqpID(got[0]), amqpID(got[1]))
	}
	for _, want := range [][]string{
		{"cannot be decoded", "poison-decimal", "decimal128 not implemented"},
		{"cannot be decoded", "poison-char", "char not implemented"},
	} {
		if !amqpLogHas(d, want...) {
			t.Errorf("no log line with %q", want)
		}
	}
	r, s := d.metric("qbridge_messages_received_total"), d.metric("qbridge_messages_sent_total")
	if s != 2 {
		t.Errorf("sent %v, want 2", s)
	}
	// The source hands each poison message to the engine as undecodable
	// (driver.DecodeErrorer): it reaches the dead-letter sink as the raw
	// AMQP bytes of the message, with reason corrupt and a description
	// naming the type, in its place between the good ones.
	dead := amqpReceiveN(t, amqpReceiver(t, url, dlq), 2, 20*time.Second)
	for i, want := range [][2]string{
		{"poison-decimal", "application-properties: decimal128 not implemented by go-amqp"},
		{"poison-char", "application-properties: char not implemented by go-amqp"},
	} {
		m := dead[i]
		reason, _ := m.ApplicationProperties["DeadLetterReason"].(string)
		desc, _ := m.ApplicationProperties["DeadLetterErrorDescription"].(string)
		if amqpID(m) != want[0] || reason != "corrupt" || !strings.Contains(desc, want[1]) {
			t.Errorf("dead letter %d: id %q, DeadLetterReason %q, DeadLetterErrorDescription %q; want %s, corrupt, %q",
				i, amqpID(m), reason, desc, want[0], want[1])
		}
		if m.Properties == nil || m.Properties.ContentType == nil || *m.Properties.ContentType != "application/vnd.qbridge.amqp-message" ||
			len(m.Data) != 1 || !bytes.Contains(m.Data[0], []byte(want[0])) {
			t.Errorf("dead letter %d: not the raw message: %+v %q", i, m.Properties, m.Data)
		}
		t.Logf("%s dead-lettered: %s: %s (%d raw bytes)", want[0], reason, desc, len(m.GetData()))
	}
	if raw := dead[0].GetData(); !bytes.Contains(raw, append([]byte{0x94}, amqpMagicUUID[:]...)) {
		t.Errorf("the dead letter lost the decimal128: % x", raw)
	}
	// the copy is confirmed just before the engine counts it
	dl := d.metric("qbridge_messages_dead_lettered_total", "reason=corrupt")
	for deadline := time.Now().Add(5 * time.Second); dl < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		dl = d.metric("qbridge_messages_dead_lettered_total", "reason=corrupt")
	}
	t.Logf("metrics: received %v, sent %v, dead_lettered{corrupt} %v", r, s, dl)
	if r != 4 || dl != 2 {
		t.Errorf("received %v, dead-lettered (corrupt) %v; want 4 and 2", r, dl)
	}
	// settled (accepted after the dead-letter copy), so gone from the
	// source queue for good, and nothing more in the dead-letter queue
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	amqpExpectNone(t, amqpReceiver(t, url, a), 300*time.Millisecond)
	amqpExpectNone(t, amqpReceiver(t, url, dlq), 300*time.Millisecond)
}

// The example configurations are accepted by `qbridge validate` once their
// required environment variables are set, and refused (naming the
// variable) without them.
func TestAmqpExampleConfigsValidate(t *testing.T) {
	files := []string{"../configs/amqp-to-nats.hcl", "../configs/nats-to-amqp.hcl", "../configs/amqp-to-sqs.hcl"}
	t.Setenv("QBRIDGE_AMQP_URL", "")
	if code, _, stderr := runQbridge(t, append([]string{"validate"}, files...)...); code == 0 || !strings.Contains(stderr, "QBRIDGE_AMQP_URL") {
		t.Errorf("validate without the environment: exit %d\n%s", code, stderr)
	}
	t.Setenv("QBRIDGE_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672")
	t.Setenv("QBRIDGE_AMQP_TO_SQS_QUEUE_URL", "https://sqs.eu-west-1.amazonaws.com/123456789012/orders")
	code, stdout, stderr := runQbridge(t, append([]string{"validate"}, files...)...)
	if code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, stdout, stderr)
	}
}
