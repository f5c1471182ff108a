package natsmap

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestEncodeGolden(t *testing.T) {
	tr, err := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if err != nil {
		t.Fatal(err)
	}
	tr.State = "congo=t61rcWkgMzE"
	m := &mapping.Message{
		Body:        []byte(`{"sku":"W7U"}`),
		DedupID:     "order-42",
		ContentType: "application/json",
		GroupKey:    "acme",
		Trace:       tr,
		Attributes: []mapping.Attribute{
			{Name: "product", Value: mapping.String("Windows 7 Ultimate")},
			{Name: "tags", Value: mapping.Strings("new", "promo")},
			{Name: "qty", Value: mapping.Int32(3)},
		},
	}
	msg, err := Encode(m, "orders.acme", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := nats.Header{
		"Nats-Msg-Id":      {"order-42"},
		"Content-Type":     {"application/json"},
		"Qbridge-Group":    {"acme"},
		"traceparent":      {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"tracestate":       {"congo=t61rcWkgMzE"},
		"product":          {"Windows 7 Ultimate"},
		"tags":             {"new", "promo"},
		"qty":              {"3"},
		"qbridge.envelope": {`{"v":1,"types":{"qty":"Number.int"}}`},
	}
	if d := mappingtest.DiffHeaders(want, msg.Header); d != "" {
		t.Fatal(d)
	}
	if msg.Subject != "orders.acme" || string(msg.Data) != string(m.Body) {
		t.Fatalf("%s %q", msg.Subject, msg.Data)
	}
	// A custom group header.
	msg, err = Encode(&mapping.Message{GroupKey: "g"}, "s", EncodeOptions{GroupHeader: "X-Tenant"})
	if err != nil || msg.Header.Get("X-Tenant") != "g" || len(msg.Header) != 1 {
		t.Fatalf("%v %v", msg.Header, err)
	}
	if _, err := Encode(&mapping.Message{}, "s", EncodeOptions{GroupHeader: "bad name"}); err == nil || mapping.IsReject(err) {
		t.Fatalf("a bad group header is a configuration error: %v", err)
	}
}

// Nats-Msg-Id is DedupKey(); ID and DedupID both come back exactly, except
// an id that is the only thing to carry: it stays at its native home, with
// no envelope, and comes back as the dedup id.
func TestDedupIDs(t *testing.T) {
	for _, tc := range []struct {
		id, dedup, msgID string
		subject          string // something else to carry
		backID, backDD   string
	}{
		{"", "", "", "", "", ""},
		{"id", "", "id", "", "", "id"},
		{"id", "", "id", "s", "id", ""},
		{"", "dd", "dd", "", "", "dd"},
		{"same", "same", "same", "", "same", "same"},
		{"id", "dd", "dd", "", "id", "dd"},
	} {
		msg, err := Encode(&mapping.Message{ID: tc.id, DedupID: tc.dedup, Subject: tc.subject}, "s", EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get(nats.MsgIdHdr); got != tc.msgID {
			t.Errorf("%+v: Nats-Msg-Id %q", tc, got)
		}
		back, err := Decode(msg, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if back.ID != tc.backID || back.DedupID != tc.backDD {
			t.Errorf("%+v: decoded id %q dedup %q", tc, back.ID, back.DedupID)
		}
	}
	// A publisher's own Nats-Msg-Id is the dedup id.
	m, err := Decode(&nats.Msg{Subject: "s", Header: nats.Header{"Nats-Msg-Id": {"x"}}}, DecodeOptions{})
	if err != nil || m.DedupID != "x" || m.ID != "" {
		t.Fatalf("%+v %v", m, err)
	}
}

func clearSource(m *mapping.Message) *mapping.Message {
	m.Source = mapping.Source{}
	return m
}

// policyCase: Reject names field; Drop reports it and decodes to
// dropped(m); Encode decodes back to m exactly.
func policyCase(t *testing.T, name string, m *mapping.Message, field string, dropped func(*mapping.Message)) {
	t.Helper()
	m = m.Clone()
	sortAttributes(m.Attributes)
	_, err := Encode(m, "s", EncodeOptions{})
	var r *mapping.RejectError
	if !asReject(err, &r) || r.Field != field || r.Wire != Wire {
		t.Errorf("%s: Reject: got %v, want a RejectError on %s", name, err, field)
	}
	var reported []string
	msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Drop, OnDrop: func(f, _ string) { reported = append(reported, f) }}})
	if err != nil {
		t.Errorf("%s: Drop: %v", name, err)
	} else {
		if len(reported) != 1 || reported[0] != field {
			t.Errorf("%s: Drop reported %v, want [%s]", name, reported, field)
		}
		want := m.Clone()
		dropped(want)
		if back, err := Decode(msg, DecodeOptions{}); err != nil {
			t.Errorf("%s: Drop: decode: %v", name, err)
		} else if d := mappingtest.Diff(want, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
			t.Errorf("%s: Drop: %s", name, d)
		}
	}
	msg, err = Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Encode}})
	if err != nil {
		t.Errorf("%s: Encode: %v", name, err)
		return
	}
	if back, err := Decode(msg, DecodeOptions{}); err != nil {
		t.Errorf("%s: Encode: decode: %v", name, err)
	} else if d := mappingtest.Diff(m, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
		t.Errorf("%s: Encode: %s", name, d)
	}
}

