package sqsmap

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
)

// FuzzDecode feeds arbitrary attribute names, data types, values, digests
// and envelopes to Decode: it must not panic, must only fail with a
// RejectError, and what it decodes must survive Encode → Deliver → Decode.
func FuzzDecode(f *testing.F) {
	f.Add("body", "n", "Number.int", "42", []byte(nil), "", "")
	f.Add("body", "img", "Binary.png", "", []byte{0x89, 0}, "", "")
	f.Add("", "s", "String", "007", []byte(nil), "d41d8cd98f00b204e9800998ecf8427e", "")
	f.Add("x", "n", "Number.int", "007", []byte(nil), "", `{"v":1,"types":{"n":"Number.double"},"m":{"id":"i","groupKey":""}}`)
	f.Add("eA==", "a", "String", "v", []byte(nil), "", `{"v":1,"body":"base64","attrs":[{"name":"ü","value":{"type":"long","value":1}}]}`)
	f.Add("x", "l", "String.list", `[{"type":"null"}]`, []byte(nil), "", `{"v":1,"m":{"trace":{"traceId":"0af7651916cd43dd8448eb211c80319c","state":"a=b"}}}`)
	f.Fuzz(func(t *testing.T, body, name, dt, str string, bin []byte, md5 string, env string) {
		a := types.MessageAttributeValue{DataType: &dt}
		if bin != nil {
			a.BinaryValue = bin
		} else {
			a.StringValue = &str
		}
		msg := types.Message{Body: &body, MessageAttributes: map[string]types.MessageAttributeValue{name: a}}
		if md5 != "" {
			msg.MD5OfMessageAttributes = &md5
		}
		if env != "" {
			msg.MessageAttributes[mapping.EnvelopeName] = types.MessageAttributeValue{DataType: new(mapping.EnvelopeDataType), StringValue: &env}
		}
		m, err := Decode(msg, DecodeOptions{})
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return
		}
		o, err := Encode(m, EncodeOptions{Options: mapping.Options{Policy: mapping.Encode, MaxMessageSize: 1 << 30}})
		if err != nil {
			if !mapping.IsReject(err) {
				t.Fatalf("not a RejectError: %v", err)
			}
			return // e.g. an invalid value in the envelope
		}
		back, err := Decode(Deliver(o, deliveredID, "rh", t0), DecodeOptions{})
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if d := diffMessages(m, back); d != "" && validUTF8Model(m) {
			t.Fatalf("round trip:\n%s", d)
		}
	})
}

// validUTF8Model: JSON (the envelope) cannot carry invalid UTF-8 in model
// strings; see the report on mapping.Envelope.
func validUTF8Model(m *mapping.Message) bool {
	b, err := (&mapping.Envelope{V: 1, Attrs: m.Attributes}).Marshal()
	if err != nil {
		return false
	}
	e, err := mapping.ParseEnvelope(b)
	return err == nil && attrsEqual(e.Attrs, m.Attributes) && invalidTextAt(m.Subject+m.GroupKey+m.DedupID+m.ID) < 0
}

// FuzzEncode: any attribute name, string value and body goes through Encode
// under the Encode policy and comes back equal.
func FuzzEncode(f *testing.F) {
	f.Add([]byte("body"), "name", "value", "label", false)
	f.Add([]byte{}, "AWS.x", "", "", true)
	f.Add([]byte{0xff}, "größe", "a\x00", "\x01", false)
	f.Fuzz(func(t *testing.T, body []byte, name, value, label string, fifo bool) {
		m := &mapping.Message{Body: body, GroupKey: label, DedupID: value,
			Attributes: []mapping.Attribute{at(name, mapping.String(value).WithLabel(label)), at(name+"n", mapping.Number(value))}}
		if !validUTF8Model(m) {
			return
		}
		o := opts(mapping.Encode, nil)
		o.FIFO = fifo
		out, err := Encode(m, o)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if len(out.Attributes) > MaxAttributes || invalidTextAt(out.Body) >= 0 || out.Body == "" {
			t.Fatalf("invalid send %+v", out)
		}
		for n, a := range out.Attributes {
			if checkName(n) != "" && n != mapping.EnvelopeName || checkDataType(deref(a.DataType)) != "" ||
				a.StringValue != nil && (invalidTextAt(*a.StringValue) >= 0 || *a.StringValue == "") ||
				a.StringValue == nil && len(a.BinaryValue) == 0 {
				t.Fatalf("invalid attribute %q %+v", n, a)
			}
		}
		if fifo && (checkID(out.GroupID) != "" || out.GroupID == "" || checkID(out.DedupID) != "" || out.DedupID == "") {
			t.Fatalf("invalid ids %q %q", out.GroupID, out.DedupID)
		}
		back, err := Decode(Deliver(out, deliveredID, "rh", t0), DecodeOptions{})
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if name > name+"n" {
			m.Attributes[0], m.Attributes[1] = m.Attributes[1], m.Attributes[0]
		}
		if d := diffMessages(m, back); d != "" {
			t.Fatalf("round trip:\n%s", d)
		}
	})
}

// FuzzParseJSON: no panics, only RejectErrors.
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(receivedJSON))
	f.Add([]byte(`{"Body":"x","MessageAttributes":{"a":{"DataType":"Binary.png","BinaryValue":"iVBORw=="}}}`))
	f.Add([]byte(`{"Body":"-","MessageAttributes":{"qbridge.envelope":{"DataType":"String.qbridge-envelope","StringValue":"{\"v\":1,\"body\":\"empty\"}"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseJSON(data); err != nil && !mapping.IsReject(err) {
			t.Fatalf("not a RejectError: %v", err)
		}
	})
}
