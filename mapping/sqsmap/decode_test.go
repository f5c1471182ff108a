package sqsmap

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
)

func strAttr(dt, v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: new(dt), StringValue: new(v)}
}

func binAttr(dt string, b []byte) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: new(dt), BinaryValue: b}
}

func TestDecodeValues(t *testing.T) {
	tests := []struct {
		name string
		a    types.MessageAttributeValue
		want mapping.Value
		err  bool
	}{
		{"Number.int 42", strAttr("Number.int", "42"), mapping.Int32(42), false},
		{"Number.int 007 keeps its text", strAttr("Number.int", "007"), mapping.Number("007").WithLabel("int"), false},
		{"Number.int too big", strAttr("Number.int", "3000000000"), mapping.Number("3000000000").WithLabel("int"), false},
		{"Number.float", strAttr("Number.float", "2.5"), mapping.Float64(2.5).WithLabel("float"), false},
		{"Number", strAttr("Number", "1.50"), mapping.Number("1.50"), false},
		{"custom Number label", strAttr("Number.price-eur", "9.99"), mapping.Number("9.99").WithLabel("price-eur"), false},
		{"String", strAttr("String", "Grüße"), mapping.String("Grüße"), false},
		{"String.uuid", strAttr("String.uuid", "01020300-0000-0000-0000-000000000000"), mapping.UUID([16]byte{1, 2, 3}), false},
		{"String.bool", strAttr("String.bool", "true"), mapping.Bool(true), false},
		{"Binary", binAttr("Binary", []byte{0, 1}), mapping.Binary([]byte{0, 1}), false},
		{"Binary.png", binAttr("Binary.png", []byte{0x89}), mapping.Binary([]byte{0x89}).WithLabel("png"), false},
		{"bad data type", strAttr("Text", "x"), mapping.Value{}, true},
		{"empty label", strAttr("String.", "x"), mapping.Value{}, true},
		{"Binary with StringValue", strAttr("Binary", "AAE="), mapping.Value{}, true},
		{"String with BinaryValue", binAttr("String", []byte("x")), mapping.Value{}, true},
		{"list values", types.MessageAttributeValue{DataType: new("String"), StringListValues: []string{"a"}}, mapping.Value{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := types.Message{Body: new("b"), MessageAttributes: map[string]types.MessageAttributeValue{"a": tc.a}}
			m, err := Decode(msg, DecodeOptions{})
			if tc.err {
				wantReject(t, err, `attribute "a"`)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := m.Attr("a"); !got.Equal(tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestDecodeDigests(t *testing.T) {
	attrs := map[string]types.MessageAttributeValue{"baz": strAttr("String", "qux")}
	ok := types.Message{Body: new(`{"foo":20}`), MessageAttributes: attrs,
		MD5OfBody: new("d6cf0f93237ada70daf9b6e75cfff2e6"), MD5OfMessageAttributes: new("16bd0283a5b4962721ccd3efe4bc6257")}
	if _, err := Decode(ok, DecodeOptions{}); err != nil {
		t.Fatal(err)
	}
	upper := ok
	upper.MD5OfBody = new(strings.ToUpper(*ok.MD5OfBody))
	if _, err := Decode(upper, DecodeOptions{}); err != nil {
		t.Errorf("upper-case hex: %v", err)
	}
	absent := ok
	absent.MD5OfBody, absent.MD5OfMessageAttributes = nil, nil
	if _, err := Decode(absent, DecodeOptions{}); err != nil {
		t.Errorf("absent digests: %v", err)
	}

	badBody := ok
	badBody.Body = new(`{"foo":21}`)
	_, err := Decode(badBody, DecodeOptions{})
	wantReject(t, err, "MD5OfBody")
	for _, s := range []string{"corrupt", "d6cf0f93237ada70daf9b6e75cfff2e6", MD5OfBody(`{"foo":21}`)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}

	badAttrs := ok
	badAttrs.MessageAttributes = map[string]types.MessageAttributeValue{"baz": strAttr("String.x", "qux")}
	_, err = Decode(badAttrs, DecodeOptions{})
	wantReject(t, err, "MD5OfMessageAttributes")
	if !strings.Contains(err.Error(), "16bd0283a5b4962721ccd3efe4bc6257") || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("%q", err)
	}

	noAttrs := types.Message{Body: new("b"), MD5OfMessageAttributes: new("d41d8cd98f00b204e9800998ecf8427e")}
	if _, err := Decode(noAttrs, DecodeOptions{}); err != nil {
		t.Errorf("digest of no attributes: %v", err)
	}
}

func TestDecodeSystemAttributes(t *testing.T) {
	msg := types.Message{
		Body: new("b"), MessageId: new("mid"), ReceiptHandle: new("rh"),
		Attributes: map[string]string{
			"SentTimestamp":                    "1700000000123",
			"ApproximateReceiveCount":          "3",
			"ApproximateFirstReceiveTimestamp": "1700000001000",
			"SenderId":                         "AIDAEXAMPLE",
			"MessageGroupId":                   "g1",
			"MessageDeduplicationId":           "d1",
			"SequenceNumber":                   "18849496460467696128",
			"AWSTraceHeader":                   "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
			"DeadLetterQueueSourceArn":         "arn:aws:sqs:eu-west-1:1:src",
			"SomethingNew":                     "ignored",
		},
	}
	m, err := Decode(msg, DecodeOptions{Address: "https://q"})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Source
	tr, _ := mapping.ParseXRay(msg.Attributes["AWSTraceHeader"])
	if m.ID != "mid" || s.LockToken != "rh" || s.Protocol != "sqs" || s.Address != "https://q" ||
		!s.EnqueuedTime.Equal(time.UnixMilli(1700000000123)) || s.DeliveryCount != 3 ||
		!s.FirstReceiveTime.Equal(time.UnixMilli(1700000001000)) || s.SenderID != "AIDAEXAMPLE" ||
		m.GroupKey != "g1" || m.DedupID != "d1" || s.SequenceNumber != "18849496460467696128" ||
		m.Trace != tr || s.DeadLetterSource != "arn:aws:sqs:eu-west-1:1:src" || s.PartitionID != -1 {
		t.Errorf("decoded %+v", m)
	}
	if m.Source.EnqueuedTime.Location() != time.UTC {
		t.Errorf("times are UTC")
	}

	for _, k := range []string{"SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"} {
		bad := types.Message{Body: new("b"), Attributes: map[string]string{k: "soon"}}
		_, err := Decode(bad, DecodeOptions{})
		wantReject(t, err, k)
	}
}

func TestDecodeMalformedTraceWarns(t *testing.T) {
	var warned []string
	msg := types.Message{Body: new("b"), Attributes: map[string]string{"AWSTraceHeader": "Root=nonsense"}}
	m, err := Decode(msg, DecodeOptions{OnWarn: func(field, reason string) { warned = append(warned, field+": "+reason) }})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Trace.IsZero() || len(warned) != 1 || !strings.HasPrefix(warned[0], "AWSTraceHeader: ") {
		t.Errorf("trace %+v, warned %q", m.Trace, warned)
	}
	if _, err := Decode(msg, DecodeOptions{}); err != nil {
		t.Errorf("without OnWarn: %v", err)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	good := `{"v":1,"types":{"n":"Number.double"},"m":{"subject":"s"}}`
	tests := []struct {
		name string
		env  types.MessageAttributeValue
		err  bool
	}{
		{"good", strAttr(mapping.EnvelopeDataType, good), false},
		{"plain String type", strAttr("String", good), false},
		{"not JSON", strAttr(mapping.EnvelopeDataType, "{"), true},
		{"version 2", strAttr(mapping.EnvelopeDataType, `{"v":2}`), true},
		{"Binary", binAttr("Binary", []byte(good)), true},
		{"bad body encoding", strAttr(mapping.EnvelopeDataType, `{"v":1,"body":"rot13"}`), true},
		{"bad base64 body", strAttr(mapping.EnvelopeDataType, `{"v":1,"body":"base64"}`), true},
		{"bad body type", strAttr(mapping.EnvelopeDataType, `{"v":1,"m":{"bodyType":"odd"}}`), true},
		{"bad type note", strAttr(mapping.EnvelopeDataType, `{"v":1,"types":{"n":"Nope"}}`), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := types.Message{Body: new("b!"), MessageAttributes: map[string]types.MessageAttributeValue{
				mapping.EnvelopeName: tc.env,
				"n":                  strAttr("String", "NaN"),
			}}
			m, err := Decode(msg, DecodeOptions{})
			if tc.err {
				var field string
				if err != nil {
					field = err.(*mapping.RejectError).Field
				}
				if !slices.Contains([]string{attrField(mapping.EnvelopeName), "body", `attribute "n"`}, field) {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Attributes) != 1 || m.Attributes[0].Value.DataType() != "Number.double" || m.Subject != "s" {
				t.Errorf("decoded %+v", m)
			}
		})
	}
}

func TestDecodeSortsAttributes(t *testing.T) {
	attrs := map[string]types.MessageAttributeValue{}
	for _, n := range []string{"zeta", "Alpha", "beta", "_x", "0"} {
		attrs[n] = strAttr("String", n)
	}
	attrs[mapping.EnvelopeName] = strAttr(mapping.EnvelopeDataType,
		`{"v":1,"attrs":[{"name":"größe","value":{"type":"string","value":"1"}},{"name":"a b","value":{"type":"int","value":1}}]}`)
	m, err := Decode(types.Message{Body: new("b"), MessageAttributes: attrs}, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range m.Attributes {
		names = append(names, a.Name)
	}
	if want := []string{"0", "Alpha", "_x", "a b", "beta", "größe", "zeta"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
}

func TestDecodeEmptyBody(t *testing.T) {
	m, err := Decode(types.Message{}, DecodeOptions{})
	if err != nil || m.Body != nil {
		t.Errorf("%v %q", err, m.Body)
	}
}

func TestIsBodyHash(t *testing.T) {
	body := []byte("a body")
	h := hashID(string(body))
	for _, tc := range []struct {
		name string
		d    string
		want bool
	}{
		{"the body's hash", h, true},
		{"upper case", strings.ToUpper(h), false},
		{"another body's", hashID("another"), false},
		{"one digit off", h[:63] + "x", false},
		{"too short", h[:62], false},
		{"empty", "", false},
	} {
		if got := isBodyHash(tc.d, body); got != tc.want {
			t.Errorf("%s: isBodyHash(%q) = %v, want %v", tc.name, tc.d, got, tc.want)
		}
	}
}

// A queue that deduplicates within each message group (DeduplicationScope
// messageGroup) may hold distinct messages of two groups under one
// MessageDeduplicationId; the model's DedupID is made unique across the
// queue, since the sinks that deduplicate do so across groups and would
// merge them.
func TestDecodeDedupPerGroup(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, group, dedup string
		perGroup           bool
		want               string
	}{
		{"queue scope: as sent", "g1", "order-1", false, "order-1"},
		{"group scope: the group's", "g1", "order-1", true, "g1/order-1"},
		{"group scope, another group: another id", "g2", "order-1", true, "g2/order-1"},
		{"group scope, over 128 characters: hashed", long, long, true, "group-" + hashID(long+"\x00"+long)},
	} {
		msg := types.Message{Body: new("b"), MessageId: new("mid"),
			Attributes: map[string]string{"MessageGroupId": tc.group, "MessageDeduplicationId": tc.dedup}}
		m, err := Decode(msg, DecodeOptions{DedupPerGroup: tc.perGroup})
		if err != nil {
			t.Fatal(err)
		}
		if m.DedupID != tc.want || len(m.DedupID) > 128 {
			t.Errorf("%s: DedupID %q, want %q", tc.name, m.DedupID, tc.want)
		}
	}
}
