package amqpmap

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func envelopeOf(t *testing.T, msg *amqp.Message) *mapping.Envelope {
	t.Helper()
	s, ok := msg.ApplicationProperties[mapping.EnvelopeName].(string)
	if !ok {
		return nil
	}
	env, err := mapping.ParseEnvelope(s)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestEncodeApplicationProperties checks the native type and the recorded
// envelope type of every kind.
func TestEncodeApplicationProperties(t *testing.T) {
	tests := []struct {
		v      mapping.Value
		native any
		typ    string // recorded in the envelope, "" for none
	}{
		{mapping.String("s"), "s", ""},
		{mapping.String("s").WithLabel("x"), "s", "String.x"},
		{mapping.Symbol("s"), amqp.Symbol("s"), "String.symbol"},
		{mapping.Binary([]byte{1}), []byte{1}, ""},
		{mapping.Binary([]byte{1}).WithLabel("png"), []byte{1}, "Binary.png"},
		{mapping.Bool(true), true, ""},
		{mapping.Int8(-1), int8(-1), ""},
		{mapping.Int16(-1), int16(-1), ""},
		{mapping.Int32(-1), int32(-1), ""},
		{mapping.Int64(-1), int64(-1), ""},
		{mapping.Uint8(1), uint8(1), ""},
		{mapping.Uint16(1), uint16(1), ""},
		{mapping.Uint32(1), uint32(1), ""},
		{mapping.Uint64(1), uint64(1), ""},
		{mapping.Float32(1.5), float32(1.5), ""},
		{mapping.Float64(1.5), 1.5, ""},
		{mapping.Float64(1.5).WithLabel("float"), 1.5, "Number.float"},
		{mapping.Number("7"), int64(7), "Number"},
		{mapping.Number("7.25"), 7.25, "Number"},
		// Natural type first, the exact text in the envelope (see
		// TestEncodeNaturalNumbers).
		{mapping.Number("7.250"), 7.25, "Number"},
		{mapping.Number("3.50").WithLabel("float"), 3.5, "Number.float"},
		{mapping.Number("007").WithLabel("int"), int32(7), "Number.int"},
		{mapping.Number("99999999999999999999"), "99999999999999999999", "Number"},
		{mapping.Decimal(mapping.KindDecimal128, "1.10"), "1.10", "Number.decimal128"},
		{mapping.Char('x'), "x", "String.char"},
		{mapping.TimestampMillis(1500), time.UnixMilli(1500).UTC(), ""},
		{mapping.UUID(uuid1), amqp.UUID(uuid1), ""},
		{mapping.URI("urn:x"), "urn:x", "String.uri"},
		{mapping.DateTimeOffsetTicks(mapping.TicksFromTime(time.Unix(0, 0))), "1970-01-01T00:00:00.0000000Z", "String.datetime-offset"},
		{mapping.TimeSpan(1500 * time.Millisecond), "1.5", "Number.timespan"},
		{mapping.Strings("a"), `["a"]`, "String.strings"},
		{mapping.List(mapping.Int32(1)), `[{"type":"int","value":1}]`, "String.list"},
		{mapping.Map(mapping.String("k"), mapping.Null()), `[[{"type":"string","value":"k"},{"type":"null"}]]`, "String.map"},
		{mapping.Null(), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.v.DataType(), func(t *testing.T) {
			msg, err := Encode(&mapping.Message{Attributes: mappingtest.Attrs("a", tt.v)}, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.ApplicationProperties["a"]; !reflect.DeepEqual(got, tt.native) {
				t.Errorf("native %#v (%T), want %#v (%T)", got, got, tt.native, tt.native)
			}
			typ, _ := envelopeOf(t, msg).TypeOf("a")
			if typ != tt.typ {
				t.Errorf("envelope type %q, want %q", typ, tt.typ)
			}
		})
	}
}

// TestEncodeNaturalNumbers: a Number travels in its natural AMQP type; where
// that type renders another text, the envelope keeps the exact text and a
// qbridge reader gets it back byte for byte. With the envelope off the text
// is normalized, and reported.
func TestEncodeNaturalNumbers(t *testing.T) {
	for _, tt := range []struct {
		v      mapping.Value
		native any
		text   string // kept in the envelope
	}{
		{parse(t, "Number.float", "3.5"), 3.5, ""},
		{parse(t, "Number.float", "3.50"), 3.5, "3.50"},
		{parse(t, "Number.int", "007"), int32(7), "007"},
		{parse(t, "Number", "1e3"), int64(1000), "1e3"},
		{parse(t, "Number.byte", "300"), int64(300), ""},
		{parse(t, "Number", "12345678901234567890123456789012345678"), "12345678901234567890123456789012345678", ""},
		{parse(t, "Number", "0.1000"), 0.1, "0.1000"},
		{parse(t, "Number.price", "-2.50"), -2.5, "-2.50"},
	} {
		m := &mapping.Message{Attributes: mappingtest.Attrs("a", tt.v)}
		msg, err := Encode(m, mapping.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.ApplicationProperties["a"]; !reflect.DeepEqual(got, tt.native) {
			t.Errorf("%s %q: native %#v (%T), want %#v", tt.v.DataType(), tt.v.Str(), got, got, tt.native)
		}
		env := envelopeOf(t, msg)
		if got := env.Texts["a"]; got != tt.text {
			t.Errorf("%s %q: envelope text %q, want %q", tt.v.DataType(), tt.v.Str(), got, tt.text)
		}
		back, err := Decode(msg)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := back.Attr("a"); !v.Equal(tt.v) {
			t.Errorf("%s %q came back as %#v", tt.v.DataType(), tt.v.Str(), v)
		}
		var shed []string
		msg, err = Encode(m, mapping.Options{Envelope: mapping.EnvelopeOff, OnShed: func(f []string) { shed = f }})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.ApplicationProperties[mapping.EnvelopeName]; ok {
			t.Errorf("envelope off: %v", msg.ApplicationProperties)
		}
		if got := msg.ApplicationProperties["a"]; !reflect.DeepEqual(got, tt.native) {
			t.Errorf("envelope off: native %#v", got)
		}
		if tt.text != "" && !slices.Contains(shed, "text") {
			t.Errorf("envelope off: shed %v, want the text reported", shed)
		}
	}
}

func parse(t *testing.T, dt, text string) mapping.Value {
	t.Helper()
	v, err := mapping.ParseValue(dt, text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEncodeHeader(t *testing.T) {
	tests := []struct {
		name string
		m    mapping.Message
		want *amqp.MessageHeader
	}{
		{"defaults: no header", mapping.Message{}, nil},
		{"durable", mapping.Message{Durable: true}, &amqp.MessageHeader{Durable: true, Priority: 4}},
		{"priority", mapping.Message{Priority: ptr(uint8(0))}, &amqp.MessageHeader{Priority: 0}},
		{"priority 4 is the default", mapping.Message{Priority: ptr(uint8(4))}, nil},
		{"ttl", mapping.Message{TTL: time.Minute}, &amqp.MessageHeader{Priority: 4, TTL: time.Minute}},
		{"ttl rounded up to ms", mapping.Message{TTL: 1}, &amqp.MessageHeader{Priority: 4, TTL: time.Millisecond}},
		{"first-acquirer", mapping.Message{FirstAcquirer: true}, &amqp.MessageHeader{Priority: 4, FirstAcquirer: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Encode(&tt.m, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(msg.Header, tt.want) {
				t.Errorf("header %+v, want %+v", msg.Header, tt.want)
			}
		})
	}
}

func TestEncodeTTLPolicy(t *testing.T) {
	long := 50 * 24 * time.Hour
	tests := []struct {
		policy    mapping.Policy
		header    time.Duration // 0: no TTL in the header
		carried   time.Duration
		dropped   []string
		rejectErr bool
	}{
		{mapping.Reject, 0, 0, nil, true},
		{mapping.Drop, 0, 0, []string{"header.ttl"}, false},
		{mapping.Encode, MaxTTL, long, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			var dropped []string
			msg, err := Encode(&mapping.Message{TTL: long}, collect(tt.policy, &dropped))
			if tt.rejectErr {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), "header.ttl") {
					t.Fatalf("error %v, want a RejectError naming header.ttl", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var h time.Duration
			if msg.Header != nil {
				h = msg.Header.TTL
			}
			if h != tt.header {
				t.Errorf("header ttl %v, want %v", h, tt.header)
			}
			var c time.Duration
			if env := envelopeOf(t, msg); env != nil && env.Fields != nil {
				c = time.Duration(env.Fields.TTL)
			}
			if c != tt.carried {
				t.Errorf("carried ttl %v, want %v", c, tt.carried)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped %v, want %v", dropped, tt.dropped)
			}
		})
	}
	if _, err := Encode(&mapping.Message{TTL: -1}, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("negative TTL: %v, want a RejectError", err)
	}
}

func TestEncodeIDs(t *testing.T) {
	tests := []struct {
		id     string
		kind   mapping.Kind
		native any
		bad    bool
	}{
		{"abc", 0, "abc", false},
		{"abc", mapping.KindString, "abc", false},
		{"42", mapping.KindUint64, uint64(42), false},
		{"-1", mapping.KindUint64, nil, true},
		{mapping.UUIDString(uuid1), mapping.KindUUID, amqp.UUID(uuid1), false},
		{"nope", mapping.KindUUID, nil, true},
		{"AAE=", mapping.KindBinary, []byte{0, 1}, false},
		{"!!", mapping.KindBinary, nil, true},
		{"1", mapping.KindInt32, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String()+"/"+tt.id, func(t *testing.T) {
			msg, err := Encode(&mapping.Message{ID: tt.id, IDKind: tt.kind, CorrelationID: tt.id, CorrelationKind: tt.kind}, mapping.Options{})
			if tt.bad {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), "properties.message-id") {
					t.Fatalf("error %v, want a RejectError naming properties.message-id", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(msg.Properties.MessageID, tt.native) || !reflect.DeepEqual(msg.Properties.CorrelationID, tt.native) {
				t.Errorf("ids %#v, %#v, want %#v", msg.Properties.MessageID, msg.Properties.CorrelationID, tt.native)
			}
		})
	}
}

func TestEncodeProperties(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	m := &mapping.Message{To: "to", Subject: "subj", ReplyTo: "rt", ContentType: "text/plain", ContentEncoding: "gzip",
		GroupKey: "g", GroupSequence: 3, ReplyToGroup: "rg", UserID: []byte("u"), CreationTime: at, AbsoluteExpiry: at.Add(time.Hour)}
	msg, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := msg.Properties
	utc, utc2 := at.UTC(), at.Add(time.Hour).UTC()
	want := &amqp.MessageProperties{To: ptr("to"), Subject: ptr("subj"), ReplyTo: ptr("rt"), ContentType: ptr("text/plain"),
		ContentEncoding: ptr("gzip"), GroupID: ptr("g"), GroupSequence: ptr(uint32(3)), ReplyToGroupID: ptr("rg"),
		UserID: []byte("u"), CreationTime: &utc, AbsoluteExpiryTime: &utc2}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("properties\n%+v\nwant\n%+v", p, want)
	}
	if env := envelopeOf(t, msg); env != nil {
		t.Errorf("unexpected envelope %+v", env)
	}
	if _, err := Encode(&mapping.Message{Subject: "\xff"}, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("invalid UTF-8 subject: %v, want a RejectError", err)
	}
}

func TestEncodeEnvelopeFields(t *testing.T) {
	sched := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &mapping.Message{DedupID: "d", PartitionKey: "p", ViaPartitionKey: "v", ScheduledAt: sched,
		Source: mapping.Source{Protocol: "sqs", SequenceNumber: "9"}}
	msg, err := Encode(m, mapping.Options{CarrySource: true})
	if err != nil {
		t.Fatal(err)
	}
	f := envelopeOf(t, msg).Fields
	if f == nil || f.DedupID != "d" || f.PartitionKey != "p" || f.ViaPartitionKey != "v" || !f.ScheduledAt.Equal(sched) || f.Source == nil {
		t.Errorf("carried fields %+v", f)
	}
}

func TestEncodeAttributePolicies(t *testing.T) {
	tests := []struct {
		name    string
		attrs   []mapping.Attribute
		policy  mapping.Policy
		reject  string   // substring of the RejectError, "" for success
		dropped []string // reported fields
		carried int      // attributes in the envelope
		native  []string // application property names written natively (envelope excluded)
	}{
		{"envelope name rejected", mappingtest.Attrs(mapping.EnvelopeName, mapping.String("x")), mapping.Reject, `"qbridge.envelope"`, nil, 0, nil},
		{"envelope name dropped", mappingtest.Attrs(mapping.EnvelopeName, mapping.String("x")), mapping.Drop, "", []string{`application-properties "qbridge.envelope"`}, 0, nil},
		{"envelope name carried", mappingtest.Attrs(mapping.EnvelopeName, mapping.String("x")), mapping.Encode, "", nil, 1, nil},
		{"duplicate rejected", mappingtest.Attrs("a", mapping.Int32(1), "a", mapping.Int32(2)), mapping.Reject, "duplicate", nil, 0, nil},
		{"duplicate dropped", mappingtest.Attrs("a", mapping.Int32(1), "a", mapping.Int32(2)), mapping.Drop, "", []string{`application-properties "a"`}, 0, []string{"a"}},
		{"duplicate carried", mappingtest.Attrs("a", mapping.Int32(1), "a", mapping.Int32(2)), mapping.Encode, "", nil, 1, []string{"a"}},
		{"invalid UTF-8 value never carried", mappingtest.Attrs("a", mapping.String("\xff")), mapping.Encode, "UTF-8", nil, 0, nil},
		{"invalid UTF-8 value dropped", mappingtest.Attrs("a", mapping.String("\xff"), "b", mapping.Int32(1)), mapping.Drop, "", []string{`application-properties "a"`}, 0, []string{"b"}},
		{"invalid UTF-8 name", mappingtest.Attrs("\xff", mapping.Int32(1)), mapping.Encode, "UTF-8", nil, 0, nil},
		// A Strings value's text is JSON, which cannot hold it either.
		{"invalid UTF-8 in Strings rejected", mappingtest.Attrs("a", mapping.Strings("x", "\xff")), mapping.Reject, "UTF-8", nil, 0, nil},
		{"invalid UTF-8 in Strings never carried", mappingtest.Attrs("a", mapping.Strings("x", "\xff")), mapping.Encode, "UTF-8", nil, 0, nil},
		{"invalid UTF-8 in Strings dropped", mappingtest.Attrs("a", mapping.Strings("x", "\xff"), "b", mapping.Int32(1)), mapping.Drop, "", []string{`application-properties "a"`}, 0, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dropped []string
			msg, err := Encode(&mapping.Message{Attributes: tt.attrs}, collect(tt.policy, &dropped))
			if tt.reject != "" {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), tt.reject) {
					t.Fatalf("error %v, want a RejectError with %q", err, tt.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped %v, want %v", dropped, tt.dropped)
			}
			var carried int
			if env := envelopeOf(t, msg); env != nil {
				carried = len(env.Attrs)
			}
			if carried != tt.carried {
				t.Errorf("%d attributes carried, want %d", carried, tt.carried)
			}
			var native []string
			for k := range msg.ApplicationProperties {
				if k != mapping.EnvelopeName {
					native = append(native, k)
				}
			}
			slices.Sort(native)
			if !slices.Equal(native, tt.native) {
				t.Errorf("native properties %v, want %v", native, tt.native)
			}
		})
	}
}

func TestEncodeTrace(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	w3c := mustTrace(t, tp, "k=v")
	xray, _ := mapping.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=x")
	noSpan, _ := mapping.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
	tests := []struct {
		name      string
		m         mapping.Message
		props     map[string]any // expected trace-related application properties
		carried   bool           // the trace rides in the envelope
		userTyped []string       // user attributes typed in the envelope
	}{
		{"none", mapping.Message{}, map[string]any{}, false, nil},
		{"w3c", mapping.Message{Trace: w3c}, map[string]any{"traceparent": tp, "tracestate": "k=v"}, false, nil},
		{"x-ray extras: traceparent and carried", mapping.Message{Trace: xray},
			map[string]any{"traceparent": "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"}, true, nil},
		{"no parent span: carried only", mapping.Message{Trace: noSpan}, map[string]any{}, true, nil},
		{"user traceparent, no trace", mapping.Message{Attributes: mappingtest.Attrs("traceparent", mapping.String(tp))},
			map[string]any{"traceparent": tp}, false, []string{"traceparent"}},
		{"user tracestate beside a trace", mapping.Message{Trace: w3c, Attributes: mappingtest.Attrs("tracestate", mapping.String("mine"))},
			map[string]any{"tracestate": "mine"}, true, []string{"tracestate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Encode(&tt.m, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for _, k := range []string{"traceparent", "tracestate"} {
				if v, ok := msg.ApplicationProperties[k]; ok {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tt.props) {
				t.Errorf("properties %v, want %v", got, tt.props)
			}
			env := envelopeOf(t, msg)
			if c := env != nil && env.Fields != nil && env.Fields.Trace != nil; c != tt.carried {
				t.Errorf("trace carried %v, want %v", c, tt.carried)
			}
			for _, name := range tt.userTyped {
				if _, ok := env.TypeOf(name); !ok {
					t.Errorf("user attribute %q not typed in the envelope", name)
				}
			}
			mappingtest.Check(t, &tt.m, roundTrip(t, Plain, &tt.m, mapping.Options{}))
		})
	}
}

func TestEncodeAnnotations(t *testing.T) {
	m := &mapping.Message{Annotations: mappingtest.Attrs(
		"x-int", mapping.Int32(5),
		"x-sym", mapping.Symbol("s"),
		"x-dec", mapping.Decimal(mapping.KindDecimal64, "1.5"),
		"x-map", mapping.Map(mapping.Binary([]byte{1}), mapping.Int32(1)),
	)}
	msg, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := amqp.Annotations{"x-int": int32(5), "x-sym": amqp.Symbol("s"), "x-dec": "1.5",
		"x-map": `[[{"type":"binary","value":"AQ=="},{"type":"int","value":1}]]`}
	if !reflect.DeepEqual(msg.Annotations, want) {
		t.Errorf("annotations %#v, want %#v", msg.Annotations, want)
	}
	var carried []string
	for _, a := range envelopeOf(t, msg).Fields.Annotations {
		carried = append(carried, a.Name)
	}
	if want := []string{"x-sym", "x-dec", "x-map"}; !slices.Equal(carried, want) {
		t.Errorf("carried %v, want %v", carried, want)
	}
	dup := &mapping.Message{Annotations: mappingtest.Attrs("x", mapping.Int32(1), "x", mapping.Int32(2))}
	if _, err := Encode(dup, mapping.Options{Policy: mapping.Encode}); !mapping.IsReject(err) {
		t.Errorf("duplicate annotation: %v, want a RejectError", err)
	}
}

func TestEncodeBody(t *testing.T) {
	tests := []struct {
		name     string
		m        mapping.Message
		data     [][]byte
		value    any
		seq      [][]any
		fallback bool
	}{
		{"data", mapping.Message{Body: []byte("b")}, [][]byte{[]byte("b")}, nil, nil, false},
		{"empty data", mapping.Message{}, [][]byte{{}}, nil, nil, false},
		{"text", mapping.Message{BodyType: mapping.BodyText, Body: []byte("t")}, nil, "t", nil, false},
		{"value", mapping.Message{BodyType: mapping.BodyValue, Body: []byte(`{"type":"long","value":5}`)}, nil, int64(5), nil, false},
		{"sequence", mapping.Message{BodyType: mapping.BodySequence, Body: []byte(`{"type":"list","value":[{"type":"list","value":[{"type":"int","value":1}]}]}`)},
			nil, nil, [][]any{{int32(1)}}, false},
		{"multi-data", mapping.Message{BodyType: mapping.BodyMultiData, Body: []byte(`{"type":"list","value":[{"type":"binary","value":"AQ=="},{"type":"binary","value":"Ag=="}]}`)},
			[][]byte{{1}, {2}}, nil, nil, false},
		{"text not UTF-8", mapping.Message{BodyType: mapping.BodyText, Body: []byte{0xff}}, [][]byte{{0xff}}, nil, nil, true},
		{"value of a string", mapping.Message{BodyType: mapping.BodyValue, Body: []byte(`{"type":"string","value":"s"}`)},
			[][]byte{[]byte(`{"type":"string","value":"s"}`)}, nil, nil, true},
		{"value with a decimal", mapping.Message{BodyType: mapping.BodyValue, Body: []byte(`{"type":"decimal32","value":"1"}`)},
			[][]byte{[]byte(`{"type":"decimal32","value":"1"}`)}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Encode(&tt.m, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(msg.Data, tt.data) || !reflect.DeepEqual(msg.Value, tt.value) || !reflect.DeepEqual(msg.Sequence, tt.seq) {
				t.Errorf("body data=%q value=%#v seq=%#v", msg.Data, msg.Value, msg.Sequence)
			}
			env := envelopeOf(t, msg)
			fb := env != nil && env.Fields != nil && env.Fields.BodyType != ""
			if fb != tt.fallback {
				t.Errorf("body type carried %v, want %v", fb, tt.fallback)
			}
		})
	}
}

func TestEncodeMaxMessageSize(t *testing.T) {
	m := &mapping.Message{Body: make([]byte, 1000)}
	if _, err := Encode(m, mapping.Options{MaxMessageSize: 1000}); !mapping.IsReject(err) {
		t.Errorf("oversize: %v, want a RejectError", err)
	}
	if _, err := Encode(m, mapping.Options{MaxMessageSize: 1010}); err != nil {
		t.Errorf("fits: %v", err)
	}
	var re *mapping.RejectError
	if _, err := Encode(nil, mapping.Options{}); !errors.As(err, &re) {
		t.Errorf("nil message: %v", err)
	}
}