func TestAttributePolicies(t *testing.T) {
	for _, tc := range []struct {
		name string
		attr mapping.Attribute
	}{
		{"colon", mapping.Attribute{Name: "a:b", Value: mapping.Int32(1)}},
		{"space", mapping.Attribute{Name: "a b", Value: mapping.Int32(1)}},
		{"slash", mapping.Attribute{Name: "a/b", Value: mapping.Int32(1)}},
		{"non-ASCII name", mapping.Attribute{Name: "größe", Value: mapping.Int32(1)}},
		{"empty name", mapping.Attribute{Name: "", Value: mapping.Int32(1)}},
		{"Nats-", mapping.Attribute{Name: "Nats-Expected-Stream", Value: mapping.String("X")}},
		{"nats- lower", mapping.Attribute{Name: "nats-rollup", Value: mapping.String("sub")}},
		{"content-type", mapping.Attribute{Name: "content-type", Value: mapping.String("x")}},
		{"traceparent", mapping.Attribute{Name: "traceparent", Value: mapping.String("x")}},
		{"tracestate", mapping.Attribute{Name: "TraceState", Value: mapping.String("x")}},
		{"group header", mapping.Attribute{Name: "qbridge-group", Value: mapping.String("x")}},
		{"envelope", mapping.Attribute{Name: mapping.EnvelopeName, Value: mapping.String("{}")}},
		{"status", mapping.Attribute{Name: "Status", Value: mapping.String("404")}},
		{"CR LF", mapping.Attribute{Name: "note", Value: mapping.String("a\r\nInjected: 1")}},
		{"NUL", mapping.Attribute{Name: "note", Value: mapping.String("a\x00b")}},
		{"leading space", mapping.Attribute{Name: "note", Value: mapping.String(" a")}},
		{"trailing tab", mapping.Attribute{Name: "note", Value: mapping.String("a\t")}},
		{"symbol with newline", mapping.Attribute{Name: "note", Value: mapping.Symbol("a\nb")}},
	} {
		m := &mapping.Message{ID: "m", Body: []byte("b"), Attributes: []mapping.Attribute{
			{Name: "keep", Value: mapping.Int32(7)}, tc.attr,
		}}
		policyCase(t, tc.name, m, attrField(tc.attr.Name), func(m *mapping.Message) { m.DeleteAttr(tc.attr.Name) })
	}
	m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "a", Value: mapping.String("x")}, {Name: "a", Value: mapping.String("y")}}}
	policyCase(t, "duplicate", m, `attribute "a"`, func(m *mapping.Message) { m.Attributes = m.Attributes[:1] })
}

