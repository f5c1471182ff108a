package sqsmap

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

func TestEncodeBody(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		policy mapping.Policy
		reject bool
		want   string // wire body
		enc    string // envelope BodyEncoding
	}{
		{"text", []byte("Grüße 🌍\t\n"), mapping.Reject, false, "Grüße 🌍\t\n", ""},
		{"empty reject", nil, mapping.Reject, true, "", ""},
		{"empty drop", nil, mapping.Drop, true, "", ""},
		{"empty encode", []byte{}, mapping.Encode, false, EmptyBodyPlaceholder, mapping.BodyEncodingEmpty},
		{"binary reject", []byte{0x89, 'P', 'N', 'G', 0}, mapping.Reject, true, "", ""},
		{"binary drop", []byte{0x89, 'P', 'N', 'G', 0}, mapping.Drop, true, "", ""},
		{"binary encode", []byte{0x89, 'P', 'N', 'G', 0}, mapping.Encode, false, "iVBORwA=", mapping.BodyEncodingBase64},
		{"control char", []byte("a\x01"), mapping.Reject, true, "", ""},
		{"U+FFFE", []byte("a\uFFFE"), mapping.Encode, false, base64.StdEncoding.EncodeToString([]byte("a\uFFFE")), mapping.BodyEncodingBase64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sqsMsg("")
			m.Body = tc.body
			var r recorder
			o, err := Encode(m, opts(tc.policy, &r))
			if tc.reject {
				wantReject(t, err, "body")
				if len(r.fields) != 0 {
					t.Errorf("a body cannot be dropped, but Drop reported %v", r.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Body != tc.want {
				t.Errorf("body %q, want %q", o.Body, tc.want)
			}
			env := envelopeOf(t, o)
			got := ""
			if env != nil {
				got = env.BodyEncoding
			}
			if got != tc.enc {
				t.Errorf("body encoding %q, want %q", got, tc.enc)
			}
			_, back := roundTrip(t, m, opts(tc.policy, nil))
			if string(back.Body) != string(tc.body) {
				t.Errorf("round trip body %q, want %q", back.Body, tc.body)
			}
		})
	}
}

func TestEncodeAttributeNames(t *testing.T) {
	bad := []string{"", "AWS.trace", "aws.x", "amazon.X", ".lead", "trail.", "a..b", "größe", "with space",
		strings.Repeat("n", 257), mapping.EnvelopeName}
	for _, name := range bad {
		for _, p := range policies {
			t.Run(p.String()+"/"+name, func(t *testing.T) {
				m := sqsMsg("b", at("ok", mapping.String("v")), at(name, mapping.String("x")))
				var r recorder
				o, err := Encode(m, opts(p, &r))
				switch p {
				case mapping.Reject:
					wantReject(t, err, attrField(name))
					return
				case mapping.Drop:
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(r.fields, []string{attrField(name)}) {
						t.Errorf("dropped %v", r.fields)
					}
					if envelopeOf(t, o) != nil || len(o.Attributes) != 1 {
						t.Errorf("attributes %v", keys(o.Attributes))
					}
				case mapping.Encode:
					if err != nil {
						t.Fatal(err)
					}
					if got := envAttrNames(envelopeOf(t, o)); !slices.Equal(got, []string{name}) {
						t.Errorf("envelope attrs %q", got)
					}
					_, back := roundTrip(t, m, opts(p, nil))
					want := sqsMsg("b", at(name, mapping.String("x")), at("ok", mapping.String("v")))
					if name > "ok" {
						want.Attributes[0], want.Attributes[1] = want.Attributes[1], want.Attributes[0]
					}
					if d := diffMessages(want, back); d != "" {
						t.Error(d)
					}
				}
			})
		}
	}
}

func TestEncodeDuplicateNames(t *testing.T) {
	m := sqsMsg("b", at("x", mapping.String("1")), at("x", mapping.String("2")))
	_, err := Encode(m, opts(mapping.Reject, nil))
	wantReject(t, err, `attribute "x"`)
	var r recorder
	o, err := Encode(m, opts(mapping.Drop, &r))
	if err != nil || len(r.fields) != 1 || deref(wireAttrOf(t, o, "x").StringValue) != "1" {
		t.Errorf("drop: %v %v", err, r.fields)
	}
	_, back := roundTrip(t, m, opts(mapping.Encode, nil))
	if d := diffMessages(m, back); d != "" {
		t.Error(d)
	}
}

// TestEncodeValues checks each value's wire form and what each policy does
// with the ones SQS cannot take natively.
func TestEncodeValues(t *testing.T) {
	tests := []struct {
		name   string
		v      mapping.Value
		dt     string // wire data type; "" when the value cannot go natively
		str    string
		bin    []byte
		noted  string // data type recorded in the envelope
		movedE bool   // Encode moves it into the envelope
	}{
		{name: "int", v: mapping.Int32(42), dt: "Number.int", str: "42"},
		{name: "int 007", v: mapping.Number("007").WithLabel("int"), dt: "Number.int", str: "007"},
		{name: "number 38", v: mapping.Number(strings.Repeat("7", 38)), dt: "Number", str: strings.Repeat("7", 38)},
		{name: "float label", v: mapping.Float64(2.5).WithLabel("float"), dt: "Number.float", str: "2.5"},
		{name: "double", v: mapping.Float64(-0.125), dt: "Number.double", str: "-0.125"},
		{name: "ulong max", v: mapping.Uint64(math.MaxUint64), dt: "Number.ulong", str: "18446744073709551615"},
		{name: "uuid", v: mapping.UUID([16]byte{1, 2, 3}), dt: "String.uuid", str: "01020300-0000-0000-0000-000000000000"},
		{name: "png", v: mapping.Binary([]byte{0x89, 'P'}).WithLabel("png"), dt: "Binary.png", bin: []byte{0x89, 'P'}},
		{name: "unicode", v: mapping.String("Grüße 🌍"), dt: "String", str: "Grüße 🌍"},
		{name: "unicode label", v: mapping.String("x").WithLabel("ünits"), dt: "String.ünits", str: "x"},
		{name: "NaN", v: mapping.Float64(math.NaN()), dt: "String", str: "NaN", noted: "Number.double"},
		{name: "+Inf", v: mapping.Float64(math.Inf(1)), dt: "String", str: "Infinity", noted: "Number.double"},
		{name: "1e300", v: mapping.Float64(1e300), dt: "String", str: "1" + strings.Repeat("0", 300), noted: "Number.double"},
		{name: "5e-324", v: mapping.Float64(5e-324), dt: "String", str: "0." + strings.Repeat("0", 323) + "5", noted: "Number.double"},
		{name: "39 digits", v: mapping.Number(strings.Repeat("1", 39)), dt: "String", str: strings.Repeat("1", 39), noted: "Number"},
		{name: "not a number", v: mapping.Number("abc"), dt: "String", str: "abc", noted: "Number"},
		{name: "decimal128 huge", v: mapping.Decimal(mapping.KindDecimal128, "1E+6000"), dt: "String", str: "1E+6000", noted: "Number.decimal128"},
		{name: "NUL in string", v: mapping.String("a\x00b"), dt: "Binary", bin: []byte("a\x00b"), noted: "String"},
		{name: "invalid UTF-8", v: mapping.String("a\xffb").WithLabel("raw"), dt: "Binary", bin: []byte("a\xffb"), noted: "String.raw"},
		{name: "char U+FFFF", v: mapping.Char(0xFFFF), dt: "Binary", bin: []byte("\uFFFF"), noted: "String.char"},
		{name: "bad label", v: mapping.String("x").WithLabel("a\x01"), dt: "String", str: "x", noted: "String.a\x01"},
		{name: "long label", v: mapping.Number("1").WithLabel(strings.Repeat("l", 300)), dt: "Number", str: "1", noted: "Number." + strings.Repeat("l", 300)},
		{name: "empty string", v: mapping.String(""), movedE: true},
		{name: "empty labelled", v: mapping.String("").WithLabel("x"), movedE: true},
		{name: "empty binary", v: mapping.Binary(nil), movedE: true},
	}
	for _, tc := range tests {
		native := tc.dt != "" && tc.noted == ""
		for _, p := range policies {
			t.Run(tc.name+"/"+p.String(), func(t *testing.T) {
				m := sqsMsg("b", at("a", tc.v))
				var r recorder
				o, err := Encode(m, opts(p, &r))
				if !native && p == mapping.Reject {
					wantReject(t, err, `attribute "a"`)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				env := envelopeOf(t, o)
				if !native && p == mapping.Drop {
					if len(o.Attributes) != 0 || !slices.Equal(r.fields, []string{`attribute "a"`}) {
						t.Errorf("drop: attributes %v, reported %v", keys(o.Attributes), r.fields)
					}
					return
				}
				if tc.movedE {
					if _, ok := o.Attributes["a"]; ok || !slices.Equal(envAttrNames(env), []string{"a"}) {
						t.Errorf("want it in the envelope, got wire %v", keys(o.Attributes))
					}
				} else {
					a := wireAttrOf(t, o, "a")
					if deref(a.DataType) != tc.dt || deref(a.StringValue) != tc.str || string(a.BinaryValue) != string(tc.bin) ||
						(a.StringValue == nil) != (tc.bin != nil) {
						t.Errorf("wire %q %q %q, want %q %q %q", deref(a.DataType), deref(a.StringValue), a.BinaryValue, tc.dt, tc.str, tc.bin)
					}
					got, _ := env.TypeOf("a")
					if got != tc.noted {
						t.Errorf("envelope type %q, want %q", got, tc.noted)
					}
				}
				_, back := roundTrip(t, m, opts(p, nil))
				if d := diffMessages(m, back); d != "" {
					t.Error(d)
				}
			})
		}
	}
}

func TestEncodeInvalidValue(t *testing.T) {
	bad := mapping.Value{Kind: mapping.KindUUID} // no bytes
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
		_, err := Encode(sqsMsg("b", at("u", bad)), opts(p, nil))
		wantReject(t, err, `attribute "u"`)
	}
	var r recorder
	o, err := Encode(sqsMsg("b", at("u", bad)), opts(mapping.Drop, &r))
	if err != nil || len(o.Attributes) != 0 || len(r.fields) != 1 {
		t.Errorf("drop: %v %v %v", err, keys(o.Attributes), r.fields)
	}
}

func nAttrs(n int) []mapping.Attribute {
	var as []mapping.Attribute
	for i := range n {
		as = append(as, at(string(rune('a'+i)), mapping.Int32(int32(i))))
	}
	return as
}

func TestEncodeAttributeCount(t *testing.T) {
	tests := []struct {
		name      string
		m         *mapping.Message
		policy    mapping.Policy
		reject    bool
		native    int      // user attributes on the wire
		envelope  bool     // qbridge.envelope present
		moved     []string // attributes in the envelope
		dropped   []string
		shed      []string // envelope members shed
		roundTrip bool
	}{
		{name: "10 fit", m: sqsMsg("b", nAttrs(10)...), policy: mapping.Reject, native: 10, roundTrip: true},
		{name: "11 reject", m: sqsMsg("b", nAttrs(11)...), policy: mapping.Reject, reject: true},
		{name: "11 drop", m: sqsMsg("b", nAttrs(11)...), policy: mapping.Drop, native: 10, dropped: []string{`attribute "k"`}},
		{name: "11 encode", m: sqsMsg("b", nAttrs(11)...), policy: mapping.Encode, native: 9, envelope: true, moved: []string{"j", "k"}, roundTrip: true},
		// Ten attributes fit natively: the envelope (here the id alone) is
		// shed, whatever the policy.
		{name: "10 + envelope reject", m: withID(sqsMsg("b", nAttrs(10)...)), policy: mapping.Reject, native: 10, shed: []string{"id"}},
		{name: "10 + envelope drop", m: withID(sqsMsg("b", nAttrs(10)...)), policy: mapping.Drop, native: 10, shed: []string{"id"}},
		{name: "10 + envelope encode", m: withID(sqsMsg("b", nAttrs(10)...)), policy: mapping.Encode, native: 10, shed: []string{"id"}},
		{name: "11 + envelope drop", m: withID(sqsMsg("b", nAttrs(11)...)), policy: mapping.Drop, native: 10,
			dropped: []string{`attribute "k"`}, shed: []string{"id"}},
		{name: "9 + envelope", m: withID(sqsMsg("b", nAttrs(9)...)), policy: mapping.Reject, native: 9, envelope: true, roundTrip: true},
		// The 11th needs a type note: dropping it empties the envelope, so 10 fit.
		{name: "drop frees the envelope", m: sqsMsg("b", append(nAttrs(10), at("z", mapping.Float64(math.NaN())))...),
			policy: mapping.Drop, native: 10, dropped: []string{`attribute "z"`}},
		// An Encode-policy encoding (a String that is not XML text, sent
		// as Binary) is undone by its type record: the envelope holding it
		// is never shed (an audit saw it come back as Binary). With ten
		// attributes, the tenth moves into the envelope instead.
		{name: "10 with an encoding", m: sqsMsg("b", append(nAttrs(9), at("z", mapping.String("a\x01b")))...), policy: mapping.Encode,
			native: 9, envelope: true, moved: []string{"z"}, roundTrip: true},
		{name: "9 with an encoding + envelope", m: withID(sqsMsg("b", append(nAttrs(8), at("z", mapping.String("a\x01b")))...)), policy: mapping.Encode,
			native: 9, envelope: true, roundTrip: true},
		{name: "30 encode", m: sqsMsg("b", nAttrs(26)...), policy: mapping.Encode, native: 9, envelope: true,
			moved: strings.Split("jklmnopqrstuvwxyz", ""), roundTrip: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			var shed []string
			op := opts(tc.policy, &r)
			op.OnShed = func(f []string) { shed = append(shed, f...) }
			o, err := Encode(tc.m, op)
			if tc.reject {
				wantReject(t, err, "attributes")
				if !strings.Contains(err.Error(), "at most 10") {
					t.Errorf("reason %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			env := envelopeOf(t, o)
			if got := len(o.Attributes) - b2i(env != nil); got != tc.native || (env != nil) != tc.envelope {
				t.Errorf("native %d envelope %v, want %d %v", got, env != nil, tc.native, tc.envelope)
			}
			if len(o.Attributes) > MaxAttributes {
				t.Errorf("%d attributes on the wire", len(o.Attributes))
			}
			if got := envAttrNames(env); !slices.Equal(got, tc.moved) {
				t.Errorf("moved %v, want %v", got, tc.moved)
			}
			if !slices.Equal(r.fields, tc.dropped) {
				t.Errorf("dropped %v, want %v", r.fields, tc.dropped)
			}
			if !slices.Equal(shed, tc.shed) {
				t.Errorf("shed %v, want %v", shed, tc.shed)
			}
			if tc.roundTrip {
				_, back := roundTrip(t, tc.m, opts(tc.policy, nil))
				if d := diffMessages(tc.m, back); d != "" {
					t.Error(d)
				}
			}
		})
	}
}

func withID(m *mapping.Message) *mapping.Message {
	m.ID, m.Source.Protocol = "id-1", "amqp"
	return m
}

func TestEncodeSize(t *testing.T) {
	// attribute "a": 1 + len("String") + value
	attrA := func(n int) mapping.Attribute { return at("a", mapping.String(strings.Repeat("v", n))) }
	tests := []struct {
		name    string
		body    int
		attrs   []mapping.Attribute
		max     int
		policy  mapping.Policy
		reject  bool
		dropped []string
	}{
		{name: "body at limit", body: DefaultMaxMessageSize, policy: mapping.Reject},
		{name: "body over", body: DefaultMaxMessageSize + 1, policy: mapping.Reject, reject: true},
		{name: "body over drop", body: DefaultMaxMessageSize + 1, attrs: []mapping.Attribute{attrA(1)}, policy: mapping.Drop, reject: true},
		{name: "body over encode", body: DefaultMaxMessageSize + 1, policy: mapping.Encode, reject: true},
		{name: "attrs count", body: 100, attrs: []mapping.Attribute{attrA(93)}, max: 200, policy: mapping.Reject},
		{name: "attrs count over", body: 100, attrs: []mapping.Attribute{attrA(94)}, max: 200, policy: mapping.Reject, reject: true},
		{name: "attrs over encode", body: 100, attrs: []mapping.Attribute{attrA(94)}, max: 200, policy: mapping.Encode, reject: true},
		{name: "drop the largest", body: 100, attrs: []mapping.Attribute{attrA(90), at("b", mapping.String("small"))}, max: 200,
			policy: mapping.Drop, dropped: []string{`attribute "a"`}},
		{name: "1 MiB", body: 1 << 20, max: 1 << 20, policy: mapping.Reject},
		// The type record that undoes an encoding counts as content: no
		// room for it is no room for the message.
		{name: "no room for an encoding's type", body: 100, attrs: []mapping.Attribute{at("a", mapping.String("a\x01b"))}, max: 112, policy: mapping.Encode, reject: true},
		{name: "room for an encoding's type", body: 100, attrs: []mapping.Attribute{at("a", mapping.String("a\x01b"))}, max: 200, policy: mapping.Encode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sqsMsg(strings.Repeat("x", tc.body), tc.attrs...)
			var r recorder
			o := opts(tc.policy, &r)
			o.MaxMessageSize = tc.max
			out, err := Encode(m, o)
			if tc.reject {
				wantReject(t, err, "message")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.fields, tc.dropped) {
				t.Errorf("dropped %v, want %v", r.fields, tc.dropped)
			}
			limit := tc.max
			if limit == 0 {
				limit = DefaultMaxMessageSize
			}
			if out.Size() > limit {
				t.Errorf("size %d > %d", out.Size(), limit)
			}
		})
	}
}

func TestOutboundSize(t *testing.T) {
	m := withID(sqsMsg("héllo", at("n", mapping.Int32(42)), at("p", mapping.Binary([]byte{1, 2, 3}).WithLabel("png"))))
	o, err := Encode(m, opts(mapping.Reject, nil))
	if err != nil {
		t.Fatal(err)
	}
	env := deref(o.Attributes[mapping.EnvelopeName].StringValue)
	want := len("héllo") + // 6 bytes
		len("n") + len("Number.int") + len("42") +
		len("p") + len("Binary.png") + 3 +
		len(mapping.EnvelopeName) + len(mapping.EnvelopeDataType) + len(env)
	if got := o.Size(); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
	m.Trace = mapping.Trace{TraceID: [16]byte{1}}
	o2, _ := Encode(m, opts(mapping.Reject, nil))
	if o2.Size() != want {
		t.Errorf("the system attribute counts: %d", o2.Size())
	}
}

func TestEncodeFIFO(t *testing.T) {
	fifo := func(p mapping.Policy, r *recorder) EncodeOptions {
		o := opts(p, r)
		o.FIFO = true
		return o
	}
	type want struct {
		group, dedup string
		envGroup     *string // carried group key
		envDedup     string
		reject       string // field
		dropped      []string
		// idAsDedup: the id went to its native home alone, so it decodes
		// as the dedup id (the SQS message id becomes the id).
		idAsDedup bool
	}
	tests := []struct {
		name string
		m    *mapping.Message
		opt  EncodeOptions
		want want
	}{
		{"explicit", &mapping.Message{Body: []byte("b"), GroupKey: "g1", DedupID: "d1"}, fifo(mapping.Reject, nil),
			want{group: "g1", dedup: "d1"}},
		{"dedup from ID", &mapping.Message{Body: []byte("b"), ID: "id-1", GroupKey: "g1"}, fifo(mapping.Reject, nil),
			want{group: "g1", dedup: "id-1", idAsDedup: true}},
		{"dedup equal to carried ID is carried", &mapping.Message{Body: []byte("b"), ID: "x", DedupID: "x", GroupKey: "g"}, fifo(mapping.Reject, nil),
			want{group: "g", dedup: "x", envDedup: "x"}},
		{"no group: default", &mapping.Message{Body: []byte("b"), DedupID: "d"}, fifo(mapping.Reject, nil),
			want{group: DefaultGroupID, dedup: "d", envGroup: new("")}},
		{"no group: configured", &mapping.Message{Body: []byte("b"), DedupID: "d"},
			func() EncodeOptions { o := fifo(mapping.Reject, nil); o.DefaultGroup = "all"; return o }(),
			want{group: "all", dedup: "d", envGroup: new("")}},
		// Content-based deduplication merges equal bodies: a message with a
		// name of its own (or the source's for it) keeps it there too.
		{"content-based, ID wins", &mapping.Message{Body: []byte("b"), ID: "id-1", GroupKey: "g"},
			func() EncodeOptions { o := fifo(mapping.Reject, nil); o.ContentBasedDedup = true; return o }(),
			want{group: "g", dedup: "id-1", idAsDedup: true}},
		{"content-based, the source's name for it", &mapping.Message{Body: []byte("b"), GroupKey: "g",
			Source: mapping.Source{Protocol: "nats", Address: "orders.eu", SequenceNumber: "7"}},
			func() EncodeOptions { o := fifo(mapping.Reject, nil); o.ContentBasedDedup = true; return o }(),
			want{group: "g", dedup: "qbridge-" + hashID("nats\x00orders.eu\x007")}},
		{"content-based, nothing names it", &mapping.Message{Body: []byte("b"), GroupKey: "g"},
			func() EncodeOptions { o := fifo(mapping.Reject, nil); o.ContentBasedDedup = true; return o }(),
			want{group: "g"}},
		{"content-based, explicit wins", &mapping.Message{Body: []byte("b"), DedupID: "d", GroupKey: "g"},
			func() EncodeOptions { o := fifo(mapping.Reject, nil); o.ContentBasedDedup = true; return o }(),
			want{group: "g", dedup: "d"}},
		{"no id: the source's name for it", &mapping.Message{Body: []byte("b"), GroupKey: "g",
			Source: mapping.Source{Protocol: "nats", Address: "orders.eu", SequenceNumber: "7"}}, fifo(mapping.Reject, nil),
			want{group: "g", dedup: "qbridge-" + hashID("nats\x00orders.eu\x007")}},
		{"invalid group reject", &mapping.Message{Body: []byte("b"), GroupKey: "grüße", DedupID: "d"}, fifo(mapping.Reject, nil),
			want{reject: "MessageGroupId"}},
		{"invalid group drop", &mapping.Message{Body: []byte("b"), GroupKey: "grüße", DedupID: "d"}, fifo(mapping.Drop, &recorder{}),
			want{group: hashID("grüße"), dedup: "d", dropped: []string{"MessageGroupId"}}},
		{"invalid group encode", &mapping.Message{Body: []byte("b"), GroupKey: "grüße", DedupID: "d"}, fifo(mapping.Encode, nil),
			want{group: hashID("grüße"), dedup: "d", envGroup: new("grüße")}},
		{"long dedup reject", &mapping.Message{Body: []byte("b"), GroupKey: "g", DedupID: strings.Repeat("d", 129)}, fifo(mapping.Reject, nil),
			want{reject: "MessageDeduplicationId"}},
		{"long dedup encode", &mapping.Message{Body: []byte("b"), GroupKey: "g", DedupID: strings.Repeat("d", 129)}, fifo(mapping.Encode, nil),
			want{group: "g", dedup: hashID(strings.Repeat("d", 129)), envDedup: strings.Repeat("d", 129)}},
		{"invalid ID as dedup is hashed", &mapping.Message{Body: []byte("b"), GroupKey: "g", ID: "id with space"}, fifo(mapping.Reject, nil),
			want{group: "g", dedup: hashID("id with space")}},
		// Standard queues take MessageGroupId (fair queues); the envelope,
		// written for the dedup id, carries the group too.
		{"standard queue", &mapping.Message{Body: []byte("b"), GroupKey: "g", DedupID: "d"}, opts(mapping.Reject, nil),
			want{group: "g", envGroup: new("g"), envDedup: "d"}},
		{"standard queue, group alone", &mapping.Message{Body: []byte("b"), GroupKey: "g"}, opts(mapping.Reject, nil),
			want{group: "g"}},
		{"standard queue, group not an SQS id", &mapping.Message{Body: []byte("b"), GroupKey: "grüße"}, opts(mapping.Reject, nil),
			want{envGroup: new("grüße")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			if tc.opt.OnDrop != nil {
				tc.opt.OnDrop = r.onDrop
			}
			o, err := Encode(tc.m, tc.opt)
			if tc.want.reject != "" {
				wantReject(t, err, tc.want.reject)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.GroupID != tc.want.group || o.DedupID != tc.want.dedup {
				t.Errorf("group %q dedup %q, want %q %q", o.GroupID, o.DedupID, tc.want.group, tc.want.dedup)
			}
			var f mapping.CarriedFields
			if env := envelopeOf(t, o); env != nil && env.Fields != nil {
				f = *env.Fields
			}
			if (f.GroupKey == nil) != (tc.want.envGroup == nil) || f.GroupKey != nil && *f.GroupKey != *tc.want.envGroup {
				t.Errorf("carried group %v, want %v", f.GroupKey, tc.want.envGroup)
			}
			if f.DedupID != tc.want.envDedup {
				t.Errorf("carried dedup %q, want %q", f.DedupID, tc.want.envDedup)
			}
			if !slices.Equal(r.fields, tc.want.dropped) {
				t.Errorf("dropped %v, want %v", r.fields, tc.want.dropped)
			}
			if tc.want.idAsDedup {
				out, back := roundTrip(t, tc.m, tc.opt)
				if envelopeOf(t, out) != nil || back.DedupID != tc.m.ID || back.ID == tc.m.ID {
					t.Errorf("id %q: envelope %v, decoded id %q dedup %q", tc.m.ID, envelopeOf(t, out), back.ID, back.DedupID)
				}
			} else if tc.opt.Policy != mapping.Drop && !tc.opt.ContentBasedDedup && tc.m.DedupKey() != "" {
				_, back := roundTrip(t, tc.m, tc.opt)
				if d := diffMessages(tc.m, back); d != "" {
					t.Error(d)
				}
			}
		})
	}
	if _, err := Encode(&mapping.Message{Body: []byte("b")}, func() EncodeOptions {
		o := fifo(mapping.Reject, nil)
		o.DefaultGroup = "bad group"
		return o
	}()); err == nil || mapping.IsReject(err) {
		t.Errorf("an invalid DefaultGroup is a configuration error, got %v", err)
	}
}

func TestEncodeSchedule(t *testing.T) {
	tests := []struct {
		name    string
		in      time.Duration // ScheduledAt - now; 0 for unset
		fifo    bool
		policy  mapping.Policy
		reject  bool
		delay   int32
		carried bool
		dropped bool
	}{
		{name: "unset", policy: mapping.Reject},
		{name: "past", in: -time.Hour, policy: mapping.Reject, carried: true},
		{name: "10s", in: 10 * time.Second, policy: mapping.Reject, delay: 10, carried: true},
		{name: "10.2s rounds up", in: 10*time.Second + 200*time.Millisecond, policy: mapping.Reject, delay: 11, carried: true},
		{name: "900s", in: 900 * time.Second, policy: mapping.Reject, delay: 900, carried: true},
		{name: "901s reject", in: 901 * time.Second, policy: mapping.Reject, reject: true},
		{name: "901s drop", in: 901 * time.Second, policy: mapping.Drop, dropped: true},
		{name: "901s encode", in: 901 * time.Second, policy: mapping.Encode, carried: true},
		{name: "year 2300 encode", in: 275 * 365 * 24 * time.Hour, policy: mapping.Encode, carried: true},
		{name: "fifo reject", in: 10 * time.Second, fifo: true, policy: mapping.Reject, reject: true},
		{name: "fifo drop", in: 10 * time.Second, fifo: true, policy: mapping.Drop, dropped: true},
		{name: "fifo encode", in: 10 * time.Second, fifo: true, policy: mapping.Encode, carried: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sqsMsg("b")
			m.GroupKey, m.DedupID = "g", "d" // so that FIFO needs no envelope
			if tc.in != 0 {
				m.ScheduledAt = t0.Add(tc.in)
			}
			var r recorder
			o := opts(tc.policy, &r)
			o.FIFO = tc.fifo
			out, err := Encode(m, o)
			if tc.reject {
				wantReject(t, err, "ScheduledAt")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.DelaySeconds != tc.delay {
				t.Errorf("DelaySeconds %d, want %d", out.DelaySeconds, tc.delay)
			}
			env := envelopeOf(t, out)
			carried := env != nil && env.Fields != nil && env.Fields.ScheduledAt != nil
			if carried != tc.carried || carried && !env.Fields.ScheduledAt.Equal(m.ScheduledAt) {
				t.Errorf("carried %v, want %v", carried, tc.carried)
			}
			if (len(r.fields) == 1 && r.fields[0] == "ScheduledAt") != tc.dropped {
				t.Errorf("dropped %v", r.fields)
			}
			// The Encode policy sent it now: said, for a dry run to show.
			if encoded := tc.policy == mapping.Encode && (tc.fifo || tc.in > 900*time.Second); fmt.Sprint(r.encoded) != fmt.Sprint(map[bool][]string{true: {"ScheduledAt"}}[encoded]) {
				t.Errorf("encoded %v, want it reported: %v", r.encoded, encoded)
			}
		})
	}
}

func TestEncodeTrace(t *testing.T) {
	xray, err := mapping.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1")
	if err != nil {
		t.Fatal(err)
	}
	w3c, _ := mapping.ParseTraceparent("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
	w3c.State = "congo=t61rcWkgMzE"
	bad := xray
	bad.XRayExtra = "noequals"
	tests := []struct {
		name    string
		tr      mapping.Trace
		header  string
		carried bool
	}{
		{"x-ray", xray, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1", false},
		{"w3c with tracestate", w3c, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true},
		{"malformed extra", bad, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sqsMsg("b")
			m.Trace = tc.tr
			o, err := Encode(m, opts(mapping.Reject, nil))
			if err != nil {
				t.Fatal(err)
			}
			h := deref(o.SystemAttributes["AWSTraceHeader"].StringValue)
			if h != tc.header {
				t.Errorf("header %q, want %q", h, tc.header)
			}
			if h != "" && deref(o.SystemAttributes["AWSTraceHeader"].DataType) != "String" {
				t.Errorf("data type %q", deref(o.SystemAttributes["AWSTraceHeader"].DataType))
			}
			env := envelopeOf(t, o)
			if carried := env != nil && env.Fields != nil && env.Fields.Trace != nil; carried != tc.carried {
				t.Errorf("carried %v, want %v", carried, tc.carried)
			}
			_, back := roundTrip(t, m, opts(mapping.Reject, nil))
			if back.Trace != tc.tr {
				t.Errorf("trace %+v, want %+v", back.Trace, tc.tr)
			}
		})
	}
}

func TestEncodeCarriesIDUnlessFromSQS(t *testing.T) {
	m := &mapping.Message{Body: []byte("b"), ID: "sb-1", Source: mapping.Source{Protocol: "servicebus"}}
	o, _ := Encode(m, opts(mapping.Reject, nil))
	if env := envelopeOf(t, o); env == nil || env.Fields.ID != "sb-1" {
		t.Errorf("ID not carried")
	}
	m.Source.Protocol, m.Source.MessageID = "sqs", "sb-1"
	o, _ = Encode(m, opts(mapping.Reject, nil))
	if envelopeOf(t, o) != nil {
		t.Errorf("an SQS message id is carried")
	}
	// An id restored from an envelope is not the SQS message id: carried on.
	m.Source.MessageID = "sqs-assigned"
	o, _ = Encode(m, opts(mapping.Reject, nil))
	if env := envelopeOf(t, o); env == nil || env.Fields.ID != "sb-1" {
		t.Errorf("restored ID not carried on a second hop")
	}
}

func TestEncodeEnvelopeEscapesNonXML(t *testing.T) {
	m := sqsMsg("b")
	m.Subject = "odd \uFFFE\uFFFF"
	o, err := Encode(m, opts(mapping.Reject, nil))
	if err != nil {
		t.Fatal(err)
	}
	v := deref(o.Attributes[mapping.EnvelopeName].StringValue)
	if invalidTextAt(v) >= 0 {
		t.Fatalf("envelope %q holds characters SQS refuses", v)
	}
	_, back := roundTrip(t, m, opts(mapping.Reject, nil))
	if back.Subject != m.Subject {
		t.Errorf("subject %q", back.Subject)
	}
}

func TestSendInputs(t *testing.T) {
	m := &mapping.Message{Body: []byte("b"), GroupKey: "g", DedupID: "d", Attributes: []mapping.Attribute{at("n", mapping.Int32(1))},
		Trace: mapping.Trace{TraceID: [16]byte{1}}, Source: mapping.Source{Protocol: "sqs"}}
	o, err := Encode(m, EncodeOptions{FIFO: true})
	if err != nil {
		t.Fatal(err)
	}
	in := o.SendMessageInput("https://q")
	if deref(in.QueueUrl) != "https://q" || deref(in.MessageBody) != "b" || deref(in.MessageGroupId) != "g" ||
		deref(in.MessageDeduplicationId) != "d" || len(in.MessageAttributes) != 1 || len(in.MessageSystemAttributes) != 1 {
		t.Errorf("SendMessageInput %+v", in)
	}
	e := o.BatchEntry("e1")
	if deref(e.Id) != "e1" || deref(e.MessageBody) != "b" || deref(e.MessageGroupId) != "g" || deref(e.MessageDeduplicationId) != "d" ||
		len(e.MessageAttributes) != 1 || len(e.MessageSystemAttributes) != 1 || e.DelaySeconds != 0 {
		t.Errorf("BatchEntry %+v", e)
	}
	std, _ := Encode(&mapping.Message{Body: []byte("b")}, EncodeOptions{})
	if in := std.SendMessageInput("q"); in.MessageGroupId != nil || in.MessageDeduplicationId != nil || in.MessageAttributes != nil {
		t.Errorf("standard send %+v", in)
	}
}

func TestEncodeNil(t *testing.T) {
	if _, err := Encode(nil, EncodeOptions{}); !mapping.IsReject(err) {
		t.Errorf("nil message: %v", err)
	}
}

// A Strings value's text is JSON, which cannot hold invalid UTF-8: it is
// refused (or dropped), never sent with U+FFFD in place of its bytes.
func TestEncodeStringsNotUTF8(t *testing.T) {
	bad := at("a", mapping.Strings("x", "\xff"))
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
		var r recorder
		_, err := Encode(sqsMsg("b", bad), opts(p, &r))
		wantReject(t, err, `attribute "a"`)
	}
	var r recorder
	o, err := Encode(sqsMsg("b", bad, at("k", mapping.String("v"))), opts(mapping.Drop, &r))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Attributes["a"]; ok || len(r.fields) != 1 {
		t.Errorf("attributes %v, dropped %v; want a dropped", o.Attributes, r.fields)
	}
}

// TestEncodeFIFOMadeUpDedupID: a message without any id gets a dedup id of
// its own, never the hash of its body: two distinct messages with equal
// bodies (different attributes, or simply sent twice) must both reach a
// FIFO queue that does not deduplicate on content — an audit saw a move of
// four "{}" messages leave one in the queue and none at the source. From the
// source's name for the message it is the same on every delivery; decoded,
// a made-up id is no dedup id of the message's, while an explicit one that
// looks made up comes back.
func TestEncodeFIFOMadeUpDedupID(t *testing.T) {
	opt := opts(mapping.Reject, nil)
	opt.FIFO = true
	plain := func(order string) *mapping.Message {
		return &mapping.Message{Body: []byte("{}"), GroupKey: "g",
			Attributes: []mapping.Attribute{{Name: "order", Value: mapping.String(order)}}}
	}
	a, err := Encode(plain("1"), opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(plain("2"), opt)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Encode(plain("1"), opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*Outbound{a, b, again} {
		if !strings.HasPrefix(o.DedupID, "qbridge-") || checkID(o.DedupID) != "" {
			t.Errorf("dedup id %q: want a valid made-up id", o.DedupID)
		}
	}
	if a.DedupID == b.DedupID || a.DedupID == again.DedupID {
		t.Errorf("distinct messages share dedup ids: %q %q %q", a.DedupID, b.DedupID, again.DedupID)
	}

	js := plain("1")
	js.Source = mapping.Source{Protocol: "nats", Address: "sb.x", SequenceNumber: "42"}
	first, _ := Encode(js, opt)
	redelivered, _ := Encode(js, opt)
	if first.DedupID != redelivered.DedupID {
		t.Errorf("a redelivery got another dedup id: %q, %q", first.DedupID, redelivered.DedupID)
	}

	if _, got := roundTrip(t, plain("1"), opt); got.DedupID != "" {
		t.Errorf("decoded a made-up dedup id as the message's: %q", got.DedupID)
	}
	explicit := plain("1")
	explicit.DedupID = "qbridge-mine"
	if o, got := roundTrip(t, explicit, opt); o.DedupID != "qbridge-mine" || got.DedupID != "qbridge-mine" {
		t.Errorf("explicit dedup id sent %q, decoded %q; want qbridge-mine both", o.DedupID, got.DedupID)
	}
}
