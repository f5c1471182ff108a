package mapping

import (
	"reflect"
	"testing"
	"time"
)

func fullMessage() *Message {
	prio := uint8(7)
	tr, _ := ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?")
	tr.State = "vendor=x"
	return &Message{
		Body: []byte("b"), BodyType: BodyText,
		ID: "42", IDKind: KindUint64, CorrelationID: "c", ContentType: "text/plain",
		ContentEncoding: "gzip", Subject: "s", To: "t", ReplyTo: "r", ReplyToGroup: "rg",
		GroupKey: "g", GroupSequence: 3, PartitionKey: "p", ViaPartitionKey: "vp", DedupID: "d",
		UserID: []byte{1, 2}, TTL: 90 * time.Second,
		ScheduledAt:    time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		CreationTime:   time.Date(2020, 1, 2, 3, 4, 5, 6e6, time.UTC),
		AbsoluteExpiry: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
		Durable:        true, Priority: &prio, FirstAcquirer: true,
		Annotations: []Attribute{{"x-opt-custom", Int32(5)}},
		Trace:       tr,
	}
}

func TestEnvelopeCarriesWhatIsNotNative(t *testing.T) {
	m := fullMessage()
	env := NewEnvelope(m, 0, &Options{})
	env.SetType("a", "Number.float")
	s, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseEnvelope(s)
	if err != nil {
		t.Fatal(err)
	}
	if dt, _ := parsed.TypeOf("a"); dt != "Number.float" {
		t.Fatalf("TypeOf = %q", dt)
	}
	got := &Message{Body: []byte("b")}
	if err := parsed.Apply(got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("Apply:\n got %+v\nwant %+v", got, m)
	}
}

func TestEnvelopeEmptyWhenAllNative(t *testing.T) {
	m := &Message{Body: []byte("x"), ID: "i", GroupKey: "g"}
	m.Trace, _ = ParseTraceparent("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
	env := NewEnvelope(m, FieldID|FieldGroupKey|FieldTraceW3C, nil)
	if !env.Empty() {
		s, _ := env.Marshal()
		t.Fatalf("envelope not empty: %s", s)
	}
	// The same trace on an X-Ray-only form fits too (flags 01, no state).
	if env := NewEnvelope(m, FieldID|FieldGroupKey|FieldTraceXRay, nil); !env.Empty() {
		t.Fatal("X-Ray form should hold a plain sampled trace")
	}
	m.Trace.State = "a=b"
	if env := NewEnvelope(m, FieldID|FieldGroupKey|FieldTraceXRay, nil); env.Empty() {
		t.Fatal("tracestate must be carried on an X-Ray form")
	}
}

func TestEnvelopeCarrySource(t *testing.T) {
	m := &Message{Source: Source{Protocol: "servicebus", SequenceNumber: "7", DeadLetterReason: "why", EnqueuedTime: time.Unix(5, 0).UTC()}}
	env := NewEnvelope(m, ^Field(0), &Options{CarrySource: true})
	s, _ := env.Marshal()
	p, err := ParseEnvelope(s)
	if err != nil {
		t.Fatal(err)
	}
	got := &Message{Source: Source{Protocol: "sqs"}}
	if err := p.Apply(got); err != nil {
		t.Fatal(err)
	}
	if got.Source.Protocol != "servicebus" || got.Source.SequenceNumber != "7" || got.Source.DeadLetterReason != "why" || !got.Source.EnqueuedTime.Equal(m.Source.EnqueuedTime) {
		t.Fatalf("source facts: %+v", got.Source)
	}
}

func TestParseEnvelopeErrors(t *testing.T) {
	for _, s := range []string{``, `{}`, `{"v":2}`, `[`, `{"v":1,"m":{"idKind":"nope"}}`, `{"v":1,"m":{"bodyType":"x"}}`, `{"v":1,"m":{"trace":{"traceId":"zz"}}}`} {
		e, err := ParseEnvelope(s)
		if err == nil {
			err = e.Apply(&Message{})
		}
		if err == nil {
			t.Errorf("%q: want error", s)
		}
	}
}

func FuzzEnvelope(f *testing.F) {
	m := fullMessage()
	s, _ := NewEnvelope(m, 0, nil).Marshal()
	f.Add(s)
	f.Add(`{"v":1,"types":{"a":"Number"},"attrs":[{"name":"x","value":{"type":"int","value":1}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEnvelope(s)
		if err != nil {
			return
		}
		_ = e.Apply(&Message{})
	})
}

func TestEnvelopeRefusesInvalidUTF8(t *testing.T) {
	for _, m := range []*Message{
		{Subject: "a\xffb"},
		{Annotations: []Attribute{{"x-opt-a", String("\xfe")}}},
		{Annotations: []Attribute{{"x-opt-a", List(Strings("ok", "\xc0"))}}},
	} {
		if _, err := NewEnvelope(m, 0, nil).Marshal(); err == nil {
			t.Errorf("%+v: want an error, not a silent U+FFFD", m)
		}
	}
	e := NewEnvelope(&Message{Subject: "ok", Annotations: []Attribute{{"x-opt-b", Binary([]byte{0xff})}}}, 0, nil)
	if _, err := e.Marshal(); err != nil {
		t.Errorf("binary is base64: %v", err)
	}
}

// TestDecodeBody: the one decoding of the envelope's body marker, with the
// one error text every codec reports (wrapped on the field "body").
func TestDecodeBody(t *testing.T) {
	for _, tc := range []struct {
		name, encoding, body string
		want                 string
		err                  string
	}{
		{"no envelope", "-", "as is", "as is", ""},
		{"none", "", "as is", "as is", ""},
		{"base64", BodyEncodingBase64, "aGk=", "hi", ""},
		{"empty", BodyEncodingEmpty, "-", "", ""},
		{"bad base64", BodyEncodingBase64, "!!", "", "qbridge.envelope: body marked base64 is not base64: illegal base64 data at input byte 0"},
		{"unknown", "rot13", "x", "", `qbridge.envelope: unknown body encoding "rot13": want "base64" or "empty"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Envelope
			if tc.encoding != "-" {
				e = &Envelope{V: 1, BodyEncoding: tc.encoding}
			}
			got, err := e.DecodeBody([]byte(tc.body))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
