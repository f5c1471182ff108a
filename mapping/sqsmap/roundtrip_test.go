package sqsmap

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// kinds holds one value of every kind of the model, with custom labels and
// the values SQS cannot take natively.
func kinds() []mapping.Attribute {
	return []mapping.Attribute{
		at("bin", mapping.Binary([]byte{0, 1, 2, 0xff})),
		at("bin_png", mapping.Binary([]byte{0x89, 'P', 'N', 'G', '\r', '\n'}).WithLabel("png")),
		at("bool", mapping.Bool(true)),
		at("byte", mapping.Int8(-128)),
		at("char", mapping.Char('€')),
		at("char_astral", mapping.Char('🌍')),
		at("dec128", mapping.Decimal(mapping.KindDecimal128, "79228162514264337593543950335")),
		at("dec32", mapping.Decimal(mapping.KindDecimal32, "1.50")),
		at("dec64", mapping.Decimal(mapping.KindDecimal64, "-0.000001")),
		at("double", mapping.Float64(math.Pi)),
		at("double_big", mapping.Float64(1e300)),
		at("double_inf", mapping.Float64(math.Inf(-1))),
		at("double_nan", mapping.Float64(math.NaN())),
		at("dto", mapping.DateTimeOffset(time.Date(2024, 2, 29, 23, 59, 59, 123456700, time.UTC))),
		at("float", mapping.Float64(0.1).WithLabel("float")),
		at("float32", mapping.Float32(1.25)),
		at("int", mapping.Int32(math.MinInt32)),
		at("int_007", mapping.Number("007").WithLabel("int")),
		at("list", mapping.List(mapping.Int32(1), mapping.String("x"), mapping.Null())),
		at("long", mapping.Int64(math.MaxInt64)),
		at("map", mapping.Map(mapping.Symbol("k"), mapping.UUID([16]byte{0xde, 0xad}))),
		at("null", mapping.Null()),
		at("number", mapping.Number("-12345678901234567890123456789.012345678")),
		at("short", mapping.Int16(-300)),
		at("string", mapping.String("plain")),
		at("string_cjk", mapping.String("東京 · Zürich · Привет · 🌍")),
		at("string_ctl", mapping.String("tab\tnul\x00")),
		at("string_label", mapping.String("v").WithLabel("my-type.v2")),
		at("strings", mapping.Strings("a", "b,c", "")),
		at("symbol", mapping.Symbol("amqp:accepted:list")),
		at("timespan", mapping.TimeSpan(-90*time.Minute-time.Microsecond)),
		at("timestamp", mapping.Timestamp(time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC))),
		at("ubyte", mapping.Uint8(255)),
		at("uint", mapping.Uint32(math.MaxUint32)),
		at("ulong", mapping.Uint64(math.MaxUint64)),
		at("uri", mapping.URI("https://example.com/ä?q=1")),
		at("ushort", mapping.Uint16(65535)),
		at("uuid", mapping.UUID([16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00})),
		at("ünïcode-name", mapping.String("värde")),
		at("名前", mapping.String("値")),
	}
}

// TestRoundTripEachKind sends each value on its own (natively where SQS
// can) and checks it comes back equal.
func TestRoundTripEachKind(t *testing.T) {
	for _, a := range kinds() {
		for _, fifo := range []bool{false, true} {
			t.Run(a.Name, func(t *testing.T) {
				m := sqsMsg("body", a)
				m.GroupKey, m.DedupID = "g", "d"
				o := opts(mapping.Encode, nil)
				o.FIFO = fifo
				_, back := roundTrip(t, m, o)
				if !fifo {
					m.GroupKey, m.DedupID = "g", "d" // carried
				}
				if d := diffMessages(m, back); d != "" {
					t.Error(d)
				}
			})
		}
	}
}

// full is a message with every model field set.
func full() *mapping.Message {
	prio := uint8(7)
	tr, _ := mapping.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	tr.State = "rojo=00f067aa0ba902b7"
	return &mapping.Message{
		Body:            []byte(`{"order":42,"note":"Grüße"}`),
		BodyType:        mapping.BodyText,
		ID:              "18446744073709551615",
		IDKind:          mapping.KindUint64,
		CorrelationID:   "corr-1",
		ContentType:     "application/json",
		ContentEncoding: "identity",
		Subject:         "orders.created",
		To:              "queue://orders",
		ReplyTo:         "queue://replies",
		ReplyToGroup:    "session-r",
		GroupKey:        "customer-7",
		GroupSequence:   3,
		PartitionKey:    "pk",
		ViaPartitionKey: "vpk",
		DedupID:         "dedup-1",
		UserID:          []byte("alice"),
		TTL:             90 * time.Minute,
		ScheduledAt:     t0.Add(2*time.Minute + 300*time.Millisecond),
		CreationTime:    t0.Add(-time.Second),
		AbsoluteExpiry:  t0.Add(time.Hour),
		Durable:         true,
		Priority:        &prio,
		FirstAcquirer:   true,
		Annotations:     []mapping.Attribute{at("x-opt-custom", mapping.Symbol("v"))},
		Trace:           tr,
		Attributes:      kinds(),
		Source:          mapping.Source{Protocol: "servicebus", SequenceNumber: "77"},
	}
}

func TestRoundTripFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fifo  bool
		delay int32
	}{{"standard", false, 121}, {"fifo", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			m := full()
			o := opts(mapping.Encode, nil)
			o.FIFO = tc.fifo
			out, back := roundTrip(t, m, o)
			if d := diffMessages(m, back); d != "" {
				t.Error(d)
			}
			if len(out.Attributes) != MaxAttributes || out.DelaySeconds != tc.delay {
				t.Errorf("%d attributes, delay %d", len(out.Attributes), out.DelaySeconds)
			}
			if tc.fifo && (out.GroupID != "customer-7" || out.DedupID != "dedup-1") {
				t.Errorf("group %q dedup %q", out.GroupID, out.DedupID)
			}
			if out.SystemAttributes["AWSTraceHeader"].StringValue == nil {
				t.Errorf("no AWSTraceHeader")
			}
			if back.Source.Protocol != "sqs" || back.Source.DeliveryCount != 1 || !back.Source.EnqueuedTime.Equal(t0) {
				t.Errorf("source %+v", back.Source)
			}
		})
	}
}

func TestRoundTripCarrySource(t *testing.T) {
	m := full()
	m.Attributes = nil
	o := opts(mapping.Reject, nil)
	o.CarrySource = true
	_, back := roundTrip(t, m, o)
	if back.Source.Protocol != "servicebus" || back.Source.SequenceNumber != "77" {
		t.Errorf("source %+v", back.Source)
	}
}

// TestRoundTripDedupFromID: a FIFO send whose dedup id is the ID decodes
// without a DedupID, as it was, when the envelope carries the id; an id
// that is the only thing to carry stays at its native home alone (no
// envelope) and decodes as the dedup id.
func TestRoundTripDedupFromID(t *testing.T) {
	for _, tc := range []struct {
		id, corr string
		atHome   bool
	}{{"amqp-id-1", "", true}, {"amqp-id-1", "c-1", false}, {"id with spaces", "", false}} {
		m := &mapping.Message{Body: []byte("b"), ID: tc.id, CorrelationID: tc.corr, GroupKey: "g", Source: mapping.Source{Protocol: "amqp"}}
		o := opts(mapping.Reject, nil)
		o.FIFO = true
		out, back := roundTrip(t, m, o)
		_, hasEnv := out.Attributes[mapping.EnvelopeName]
		switch {
		case tc.atHome && (hasEnv || out.DedupID != tc.id || back.DedupID != tc.id):
			t.Errorf("%q: envelope %v, sent dedup %q, decoded dedup %q", tc.id, hasEnv, out.DedupID, back.DedupID)
		case !tc.atHome && (out.DedupID == "" || back.DedupID != "" || back.ID != tc.id):
			t.Errorf("%q: sent dedup %q, decoded %q / %q", tc.id, out.DedupID, back.DedupID, back.ID)
		}
	}
}

func TestDeliver(t *testing.T) {
	m := sqsMsg("hello", at("n", mapping.Int32(1)))
	m.GroupKey, m.DedupID = "g", "d"
	m.Trace = mapping.Trace{TraceID: [16]byte{1}, Flags: 1}
	o := opts(mapping.Reject, nil)
	o.FIFO = true
	out, err := Encode(m, o)
	if err != nil {
		t.Fatal(err)
	}
	msg := Deliver(out, "mid", "rh", t0)
	want := map[string]string{
		"SentTimestamp": "1748779200000", "ApproximateReceiveCount": "1", "ApproximateFirstReceiveTimestamp": "1748779200000",
		"MessageGroupId": "g", "MessageDeduplicationId": "d",
		"AWSTraceHeader": "Root=1-01000000-000000000000000000000000;Sampled=1",
	}
	if len(msg.Attributes) != len(want) {
		t.Errorf("system attributes %v", msg.Attributes)
	}
	for k, v := range want {
		if msg.Attributes[k] != v {
			t.Errorf("%s = %q, want %q", k, msg.Attributes[k], v)
		}
	}
	if deref(msg.MD5OfBody) != MD5OfBody("hello") || deref(msg.MD5OfMessageAttributes) != MD5OfAttributes(out.Attributes) ||
		deref(msg.MessageId) != "mid" || deref(msg.ReceiptHandle) != "rh" || deref(msg.Body) != "hello" {
		t.Errorf("message %+v", msg)
	}
	bare := Deliver(&Outbound{Body: "x", DelaySeconds: 5}, "", "", t0)
	if bare.MD5OfMessageAttributes != nil || bare.MessageAttributes != nil || bare.MessageId != nil ||
		bare.Attributes["ApproximateFirstReceiveTimestamp"] != "1748779205000" {
		t.Errorf("bare %+v", bare)
	}
}

// TestSecondHop: SQS → SQS keeps everything, the original id included (it
// is not the SQS message id), and the decoder's attributes are sorted.
func TestSecondHop(t *testing.T) {
	m := full()
	o := opts(mapping.Encode, nil)
	_, hop1 := roundTrip(t, m, o)
	_, hop2 := roundTrip(t, hop1, o)
	if d := diffMessages(hop1, hop2); d != "" {
		t.Error(d)
	}
	if !slices.IsSortedFunc(hop2.Attributes, func(a, b mapping.Attribute) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("attributes not sorted")
	}
}
