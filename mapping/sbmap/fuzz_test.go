package sbmap

import (
	"testing"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// FuzzDecode feeds arbitrary bytes to go-amqp and the result to Decode: it
// must never panic, and whatever decodes must encode again.
func FuzzDecode(f *testing.F) {
	for _, m := range []*mapping.Message{
		{Body: []byte("x"), ID: "1", PartitionKey: "p", Attributes: mappingtest.Attrs("u", mapping.URI("x"), "t", mapping.TimeSpanTicks(5))},
		{Body: []byte("x"), ScheduledAt: mapping.TimestampMillis(5).Time(), Annotations: mappingtest.Attrs("a", mapping.Symbol("s"))},
	} {
		msg, err := Encode(m, mapping.Options{})
		if err != nil {
			f.Fatal(err)
		}
		b, err := msg.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(nil))
	}
	f.Add([]byte{0x00, 0x53, 0x75, 0xa0, 0x00}, make([]byte, 16))
	f.Fuzz(func(t *testing.T, data, tag []byte) {
		msg, err := amqpmap.UnmarshalMessage(data) // go-amqp's own panics are not Decode's
		if err != nil {
			return
		}
		msg.DeliveryTag = tag
		m, err := Decode(msg)
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		if _, err := Encode(m, mapping.Options{Policy: mapping.Encode}); err != nil && !mapping.IsReject(err) {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"deliveryTag":"AAAAAAAAAAAAAAAAAAAAAA==","messageAnnotations":[{"key":"x-opt-partition-key","value":{"type":"string","value":"p"}}]}`,
		`{"applicationProperties":[{"key":"Diagnostic-Id","value":{"type":"string","value":"|0af7651916cd43dd8448eb211c80319c.b7ad6b7169203331."}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseJSON(data)
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		if _, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode}); err != nil && !mapping.IsReject(err) {
			t.Fatalf("render: %v", err)
		}
	})
}
