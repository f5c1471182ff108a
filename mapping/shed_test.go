package mapping

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestShedOrder: every carried field and the type and text notes are
// sheddable, each once, in ShedOrder; attributes and the body marker are
// not.
func TestShedOrder(t *testing.T) {
	p := uint8(1)
	m := &Message{
		ID: "i", IDKind: KindUint64, CorrelationID: "c", CorrelationKind: KindUUID, ContentType: "t",
		ContentEncoding: "gzip", Subject: "s", To: "to", ReplyTo: "r", ReplyToGroup: "rg", GroupKey: "g",
		GroupSequence: 3, PartitionKey: "p", ViaPartitionKey: "vp", DedupID: "d", UserID: []byte{1},
		TTL: time.Second, ScheduledAt: time.Unix(1, 0), CreationTime: time.Unix(2, 0), AbsoluteExpiry: time.Unix(3, 0),
		Durable: true, Priority: &p, FirstAcquirer: true, Annotations: []Attribute{{Name: "x", Value: Int32(1)}},
		BodyType: BodyText, Trace: Trace{TraceID: [16]byte{1}, SpanID: [8]byte{2}},
	}
	e := NewEnvelope(m, 0, &Options{CarrySource: true})
	e.SetType("a", "Number.float")
	e.SetText("a", "3.50")
	e.Attrs = []Attribute{{Name: "moved", Value: String("v")}}
	e.BodyEncoding = "base64"
	got := e.ShedAll(nil)
	if !slices.Equal(got, ShedOrder) {
		t.Errorf("shed %v\nwant %v", got, ShedOrder)
	}
	if e.Sheddable() || e.Fields != nil || !e.Essential() || e.Empty() {
		t.Errorf("after ShedAll: %+v", e)
	}
	want := &Envelope{V: 1, Attrs: e.Attrs, BodyEncoding: "base64"}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("left %+v, want %+v", e, want)
	}
}

// TestTextsApply: the exact text of a value sent in its natural type comes
// back through Apply, with the value's data type; a text for an attribute
// the message does not have is ignored.
func TestTextsApply(t *testing.T) {
	e := &Envelope{V: 1}
	e.SetText("f", "3.50")
	e.SetText("gone", "1")
	s, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseEnvelope(s)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := ParseValue("Number.float", "3.5")
	m := &Message{Attributes: []Attribute{{Name: "f", Value: f}}}
	if err := back.Apply(m); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Attr("f"); v.DataType() != "Number.float" || v.Str() != "3.50" {
		t.Errorf("f = %#v", v)
	}
	changed, _ := ParseValue("Number.float", "4")
	m = &Message{Attributes: []Attribute{{Name: "f", Value: changed}}}
	if err := back.Apply(m); err != nil || m.Attributes[0].Value.Str() == "3.50" {
		t.Errorf("a text applied to a changed value: %v %#v", err, m.Attributes[0].Value)
	}
	stale := &Envelope{V: 1, Texts: map[string]string{"f": "x"}}
	m = &Message{Attributes: []Attribute{{Name: "f", Value: Binary([]byte{1})}}}
	if err := stale.Apply(m); err != nil || !m.Attributes[0].Value.Equal(Binary([]byte{1})) {
		t.Errorf("a stale text: %v %v", err, m.Attributes)
	}
}

func TestNaturalNumber(t *testing.T) {
	for _, tc := range []struct {
		dt, text string
		want     Value
		same     bool
	}{
		{"Number.float", "3.50", Float64(3.5), false},
		{"Number", "42", Int64(42), true},
		{"Number", "-0.5", Float64(-0.5), true},
		{"Number", "1e5", Int64(100000), false},
		{"Number.int", "007", Int32(7), false},
		{"Number.int", "3000000000", Int64(3000000000), true},
		{"Number.ubyte", "0255", Uint8(255), false},
		{"Number.float32", "1.50", Float32(1.5), false},
		{"Number", "12345678901234567890123456789012345678", Number("12345678901234567890123456789012345678"), true},
		{"Number", "1e99999", Number("1e99999"), true},
		{"Number", "0.1", Float64(0.1), true},
	} {
		v, err := ParseValue(tc.dt, tc.text)
		if err != nil {
			t.Fatal(err)
		}
		got, same := NaturalNumber(v)
		if !got.Equal(tc.want) || same != tc.same {
			t.Errorf("%s %q: %#v %v, want %#v %v", tc.dt, tc.text, got, same, tc.want, tc.same)
		}
	}
}

func TestEnvelopeModes(t *testing.T) {
	for _, s := range []string{"auto", "off"} {
		m, err := ParseEnvelopeMode(s)
		if err != nil || m.String() != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseEnvelopeMode("on"); err == nil {
		t.Error("on: no error")
	}
	if o := (Options{Policy: Encode, Envelope: EnvelopeOff}).Effective(); o.Policy != Reject {
		t.Errorf("encode with the envelope off: %v", o.Policy)
	}
	if o := (Options{Policy: Encode}).Effective(); o.Policy != Encode {
		t.Errorf("encode: %v", o.Policy)
	}
}

// TestShedThroughOnDrop: without OnShed, a shed is reported through OnDrop
// in the form ShedReport reads back, and nothing else reads as one.
func TestShedThroughOnDrop(t *testing.T) {
	var field, reason string
	o := &Options{OnDrop: func(f, r string) { field, reason = f, r }}
	o.Shed([]string{"id", "types"})
	got, ok := ShedReport(field, reason)
	if !ok || !slices.Equal(got, []string{"id", "types"}) {
		t.Errorf("%q %q: %v %v", field, reason, got, ok)
	}
	for _, d := range [][2]string{{`attribute "qbridge.envelope"`, "envelope shed: id"}, {EnvelopeName, "reserved name"}, {EnvelopeName, "envelope shed: "}} {
		if _, ok := ShedReport(d[0], d[1]); ok {
			t.Errorf("%q %q read as a shed", d[0], d[1])
		}
	}
	o.Shed(nil) // nothing to report: no call
	o.OnDrop = func(string, string) { t.Error("empty shed reported") }
	o.Shed(nil)
}

// TestEncodedThroughOnDrop: what the Encode policy changed is reported
// through OnDrop in the form EncodedReport reads back; a drop's reason does
// not read as one, and a nil callback is not called.
func TestEncodedThroughOnDrop(t *testing.T) {
	var field, reason string
	o := &Options{OnDrop: func(f, r string) { field, reason = f, r }}
	o.Encoded(`attribute "a b"`, "name not valid here")
	if how, ok := EncodedReport(reason); field != `attribute "a b"` || !ok || how != "name not valid here" {
		t.Errorf("%q %q: %q %v", field, reason, how, ok)
	}
	if _, ok := EncodedReport("SQS takes at most 10 message attributes"); ok {
		t.Error("a drop's reason read as encoded")
	}
	(&Options{}).Encoded("body", "base64")
	var nilOpt *Options
	nilOpt.Encoded("body", "base64")
}
