package natsmap

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// A message from a publisher that knows nothing of qbridge.
func TestDecodeForeign(t *testing.T) {
	msg := &nats.Msg{
		Subject: "orders.created",
		Reply:   "_INBOX.abc",
		Data:    []byte("hello"),
		Header: nats.Header{
			"Nats-Msg-Id":          {"order-42"},
			"Nats-Expected-Stream": {"ORDERS"},
			"content-type":         {"text/plain"},
			"traceparent":          {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"tracestate":           {"a=1", "b=2"},
			"Qbridge-Group":        {"acme"},
			"Region":               {"emea"},
			"Tags":                 {"new", "promo"},
			"Empty":                {""},
			"Nothing":              {},
		},
	}
	m, err := Decode(msg, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tr.State = "a=1,b=2"
	want := &mapping.Message{
		Body:        []byte("hello"),
		DedupID:     "order-42",
		ContentType: "text/plain",
		GroupKey:    "acme",
		ReplyTo:     "_INBOX.abc",
		Trace:       tr,
		Annotations: []mapping.Attribute{{Name: "Nats-Expected-Stream", Value: mapping.String("ORDERS")}},
		Attributes: []mapping.Attribute{
			{Name: "Empty", Value: mapping.String("")},
			{Name: "Region", Value: mapping.String("emea")},
			{Name: "Tags", Value: mapping.Strings("new", "promo")},
		},
		Source: mapping.Source{Protocol: "nats", Address: "orders.created", DeliveryCount: 1, PartitionID: -1},
	}
	if d := mappingtest.Diff(want, m, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
	// A custom group header; the default one is then an ordinary header.
	m, err = Decode(msg, DecodeOptions{GroupHeader: "Region"})
	if err != nil || m.GroupKey != "emea" {
		t.Fatalf("%+v %v", m, err)
	}
	if v, ok := m.Attr("Qbridge-Group"); !ok || v.Str() != "acme" {
		t.Fatalf("%v", m.Attributes)
	}
	// A trace header that does not parse stays a user header.
	m, err = Decode(&nats.Msg{Subject: "s", Header: nats.Header{"traceparent": {"garbage"}, "tracestate": {"a=1"}}}, DecodeOptions{})
	if err != nil || !m.Trace.IsZero() || len(m.Attributes) != 2 {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     nats.Header
		field string
	}{
		{"envelope not JSON", nats.Header{"qbridge.envelope": {"nope"}}, mapping.EnvelopeName},
		{"envelope version", nats.Header{"qbridge.envelope": {`{"v":2}`}}, mapping.EnvelopeName},
		{"envelope twice", nats.Header{"qbridge.envelope": {`{"v":1}`, `{"v":1}`}}, `header "qbridge.envelope"`},
		{"content type twice", nats.Header{"Content-Type": {"a"}, "content-type": {"b"}}, ""},
		{"msg id values", nats.Header{"Nats-Msg-Id": {"a", "b"}}, `header "Nats-Msg-Id"`},
		{"group values", nats.Header{"Qbridge-Group": {"a", "b"}}, `header "Qbridge-Group"`},
		{"type does not parse", nats.Header{"qbridge.envelope": {`{"v":1,"types":{"b":"Binary"}}`}, "b": {"not base64!"}}, `header "b"`},
		{"typed, several values", nats.Header{"qbridge.envelope": {`{"v":1,"types":{"n":"Number.int"}}`}, "n": {"1", "2"}}, `header "n"`},
		{"bad body encoding", nats.Header{"qbridge.envelope": {`{"v":1,"body":"rot13"}`}}, "body"},
		{"bad base64 body", nats.Header{"qbridge.envelope": {`{"v":1,"body":"base64"}`}}, "body"},
	} {
		_, err := Decode(&nats.Msg{Subject: "s", Header: tc.h, Data: []byte("!!")}, DecodeOptions{})
		var r *mapping.RejectError
		if !asReject(err, &r) || tc.field != "" && r.Field != tc.field {
			t.Errorf("%s: got %v, want a RejectError on %s", tc.name, err, tc.field)
		}
	}
	if _, err := Decode(nil, DecodeOptions{}); err == nil {
		t.Error("nil message")
	}
}

func TestParseAckSubject(t *testing.T) {
	ts := time.Unix(1700000000, 123456789).UTC()
	for _, tc := range []struct {
		reply string
		want  JetStreamMeta
		ok    bool
	}{
		{"$JS.ACK.ORDERS.worker.2.17.5.1700000000123456789.3",
			JetStreamMeta{Stream: "ORDERS", Consumer: "worker", NumDelivered: 2, StreamSeq: 17, ConsumerSeq: 5, Timestamp: ts, NumPending: 3}, true},
		{"$JS.ACK._.HASH.ORDERS.worker.1.18.6.1700000000123456789.0.rnd",
			JetStreamMeta{Stream: "ORDERS", Consumer: "worker", NumDelivered: 1, StreamSeq: 18, ConsumerSeq: 6, Timestamp: ts}, true},
		{"$JS.ACK.hub.HASH.ORDERS.worker.1.18.6.1700000000123456789.0",
			JetStreamMeta{Domain: "hub", Stream: "ORDERS", Consumer: "worker", NumDelivered: 1, StreamSeq: 18, ConsumerSeq: 6, Timestamp: ts}, true},
		{"$JS.ACK.ORDERS.worker.x.17.5.1.3", JetStreamMeta{}, false},
		{"$JS.ACK.ORDERS.worker.1.2", JetStreamMeta{}, false},
		{"$JS.ACK.a.b.c.1.2.3.4.5", JetStreamMeta{}, false}, // 10 tokens
		{"_INBOX.x", JetStreamMeta{}, false},
		{"", JetStreamMeta{}, false},
	} {
		got, ok := ParseAckSubject(tc.reply)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v", tc.reply, got, ok)
		}
	}
	m, err := Decode(&nats.Msg{Subject: "orders.a", Reply: "$JS.ACK.ORDERS.worker.2.17.5.1700000000123456789.3"}, DecodeOptions{})
	if err != nil || m.Source.SequenceNumber != "17" || m.Source.DeliveryCount != 2 || !m.Source.EnqueuedTime.Equal(ts) || m.ReplyTo != "" {
		t.Fatalf("%+v %v", m.Source, err)
	}
	// Explicit metadata wins.
	m, err = Decode(&nats.Msg{Subject: "s"}, DecodeOptions{JetStream: &JetStreamMeta{StreamSeq: 9, NumDelivered: 4, Timestamp: ts}})
	if err != nil || m.Source.SequenceNumber != "9" || m.Source.DeliveryCount != 4 {
		t.Fatalf("%+v %v", m.Source, err)
	}
}

// The pin nats-server puts on a pinned consumer's deliveries belongs to the
// delivery: a JetStream delivery (metadata given, or a $JS.ACK reply) drops
// it; anywhere else it is an ordinary Nats-* header, an annotation.
func TestDecodePinIDOfJetStreamDelivery(t *testing.T) {
	hdr := nats.Header{"Nats-Pin-Id": {"p1"}, "Nats-Expected-Stream": {"ORDERS"}}
	ack := "$JS.ACK.ORDERS.c.1.7.7.1700000000000000000.0"
	for _, tc := range []struct {
		name  string
		reply string
		opt   DecodeOptions
		want  []string
	}{
		{"metadata given", "", DecodeOptions{JetStream: &JetStreamMeta{Stream: "ORDERS", StreamSeq: 7}}, []string{"Nats-Expected-Stream"}},
		{"ack reply", ack, DecodeOptions{}, []string{"Nats-Expected-Stream"}},
		{"core message", "", DecodeOptions{}, []string{"Nats-Expected-Stream", "Nats-Pin-Id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(&nats.Msg{Subject: "orders.a", Reply: tc.reply, Header: hdr, Data: []byte("x")}, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range m.Annotations {
				got = append(got, a.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("annotations %v, want %v", got, tc.want)
			}
			if _, ok := hdr["Nats-Pin-Id"]; !ok {
				t.Error("Decode changed the message's headers")
			}
		})
	}
}

// TestDecodeBodyMarkers: the envelope's body markers decode as in every
// other codec, "empty" (written by the SQS encoder) included.
func TestDecodeBodyMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, envelope, data, want string
	}{
		{"base64", `{"v":1,"body":"base64"}`, "aGk=", "hi"},
		{"empty", `{"v":1,"body":"empty"}`, "-", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(&nats.Msg{Subject: "s", Header: nats.Header{"qbridge.envelope": {tc.envelope}}, Data: []byte(tc.data)}, DecodeOptions{})
			if err != nil || string(m.Body) != tc.want {
				t.Fatalf("got %v; want the body %q", err, tc.want)
			}
		})
	}
}
