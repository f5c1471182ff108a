package amqp

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// Tests against the real RabbitMQ 3.10 (AMQP 1.0 plugin) started by
// e2e/brokers/up.sh; each test uses its own queue. What RabbitMQ 3.x cannot
// show (Modify, delivery-count, group pinning, credit > 1 on a backlog) is
// covered by unit tests and listed in docs/adapter-amqp.md.

func allTypesMessage() *mapping.Message {
	prio := uint8(7)
	created := time.UnixMilli(1_700_000_000_123).UTC()
	return &mapping.Message{
		Body:            []byte(`{"order":42}`),
		BodyType:        mapping.BodyData,
		ID:              "msg-1",
		CorrelationID:   "corr-1",
		ContentType:     "application/json",
		ContentEncoding: "identity-ish",
		Subject:         "order.created",
		To:              "/queue/elsewhere",
		ReplyTo:         "/queue/replies",
		ReplyToGroup:    "reply-group",
		GroupKey:        "customer-7",
		GroupSequence:   3,
		DedupID:         "dedup-1",
		UserID:          []byte("guest"), // RabbitMQ checks user-id against the login
		TTL:             time.Hour,
		CreationTime:    created,
		AbsoluteExpiry:  created.Add(2 * time.Hour),
		Durable:         true,
		Priority:        &prio,
		Annotations: []mapping.Attribute{
			{Name: "x-opt-custom", Value: mapping.String("annotated")},
			{Name: "x-opt-num", Value: mapping.Int64(99)},
		},
		Trace: mapping.Trace{TraceID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Flags: 1, State: "vendor=x"},
		Attributes: []mapping.Attribute{
			{Name: "a-string", Value: mapping.String("héllo")},
			{Name: "b-int32", Value: mapping.Int32(-42)},
			{Name: "c-int64", Value: mapping.Int64(1 << 40)},
			{Name: "d-double", Value: mapping.Float64(3.25)},
			{Name: "e-bool", Value: mapping.Bool(true)},
			{Name: "f-timestamp", Value: mapping.TimestampMillis(1_700_000_000_456)},
			{Name: "g-uuid", Value: mapping.UUID([16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
			{Name: "h-binary", Value: mapping.Binary([]byte{0, 1, 2, 0xff})},
			{Name: "i-ubyte", Value: mapping.Uint8(200)},
			{Name: "j-ushort", Value: mapping.Uint16(60000)},
			{Name: "k-uint", Value: mapping.Uint32(4_000_000_000)},
			{Name: "l-ulong", Value: mapping.Uint64(1 << 63)},
			{Name: "m-byte", Value: mapping.Int8(-7)},
			{Name: "n-short", Value: mapping.Int16(-30000)},
			{Name: "o-float", Value: mapping.Float32(1.5)},
			{Name: "p-symbol", Value: mapping.Symbol("a-symbol")},
			{Name: "q-null", Value: mapping.Null()},
			{Name: "r-number", Value: mapping.Number("12345678901234567890.5")},
			{Name: "s-decimal", Value: mapping.Decimal(mapping.KindDecimal128, "79.99")},
		},
	}
}

// normalize clears what the trip legitimately changes: the source facts,
// and first-acquirer (set by the broker on delivery).
func normalize(m *mapping.Message) *mapping.Message {
	c := m.Clone()
	c.Source = mapping.Source{}
	c.FirstAcquirer = false
	// nil and empty are the same message
	if len(c.Body) == 0 {
		c.Body = nil
	}
	if len(c.UserID) == 0 {
		c.UserID = nil
	}
	if len(c.Attributes) == 0 {
		c.Attributes = nil
	}
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	return c
}

func TestRoundTripAllTypes(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})

	text := &mapping.Message{Body: []byte("plain text"), BodyType: mapping.BodyText, ID: "text"}
	value := &mapping.Message{Body: []byte(`{"kind":"map","value":[{"kind":"string","value":"k"},{"kind":"long","value":"5"}]}`), BodyType: mapping.BodyValue, ID: "value"}
	msgs := []*mapping.Message{allTypesMessage(), text, value, {ID: "empty", Durable: true}}
	for _, m := range msgs {
		m.Durable = true // the sink's default; the model must then match exactly
	}
	sendAll(t, snk, msgs)
	for i := range msgs {
		// credit 1 on RabbitMQ 3.x: one unsettled message at a time
		d := receiveN(t, src, 1, 10*time.Second)[0]
		m := d.Message()
		if m.Source.Protocol != "amqp" || m.Source.Address != q || m.Source.DeliveryCount != 1 {
			t.Errorf("message %d: source facts %+v", i, m.Source)
		}
		want := normalize(msgs[i])
		if !reflect.DeepEqual(normalize(m), want) {
			t.Errorf("message %d changed in the trip:\n got %+v\nwant %+v", i, normalize(m), want)
			for j := range want.Attributes {
				if j < len(m.Attributes) && !reflect.DeepEqual(m.Attributes[j], want.Attributes[j]) {
					t.Errorf("  attribute %s: got %#v want %#v", want.Attributes[j].Name, m.Attributes[j], want.Attributes[j])
				}
			}
		}
		if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	expectNone(t, src, 300*time.Millisecond)
}

// The wire as a plain go-amqp client sees it: header durable/ttl, every
// property, annotations and typed application properties.
func TestSinkWireForm(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	m := allTypesMessage()
	m.Durable = false // the sink forces durable
	sendAll(t, snk, []*mapping.Message{m})
	got := rawReceive(t, url, q, 10*time.Second)
	if got == nil {
		t.Fatal("nothing received")
	}
	h, p := got.Header, got.Properties
	if h == nil || !h.Durable || h.TTL != time.Hour || h.Priority != 7 {
		t.Fatalf("header %+v", h)
	}
	if p == nil || p.MessageID != "msg-1" || p.CorrelationID != "corr-1" || *p.Subject != "order.created" || *p.GroupID != "customer-7" ||
		*p.ReplyToGroupID != "reply-group" || *p.ContentType != "application/json" || *p.To != "/queue/elsewhere" ||
		*p.ReplyTo != "/queue/replies" || *p.GroupSequence != 3 || string(p.UserID) != "guest" ||
		!p.CreationTime.Equal(time.UnixMilli(1_700_000_000_123)) {
		t.Fatalf("properties %+v", p)
	}
	if got.Annotations["x-opt-custom"] != "annotated" || got.Annotations["x-opt-num"] != int64(99) {
		t.Fatalf("annotations %v", got.Annotations)
	}
	ap := got.ApplicationProperties
	for k, want := range map[string]any{
		"a-string": "héllo", "b-int32": int32(-42), "c-int64": int64(1 << 40), "d-double": 3.25, "e-bool": true,
		"f-timestamp": time.UnixMilli(1_700_000_000_456), "g-uuid": amqp.UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		"h-binary": []byte{0, 1, 2, 0xff}, "i-ubyte": uint8(200), "j-ushort": uint16(60000), "k-uint": uint32(4_000_000_000),
		"l-ulong": uint64(1 << 63), "m-byte": int8(-7), "n-short": int16(-30000), "o-float": float32(1.5), "q-null": nil,
	} {
		v, ok := ap[k]
		if tm, isTime := want.(time.Time); isTime {
			if gt, _ := v.(time.Time); !ok || !gt.Equal(tm) {
				t.Errorf("%s: %#v", k, v)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("application property %s: got %#v (%T), want %#v", k, v, v, want)
		}
	}
	if !strings.HasPrefix(fmt.Sprint(ap["traceparent"]), "00-0102030405060708090a0b0c0d0e0f10-") {
		t.Errorf("traceparent %v", ap["traceparent"])
	}
}

// The header ttl is honoured by the broker: an expired message never arrives.
func TestTTLExpiry(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q}) // declares the queue
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	short := textMsg("short")
	short.TTL = 50 * time.Millisecond
	// The source holds credit 1: keep it busy with a first message so the
	// short-lived one waits in the queue.
	sendAll(t, snk, []*mapping.Message{textMsg("first"), short, textMsg("last")})
	first := receiveN(t, src, 1, 10*time.Second)[0]
	// Past the 50 ms TTL on the broker's clock (it runs from the send,
	// before this receive): what is tested is that the broker drops it.
	time.Sleep(300 * time.Millisecond)
	_ = first.Ack(ctxT(t, 5*time.Second))
	next := receiveN(t, src, 1, 10*time.Second)[0]
	if next.Message().ID != "last" {
		t.Fatalf("got %q, want the expired message skipped", next.Message().ID)
	}
	_ = next.Ack(ctxT(t, 5*time.Second))
}

func TestSettlementEffects(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	src, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("ack"), textMsg("nack"), textMsg("dead")})
	ctx := ctxT(t, 30*time.Second)

	d := receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "ack" {
		t.Fatalf("got %s", d.Message().ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "nack" {
		t.Fatalf("got %s", d.Message().ID)
	}
	if err := d.Nack(ctx, 0); err != nil { // auto → release on RabbitMQ 3.x (with a delay it is held: TestNackDelayHoldsWhileTheRestFlows)
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "nack" {
		t.Fatalf("released message not redelivered first: got %s", d.Message().ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if err := d.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.(driver.DeadLetterer).DeadLetter(ctx, "validation-failed", "no customer"); err != nil {
		t.Fatal(err)
	}
	expectNone(t, src, 500*time.Millisecond)
	if !strings.Contains(logs.String(), "Nack releases from now on (RabbitMQ 3.x ends the session on Modify)") {
		t.Errorf("RabbitMQ 3.x not detected:\n%s", logs)
	}
}

// nack = "modify" on RabbitMQ 3.x: every Modify costs the session, but the
// message comes back and the source recovers; auto mode without the product
// check learns from the first refusal and releases from then on.
func TestModifyRefusedNothingLost(t *testing.T) {
	url := brokerURL(t)
	for _, mode := range []string{"modify", "auto-unknown-broker"} {
		t.Run(mode, func(t *testing.T) {
			q := queue(t)
			snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
			cfg := SourceConfig{ConnConfig: ConnConfig{URL: url, ReconnectBackoff: "50ms"}, Address: q, Nack: "modify"}
			if mode != "modify" {
				cfg.Nack = "auto"
			}
			src, logs := newTestSource(t, cfg)
			if mode != "modify" {
				// forget the product check: behave as with an unknown broker
				src.pol.refused.Store(false)
			}
			sendAll(t, snk, []*mapping.Message{textMsg("m1"), textMsg("m2")})
			ctx := ctxT(t, 30*time.Second)
			for round := 0; round < 3; round++ {
				d := receiveN(t, src, 1, 15*time.Second)[0]
				if d.Message().ID != "m1" {
					t.Fatalf("round %d: got %s, want m1 back", round, d.Message().ID)
				}
				if err := d.Nack(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			for _, want := range []string{"m1", "m2"} {
				d := receiveN(t, src, 1, 15*time.Second)[0]
				if d.Message().ID != want {
					t.Fatalf("got %s, want %s", d.Message().ID, want)
				}
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			expectNone(t, src, 300*time.Millisecond)
			refusals := strings.Count(logs.String(), "link lost") + strings.Count(logs.String(), "Modify")
			if mode == "modify" {
				if src.pol.useModify() != true {
					t.Error("explicit modify mode switched")
				}
			} else if src.pol.useModify() || !strings.Contains(logs.String(), "the peer ended the link after a Modify") {
				t.Errorf("auto mode did not fall back (refusals %d)", refusals)
			}
		})
	}
}

func TestBacklogDrainCredit1(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	const n = 2000
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	msgs := make([]*mapping.Message, n)
	for i := range msgs {
		msgs[i] = textMsg(fmt.Sprintf("m%05d", i))
	}
	t0 := time.Now()
	for i := 0; i < n; i += 200 {
		sendAll(t, snk, msgs[i:i+200])
	}
	sendTime := time.Since(t0)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q}) // credit: auto → 1
	if src.cur.credit != 1 {
		t.Fatalf("credit %d on RabbitMQ 3.x, want 1", src.cur.credit)
	}
	t1 := time.Now()
	ctx := ctxT(t, 60*time.Second)
	for i := 0; i < n; {
		ds, err := src.Receive(ctx, 100)
		if err != nil {
			t.Fatalf("after %d: %v", i, err)
		}
		for _, d := range ds {
			if want := fmt.Sprintf("m%05d", i); d.Message().ID != want {
				t.Fatalf("got %s, want %s", d.Message().ID, want)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			i++
		}
	}
	t.Logf("%d messages: pipelined send %v (%.0f/s), credit-1 receive+ack %v (%.0f/s)",
		n, sendTime.Round(time.Millisecond), n/sendTime.Seconds(), time.Since(t1).Round(time.Millisecond), n/time.Since(t1).Seconds())
	expectNone(t, src, 300*time.Millisecond)
}

// undecodableDelivery checks that d is the delivery of a message that
// cannot be decoded (driver.DecodeErrorer, error containing reason) and
// returns its raw body.
func undecodableDelivery(t *testing.T, d driver.Delivery, addr, id, reason string) []byte {
	t.Helper()
	de, ok := d.(driver.DecodeErrorer)
	if !ok || de.DecodeError() == nil {
		t.Fatalf("%s: not an undecodable delivery: %+v", id, d.Message())
	}
	if err := de.DecodeError(); !strings.Contains(err.Error(), reason) {
		t.Fatalf("%s: decode error %q lacks %q", id, err, reason)
	}
	m := d.Message()
	if m.ID != id || m.ContentType != RawMessageContentType || m.BodyType != mapping.BodyData || len(m.Attributes) != 0 ||
		m.Source.Protocol != "amqp" || m.Source.Address != addr || m.Source.DeliveryCount < 1 {
		t.Fatalf("%s: message %+v", id, m)
	}
	if _, ok := d.(driver.DeadLetterer); !ok {
		t.Fatal("no DeadLetterer")
	}
	return m.Body
}

// Poison messages: a decimal128 and a char application property (a .NET
// producer's decimal or char) between good messages. go-amqp cannot decode
// them; without the guard the link dies on the first one forever. With it,
// each comes out in its place as a driver.DecodeErrorer delivery holding
// the message's raw bytes, for the engine to dead-letter.
func TestPoisonMessagesHandedOver(t *testing.T) {
	url := brokerURL(t)
	decimal := append([]byte{0x94}, magicUUID[:]...)
	char := []byte{0x73, 0x0c, 0x4a, 0x0c, 0x4a}
	for _, guard := range []string{"scan", "full"} {
		t.Run(guard, func(t *testing.T) {
			q := queue(t)
			snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
			rw := &rewriteConn{
				from: [][]byte{append([]byte{0x98}, magicUUID[:]...), {0x71, 0x0c, 0x4a, 0x0c, 0x4a}},
				to:   [][]byte{decimal, char},
			}
			raw := rawSender(t, url, q, rw)
			ctx := ctxT(t, 30*time.Second)
			sendAll(t, snk, []*mapping.Message{textMsg("good-1")})
			if err := raw.Send(ctx, &amqp.Message{Properties: &amqp.MessageProperties{MessageID: "poison-decimal"},
				ApplicationProperties: map[string]any{"price": magicUUID}, Data: [][]byte{[]byte("body-x")}}, nil); err != nil {
				t.Fatal(err)
			}
			if err := raw.Send(ctx, &amqp.Message{Properties: &amqp.MessageProperties{MessageID: "poison-char"},
				ApplicationProperties: map[string]any{"grade": magicInt}, Data: [][]byte{[]byte("body-y")}}, nil); err != nil {
				t.Fatal(err)
			}
			sendAll(t, snk, []*mapping.Message{textMsg("good-2")})

			src, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q, DecodeGuard: guard})
			next := func() driver.Delivery { return receiveN(t, src, 1, 10*time.Second)[0] }
			if d := next(); d.Message().ID != "good-1" || d.(driver.DecodeErrorer).DecodeError() != nil {
				t.Fatalf("got %+v", d.Message())
			} else if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			// Nack (the engine's fallback when its dead-letter copy failed)
			// hands it back: it comes again, still undecodable.
			d := next()
			undecodableDelivery(t, d, q, "poison-decimal", "application-properties: decimal128 not implemented by go-amqp")
			if err := d.Nack(ctx, 0); err != nil {
				t.Fatal(err)
			}
			d = next()
			body := undecodableDelivery(t, d, q, "poison-decimal", "application-properties: decimal128 not implemented by go-amqp")
			if n := d.Message().Source.DeliveryCount; n != 2 {
				t.Errorf("redelivered poison-decimal: DeliveryCount %d, want 2 (the source counts its hand-backs)", n)
			}
			for _, want := range [][]byte{decimal, []byte("poison-decimal"), []byte("price"), []byte("body-x")} {
				if !bytes.Contains(body, want) {
					t.Errorf("raw body lacks % x:\n% x", want, body)
				}
			}
			if err := d.(driver.DeadLetterer).DeadLetter(ctx, "corrupt", "cannot decode"); err != nil {
				t.Fatal(err)
			}
			d = next()
			body = undecodableDelivery(t, d, q, "poison-char", "application-properties: char not implemented by go-amqp")
			if !bytes.Contains(body, char) || !bytes.Contains(body, []byte("body-y")) {
				t.Errorf("raw body % x", body)
			}
			if err := d.(driver.DeadLetterer).DeadLetter(ctx, "corrupt", "cannot decode"); err != nil {
				t.Fatal(err)
			}
			if d := next(); d.Message().ID != "good-2" || d.(driver.DecodeErrorer).DecodeError() != nil {
				t.Fatalf("got %+v", d.Message())
			} else if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			expectNone(t, src, 300*time.Millisecond)
			if n := src.undecodable.Load(); n != 3 {
				t.Errorf("%d undecodable, want 3 (one redelivered)", n)
			}
			if n := src.reconnects.Load(); n != 0 {
				t.Errorf("%d reconnects: the poison killed the link", n)
			}
			l := logs.String()
			for _, want := range []string{"message_id=poison-decimal", "decimal128 not implemented", "message_id=poison-char", "char not implemented"} {
				if !strings.Contains(l, want) {
					t.Errorf("log lacks %q", want)
				}
			}
			// rejected, so gone from the queue for good
			if m := rawReceive(t, url, q, 300*time.Millisecond); m != nil {
				t.Fatalf("left in the queue: %v", m.Properties)
			}
		})
	}
}

// With decode_guard = off the poison message kills the link at the head of
// the queue; the source recovers with backoff and says so (RabbitMQ 3.x
// never dead-letters it: delivery-count does not grow).
func TestPoisonWithoutGuardRecovers(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	rw := &rewriteConn{from: [][]byte{append([]byte{0x98}, magicUUID[:]...)}, to: [][]byte{append([]byte{0x94}, magicUUID[:]...)}}
	raw := rawSender(t, url, q, rw)
	if err := raw.Send(ctxT(t, 10*time.Second), &amqp.Message{ApplicationProperties: map[string]any{"price": magicUUID}, Data: [][]byte{[]byte("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	src, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url, ReconnectBackoff: "20ms", ReconnectBackoffM: "100ms"}, Address: q, DecodeGuard: "off"})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := src.Receive(ctx, 1); err == nil {
		t.Fatal("received the undecodable message")
	}
	if src.reconnects.Load() < 2 || !strings.Contains(logs.String(), "decode_guard = off") {
		t.Fatalf("reconnects %d", src.reconnects.Load())
	}
	if err := src.Ready(context.Background()); err != nil && !strings.Contains(err.Error(), "not connected") {
		t.Fatal(err)
	}
	// The first source stops: while it lives it keeps taking the message
	// back (its reconnects race src2 for it), and a link that went down as
	// its Receive ended pinned the delivery to its open connection.
	if err := src.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// a source with the guard hands it over; dead-lettered, it is gone
	src2, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	d := receiveN(t, src2, 1, 10*time.Second)[0]
	undecodableDelivery(t, d, q, "", "decimal128 not implemented by go-amqp")
	if err := d.(driver.DeadLetterer).DeadLetter(ctxT(t, 10*time.Second), "corrupt", "x"); err != nil {
		t.Fatal(err)
	}
	expectNone(t, src2, 500*time.Millisecond)
}

// A message amqpmap refuses (malformed carry envelope) is handed over the
// same way, its body go-amqp's re-encoding of the message.
func TestMappingRejectHandedOver(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	raw := rawSender(t, url, q, nil)
	if err := raw.Send(ctxT(t, 10*time.Second), &amqp.Message{Properties: &amqp.MessageProperties{MessageID: "bad-envelope"},
		ApplicationProperties: map[string]any{mapping.EnvelopeName: "{not json"}, Value: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	src, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	body := undecodableDelivery(t, d, q, "bad-envelope", "malformed envelope")
	var m amqp.Message
	if err := m.UnmarshalBinary(body); err != nil || m.Value != "x" || m.ApplicationProperties[mapping.EnvelopeName] != "{not json" {
		t.Fatalf("raw body: %v %+v", err, m)
	}
	if err := d.(driver.DeadLetterer).DeadLetter(ctxT(t, 10*time.Second), "corrupt", "x"); err != nil {
		t.Fatal(err)
	}
	expectNone(t, src, 500*time.Millisecond)
	if src.undecodable.Load() != 1 || !strings.Contains(logs.String(), "malformed envelope") {
		t.Fatalf("undecodable %d", src.undecodable.Load())
	}
}

// Filters are sent on attach; RabbitMQ 3.x echoes them (it does not apply a
// JMS selector: what a filter does is the broker's business, whether it is
// accepted is checked from the attach reply).
func TestFiltersAttach(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q, Selector: "color = 'red'", Filters: []FilterConfig{{Name: "jms-selector", Descriptor: "apache.org:selector-filter:string", Value: "size > 3"}}})
	for _, key := range []string{"apache.org:selector-filter:string", "jms-selector"} {
		if src.cur.rcv.LinkSourceFilterValue(key) == nil {
			t.Errorf("filter %s not echoed", key)
		}
	}
}

// Target address per message from the template; a message the template
// cannot address or that is too large fails alone, permanently.
func TestSinkAddressTemplateAndLimits(t *testing.T) {
	url := brokerURL(t)
	base := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: base + "-{group}-{attr.region}", MaxMessageSize: 1000})
	ok1 := textMsg("to-a")
	ok1.GroupKey = "a"
	ok1.SetAttr("region", mapping.String("eu"))
	ok2 := textMsg("to-b")
	ok2.GroupKey = "b"
	ok2.SetAttr("region", mapping.String("us"))
	noAttr := textMsg("no-region")
	big := textMsg("too-big")
	big.GroupKey = "a"
	big.SetAttr("region", mapping.String("eu"))
	big.Body = make([]byte, 2000)
	errs := snk.Send(ctxT(t, 20*time.Second), []*mapping.Message{ok1, noAttr, big, ok2})
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("errors %v", errs)
	}
	for i, want := range map[int]string{1: `attribute "region"`, 2: "exceeds the limit of 1000"} {
		if !driver.IsPermanent(errs[i]) || !strings.Contains(errs[i].Error(), want) {
			t.Errorf("message %d: %v, want a permanent error about %s", i, errs[i], want)
		}
	}
	for addr, id := range map[string]string{base + "-a-eu": "to-a", base + "-b-us": "to-b"} {
		if m := rawReceive(t, url, addr, 5*time.Second); m == nil || m.Properties.MessageID != id || m.Properties.GroupID == nil {
			t.Errorf("%s: %+v", addr, m)
		}
	}
	if n := snk.conn.links.Len(); n != 2 {
		t.Errorf("%d sender links cached, want 2", n)
	}
}

// More target addresses than max_links: the least recently used sender is
// evicted and re-attached when needed again.
func TestSinkLinkCacheEviction(t *testing.T) {
	url := brokerURL(t)
	base := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: base + "-{group}", MaxLinks: 2})
	for _, g := range []string{"a", "b", "c", "a", "d", "b"} {
		m := textMsg(g)
		m.GroupKey = g
		sendAll(t, snk, []*mapping.Message{m})
		if n := snk.conn.links.Len(); n > 2 {
			t.Fatalf("%d links cached", n)
		}
	}
	for _, g := range []string{"a", "b"} {
		for i := 0; i < 2; i++ {
			if m := rawReceive(t, url, base+"-"+g, 5*time.Second); m == nil {
				t.Fatalf("%s: message %d missing", g, i)
			}
		}
	}
}

// A durable, named link attaches and receives. RabbitMQ 3.x takes terminus
// durability as queue durability when /queue/NAME declares the queue, so
// the sink asks for a durable target too (else: precondition-failed,
// inequivalent arg 'durable'). Whether a broker keeps a durable
// subscription across reconnects cannot be checked here.
func TestDurableNamedLink(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url, ContainerID: "qbridge-test-container"}, Address: q, Durable: true, LinkName: "qbridge-durable-test", ExpiryTimeout: "60s"})
	if got := src.cur.rcv.LinkName(); got != "qbridge-durable-test" {
		t.Fatalf("link name %q", got)
	}
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q, TargetDurable: true})
	sendAll(t, snk, []*mapping.Message{textMsg("d1")})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// Release (driver.Releaser, the engine's hand-back on shutdown) returns the
