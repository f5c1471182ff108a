package sqsmap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// A message as `aws sqs receive-message --attribute-names All
// --message-attribute-names All` prints it; the digests are those of real
// SQS for this body and attribute (aws/aws-sdk-ruby#1885) plus a Binary one
// computed as in TestMD5OfAttributesGolden.
const receivedJSON = `{
  "MessageId": "07d250f8-8633-4103-bb0b-1a2075cabe64",
  "ReceiptHandle": "AQEBqciY9npfykvxdnFz",
  "MD5OfBody": "d6cf0f93237ada70daf9b6e75cfff2e6",
  "Body": "{\"foo\":20}",
  "Attributes": {
    "SenderId": "AIDAEXAMPLE",
    "ApproximateFirstReceiveTimestamp": "1700000001000",
    "ApproximateReceiveCount": "2",
    "SentTimestamp": "1700000000000"
  },
  "MD5OfMessageAttributes": "16bd0283a5b4962721ccd3efe4bc6257",
  "MessageAttributes": {
    "baz": {"StringValue": "qux", "DataType": "String"}
  }
}`

func TestParseJSON(t *testing.T) {
	m, err := ParseJSON([]byte(receivedJSON))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != `{"foo":20}` || m.ID != "07d250f8-8633-4103-bb0b-1a2075cabe64" || m.Source.DeliveryCount != 2 ||
		m.Source.SenderID != "AIDAEXAMPLE" || m.Source.LockToken != "AQEBqciY9npfykvxdnFz" {
		t.Errorf("decoded %+v", m)
	}
	if v, _ := m.Attr("baz"); !v.Equal(mapping.String("qux")) {
		t.Errorf("baz = %#v", v)
	}

	bin := `{"Body":"x","MessageAttributes":{"img":{"BinaryValue":"iVBORwD/","DataType":"Binary.png"},"amount":{"StringValue":"42","DataType":"Number.int"},"city":{"StringValue":"Zürich 東京","DataType":"String"}},
	"MD5OfMessageAttributes":"b4624c8a12dc0131b80374d6c9c5dcff"}`
	m, err = ParseJSON([]byte(bin))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Attr("img"); !v.Equal(mapping.Binary([]byte{0x89, 'P', 'N', 'G', 0, 0xff}).WithLabel("png")) {
		t.Errorf("img = %#v", v)
	}
	if v, _ := m.Attr("amount"); !v.Equal(mapping.Int32(42)) {
		t.Errorf("amount = %#v", v)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, json, says string
	}{
		{"unknown field", `{"Body":"x","Colour":"red"}`, `"Colour"`},
		{"wrong case", `{"body":"x"}`, `"body"`},
		{"unknown attribute field", `{"Body":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":"v","Extra":1}}}`, `"Extra"`},
		{"bad body digest", strings.Replace(receivedJSON, "d6cf0f93237ada70daf9b6e75cfff2e6", "00000000000000000000000000000000", 1), "MD5OfBody"},
		{"bad attribute digest", strings.Replace(receivedJSON, `"qux"`, `"quux"`, 1), "MD5OfMessageAttributes"},
		{"not an object", `[1]`, "json"},
		{"null", `null`, "object"},
		{"trailing data", `{"Body":"x"} {}`, "after"},
		{"bad base64", `{"Body":"x","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"!!"}}}`, "json"},
		{"bad data type", `{"Body":"x","MessageAttributes":{"a":{"DataType":"Blob","StringValue":"v"}}}`, `attribute "a"`},
		{"bad envelope", `{"Body":"x","MessageAttributes":{"qbridge.envelope":{"DataType":"String","StringValue":"{"}}}`, "qbridge.envelope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tc.json))
			if err == nil || !mapping.IsReject(err) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want a reject saying %s", err, tc.says)
			}
		})
	}
}

func TestRenderJSON(t *testing.T) {
	m := full()
	out, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode})
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(out, &shape); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"MessageId", "MD5OfBody", "Body", "Attributes", "MD5OfMessageAttributes", "MessageAttributes"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("no %s in %s", k, out)
		}
	}
	if !strings.Contains(string(out), `"MessageGroupId": "customer-7"`) {
		t.Errorf("a message with a group key renders as FIFO:\n%s", out)
	}
	back, err := ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	m.ScheduledAt = back.ScheduledAt // RenderJSON uses the real clock; the FIFO send carries it anyway
	want := full()
	if d := diffMessages(want, back); d != "" {
		t.Error(d)
	}
	again, _ := RenderJSON(m, mapping.Options{Policy: mapping.Encode})
	var a, b map[string]any
	json.Unmarshal(out, &a)
	json.Unmarshal(again, &b)
	if a["MessageId"] != b["MessageId"] {
		t.Errorf("MessageId is not derived from the content")
	}
	if _, err := RenderJSON(&mapping.Message{}, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("empty body under reject: %v", err)
	}
}
