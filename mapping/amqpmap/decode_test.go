package amqpmap

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestDecodeHeader(t *testing.T) {
	tests := []struct {
		name  string
		h     *amqp.MessageHeader
		check func(*mapping.Message) bool
	}{
		{"no header: first delivery", nil, func(m *mapping.Message) bool {
			return m.Source.DeliveryCount == 1 && m.Priority == nil && !m.Durable && m.TTL == 0
		}},
		{"delivery-count is prior deliveries", &amqp.MessageHeader{Priority: 4, DeliveryCount: 2}, func(m *mapping.Message) bool {
			return m.Source.DeliveryCount == 3
		}},
		{"priority 4 is the default", &amqp.MessageHeader{Priority: 4}, func(m *mapping.Message) bool { return m.Priority == nil }},
		{"priority", &amqp.MessageHeader{Priority: 0}, func(m *mapping.Message) bool { return m.Priority != nil && *m.Priority == 0 }},
		{"fields", &amqp.MessageHeader{Durable: true, Priority: 4, TTL: time.Second, FirstAcquirer: true}, func(m *mapping.Message) bool {
			return m.Durable && m.TTL == time.Second && m.FirstAcquirer
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(overWire(t, &amqp.Message{Header: tt.h, Data: [][]byte{nil}}))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(m) {
				t.Errorf("decoded %+v", m)
			}
			if m.Source.Protocol != "amqp" || m.Source.PartitionID != -1 {
				t.Errorf("source %+v", m.Source)
			}
		})
	}
}