// message with the Released outcome: it comes back first, and the broker
// does not count it as a failed delivery.
func TestReleaseHandsBack(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("first"), textMsg("second")})
	ctx := ctxT(t, 30*time.Second)
	d := receiveN(t, src, 1, 10*time.Second)[0]
	r, ok := d.(driver.Releaser)
	if !ok {
		t.Fatal("an AMQP delivery must be a driver.Releaser")
	}
	if d.Message().ID != "first" {
		t.Fatalf("got %s", d.Message().ID)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "first" {
		t.Fatalf("released message not redelivered first: got %s", d.Message().ID)
	}
	if n := d.Message().Source.DeliveryCount; n > 1 {
		t.Errorf("delivery count %d after a release, want it not counted", n)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx); err == nil {
		t.Error("a second settlement of a released delivery succeeded")
	}
}

// A Nack with a delay keeps the message, unsettled, for the delay, and the
// link goes on receiving what is behind it; Close hands a held message back
// at once. Before, RabbitMQ 3.x (credit 1, Release to the head of the
// queue) sent a message nothing takes straight back, about 170 times a
// second, and nothing behind it ever came: a migration moved 5 of 30.
func TestNackDelayHoldsWhileTheRestFlows(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("stuck"), textMsg("behind-1"), textMsg("behind-2")})
	ctx := ctxT(t, 30*time.Second)

	d := receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "stuck" {
		t.Fatalf("got %s", d.Message().ID)
	}
	const delay = 1500 * time.Millisecond
	nacked := time.Now()
	if err := d.Nack(ctx, delay); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(order) < 3 {
		d := receiveN(t, src, 1, 10*time.Second)[0]
		order = append(order, d.Message().ID)
		if d.Message().ID == "stuck" {
			if el := time.Since(nacked); el < delay {
				t.Errorf("the held message came back after %v, before its %v delay", el, delay)
			}
			// held again, for longer than the test: Close must hand it back
			if err := d.Nack(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(order, []string{"behind-1", "behind-2", "stuck"}) {
		t.Fatalf("received %v, want the messages behind the held one first", order)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	d = receiveN(t, again, 1, 10*time.Second)[0]
	if d.Message().ID != "stuck" {
		t.Fatalf("after Close: got %s, want the held message back", d.Message().ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// RabbitMQ 3.x takes no Modify, and a released message comes back with the
// delivery-count it had: every redelivery said DeliveryCount 1, so the
// engine's backoff never grew. The source counts its own hand-backs.
func TestDeliveryCountGrowsWithHandBacks(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("again")})
	ctx := ctxT(t, 30*time.Second)
	for want := 1; want <= 4; want++ {
		d := receiveN(t, src, 1, 10*time.Second)[0]
		if got := d.Message().Source.DeliveryCount; got != want {
			t.Fatalf("delivery %d: DeliveryCount %d", want, got)
		}
		if want == 4 {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err := d.Nack(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if src.redeliv.n["again"] != 0 {
		t.Errorf("the count outlives the acknowledgement: %v", src.redeliv.n)
	}
}

// An address template that renders an address the broker refuses at attach
// (a "/" in the value: RabbitMQ's invalid_destination, amqp:invalid-field)
// fails that message for good; the others of the call are delivered. It was
// retried for ever, the session torn down and rebuilt each time (audit).
func TestSinkTemplatedAddressTheBrokerRefuses(t *testing.T) {
	url := brokerURL(t)
	base := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: base + "-{attr.route}"})
	msgTo := func(body, route string) *mapping.Message {
		m := textMsg(body)
		m.SetAttr("route", mapping.String(route))
		return m
	}
	sendAll(t, snk, []*mapping.Message{msgTo("ok-1", "a")})
	errs := snk.Send(ctxT(t, 20*time.Second), []*mapping.Message{msgTo("bad", "x/../../exchange/amq.topic"), msgTo("other", "b")})
	if !driver.IsPermanent(errs[0]) || !strings.Contains(errs[0].Error(), "refuses the address") {
		t.Fatalf("a refused address: %v, want a permanent error naming it", errs[0])
	}
	// RabbitMQ ended the session: the other message of the call failed
	// with it, and is only retried (the refusal names another address).
	if errs[1] != nil && driver.IsPermanent(errs[1]) {
		t.Fatalf("the call's other message: %v, want no error or a transient one", errs[1])
	}
	// The sink goes on after the refusal (the broker ended the session).
	if errs := snk.Send(ctxT(t, 20*time.Second), []*mapping.Message{msgTo("ok-2", "a")}); errs[0] != nil {
		t.Fatalf("after the refusal: %v", errs[0])
	}
	for _, id := range []string{"ok-1", "ok-2"} {
		if m := rawReceive(t, url, base+"-a", 5*time.Second); m == nil || m.Properties.MessageID != id {
			t.Errorf("want %s: %+v", id, m)
		}
	}
}

// Sends at once (as the engine's batch.concurrency makes them) over more target addresses than max_links: one Send's
// attach pushes out a link that the other is still sending on or waiting
// for outcomes on, and that link must stay attached until the other is done
// with it (it was detached under it: a spurious transient error, so a
// retry and a duplicate).
func TestSinkConcurrentSendsOverMaxLinks(t *testing.T) {
	url := brokerURL(t)
	base := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: base + "-{group}", MaxLinks: 2})
	const workers, rounds, perSend = 2, 10, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				msgs := make([]*mapping.Message, perSend)
				for i := range msgs {
					msgs[i] = textMsg(fmt.Sprintf("w%d-r%d-%d", w, r, i))
					msgs[i].GroupKey = fmt.Sprintf("w%d-%d", w%2, i%4)
				}
				for i, err := range snk.Send(ctxT(t, 60*time.Second), msgs) {
					if err != nil {
						t.Errorf("worker %d round %d message %d: %v", w, r, i, err)
					}
				}
			}
		})
	}
	wg.Wait()
}
