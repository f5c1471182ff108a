package amqpmap

import (
	"testing"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func fuzzSeeds(f *testing.F) {
	for _, m := range []*mapping.Message{
		{Body: []byte("x"), ID: "1", Attributes: mappingtest.Attrs("a", mapping.Int32(1), "b", mapping.Number("1.50"))},
		{BodyType: mapping.BodyValue, Body: []byte(`{"type":"map","value":[[{"type":"symbol","value":"k"},{"type":"uuid","value":"12345678-9abc-def0-0123-456789abcdef"}]]}`)},
		{BodyType: mapping.BodySequence, Body: []byte(`{"type":"list","value":[{"type":"list","value":[]}]}`), Annotations: mappingtest.Attrs("x", mapping.Char('c'))},
	} {
		msg, err := Encode(m, mapping.Options{})
		if err != nil {
			f.Fatal(err)
		}
		b, err := msg.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(appProps("u", appendSym(described0(DescriptorURI), 0xa1, "x")))
	f.Add(appProps("e", []byte{0x00, 0x53, 0x1d, 0xc0, 0x03, 0x01, 0xa3, 0x00}))
}

// FuzzDecode feeds arbitrary bytes to go-amqp and the result to Decode: it
// must never panic, and whatever decodes must encode again.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := UnmarshalMessage(data) // go-amqp's own panics are not Decode's
		if err != nil {
			return
		}
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

// FuzzParseJSON: arbitrary JSON must never panic the parser, and a parsed
// message must render again.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"header":{"durable":true,"priority":1,"ttl":5},"properties":{"messageId":{"type":"uuid","value":"12345678-9abc-def0-0123-456789abcdef"}},"body":{"data":["aGk="]}}`,
		`{"applicationProperties":[{"key":"u","value":{"type":"uri","value":"x"}}],"body":{"value":{"type":"list","value":[{"type":"null"}]}}}`,
		`{"messageAnnotations":[{"key":"x","value":{"type":"map","value":[[{"type":"int","value":1},{"type":"strings","value":["a"]}]]}}],"body":{"sequence":[[]]}}`,
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
