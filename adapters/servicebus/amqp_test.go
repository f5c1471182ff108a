package servicebus

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

var uuid1 = [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}

// everyValue is one attribute of every kind the model has.
func everyValue() []mapping.Value {
	return []mapping.Value{
		mapping.String("text"), mapping.String("x").WithLabel("custom"), mapping.Symbol("sym"),
		mapping.Number("42"), mapping.Number("1.50"), mapping.Number("123456789012345678901234567890"),
		mapping.Binary([]byte{0, 1}), mapping.Binary([]byte{1}).WithLabel("png"), mapping.Bool(true),
		mapping.Int8(-1), mapping.Int16(-300), mapping.Int32(42), mapping.Int64(math.MinInt64),
		mapping.Uint8(255), mapping.Uint16(65535), mapping.Uint32(math.MaxUint32), mapping.Uint64(math.MaxUint64),
		mapping.Float32(1.25), mapping.Float64(math.Pi), mapping.Float64(math.Inf(-1)), mapping.Float64(0.1).WithLabel("float"),
		mapping.Decimal(mapping.KindDecimal128, "79228162514264337593543950335"), mapping.Char('€'),
		mapping.Timestamp(time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)), mapping.UUID(uuid1),
		mapping.URI("https://example.com/"),
		mapping.DateTimeOffset(time.Date(2024, 5, 6, 7, 8, 9, 1234567*100, time.UTC)),
		mapping.TimeSpan(-90*time.Minute - 100), mapping.Strings("a", "b"),
		mapping.List(mapping.Int32(1), mapping.URI("u")), mapping.Map(mapping.String("k"), mapping.TimeSpanTicks(1)),
		mapping.Null(),
	}
}

// fullMessage sets every model field a sink writes.
func fullMessage(id string) *mapping.Message {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6e6, time.UTC)
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tr.State = "k=v"
	m := &mapping.Message{
		Body: []byte(`{"order":1}`), BodyType: mapping.BodyData,
		ID: id, CorrelationID: "corr-1", ContentType: "application/json", ContentEncoding: "gzip",
		Subject: "subject", To: "to", ReplyTo: "reply", ReplyToGroup: "reply-group", GroupKey: "g1", GroupSequence: 7,
		PartitionKey: "g1", ViaPartitionKey: "via", UserID: []byte("user"), TTL: 90 * time.Minute,
		CreationTime: at, AbsoluteExpiry: at.Add(2 * time.Hour), Durable: true, Priority: ptr(uint8(9)), FirstAcquirer: true,
		Trace: tr, Annotations: []mapping.Attribute{{Name: "x-custom", Value: mapping.Symbol("v")}},
	}
	for i, v := range everyValue() {
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: "a" + string(rune('A'+i/26)) + string(rune('a'+i%26)), Value: v})
	}
	return m
}

// Send → receive over AMQP: every broker property, header field and typed
// application property comes back as it was sent, and the broker's facts
// are read.
func TestRoundTripEveryProperty(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("roundtrip")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, _ := newTestSource(t, SourceConfig{Queue: q})
	variants := map[string]*mapping.Message{
		"full":  fullMessage("full-1"),
		"dedup": func() *mapping.Message { m := fullMessage("id-2"); m.DedupID = "dedup-2"; return m }(),
		"text":  {ID: "text-3", Body: []byte("hello"), BodyType: mapping.BodyText},
		"empty": {},
		"value": {ID: "value-5", BodyType: mapping.BodyValue, Body: []byte(`{"type":"map","value":[{"type":"string","value":"k"},{"type":"long","value":"1"}]}`)},
	}
	names := []string{"full", "dedup", "text", "empty", "value"}
	var msgs []*mapping.Message
	for _, n := range names {
		msgs = append(msgs, variants[n])
	}
	before := time.Now().Add(-time.Second)
	sendAll(t, snk, msgs...)
	ds := receiveN(t, src, len(msgs), 20*time.Second)
	// Messages of different partitions (SessionId g1 and none) are sent in
	// separate batches: match by id.
	byID := map[string]driver.Delivery{}
	for _, d := range ds {
		byID[d.Message().ID] = d
	}
	for i, want := range msgs {
		d, ok := byID[want.ID]
		if want.ID == "" {
			for id, dd := range byID { // a batch gives a message without id one (the SDK)
				if !slices.ContainsFunc(msgs, func(m *mapping.Message) bool { return m.ID == id }) {
					d, ok = dd, true
					want = want.Clone()
					want.ID = id
				}
			}
		}
		t.Run(names[i], func(t *testing.T) {
			if !ok {
				t.Fatalf("not received")
			}
			got := d.Message()
			if de, ok := d.(driver.DecodeErrorer); ok && de.DecodeError() != nil {
				t.Fatalf("decode error: %v", de.DecodeError())
			}
			// first-acquirer is the broker's to set on delivery (the test
			// server sets it on a first delivery, as AMQP says)
			want = want.Clone()
			want.FirstAcquirer = got.FirstAcquirer
			mappingtest.Check(t, want, got)
			s := got.Source
			if s.Protocol != "servicebus" || s.Address != q || s.DeliveryCount != 1 || s.SequenceNumber == "" ||
				s.LockToken == "" || s.EnqueuedTime.Before(before) || !s.LockedUntil.After(time.Now()) {
				t.Errorf("source facts %+v", s)
			}
			if _, ok := d.(driver.DeadLetterer); !ok {
				t.Error("a queue delivery must be a DeadLetterer")
			}
		})
	}
	ack(t, ds...)
	expectNone(t, src, 300*time.Millisecond)
}

