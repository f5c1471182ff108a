package amqpmap

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestRenderJSONGolden(t *testing.T) {
	m := &mapping.Message{
		ID: "m1", CorrelationID: "7", CorrelationKind: mapping.KindUint64, ContentType: "text/plain",
		CreationTime: time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC),
		Durable:      true, TTL: time.Minute, Priority: ptr(uint8(7)),
		Annotations: mappingtest.Attrs("x-opt-k", mapping.Int64(1)),
		Attributes:  mappingtest.Attrs("b", mapping.Bool(true), "a", mapping.UUID(uuid1)),
		BodyType:    mapping.BodyText, Body: []byte("hello"),
	}
	got, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"header":{"durable":true,"priority":7,"ttl":60000},` +
		`"messageAnnotations":[{"key":"x-opt-k","value":{"type":"long","value":1}}],` +
		`"properties":{"messageId":{"type":"string","value":"m1"},"correlationId":{"type":"ulong","value":7},` +
		`"contentType":"text/plain","creationTime":"2024-01-02T03:04:05.006Z"},` +
		`"applicationProperties":[{"key":"a","value":{"type":"uuid","value":"12345678-9abc-def0-0123-456789abcdef"}},` +
		`{"key":"b","value":{"type":"bool","value":true}}],` +
		`"body":{"value":{"type":"string","value":"hello"}}}`
	if string(got) != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	back, err := ParseJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	m.Attributes = mappingtest.Attrs("a", mapping.UUID(uuid1), "b", mapping.Bool(true)) // decoded sorted
	mappingtest.Check(t, m, back)
}

// TestJSONRoundTrip renders and parses every value kind in every place.
func TestJSONRoundTrip(t *testing.T) {
	for i, v := range everyValue() {
		t.Run(fmt.Sprintf("%02d_%s", i, v.DataType()), func(t *testing.T) {
			if !textRoundTrips(v) {
				t.Skip("empty Strings has no Text round trip")
			}
			b, _ := v.MarshalJSON()
			m := &mapping.Message{Attributes: mappingtest.Attrs("a", v), Annotations: mappingtest.Attrs("x", v), BodyType: mapping.BodyValue, Body: b}
			if v.Kind == mapping.KindString || v.Kind == mapping.KindNull {
				m.BodyType, m.Body = mapping.BodyData, []byte("d")
			}
			j, err := RenderJSON(m, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseJSON(j)
			if err != nil {
				t.Fatalf("%v\n%s", err, j)
			}
			mappingtest.Check(t, m, back)
		})
	}
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		name   string
		json   string
		check  func(*mapping.Message) bool
		reject string
	}{
		{"minimal", `{}`, func(m *mapping.Message) bool { return m.BodyType == mapping.BodyData && len(m.Body) == 0 }, ""},
		{"data sections", `{"body":{"data":["YQ==","Yg=="]}}`, func(m *mapping.Message) bool { return m.BodyType == mapping.BodyMultiData }, ""},
		{"sequence", `{"body":{"sequence":[[{"type":"symbol","value":"s"}]]}}`, func(m *mapping.Message) bool {
			return m.BodyType == mapping.BodySequence && strings.Contains(string(m.Body), `"symbol"`)
		}, ""},
		{"null value", `{"body":{"value":{"type":"null"}}}`, func(m *mapping.Message) bool {
			return m.BodyType == mapping.BodyValue && string(m.Body) == `{"type":"null"}`
		}, ""},
		{"delivery annotations and footer are rendered but not decoded", `{"deliveryAnnotations":[{"key":"x","value":{"type":"int","value":1}}],"footer":[]}`,
			func(m *mapping.Message) bool { return len(m.Annotations) == 0 }, ""},
		{"header fields", `{"header":{"deliveryCount":4,"firstAcquirer":true}}`, func(m *mapping.Message) bool {
			return m.Source.DeliveryCount == 5 && m.FirstAcquirer && m.Priority == nil
		}, ""},
		{"unknown top-level field", `{"bogus":1}`, nil, `unknown field "bogus"`},
		{"unknown header field", `{"header":{"durable":true,"prio":1}}`, nil, `unknown field "prio"`},
		{"unknown field in a typed value", `{"applicationProperties":[{"key":"a","value":{"type":"int","value":1,"x":2}}]}`, nil, `unknown field "x"`},
		{"two bodies", `{"body":{"data":["YQ=="],"value":{"type":"int","value":1}}}`, nil, "exactly one"},
		{"no data section", `{"body":{"data":[]}}`, nil, "body.data"},
		{"decimal has no AMQP encoding in go-amqp", `{"applicationProperties":[{"key":"a","value":{"type":"decimal32","value":"1"}}]}`, nil, `"a"`},
		{"number is not an AMQP type", `{"messageAnnotations":[{"key":"a","value":{"type":"number","value":"1"}}]}`, nil, `"a"`},
		{"labels are not AMQP", `{"body":{"value":{"type":"binary","label":"png","value":""}}}`, nil, "body.value"},
		{"duplicate key", `{"applicationProperties":[{"key":"a","value":{"type":"int","value":1}},{"key":"a","value":{"type":"int","value":1}}]}`, nil, "duplicate"},
		{"id type", `{"properties":{"messageId":{"type":"int","value":1}}}`, nil, "properties.messageId"},
		{"trailing data", `{} {}`, nil, "trailing"},
		{"not JSON", `{`, nil, "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseJSON([]byte(tt.json))
			if tt.reject != "" {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), tt.reject) {
					t.Fatalf("error %v, want a RejectError with %q", err, tt.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(m) {
				t.Errorf("parsed %+v", m)
			}
		})
	}
}