func TestFieldPolicies(t *testing.T) {
	policyCase(t, "dedup", &mapping.Message{DedupID: "a\nb"}, "Nats-Msg-Id", func(m *mapping.Message) { m.DedupID = "" })
	policyCase(t, "content type", &mapping.Message{ContentType: " text/plain"}, "ContentType", func(m *mapping.Message) { m.ContentType = "" })
	policyCase(t, "group", &mapping.Message{GroupKey: "a\x01"}, "GroupKey", func(m *mapping.Message) { m.GroupKey = "" })
	// The id behind Nats-Msg-Id is carried anyway: Drop leaves the header out only.
	policyCase(t, "id", &mapping.Message{ID: "a\rb"}, "Nats-Msg-Id", func(m *mapping.Message) {})
}

// Invalid UTF-8 has no reversible encoding (the envelope is JSON, and so is
// the header text of a Strings value that is not one header per value):
// never U+FFFD in its place.
// A plain string that is not valid UTF-8 goes as the header it came as:
// NATS headers are bytes and natsmap decodes them as they are, so a NATS
// message carrying one reaches a NATS sink or dead-letter sink unchanged
// (the limits audit found it refused by both, even under encode).
func TestInvalidUTF8PlainStringHeader(t *testing.T) {
	m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "k", Value: mapping.String("v\xff")}}}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
		msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: p}})
		if err != nil || msg.Header.Get("k") != "v\xff" || msg.Header[mapping.EnvelopeName] != nil {
			t.Fatalf("%v: %v, headers %q", p, err, msg.Header)
		}
		back, err := Decode(msg, DecodeOptions{})
		if err != nil || len(back.Attributes) != 1 || !back.Attributes[0].Value.Equal(m.Attributes[0].Value) {
			t.Errorf("%v: decoded %v %v", p, back, err)
		}
	}
}

// Text that is not valid UTF-8 where JSON must hold it (a typed value, a
// Strings value's JSON form) is refused, or left out under drop.
func TestInvalidUTF8(t *testing.T) {
	for name, v := range map[string]mapping.Value{
		"typed string":         mapping.String("\xff").WithLabel("custom"),
		"strings":              mapping.Strings("a", "\xff"),
		"strings with a blank": mapping.Strings("", "\xa3"), // found by FuzzDecode
		"one of strings":       mapping.Strings("\xff"),
	} {
		t.Run(name, func(t *testing.T) {
			m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "bad", Value: v}}}
			for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
				if msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: p}}); !mapping.IsReject(err) {
					t.Errorf("%v: %v, headers %v", p, err, msg.Header)
				}
			}
			msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Drop}})
			if err != nil || len(msg.Header) != 0 {
				t.Fatalf("%v %v", msg, err)
			}
		})
	}
}

