package natsmap

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// fullMessage sets every model field and an attribute of every kind.
func fullMessage() *mapping.Message {
	prio := uint8(7)
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tr.State = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	return &mapping.Message{
		Body:            []byte{0xff, 0x00, 'x'},
		BodyType:        mapping.BodyText,
		ID:              "42",
		IDKind:          mapping.KindUint64,
		CorrelationID:   "701332e1-b37b-4d29-aa0a-e367906c206e",
		CorrelationKind: mapping.KindUUID,
		ContentType:     "text/plain; charset=utf-8",
		ContentEncoding: "identity",
		Subject:         "Grüße",
		To:              "orders.out",
		ReplyTo:         "replies",
		ReplyToGroup:    "reply-session",
		GroupKey:        "acme",
		GroupSequence:   3,
		PartitionKey:    "pk",
		ViaPartitionKey: "via",
		DedupID:         "dedup-1",
		UserID:          []byte("user"),
		TTL:             90*time.Second + 150,
		ScheduledAt:     time.Unix(1299228577, 5e8).UTC(),
		CreationTime:    time.UnixMilli(1299228570001).UTC(),
		AbsoluteExpiry:  time.UnixMilli(1299228670001).UTC(),
		Durable:         true,
		Priority:        &prio,
		FirstAcquirer:   true,
		Annotations:     []mapping.Attribute{{Name: "x-opt-custom", Value: mapping.Int32(1)}},
		Trace:           tr,
		Attributes:      allKinds(),
	}
}

func TestRoundTripAllKinds(t *testing.T) {
	for _, a := range allKinds() {
		m := &mapping.Message{Attributes: []mapping.Attribute{a}}
		msg, err := Encode(m, "s", EncodeOptions{})
		if err != nil {
			t.Errorf("%#v: %v", a.Value, err)
			continue
		}
		back, err := Decode(msg, DecodeOptions{})
		if err != nil {
			t.Errorf("%#v: %v", a.Value, err)
			continue
		}
		if d := mappingtest.Diff(m, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
			t.Errorf("%#v: headers %v: %s", a.Value, msg.Header, d)
		}
	}
}

func TestRoundTripFullMessage(t *testing.T) {
	m := fullMessage()
	msg, err := Encode(m, "orders.out", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(msg, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := m.Clone()
	sortAttributes(want.Attributes)
	want.Source = mapping.Source{Protocol: "nats", Address: "orders.out", DeliveryCount: 1, PartitionID: -1}
	if d := mappingtest.Diff(want, back, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}

// startServer runs a real nats-server (with JetStream) in the test binary.
func startServer(t testing.TB) *nats.Conn {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestOverServer sends through nats.go's wire encoding and a real server:
// core NATS and JetStream (dedup on Nats-Msg-Id, metadata from the ack
// subject).
func TestOverServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	nc := startServer(t)
	m := fullMessage()
	want := m.Clone()
	sortAttributes(want.Attributes)

	sub, err := nc.SubscribeSync("core.>")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := Encode(m, "core.orders", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(got, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want.Source = mapping.Source{Protocol: "nats", Address: "core.orders", DeliveryCount: 1, PartitionID: -1}
	if d := mappingtest.Diff(want, back, mappingtest.WithSource()); len(d) > 0 {
		t.Fatalf("core: %s", d)
	}

	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"js.>"}}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for range 2 { // the second is a duplicate by Nats-Msg-Id
		msg, err := Encode(m, "js.orders", EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	info, err := js.StreamInfo("ORDERS")
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream has %d messages (dedup on Nats-Msg-Id): %v", info.State.Msgs, err)
	}
	ps, err := js.PullSubscribe("js.orders", "w")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ps.Fetch(1, nats.MaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	back, err = Decode(msgs[0], DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := msgs[0].Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if s := back.Source; s.SequenceNumber != strconv.FormatUint(meta.Sequence.Stream, 10) || s.DeliveryCount != 1 ||
		!s.EnqueuedTime.Equal(meta.Timestamp) || s.EnqueuedTime.Before(before.Add(-time.Second)) {
		t.Fatalf("source %+v, metadata %+v", s, meta)
	}
	want.Source = back.Source
	if d := mappingtest.Diff(want, back, mappingtest.WithSource()); len(d) > 0 {
		t.Fatalf("jetstream: %s", d)
	}
}
