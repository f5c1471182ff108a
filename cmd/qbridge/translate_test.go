package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping/sqsmap"
	"github.com/qbridge/qbridge/mapping/wire"
)

// A received SQS message in the AWS JSON shape, with typed attributes.
const sqsIn = `{
  "MessageId": "m-1",
  "Body": "hello",
  "MD5OfBody": "5d41402abc4b2a76b9719d911017c592",
  "MessageAttributes": {
    "qty": {"DataType": "Number.int", "StringValue": "42"},
    "price": {"DataType": "Number.float", "StringValue": "9.5"},
    "big": {"DataType": "Number", "StringValue": "12345678901234567890123456789012345678"},
    "logo": {"DataType": "Binary.png", "BinaryValue": "iVBORw=="},
    "name": {"DataType": "String", "StringValue": "Grüße ✓"}
  },
  "Attributes": {
    "MessageGroupId": "tenant-7",
    "AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
  }
}`

func TestTranslateSQSToServiceBusAndBack(t *testing.T) {
	code, sb, stderr := run(t, runTranslate, sqsIn, "-from", "sqs", "-to", "servicebus")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// A Service Bus consumer sees natural AMQP types and the trace.
	for _, want := range []string{
		`{"key":"qty","value":{"type":"int","value":42}}`,
		`{"key":"price","value":{"type":"double","value":9.5}}`,
		`{"key":"logo","value":{"type":"binary","value":"iVBORw=="}}`,
		`"groupId":"tenant-7"`,
		`{"key":"Diagnostic-Id","value":{"type":"string","value":"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"}}`,
	} {
		if !strings.Contains(compact(t, sb), want) {
			t.Errorf("servicebus rendering lacks %s:\n%s", want, sb)
		}
	}
	code, back, stderr := run(t, runTranslate, sb, "-from", "servicebus", "-to", "sqs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		MessageAttributes map[string]struct{ DataType, StringValue, BinaryValue string }
		Attributes        map[string]string
		MD5OfBody         string
	}
	if err := json.Unmarshal([]byte(back), &got); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{
		"qty": {"Number.int", "42"}, "price": {"Number.float", "9.5"},
		"big": {"Number", "12345678901234567890123456789012345678"}, "name": {"String", "Grüße ✓"},
	} {
		a := got.MessageAttributes[name]
		if a.DataType != want[0] || a.StringValue != want[1] {
			t.Errorf("%s came back as %s %q, want %s %q", name, a.DataType, a.StringValue, want[0], want[1])
		}
	}
	if a := got.MessageAttributes["logo"]; a.DataType != "Binary.png" || a.BinaryValue != "iVBORw==" {
		t.Errorf("logo came back as %+v", a)
	}
	if got.Attributes["MessageGroupId"] != "tenant-7" || !strings.HasPrefix(got.Attributes["AWSTraceHeader"], "Root=1-5759e988-bd862e3fe1be46a994272793;") {
		t.Errorf("system attributes %v", got.Attributes)
	}
	if got.MD5OfBody != sqsmap.MD5OfBody("hello") {
		t.Errorf("MD5OfBody %q", got.MD5OfBody)
	}
}

func TestTranslateEveryPair(t *testing.T) {
	for _, from := range wire.Names() {
		// Normalize the sample into each form first.
		code, in, stderr := run(t, runTranslate, sqsIn, "-from", "sqs", "-to", from)
		if code != 0 {
			t.Fatalf("sqs -> %s: exit %d: %s", from, code, stderr)
		}
		for _, to := range wire.Names() {
			if code, _, stderr := run(t, runTranslate, in, "-from", from, "-to", to); code != 0 {
				t.Errorf("%s -> %s: exit %d: %s", from, to, code, stderr)
			}
		}
	}
}

func TestTranslateErrors(t *testing.T) {
	tests := []struct {
		name, stdin string
		args        []string
		code        int
		stderr      string
	}{
		{"wrong body digest", strings.Replace(sqsIn, "5d41402a", "00000000", 1), []string{"-from", "sqs", "-to", "nats"}, 1, "MD5OfBody"},
		{"bad attribute type", `{"Body":"x","MessageAttributes":{"a":{"DataType":"Nummer","StringValue":"1"}}}`, []string{"-from", "sqs", "-to", "amqp"}, 1, `attribute "a"`},
		{"not json", `{`, []string{"-from", "nats", "-to", "sqs"}, 1, "input (nats)"},
		{"unknown form", `{}`, []string{"-from", "kafka", "-to", "sqs"}, 2, `unknown wire form "kafka"`},
		{"unknown policy", `{}`, []string{"-from", "sqs", "-to", "sqs", "-policy", "ignore"}, 2, "unknown policy"},
		{"missing -to", `{}`, []string{"-from", "sqs"}, 2, "usage"},
		{"binary body to sqs", `{"subject":"s","data":"AAEC","dataEncoding":"base64"}`, []string{"-from", "nats", "-to", "sqs"}, 1, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, runTranslate, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tt.code, tt.stderr)
			}
		})
	}
}

func TestTranslatePolicyEncodeAndDrop(t *testing.T) {
	in := `{"subject":"s","data":"AAEC","dataEncoding":"base64"}`
	code, out, stderr := run(t, runTranslate, in, "-from", "nats", "-to", "sqs", "-policy", "encode")
	if code != 0 || !strings.Contains(out, `"Body": "AAEC"`) {
		t.Fatalf("encode: exit %d %s %s", code, out, stderr)
	}
	// What encode changed is said as encoded, not as dropped.
	if !strings.Contains(stderr, "qbridge translate: encoded") || strings.Contains(stderr, "dropped") {
		t.Errorf("encode: stderr %q, want the body reported as encoded", stderr)
	}
	// Back to NATS: the binary body is restored from the base64 marker.
	code, nats, stderr := run(t, runTranslate, out, "-from", "sqs", "-to", "nats")
	if code != 0 || !strings.Contains(compact(t, nats), `"data":"\u0000\u0001\u0002"`) {
		t.Fatalf("back: exit %d %s %s", code, nats, stderr)
	}
	// Drop: an invalid SQS attribute name is left out and reported.
	in = `{"subject":"s","headers":{"bad name!":["v"],"ok":["w"]},"data":"x"}`
	code, out, stderr = run(t, runTranslate, in, "-from", "nats", "-to", "sqs", "-policy", "drop")
	if code != 0 || strings.Contains(out, "bad name") || !strings.Contains(stderr, "dropped") {
		t.Fatalf("drop: exit %d out %s stderr %s", code, out, stderr)
	}
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
