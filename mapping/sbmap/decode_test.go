package sbmap

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestDecodeBrokerProperties(t *testing.T) {
	enq := time.Date(2024, 3, 4, 5, 6, 7, 8e6, time.UTC)
	msg := &amqp.Message{
		Header: &amqp.MessageHeader{Priority: 4, DeliveryCount: 2, TTL: time.Hour},
		Annotations: amqp.Annotations{
			AnnotationPartitionKey:           "pk",
			AnnotationViaPartitionKey:        "vpk",
			AnnotationScheduledEnqueueTime:   enq.Add(time.Minute),
			AnnotationEnqueuedTime:           enq,
			AnnotationSequenceNumber:         int64(1<<48 + 5),
			AnnotationEnqueuedSequenceNumber: int64(0),
			AnnotationLockedUntil:            enq.Add(time.Minute),
			AnnotationDeadLetterSource:       "orders",
			AnnotationMessageState:           int32(2),
			AnnotationPartitionID:            int16(3),
			"x-opt-other":                    "kept",
		},
		Properties: &amqp.MessageProperties{MessageID: "id", GroupID: ptr("sess"), AbsoluteExpiryTime: ptr(enq.Add(time.Hour))},
		ApplicationProperties: map[string]any{
			DeadLetterReasonProperty:      "MaxDeliveryCountExceeded",
			DeadLetterDescriptionProperty: "too many",
			"user":                        int32(1),
		},
		Data: [][]byte{[]byte("b")},
	}
	m, err := Decode(overWire(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	want := &mapping.Message{Body: []byte("b"), ID: "id", GroupKey: "sess", PartitionKey: "pk", ViaPartitionKey: "vpk",
		TTL: time.Hour, ScheduledAt: enq.Add(time.Minute),
		Annotations: mappingtest.Attrs("x-opt-other", mapping.String("kept")), Attributes: mappingtest.Attrs("user", mapping.Int32(1))}
	mappingtest.Check(t, want, m)
	wantSrc := mapping.Source{Protocol: "servicebus", EnqueuedTime: enq, SequenceNumber: "281474976710661", DeliveryCount: 3,
		LockedUntil: enq.Add(time.Minute), ExpiresAt: enq.Add(time.Hour), State: 2, PartitionID: 3,
		DeadLetterSource: "orders", DeadLetterReason: "MaxDeliveryCountExceeded", DeadLetterDesc: "too many"}
	if m.Source != wantSrc {
		t.Errorf("source\n%+v\nwant\n%+v", m.Source, wantSrc)
	}
}

func TestDecodeBrokerPropertyEdges(t *testing.T) {
	tests := []struct {
		name  string
		msg   amqp.Message
		check func(*mapping.Message) bool
	}{
		{"annotation of an unexpected type stays an annotation", amqp.Message{Annotations: amqp.Annotations{AnnotationPartitionKey: int32(1), AnnotationSequenceNumber: "x"}},
			func(m *mapping.Message) bool {
				return m.PartitionKey == "" && len(m.Annotations) == 2 && m.Source.SequenceNumber == ""
			}},
		{"state as a long", amqp.Message{Annotations: amqp.Annotations{AnnotationMessageState: int64(1)}},
			func(m *mapping.Message) bool { return m.Source.State == 1 && m.Annotations == nil }},
		{"no partition id", amqp.Message{}, func(m *mapping.Message) bool { return m.Source.PartitionID == -1 }},
		{"non-string dead-letter reason stays an attribute", amqp.Message{ApplicationProperties: map[string]any{DeadLetterReasonProperty: int32(1)}},
			func(m *mapping.Message) bool { return m.Source.DeadLetterReason == "" && len(m.Attributes) == 1 }},
		{"typed dead-letter reason is the user's", amqp.Message{ApplicationProperties: map[string]any{DeadLetterReasonProperty: "mine",
			mapping.EnvelopeName: `{"v":1,"types":{"DeadLetterReason":"String"}}`}},
			func(m *mapping.Message) bool { return m.Source.DeadLetterReason == "" && len(m.Attributes) == 1 }},
		{"the envelope restores AbsoluteExpiry", amqp.Message{Properties: &amqp.MessageProperties{AbsoluteExpiryTime: ptr(time.UnixMilli(5))},
			ApplicationProperties: map[string]any{mapping.EnvelopeName: `{"v":1,"m":{"absoluteExpiry":"2020-01-01T00:00:00Z"}}`}},
			func(m *mapping.Message) bool {
				return m.Source.ExpiresAt.Equal(time.UnixMilli(5)) && m.AbsoluteExpiry.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.msg.Data = [][]byte{nil}
			m, err := Decode(overWire(t, &tt.msg))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(m) {
				t.Errorf("decoded %+v", m)
			}
		})
	}
}

func TestDecodeTrace(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name  string
		props map[string]any
		trace string
		state string
		attrs []string
	}{
		{"Diagnostic-Id", map[string]any{DiagnosticIDProperty: tp, "tracestate": "k=v"}, tp, "k=v", nil},
		{"legacy request id", map[string]any{DiagnosticIDProperty: "|0af7651916cd43dd8448eb211c80319c.b7ad6b7169203331."},
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "", nil},
		{"malformed Diagnostic-Id stays", map[string]any{DiagnosticIDProperty: "x"}, "", "", []string{DiagnosticIDProperty}},
		{"traceparent is a user attribute on Service Bus", map[string]any{"traceparent": tp}, "", "", []string{"traceparent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(overWire(t, &amqp.Message{ApplicationProperties: tt.props, Data: [][]byte{nil}}))
			if err != nil {
				t.Fatal(err)
			}
			if m.Trace.Traceparent() != tt.trace || m.Trace.State != tt.state {
				t.Errorf("trace %q %q, want %q %q", m.Trace.Traceparent(), m.Trace.State, tt.trace, tt.state)
			}
			var names []string
			for _, a := range m.Attributes {
				names = append(names, a.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.attrs, ",") {
				t.Errorf("attributes %v, want %v", names, tt.attrs)
			}
		})
	}
}

// TestDecodeRESTInterop: a message sent over HTTPS (package sbrest) arrives
// over AMQP with the types Service Bus inferred from the header text (every
// integer a long, every float a double, quoted dates DateTime, the rest
// strings) and the envelope recording the original data types. It must
// decode to the model that was sent.
func TestDecodeRESTInterop(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	env := `{"v":1,"types":{"i":"Number.int","u8":"Number.ubyte","f":"Number.float","g":"String.uuid",` +
		`"ts":"Number.timespan","dto":"String.datetime-offset","uri":"String.uri","n":"Number","bin":"Binary.png","c":"String.char"},` +
		`"m":{"idKind":"uuid","bodyType":"text"}}`
	msg := &amqp.Message{
		Properties: &amqp.MessageProperties{MessageID: "12345678-9abc-def0-0123-456789abcdef", ContentType: ptr("text/plain")},
		ApplicationProperties: map[string]any{
			"i": int64(42), "u8": int64(7), "f": 0.5, "g": "12345678-9abc-def0-0123-456789abcdef",
			"ts": 1.5, "dto": "2024-01-01T00:00:00.0000000Z", "uri": "https://x/", "n": "1.50", "bin": "AQI=", "c": "€",
			"s": "plain", "b": true, "d": time.UnixMilli(1700000000000).UTC(),
			DiagnosticIDProperty: tp, mapping.EnvelopeName: env,
		},
		Data: [][]byte{[]byte("hello")},
	}
	m, err := Decode(overWire(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	var uuid [16]byte
	copy(uuid[:], unhex(t, "123456789abcdef00123456789abcdef"))
	want := &mapping.Message{
		ID: "12345678-9abc-def0-0123-456789abcdef", IDKind: mapping.KindUUID, ContentType: "text/plain",
		BodyType: mapping.BodyText, Body: []byte("hello"), Trace: m.Trace,
		Attributes: mappingtest.Attrs(
			"b", mapping.Bool(true),
			"bin", mapping.Binary([]byte{1, 2}).WithLabel("png"),
			"c", mapping.Char('€'),
			"d", mapping.TimestampMillis(1700000000000),
			"dto", mapping.DateTimeOffset(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
			"f", mapping.Float64(0.5).WithLabel("float"),
			"g", mapping.UUID(uuid),
			"i", mapping.Int32(42),
			"n", mapping.Number("1.50"),
			"s", mapping.String("plain"),
			"ts", mapping.TimeSpan(1500*time.Millisecond),
			"u8", mapping.Uint8(7),
			"uri", mapping.URI("https://x/"),
		),
	}
	mappingtest.Check(t, want, m)
	if m.Trace.Traceparent() != tp {
		t.Errorf("trace %q", m.Trace.Traceparent())
	}
}

func TestDecodeErrors(t *testing.T) {
	for name, msg := range map[string]*amqp.Message{
		"envelope not JSON": {ApplicationProperties: map[string]any{mapping.EnvelopeName: "x"}},
		"bad id type":       {Properties: &amqp.MessageProperties{MessageID: int32(1)}},
		"nil":               nil,
	} {
		if _, err := Decode(msg); !mapping.IsReject(err) || (msg != nil && !strings.HasPrefix(err.Error(), "servicebus: ")) {
			t.Errorf("%s: %v, want a servicebus RejectError", name, err)
		}
	}
}
