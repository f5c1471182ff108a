package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/wire"
)

// sb10Ints is a Service Bus message with ten int application properties
// and a MessageId (issue: refused by SQS because of the envelope).
func sb10Ints() string {
	var props []string
	for i := range 10 {
		props = append(props, fmt.Sprintf(`{"key":"p%d","value":{"type":"int","value":%d}}`, i, i*100))
	}
	return `{"properties":{"messageId":{"type":"string","value":"sb-msg-1"}},"applicationProperties":[` +
		strings.Join(props, ",") + `],"body":{"data":["aGVsbG8="]}}`
}

// sqs10Typed is an SQS message with ten typed attributes.
const sqs10Typed = `{
  "MessageId": "m-10",
  "Body": "ten",
  "MessageAttributes": {
    "a_int": {"DataType": "Number.int", "StringValue": "42"},
    "b_float": {"DataType": "Number.float", "StringValue": "3.50"},
    "c_num": {"DataType": "Number", "StringValue": "12345678901234567890123456789012345678"},
    "d_bool": {"DataType": "String.bool", "StringValue": "true"},
    "e_uuid": {"DataType": "String.uuid", "StringValue": "12345678-9abc-4def-8001-020304050607"},
    "f_png": {"DataType": "Binary.png", "BinaryValue": "iVBORw=="},
    "g_ts": {"DataType": "Number.timestamp", "StringValue": "1700000000456"},
    "h_str": {"DataType": "String", "StringValue": "Grüße"},
    "i_long": {"DataType": "Number.long", "StringValue": "-6400000000"},
    "j_custom": {"DataType": "String.tenant-id", "StringValue": "acme"}
  }
}`

type sqsJSON struct {
	MessageAttributes map[string]struct{ DataType, StringValue, BinaryValue string }
}