// Complete, abandon (delivery count grows) and dead-letter (with reason
// and description), then the dead-letter queue read with sub_queue.
func TestSettlement(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("settle")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 3})
	sendAll(t, snk, textMsg("complete"), textMsg("abandon"), textMsg("deadletter"))
	ds := receiveN(t, src, 3, 20*time.Second)
	if got := ids(ds); !slices.Equal(got, []string{"complete", "abandon", "deadletter"}) {
		t.Fatalf("order %v", got)
	}
	ack(t, ds[0])
	if err := ds[0].Ack(ctxT(t, time.Second)); err != errSettled {
		t.Fatalf("second ack: %v", err)
	}
	if err := ds[1].Nack(ctxT(t, 10*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if err := ds[2].(driver.DeadLetterer).DeadLetter(ctxT(t, 10*time.Second), "BadPayload", "field x is missing"); err != nil {
		t.Fatal(err)
	}
	again := receiveN(t, src, 1, 20*time.Second)[0]
	if m := again.Message(); m.ID != "abandon" || m.Source.DeliveryCount != 2 {
		t.Fatalf("redelivery: %s delivery count %d", m.ID, m.Source.DeliveryCount)
	}
	ack(t, again)
	expectNone(t, src, 300*time.Millisecond)

	dlq, _ := newTestSource(t, SourceConfig{Queue: q, SubQueue: "deadletter"})
	d := receiveN(t, dlq, 1, 20*time.Second)[0]
	m := d.Message()
	if m.ID != "deadletter" || m.Source.DeadLetterReason != "BadPayload" || m.Source.DeadLetterDesc != "field x is missing" ||
		m.Source.Address != q+"/$DeadLetterQueue" || string(m.Body) != "body of deadletter" {
		t.Fatalf("dead-lettered message %+v", m)
	}
	if _, ok := m.Attr("DeadLetterReason"); ok {
		t.Error("DeadLetterReason must be a source fact, not a user attribute")
	}
	if _, ok := d.(driver.DeadLetterer); ok {
		t.Error("a dead-letter queue delivery cannot be dead-lettered again")
	}
	ack(t, d)
	expectNone(t, dlq, 300*time.Millisecond)
}

// A slow consumer calling Extend keeps the message: it is not redelivered
// while the lock (2 s) is renewed for three lock durations; without Extend
// it comes back after the lock expires.
func TestLockRenewal(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("renew")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	other, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	sendAll(t, snk, textMsg("slow"))
	d := receiveN(t, src, 1, 10*time.Second)[0]
	first := d.Message().Source.LockedUntil
	stop := time.Now().Add(6 * time.Second)
	for time.Now().Before(stop) {
		if err := d.Extend(ctxT(t, 5*time.Second), time.Minute); err != nil {
			t.Fatalf("extend: %v", err)
		}
		expectNone(t, other, 700*time.Millisecond)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("ack after 6 s of a 2 s lock: %v", err)
	}
	t.Logf("lock first until %s, acked at %s", first.Format(time.TimeOnly), time.Now().Format(time.TimeOnly))
	expectNone(t, other, 500*time.Millisecond)

	// without Extend the lock lapses and the message comes back
	sendAll(t, snk, textMsg("lapse"))
	d = receiveN(t, src, 1, 10*time.Second)[0]
	again := receiveN(t, other, 1, 10*time.Second)[0]
	// (at least 2: an idle SDK receiver releases what arrives on credit
	// left from a receive call that timed out, which counts as a delivery)
	if again.Message().ID != "lapse" || again.Message().Source.DeliveryCount < 2 {
		t.Fatalf("redelivery %s count %d", again.Message().ID, again.Message().Source.DeliveryCount)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("ack with a lapsed lock: %v", err)
	}
	ack(t, again)
}

// Opening a source connects: an unreachable namespace fails the open,
// which the engine logs and /readyz shows, instead of a source that said
// ready until its first receive failed, some 50 s later.
func TestSourceOpenConnects(t *testing.T) {
	t.Parallel()
	cfg := SourceConfig{Queue: "q", ConnConfig: fastConn()}
	cfg.ConnectionString = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
	log, lb := testLog(t)
	src, err := NewSource(ctxT(t, 2*time.Minute), cfg, log)
	if err == nil {
		_ = src.Close(ctxT(t, 10*time.Second))
		t.Fatal("NewSource of an unreachable namespace succeeded")
	}
	if !strings.Contains(err.Error(), "servicebus source: q:") {
		t.Errorf("err = %v", err)
	}
	// While the SDK retried (about 50 s with its default retries) the log
	// said nothing of why: the first failed dial is logged at once.
	if logs := lb.String(); strings.Count(logs, "cannot connect to the namespace") != 1 || !strings.Contains(logs, "connection refused") {
		t.Errorf("want the failed dial logged once, with its error; log:\n%s", logs)
	}
}