func TestStringsHeaders(t *testing.T) {
	for _, tc := range []struct {
		v    mapping.Value
		vals []string
		typ  bool
	}{
		{mapping.Strings("a", "b"), []string{"a", "b"}, false},
		{mapping.Strings("a", "", "c"), []string{"a", "", "c"}, false},
		{mapping.Strings("x"), []string{`["x"]`}, true},
		{mapping.Strings([]string{}...), []string{`[]`}, true},
		{mapping.Strings(" a", "b"), []string{`[" a","b"]`}, true},
		{mapping.Strings("a\nb", "c"), []string{`["a\nb","c"]`}, true},
	} {
		msg, err := Encode(&mapping.Message{Attributes: []mapping.Attribute{{Name: "t", Value: tc.v}}}, "s", EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header["t"]; strings.Join(got, "|") != strings.Join(tc.vals, "|") || (msg.Header[mapping.EnvelopeName] != nil) != tc.typ {
			t.Errorf("%#v: %q, envelope %v", tc.v, got, msg.Header[mapping.EnvelopeName])
		}
		back, err := Decode(msg, DecodeOptions{})
		if err != nil || len(back.Attributes) != 1 || !back.Attributes[0].Value.Equal(tc.v) {
			t.Errorf("%#v: decoded %v %v", tc.v, back, err)
		}
	}
}

func TestSizeLimit(t *testing.T) {
	m := &mapping.Message{Body: make([]byte, DefaultMaxMessageSize+1)}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
		if _, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: p}}); !mapping.IsReject(err) {
			t.Errorf("%v: %v", p, err)
		}
	}
	m = &mapping.Message{Body: make([]byte, 900), Attributes: []mapping.Attribute{
		{Name: "small", Value: mapping.Int32(1)}, {Name: "big", Value: mapping.String(strings.Repeat("x", 200))},
	}}
	var dropped, shed []string
	msg, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{Policy: mapping.Drop, MaxMessageSize: 1000,
		OnDrop: func(f, _ string) { dropped = append(dropped, f) }, OnShed: func(f []string) { shed = f }}})
	// The envelope (small's type) gives way before big is dropped.
	if err != nil || len(dropped) != 1 || dropped[0] != `attribute "big"` || msg.Header["small"] == nil || !slices.Equal(shed, []string{"types"}) {
		t.Fatalf("%v %v %v %v", dropped, shed, msg, err)
	}
	if back, err := Decode(msg, DecodeOptions{}); err != nil || len(back.Attributes) != 1 {
		t.Fatalf("%v %v", back, err)
	}
	if _, err := Encode(m, "s", EncodeOptions{Options: mapping.Options{MaxMessageSize: 1000}}); !mapping.IsReject(err) {
		t.Fatal(err)
	}
}