func parseSQS(t *testing.T, s string) sqsJSON {
	t.Helper()
	var m sqsJSON
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

// TestTranslateTenIntsToSQS (golden): Service Bus with 10 int properties →
// SQS is accepted with the 10 as Number.int; the envelope, which carried
// only the MessageId, is shed and reported.
func TestTranslateTenIntsToSQS(t *testing.T) {
	code, out, stderr := run(t, runTranslate, sb10Ints(), "-from", "servicebus", "-to", "sqs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := parseSQS(t, out)
	if len(got.MessageAttributes) != 10 {
		t.Errorf("%d attributes, want 10: %s", len(got.MessageAttributes), out)
	}
	for i := range 10 {
		a := got.MessageAttributes[fmt.Sprint("p", i)]
		if a.DataType != "Number.int" || a.StringValue != fmt.Sprint(i*100) {
			t.Errorf("p%d = %+v", i, a)
		}
	}
	if !strings.Contains(stderr, mapping.EnvelopeName+" shed id") {
		t.Errorf("stderr %q does not report the shed id", stderr)
	}
}

// TestTranslateTenTypedRoundTrip (golden): SQS with 10 typed attributes →
// Service Bus / AMQP / NATS (and HTTPS) → SQS returns exactly the 10.
func TestTranslateTenTypedRoundTrip(t *testing.T) {
	want := parseSQS(t, sqs10Typed).MessageAttributes
	for _, via := range []string{"servicebus", "servicebus-https", "amqp", "nats"} {
		t.Run(via, func(t *testing.T) {
			code, mid, stderr := run(t, runTranslate, sqs10Typed, "-from", "sqs", "-to", via)
			if code != 0 {
				t.Fatalf("sqs -> %s: exit %d: %s", via, code, stderr)
			}
			code, back, stderr := run(t, runTranslate, mid, "-from", via, "-to", "sqs")
			if code != 0 {
				t.Fatalf("%s -> sqs: exit %d: %s", via, code, stderr)
			}
			got := parseSQS(t, back).MessageAttributes
			if len(got) != 10 {
				t.Errorf("%d attributes back, want exactly the 10: %s", len(got), back)
			}
			for name, w := range want {
				if g := got[name]; g != w {
					t.Errorf("%s came back as %+v, want %+v", name, g, w)
				}
			}
		})
	}
}

// TestTranslateNaturalFloat: an SQS Number.float "3.50" reaches Service Bus
// as the double 3.5 (its natural type), and comes back as "3.50".
func TestTranslateNaturalFloat(t *testing.T) {
	code, sb, stderr := run(t, runTranslate, sqs10Typed, "-from", "sqs", "-to", "servicebus")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(compact(t, sb), `{"key":"b_float","value":{"type":"double","value":3.5}}`) {
		t.Errorf("b_float is not the double 3.5:\n%s", sb)
	}
	// With the envelope off the text is normalized, and reported.
	code, sb, stderr = run(t, runTranslate, sqs10Typed, "-from", "sqs", "-to", "servicebus", "-envelope", "off")
	if code != 0 || !strings.Contains(stderr, "text") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, back, _ := run(t, runTranslate, sb, "-from", "servicebus", "-to", "sqs")
	if code != 0 || parseSQS(t, back).MessageAttributes["b_float"].StringValue != "3.5" {
		t.Errorf("envelope off: b_float came back as %+v", parseSQS(t, back).MessageAttributes["b_float"])
	}
}

// TestTranslateEnvelopeOff (golden): -envelope off writes no
// qbridge.envelope on any target, whatever the message carries.
func TestTranslateEnvelopeOff(t *testing.T) {
	rich := `{"properties":{"messageId":{"type":"string","value":"m-1"},"correlationId":{"type":"string","value":"c-9"},"subject":"s","contentType":"application/json","replyTo":"r","to":"t","groupId":"g-1"},"messageAnnotations":[{"key":"x-opt-partition-key","value":{"type":"string","value":"g-1"}}],"applicationProperties":[{"key":"sym","value":{"type":"symbol","value":"a:b"}},{"key":"f","value":{"type":"double","value":1.5}}],"body":{"data":["aGVsbG8="]}}`
	for _, in := range []struct{ from, msg string }{{"sqs", sqs10Typed}, {"sqs", sqsIn}, {"servicebus", rich}, {"servicebus", sb10Ints()}} {
		for _, to := range wire.Names() {
			code, out, stderr := run(t, runTranslate, in.msg, "-from", in.from, "-to", to, "-envelope", "off")
			if code != 0 {
				t.Errorf("%s -> %s: exit %d: %s", in.from, to, code, stderr)
				continue
			}
			if strings.Contains(out, mapping.EnvelopeName) {
				t.Errorf("%s -> %s: envelope written with -envelope off:\n%s", in.from, to, out)
			}
		}
	}
	if code, _, stderr := run(t, runTranslate, sqsIn, "-from", "sqs", "-to", "nats", "-envelope", "off", "-policy", "encode"); code != 2 || !strings.Contains(stderr, "needs the envelope") {
		t.Errorf("encode with the envelope off: exit %d %q", code, stderr)
	}
	if code, _, stderr := run(t, runTranslate, sqsIn, "-from", "sqs", "-to", "nats", "-envelope", "none"); code != 2 || !strings.Contains(stderr, "-envelope") {
		t.Errorf("bad -envelope: exit %d %q", code, stderr)
	}
}

func TestTranslateHelpHasExample(t *testing.T) {
	_, _, stderr := run(t, runTranslate, "", "-h")
	if !strings.Contains(stderr, "Example:") || !strings.Contains(stderr, "qbridge translate -from servicebus -to sqs") {
		t.Errorf("-h has no worked example:\n%s", stderr)
	}
	// The example works as shown.
	_, rest, _ := strings.Cut(translateExample, "echo '")
	in, _, _ := strings.Cut(rest, "'")
	code, out, stderr := run(t, runTranslate, in, "-from", "servicebus", "-to", "sqs")
	if code != 0 || !strings.Contains(out, `\"correlationId\":\"c-9\"`) || !strings.Contains(out, `"Number.int"`) {
		t.Errorf("example: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run(t, runTranslate, in, "-from", "servicebus", "-to", "sqs", "-envelope", "off")
	if code != 0 || strings.Contains(out, mapping.EnvelopeName) || !strings.Contains(stderr, "shed correlationId, id") {
		t.Errorf("example off: exit %d\n%s%s", code, out, stderr)
	}
}
