package sbrest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// The batch body of the REST docs (docs/wire-servicebus.md §7).
func TestDecodeBatchDocExample(t *testing.T) {
	body := `[
  {"Body":"This is the first message","BrokerProperties":{"Label":"M1","TimeToLiveTimeSpan":"0.00:00:40"}},
  {"Body":"This is the second message","BrokerProperties":{"Label":"M2"},"UserProperties":{"Priority":"Low"}},
  {"Body":"This is the third message","BrokerProperties":{"Label":"M3"},"UserProperties":{"Priority":"Medium","Customer":"ABC"}}
]`
	msgs, err := DecodeBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].TTL != 40*time.Second || msgs[2].Subject != "M3" || string(msgs[1].Body) != "This is the second message" {
		t.Fatalf("%+v", msgs)
	}
	want := []mapping.Attribute{{Name: "Customer", Value: mapping.String("ABC")}, {Name: "Priority", Value: mapping.String("Medium")}}
	if d := diffReflectAttrs(want, msgs[2].Attributes); len(d) > 0 {
		t.Fatal(d)
	}
}

func diffReflectAttrs(want, got []mapping.Attribute) []string {
	return mappingtest.Diff(&mapping.Message{Attributes: want}, &mapping.Message{Attributes: got})
}

// UserProperties: a JSON string is a quoted header, numbers and booleans
// are the unquoted ones.
func TestInferJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mapping.Value
	}{
		{`"High"`, mapping.String("High")},
		{`"Fri, 04 Mar 2011 08:49:37 GMT"`, mapping.Timestamp(date("Fri, 04 Mar 2011 08:49:37 GMT"))},
		{`"42"`, mapping.String("42")},
		{`true`, mapping.Bool(true)},
		{`42`, mapping.Int64(42)},
		{`-9223372036854775808`, mapping.Int64(math.MinInt64)},
		{`9223372036854775808`, mapping.Float64(9223372036854775808)},
		{`299.98`, mapping.Float64(299.98)},
		{`1.0`, mapping.Float64(1)},
		{`1e2`, mapping.Float64(100)},
		{`-0.0`, mapping.Float64(math.Copysign(0, -1))},
	} {
		got, err := inferJSON(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: %#v %v, want %#v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`null`, `[1]`, `{"a":1}`, `1e400`, ``, `-`} {
		if v, err := inferJSON(in); err == nil {
			t.Errorf("%s: %#v, want an error", in, v)
		}
	}
}

func TestEncodeBatch(t *testing.T) {
	msgs := []*mapping.Message{
		{Body: []byte("first"), Subject: "M1", TTL: 40 * time.Second},
		{Body: []byte("second"), Subject: "M2", Attributes: []mapping.Attribute{
			{Name: "Priority", Value: mapping.String("Low")},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Count", Value: mapping.Int64(3)},
			{Name: "Order-Time", Value: mapping.Timestamp(date("Fri, 04 Mar 2011 08:49:37 GMT"))},
		}},
	}
	out, err := EncodeBatch(msgs, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"Body":"first","BrokerProperties":{"Label":"M1","TimeToLive":40}},` +
		`{"Body":"second","BrokerProperties":{"Label":"M2"},"UserProperties":{"Count":3,` +
		`"Order-Time":"Fri, 04 Mar 2011 08:49:37 GMT","Price":299.98,"Priority":"Low"}}]`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	back, err := DecodeBatch(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		want := msgs[i].Clone()
		sortAttributes(want.Attributes)
		if d := mappingtest.Diff(want, clearSource(back[i]), mappingtest.WithSource()); len(d) > 0 {
			t.Errorf("message %d: %s", i, d)
		}
	}
}

func TestEncodeBatchErrors(t *testing.T) {
	bad := []*mapping.Message{{Body: []byte("ok")}, {Body: []byte{0xff}}}
	_, err := EncodeBatch(bad, mapping.Options{})
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 1 || !mapping.IsReject(err) {
		t.Fatalf("%v", err)
	}
	// Non-UTF-8 body: Drop cannot drop a body; Encode sends base64.
	if _, err := EncodeBatch(bad, mapping.Options{Policy: mapping.Drop}); !mapping.IsReject(err) {
		t.Fatalf("Drop: %v", err)
	}
	out, err := EncodeBatch(bad, mapping.Options{Policy: mapping.Encode})
	if err != nil || !strings.Contains(string(out), `"Body":"/w=="`) {
		t.Fatalf("Encode: %s %v", out, err)
	}
	back, err := DecodeBatch(out)
	if err != nil || string(back[1].Body) != "\xff" {
		t.Fatalf("%v %v", back, err)
	}
	// Each message fits, the batch does not: the caller splits.
	body := []byte(strings.Repeat("a", 200000))
	big := []*mapping.Message{{Body: body}, {Body: body}}
	if _, err := EncodeBatch(big, mapping.Options{}); !errors.Is(err, ErrBatchTooLarge) || mapping.IsReject(err) {
		t.Fatalf("%v", err)
	}
	if _, err := EncodeBatch(big[:1], mapping.Options{MaxMessageSize: 1000}); !mapping.IsReject(err) {
		t.Fatalf("%v", err)
	}
}

// A batch refused whole (too large, or one element refused) reports no
// shed envelope members, under every policy: the sink encodes its messages
// again in smaller batches, which report them (a review found them counted
// twice under the default reject policy).
func TestRefusedBatchReportsNoSheds(t *testing.T) {
	v, _ := mapping.ParseValue("Number.float", "1."+strings.Repeat("0", 330))
	m := &mapping.Message{Body: []byte("b")}
	for i := range 100 { // their exact texts outgrow the envelope's 32 KiB
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: fmt.Sprintf("n%03d", i), Value: v})
	}
	big := &mapping.Message{Body: []byte(strings.Repeat("a", 200000))}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
		var reports []string
		opt := mapping.Options{Policy: p, OnDrop: func(f, r string) { reports = append(reports, f+": "+r) }}
		if _, err := EncodeBatch([]*mapping.Message{m}, opt); err != nil || len(reports) == 0 {
			t.Fatalf("%s: alone: %v, reports %q (want the shed)", p, err, reports)
		}
		reports = nil
		if _, err := EncodeBatch([]*mapping.Message{m, big, big}, opt); !errors.Is(err, ErrBatchTooLarge) {
			t.Fatalf("%s: %v", p, err)
		}
		if len(reports) > 0 {
			t.Errorf("%s: a refused batch reported %q", p, reports)
		}
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	for _, in := range []string{
		`{}`, `[1]`, `[{"Body":1}]`, `[{"Body":"x","Extra":1}]`, `[{"BrokerProperties":[]}]`,
		`[{"UserProperties":[]}]`, `[{"UserProperties":{"A":null}}]`, `[{"UserProperties":{"A":{}}}]`,
		`[{"UserProperties":{"A":"x","a":"y"}}]`,
	} {
		if _, err := DecodeBatch([]byte(in)); !mapping.IsReject(err) {
			t.Errorf("%s: %v", in, err)
		}
	}
	if _, err := ParseJSON([]byte(`{"Body":"x"} {}`)); !mapping.IsReject(err) {
		t.Errorf("trailing data: %v", err)
	}
}

// Batch and header forms agree: a property reads the same either way.
func TestBatchAgreesWithHeaders(t *testing.T) {
	m := &mapping.Message{Attributes: allKinds()}
	r, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromHeaders, err := Decode(r.Header, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	if d := mappingtest.Diff(fromHeaders, fromJSON, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}