func TestSubjects(t *testing.T) {
	for _, s := range []string{"", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a\tb"} {
		if _, err := Encode(&mapping.Message{}, s, EncodeOptions{}); !mapping.IsReject(err) {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"a", "orders.acme", "$JS.API.X", "a-b_c.1"} {
		if _, err := Encode(&mapping.Message{}, s, EncodeOptions{}); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// TTL, ids, times and the rest travel in the envelope.
func TestEnvelopeFields(t *testing.T) {
	prio := uint8(9)
	m := &mapping.Message{ID: "i", CorrelationID: "c", Subject: "s", To: "t", ReplyTo: "r", TTL: time.Minute,
		ScheduledAt: time.Unix(1299228577, 123).UTC(), Priority: &prio, PartitionKey: "p"}
	msg, err := Encode(m, "x", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"m":{"id":"i","correlationId":"c","subject":"s","to":"t","replyTo":"r","partitionKey":"p","ttlNanos":60000000000,"scheduledAt":"2011-03-04T08:49:37.000000123Z","priority":9}}`
	if got := msg.Header.Get(mapping.EnvelopeName); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// The envelope holds no control character either: JSON leaves DEL raw,
// which a user header value may not hold (valueProblem). It is escaped,
// and decodes back.
func TestEnvelopeEscapesDEL(t *testing.T) {
	m := &mapping.Message{ID: "i", Subject: "a\x7fb", Body: []byte("x")}
	msg, err := Encode(m, "x", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := msg.Header.Get(mapping.EnvelopeName)
	if strings.IndexByte(env, 0x7f) >= 0 || !strings.Contains(env, `a\u007fb`) {
		t.Fatalf("envelope %q", env)
	}
	back, err := Decode(msg, DecodeOptions{})
	if err != nil || back.Subject != m.Subject {
		t.Fatalf("decoded subject %q, %v", back.Subject, err)
	}
}

// Subjects a sink cannot publish to, and the reason Encode gives; the
// first token with a problem decides.
func TestSubjectProblem(t *testing.T) {
	for _, tc := range []struct{ subject, want string }{
		{"orders", ""},
		{"orders.new.eu", ""},
		{"orders.*x.>y", ""}, // wildcards only as whole tokens
		{"", "empty"},
		{".orders", "empty token"},
		{"orders.", "empty token"},
		{"orders..new", "empty token"},
		{"orders.*", "wildcards cannot be published to"},
		{">", "wildcards cannot be published to"},
		{"orders.>.new", "wildcards cannot be published to"},
		{"orders.n w", "white space"},
		{"orders\t.new", "white space"},
		{"orders.new\r\n", "white space"},
		{"a b..c", "white space"},
		{"a..b c", "empty token"},
		{"*.a b", "wildcards cannot be published to"},
	} {
		if got := subjectProblem(tc.subject); got != tc.want {
			t.Errorf("subjectProblem(%q) = %q, want %q", tc.subject, got, tc.want)
		}
		_, err := Encode(&mapping.Message{Body: []byte("x")}, tc.subject, EncodeOptions{})
		if (err == nil) != (tc.want == "") {
			t.Errorf("Encode on %q: %v", tc.subject, err)
		}
	}
}

// A message with nothing to map has no header at all: it goes out as a
// plain PUB, and it still decodes as the same message.
func TestEncodePlainHasNoHeader(t *testing.T) {
	m := &mapping.Message{Body: []byte("plain")}
	msg, err := Encode(m, "orders", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Header) != 0 {
		t.Errorf("headers %v, want none", msg.Header)
	}
	back, err := Decode(msg, DecodeOptions{})
	if err != nil || string(back.Body) != "plain" || len(back.Attributes) != 0 {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

// EncodeScratch writes what Encode writes, message after message into one
// Scratch: nothing of a message's headers stays for the next one, whether
// the next has fewer headers, none, or more than the value array held.
func TestEncodeScratchMatchesEncode(t *testing.T) {
	plain := plainMessages()
	seq := []*mapping.Message{
		benchMessage(),
		plain["plain"],
		plain["grouped"],
		{Body: []byte("c"), CorrelationID: "only-an-envelope"},
		plain["plain"],
		benchMessage(),
		plain["grouped"],
		{Body: []byte("t"), Attributes: []mapping.Attribute{{Name: "tags", Value: mapping.Strings("a", "b", "c")}}},
	}
	var sc Scratch
	for i, m := range seq {
		want, err := Encode(m, "s.x", EncodeOptions{})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got, err := EncodeScratch(&sc, m, "s.x", EncodeOptions{})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if d := mappingtest.DiffHeaders(want.Header, got.Header); d != "" {
			t.Errorf("message %d: %s", i, d)
		}
		if got.Subject != want.Subject || string(got.Data) != string(want.Data) {
			t.Errorf("message %d: %q %q, want %q %q", i, got.Subject, got.Data, want.Subject, want.Data)
		}
	}
	if _, err := EncodeScratch(&sc, plain["plain"], "bad subject", EncodeOptions{}); err == nil {
		t.Error("EncodeScratch took a subject with white space")
	}
}

// A message without an id of its own gets no Nats-Msg-Id (the stream
// would keep every one for its window); a made-up one that an earlier hop
// wrote (Service Bus, SQS FIFO: mapping.IDFromSourceKey) decodes to none.
func TestMsgIDOfAMessageWithoutOne(t *testing.T) {
	m := &mapping.Message{Body: []byte("b"), Source: mapping.Source{Protocol: "nats", Address: "in.x", SequenceNumber: "7"}}
	msg, err := Encode(m, "out", EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(nats.MsgIdHdr); got != "" {
		t.Fatalf("Nats-Msg-Id %q, want none", got)
	}
	msg.Header = nats.Header{nats.MsgIdHdr: {mapping.IDFromSourceKey(m.SourceKey())}}
	back, err := Decode(msg, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != "" || back.DedupID != "" {
		t.Errorf("decoded id %q, dedup id %q: want none (a made-up id is an encoder's)", back.ID, back.DedupID)
	}
}
