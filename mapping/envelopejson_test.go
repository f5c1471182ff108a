package mapping

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fastEnvelopes are envelopes the hand-written writer takes, with texts
// that need escaping.
func fastEnvelopes() []*Envelope {
	g, empty, prio0, prio9 := "grp", "", uint8(0), uint8(9)
	odd := "a\"b\\c<d>&e\u2028f\u2029\x01\x7f\tü€😀"
	return []*Envelope{
		{V: 1},
		{V: 0},
		{V: 1, Types: map[string]string{}},
		{V: 1, Types: map[string]string{"b": "Number.int", "a": "String.uuid", "A": "Number.double", "a.b": "Binary.png"}},
		{V: 1, Types: map[string]string{odd: odd, "x": "String"}, BodyEncoding: "base64"},
		{V: 1, BodyEncoding: odd},
		{V: 1, Fields: &CarriedFields{}},
		{V: 1, Fields: &CarriedFields{GroupKey: &empty, Priority: &prio0}},
		{V: 2, Types: map[string]string{"t": "Number.timestamp"}, Fields: &CarriedFields{
			ID: "id", IDKind: "ulong", CorrelationID: odd, CorrelationKind: "uuid", ContentType: "text/plain; charset=utf-8",
			ContentEncoding: "gzip", Subject: "s", To: "t", ReplyTo: "r", ReplyToGroup: "rg", GroupKey: &g,
			GroupSequence: 4294967295, PartitionKey: "p", ViaPartitionKey: "vp", DedupID: "d", TTL: -5,
			Durable: true, Priority: &prio9, FirstAcquirer: true, BodyType: "text",
			Trace: &traceJSON{TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Flags: 255, State: odd, XS: "?", XE: "Lineage=a:1"},
		}},
		{V: 1, Fields: &CarriedFields{TTL: 1 << 62, Trace: &traceJSON{}}},
	}
}

func TestEnvelopeFastWriterMatchesEncodingJSON(t *testing.T) {
	for i, e := range fastEnvelopes() {
		got, ok := appendEnvelopeFast(nil, e)
		if !ok {
			t.Fatalf("%d: fast writer refused %+v", i, e)
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%d:\n got %s\nwant %s", i, got, want)
		}
		checkBothParsers(t, string(got))
	}
}

// checkBothParsers parses s with encoding/json (the old ParseEnvelope) and
// with ParseEnvelope, and wants the same envelope.
func checkBothParsers(t *testing.T, s string) {
	t.Helper()
	var old Envelope
	oldErr := json.Unmarshal([]byte(s), &old)
	var fast Envelope
	if parseEnvelopeFast(s, &fast) {
		if oldErr != nil {
			t.Fatalf("%q: fast parser took what encoding/json refuses: %v", s, oldErr)
		}
		if !reflect.DeepEqual(fast, old) {
			t.Fatalf("%q: fast parser:\n got %+v\nwant %+v", s, fast, old)
		}
	}
	e, err := ParseEnvelope(s)
	if oldErr != nil || old.V != 1 {
		if err == nil {
			t.Fatalf("%q: ParseEnvelope took what the old code refuses", s)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	if !reflect.DeepEqual(*e, old) {
		t.Fatalf("%q: ParseEnvelope:\n got %+v\nwant %+v", s, *e, old)
	}
}

func TestEnvelopeGeneralPathStillWritten(t *testing.T) {
	m := fullMessage()
	e := NewEnvelope(m, 0, &Options{CarrySource: true})
	e.Attrs = []Attribute{{"x", Int32(1)}}
	if _, ok := appendEnvelopeFast(nil, e); ok {
		t.Fatal("fast writer took attributes, times and annotations")
	}
	s, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(e)
	if s != string(want) {
		t.Fatalf("got %s\nwant %s", s, want)
	}
	checkBothParsers(t, s)
}

func TestParseEnvelopeFastEdges(t *testing.T) {
	for _, s := range []string{
		`{}`, `{"v":1}`, `{"v":01}`, `{"v":1.0}`, `{"v":1e0}`, `{"v":-1}`, `{"v":1,"v":2}`, `{"V":1}`,
		`{"v":1,"types":{}}`, `{"v":1,"types":null}`, `{"v":1,"types":{"a":"b","a":"c"}}`,
		`{"v":1,"types":{"a":"b"},"types":{"c":"d"}}`, `{"v":1,"types":{"a":1}}`, `{"v":1,"body":"base64"}`,
		`{"v":1,"body":"\u0062ase64"}`, `{"v":1,"body":null}`, `{"v":1} `, ` {"v":1}`, `{"v":1}x`, `{"v":1,}`,
		`{"v":1,"types":{"a":"b",}}`, `{"v":1,"m":{"id":"x"}}`, `{"v":1,"x":2}`, `{"v":1234567890}`,
		`{"v":1,"types":{"<&>":"é"}}`, `{"v":1,"types":{"a":"b"}`, `{"v"`, `{"v":`, `{"v":1,"types":{"a"`,
	} {
		checkBothParsers(t, s)
	}
}

func TestCarriedFieldsIsZero(t *testing.T) {
	var c CarriedFields
	if !c.isZero() {
		t.Fatal("zero fields not zero")
	}
	rv := reflect.ValueOf(&c).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint32, reflect.Uint8:
			f.SetUint(1)
		case reflect.Int64:
			f.SetInt(1)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0)) // empty but not nil: not zero
		default:
			t.Fatalf("field %s: kind %s not covered", rv.Type().Field(i).Name, f.Kind())
		}
		if c.isZero() || reflect.ValueOf(c).IsZero() {
			t.Errorf("field %s set: isZero true", rv.Type().Field(i).Name)
		}
		f.Set(reflect.Zero(f.Type()))
		if !c.isZero() {
			t.Fatalf("field %s reset: isZero false", rv.Type().Field(i).Name)
		}
	}
}

func FuzzEnvelopeFastPath(f *testing.F) {
	f.Add("a", "Number.int", "base64", "id", int64(5), byte(1), `{"v":1,"types":{"a":"Number.int"}}`)
	f.Add("<é>", "\u2028", "", "\x00", int64(-1), byte(0), `{"v":1,"body":"x"}`)
	f.Fuzz(func(t *testing.T, name, dt, body, id string, ttl int64, flags byte, raw string) {
		checkBothParsers(t, raw)
		e := &Envelope{V: 1, BodyEncoding: body, Types: map[string]string{name: dt, dt: name}}
		if id != "" || ttl != 0 || flags != 0 {
			e.Fields = &CarriedFields{ID: id, TTL: ttl, Trace: &traceJSON{TraceID: id, Flags: flags}}
		}
		if e.invalidUTF8() != "" {
			return // refused before writing
		}
		got, ok := appendEnvelopeFast(nil, e)
		want, err := json.Marshal(e)
		if !ok || err != nil || string(got) != string(want) {
			t.Fatalf("fast writer (%v):\n got %s\nwant %s", ok, got, want)
		}
		checkBothParsers(t, string(got))
	})
}