func TestDecodeIDs(t *testing.T) {
	tests := []struct {
		id   any
		text string
		kind mapping.Kind
		bad  bool
	}{
		{"abc", "abc", mapping.KindInvalid, false},
		{uint64(42), "42", mapping.KindUint64, false},
		{amqp.UUID(uuid1), mapping.UUIDString(uuid1), mapping.KindUUID, false},
		{[]byte{0, 1}, "AAE=", mapping.KindBinary, false},
		{int64(5), "", 0, true},
	}
	for _, tt := range tests {
		msg := &amqp.Message{Properties: &amqp.MessageProperties{MessageID: tt.id, CorrelationID: tt.id}}
		m, err := Decode(overWire(t, msg))
		if tt.bad {
			if !mapping.IsReject(err) || !strings.Contains(err.Error(), "message-id") {
				t.Errorf("%T id: %v, want a RejectError naming message-id", tt.id, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != tt.text || m.IDKind != tt.kind || m.CorrelationID != tt.text || m.CorrelationKind != tt.kind {
			t.Errorf("%T id: got %q/%s %q/%s", tt.id, m.ID, m.IDKind, m.CorrelationID, m.CorrelationKind)
		}
	}
}

func TestDecodeApplicationProperties(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name   string
		props  map[string]any
		attrs  []mapping.Attribute
		trace  string // traceparent of the decoded trace, "" for none
		state  string
		reject string
	}{
		{"sorted by name", map[string]any{"b": int32(1), "a": "x", "c": nil},
			mappingtest.Attrs("a", mapping.String("x"), "b", mapping.Int32(1), "c", mapping.Null()), "", "", ""},
		{"trace moved out", map[string]any{"traceparent": tp, "tracestate": "k=v", "a": true},
			mappingtest.Attrs("a", mapping.Bool(true)), tp, "k=v", ""},
		{"malformed traceparent stays", map[string]any{"traceparent": "junk", "tracestate": "k=v"},
			mappingtest.Attrs("traceparent", mapping.String("junk"), "tracestate", mapping.String("k=v")), "", "", ""},
		{"tracestate alone stays", map[string]any{"tracestate": "k=v"}, mappingtest.Attrs("tracestate", mapping.String("k=v")), "", "", ""},
		{"typed traceparent is a user attribute", map[string]any{"traceparent": tp, mapping.EnvelopeName: `{"v":1,"types":{"traceparent":"String"}}`},
			mappingtest.Attrs("traceparent", mapping.String(tp)), "", "", ""},
		{"envelope type applies to any native (REST long as int)", map[string]any{"n": int64(7), mapping.EnvelopeName: `{"v":1,"types":{"n":"Number.int"}}`},
			mappingtest.Attrs("n", mapping.Int32(7)), "", "", ""},
		{"envelope type on a binary", map[string]any{"p": []byte{1}, mapping.EnvelopeName: `{"v":1,"types":{"p":"Binary.png"}}`},
			mappingtest.Attrs("p", mapping.Binary([]byte{1}).WithLabel("png")), "", "", ""},
		{"envelope attrs appended and sorted", map[string]any{"b": "1", mapping.EnvelopeName: `{"v":1,"attrs":[{"name":"a","value":{"type":"int","value":2}}]}`},
			mappingtest.Attrs("a", mapping.Int32(2), "b", mapping.String("1")), "", "", ""},
		{"arrays become lists", map[string]any{"a": []int32{1, 2}},
			mappingtest.Attrs("a", mapping.List(mapping.Int32(1), mapping.Int32(2))), "", "", ""},
		{"string arrays become strings", map[string]any{"a": []string{"x", "y"}}, mappingtest.Attrs("a", mapping.Strings("x", "y")), "", "", ""},
		{"envelope not a string", map[string]any{mapping.EnvelopeName: int32(1)}, nil, "", "", "malformed envelope"},
		{"envelope not JSON", map[string]any{mapping.EnvelopeName: "{"}, nil, "", "", "malformed envelope"},
		{"envelope version", map[string]any{mapping.EnvelopeName: `{"v":2}`}, nil, "", "", "malformed envelope"},
		{"envelope bad type", map[string]any{"a": "x", mapping.EnvelopeName: `{"v":1,"types":{"a":"Bogus"}}`}, nil, "", "", `"a"`},
		// An application changed the property and sent the message on: the
		// recorded type no longer fits, the value is kept as delivered.
		{"envelope stale type", map[string]any{"a": "x", mapping.EnvelopeName: `{"v":1,"types":{"a":"Binary.png"},"text":{"a":"007"}}`},
			mappingtest.Attrs("a", mapping.String("x")), "", "", ""},
		{"envelope bad kind", map[string]any{mapping.EnvelopeName: `{"v":1,"m":{"idKind":"nope"}}`}, nil, "", "", "malformed envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(overWire(t, &amqp.Message{ApplicationProperties: tt.props, Data: [][]byte{nil}}))
			if tt.reject != "" {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), tt.reject) {
					t.Fatalf("error %v, want a RejectError with %q", err, tt.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mappingtest.Check(t, &mapping.Message{Attributes: tt.attrs, Trace: m.Trace}, m)
			if got := m.Trace.Traceparent(); got != tt.trace || m.Trace.State != tt.state {
				t.Errorf("trace %q %q, want %q %q", got, m.Trace.State, tt.trace, tt.state)
			}
		})
	}
}

// TestDecodeDescribed decodes the Service Bus described types as a .NET
// producer writes them, and refuses other described values.
func TestDecodeDescribed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		bytes []byte
		want  mapping.Value
		bad   bool
	}{
		{"uri", appendSym(described0("com.microsoft:uri"), 0xa1, "https://x/"), mapping.URI("https://x/"), false},
		{"timespan", append(described0("com.microsoft:timespan"), 0x81, 0, 0, 0, 0, 0, 0, 0x03, 0xe8), mapping.TimeSpanTicks(1000), false},
		{"small timespan", append(described0("com.microsoft:timespan"), 0x55, 0xff), mapping.TimeSpanTicks(-1), false},
		{"datetime-offset", append(described0("com.microsoft:datetime-offset"), 0x81, 0x08, 0x9f, 0x4c, 0xd2, 0xaa, 0xf2, 0x40, 0x00),
			mapping.DateTimeOffsetTicks(0x089f4cd2aaf24000), false},
		{"unknown", append(described0("com.example:thing"), 0x40), mapping.Value{}, true},
		{"uri holding a long", append(described0("com.microsoft:uri"), 0x55, 1), mapping.Value{}, true},
		{"ulong descriptor", []byte{0x00, 0x80, 0, 0, 1, 0x37, 0, 0, 0, 0x0c, 0x40}, mapping.Value{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var msg amqp.Message
			if err := msg.UnmarshalBinary(appProps("a", tt.bytes)); err != nil {
				t.Fatal(err)
			}
			m, err := Decode(&msg)
			if tt.bad {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), `application-properties "a"`) {
					t.Fatalf("error %v, want a RejectError naming the property", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mappingtest.Check(t, &mapping.Message{Attributes: mappingtest.Attrs("a", tt.want)}, m)
		})
	}
}

func TestDecodeAnnotations(t *testing.T) {
	msg := &amqp.Message{Annotations: amqp.Annotations{"x-b": int64(1), amqp.Symbol("x-a"): "s"}}
	m, err := Decode(overWire(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	mappingtest.Check(t, &mapping.Message{Annotations: mappingtest.Attrs("x-a", mapping.String("s"), "x-b", mapping.Int64(1))}, m)

	msg = &amqp.Message{Annotations: amqp.Annotations{int64(5): "s"}}
	if _, err := Decode(overWire(t, msg)); !mapping.IsReject(err) || !strings.Contains(err.Error(), "message-annotations") {
		t.Errorf("numeric key: %v, want a RejectError", err)
	}
	// Delivery annotations and the footer are not part of the model.
	msg = &amqp.Message{DeliveryAnnotations: amqp.Annotations{"x": "y"}, Footer: amqp.Annotations{"h": []byte{1}}, Data: [][]byte{nil}}
	if m, err = Decode(overWire(t, msg)); err != nil || len(m.Annotations) != 0 || len(m.Attributes) != 0 {
		t.Errorf("decoded %+v, %v", m, err)
	}
}

func TestDecodeBody(t *testing.T) {
	tests := []struct {
		name   string
		msg    amqp.Message
		typ    mapping.BodyType
		body   string
		reject bool
	}{
		{"none", amqp.Message{}, mapping.BodyData, "", false},
		{"data", amqp.Message{Data: [][]byte{[]byte("abc")}}, mapping.BodyData, "abc", false},
		{"multi-data", amqp.Message{Data: [][]byte{{1}, {2}}}, mapping.BodyMultiData,
			`{"type":"list","value":[{"type":"binary","value":"AQ=="},{"type":"binary","value":"Ag=="}]}`, false},
		{"text", amqp.Message{Value: "héllo"}, mapping.BodyText, "héllo", false},
		{"symbol value is a string", amqp.Message{Value: amqp.Symbol("s")}, mapping.BodyText, "s", false},
		{"value", amqp.Message{Value: map[string]any{"k": int32(1)}}, mapping.BodyValue,
			`{"type":"map","value":[[{"type":"string","value":"k"},{"type":"int","value":1}]]}`, false},
		{"sequence", amqp.Message{Sequence: [][]any{{int32(1)}, {}}}, mapping.BodySequence,
			`{"type":"list","value":[{"type":"list","value":[{"type":"int","value":1}]},{"type":"list","value":[]}]}`, false},
		{"mixed", amqp.Message{Data: [][]byte{{1}}, Value: int32(1)}, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(overWire(t, &tt.msg))
			if tt.reject {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), "body") {
					t.Fatalf("error %v, want a RejectError naming the body", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.BodyType != tt.typ || string(m.Body) != tt.body {
				t.Errorf("body %s %q, want %s %q", m.BodyType, m.Body, tt.typ, tt.body)
			}
		})
	}
}

func TestDecodeEnvelopeBody(t *testing.T) {
	msg := &amqp.Message{Data: [][]byte{[]byte("aGk=")},
		ApplicationProperties: map[string]any{mapping.EnvelopeName: `{"v":1,"body":"base64","m":{"bodyType":"text"}}`}}
	m, err := Decode(overWire(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != "hi" || m.BodyType != mapping.BodyText {
		t.Errorf("body %s %q", m.BodyType, m.Body)
	}
	msg.Data = [][]byte{[]byte("!!")}
	if _, err := Decode(overWire(t, msg)); !mapping.IsReject(err) {
		t.Errorf("bad base64: %v", err)
	}
}

func TestDecodeUnsupportedValue(t *testing.T) {
	// An amqp:error composite in an application property.
	raw := appProps("e", []byte{0x00, 0x53, 0x1d, 0xc0, 0x03, 0x01, 0xa3, 0x00})
	var msg amqp.Message
	if err := msg.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(&msg); !mapping.IsReject(err) {
		t.Errorf("error composite: %v, want a RejectError", err)
	}
	if _, err := Decode(nil); !mapping.IsReject(err) {
		t.Errorf("nil: %v", err)
	}
}

func TestUndecodableType(t *testing.T) {
	var msg amqp.Message
	err := msg.UnmarshalBinary(appProps("d", append([]byte{0x94}, make([]byte, 16)...)))
	if typ, ok := UndecodableType(err); !ok || typ != "decimal128" {
		t.Errorf("UndecodableType(%v) = %q, %v", err, typ, ok)
	}
	if _, ok := UndecodableType(nil); ok {
		t.Error("nil error")
	}
}

// described0 starts a described value with a sym8 descriptor.
func described0(descriptor string) []byte { return appendSym([]byte{0x00}, 0xa3, descriptor) }

func appendSym(b []byte, code byte, s string) []byte {
	return append(append(b, code, byte(len(s))), s...)
}

// appProps encodes an application-properties section with one entry whose
// value is already encoded.
func appProps(key string, value []byte) []byte {
	entries := append(appendSym(nil, 0xa1, key), value...)
	size := 4 + len(entries)
	b := []byte{0x00, 0x53, 0x74, 0xd1, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size), 0, 0, 0, 2}
	return append(b, entries...)
}

// TestUnmarshalMessagePanic: go-amqp v1.7.0 panics on a message-annotations
// map keyed by a map; UnmarshalMessage turns that into a RejectError.
func TestUnmarshalMessagePanic(t *testing.T) {
	raw := []byte("\x00Sx\xc1\x05\x02\xc1\x01\x00\x40")
	if _, err := UnmarshalMessage(raw); !mapping.IsReject(err) {
		t.Errorf("UnmarshalMessage: %v, want a RejectError", err)
	}
	if _, err := UnmarshalMessage([]byte{0x00, 0x53, 0x75, 0xa0, 0x00}); err != nil {
		t.Errorf("valid message: %v", err)
	}
}
