package sbrest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestEncodeGolden(t *testing.T) {
	m := &mapping.Message{
		Body:        []byte(`{"sku":"W7U"}`),
		ID:          "31907572164743c38741631acd554d6f",
		ContentType: "application/json",
		Subject:     "M1",
		GroupKey:    "session-1",
		TTL:         10 * time.Second,
		Attributes: []mapping.Attribute{
			{Name: "Product", Value: mapping.String("Windows 7 Ultimate")},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Order-Time", Value: mapping.Timestamp(date("Fri, 04 Mar 2011 08:49:37 GMT"))},
			{Name: "Quantity", Value: mapping.Int64(3)},
			{Name: "Gift", Value: mapping.Bool(false)},
		},
	}
	r, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{
		"Content-Type":     {"application/json"},
		"Brokerproperties": {`{"MessageId":"31907572164743c38741631acd554d6f","SessionId":"session-1","Label":"M1","TimeToLive":10}`},
		"Product":          {`"Windows 7 Ultimate"`},
		"Price":            {"299.98"},
		"Order-Time":       {`"Fri, 04 Mar 2011 08:49:37 GMT"`},
		"Quantity":         {"3"},
		"Gift":             {"false"},
	}
	if d := mappingtest.DiffHeaders(want, r.Header); d != "" {
		t.Fatal(d)
	}
	if string(r.Body) != string(m.Body) {
		t.Fatalf("body %q", r.Body)
	}
}

// Get-only properties are never written; Source is read-only.
func TestEncodeNeverWritesSource(t *testing.T) {
	m := &mapping.Message{ID: "x", Source: mapping.Source{
		Protocol: "servicebus", EnqueuedTime: time.Now(), SequenceNumber: "12", EnqueuedSequence: 3,
		DeliveryCount: 4, LockToken: "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547", LockedUntil: time.Now(),
		State: 1, DeadLetterSource: "q", DeadLetterReason: "r", DeadLetterDesc: "d", Address: "a",
	}}
	r, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Brokerproperties": {`{"MessageId":"x"}`}}
	if d := mappingtest.DiffHeaders(want, r.Header); d != "" {
		t.Fatal(d)
	}
	// With CarrySource, the facts ride in the envelope, still not as properties.
	r, err = Encode(m, mapping.Options{CarrySource: true})
	if err != nil {
		t.Fatal(err)
	}
	var bp map[string]any
	if err := json.Unmarshal([]byte(r.Header.Get("BrokerProperties")), &bp); err != nil || len(bp) != 1 {
		t.Fatalf("BrokerProperties %v %v", bp, err)
	}
	if !strings.Contains(r.Header[mapping.EnvelopeName][0], `"deadLetterReason":"r"`) {
		t.Fatalf("envelope %s", r.Header[mapping.EnvelopeName])
	}
}

// MessageId is DedupKey(); ID and DedupID both come back exactly.
func TestMessageIDIsDedupKey(t *testing.T) {
	for _, tc := range []struct{ id, dedup, messageID string }{
		{"", "", ""},
		{"id", "", "id"},
		{"", "dd", "dd"},
		{"same", "same", "same"},
		{"id", "dd", "dd"},
	} {
		m := &mapping.Message{ID: tc.id, DedupID: tc.dedup}
		r, err := Encode(m, mapping.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var bp struct{ MessageId string }
		if s := r.Header.Get("BrokerProperties"); s != "" {
			if err := json.Unmarshal([]byte(s), &bp); err != nil {
				t.Fatal(err)
			}
		}
		if bp.MessageId != tc.messageID {
			t.Errorf("%+v: MessageId %q, want %q", tc, bp.MessageId, tc.messageID)
		}
		back, err := Decode(r.Header, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if back.ID != tc.id || back.DedupID != tc.dedup {
			t.Errorf("%+v: decoded id %q dedup %q", tc, back.ID, back.DedupID)
		}
	}
}

// policyCase runs m through Encode under each policy and checks: Reject
// names field; Drop reports field and decodes to dropped(m); Encode decodes
// back to m exactly.
func policyCase(t *testing.T, name string, m *mapping.Message, field string, dropped func(*mapping.Message)) {
	t.Helper()
	m = m.Clone()
	sortAttributes(m.Attributes) // decoders sort attributes by name
	_, err := Encode(m, mapping.Options{Policy: mapping.Reject})
	var r *mapping.RejectError
	if !asReject(err, &r) || r.Field != field {
		t.Errorf("%s: Reject: got %v, want a RejectError on %s", name, err, field)
	} else if r.TooLarge != noEncode[name] {
		// A size limit is dead-lettered too-large, as over AMQP.
		t.Errorf("%s: Reject: TooLarge is %v", name, r.TooLarge)
	}
	var reported []string
	req, err := Encode(m, mapping.Options{Policy: mapping.Drop, OnDrop: func(f, reason string) { reported = append(reported, f) }})
	if err != nil {
		t.Errorf("%s: Drop: %v", name, err)
	} else {
		if len(reported) != 1 || reported[0] != field {
			t.Errorf("%s: Drop reported %v, want [%s]", name, reported, field)
		}
		want := m.Clone()
		dropped(want)
		if back, err := Decode(req.Header, req.Body); err != nil {
			t.Errorf("%s: Drop: decode: %v", name, err)
		} else if d := mappingtest.Diff(want, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
			t.Errorf("%s: Drop: %s", name, d)
		}
	}
	req, err = Encode(m, mapping.Options{Policy: mapping.Encode})
	if noEncode[name] {
		if !asReject(err, &r) || !r.TooLarge {
			t.Errorf("%s: Encode: %v, want a too-large rejection", name, err)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: Encode: %v", name, err)
		return
	}
	back, err := Decode(req.Header, req.Body)
	if err != nil {
		t.Errorf("%s: Encode: decode: %v", name, err)
	} else if d := mappingtest.Diff(m, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
		t.Errorf("%s: Encode: %s", name, d)
	}
}

// noEncode: cases the Encode policy cannot help, since the envelope is a
// property with the same 32 KB limit: size limits, refused as too large.
var noEncode = map[string]bool{"too large": true}

func clearSource(m *mapping.Message) *mapping.Message {
	m.Source = mapping.Source{}
	return m
}

func TestAttributePolicies(t *testing.T) {
	long := strings.Repeat("x", MaxPropertySize)
	for _, tc := range []struct {
		name string
		attr mapping.Attribute
	}{
		{"non-ASCII", mapping.Attribute{Name: "City", Value: mapping.String("Zürich")}},
		{"control", mapping.Attribute{Name: "Note", Value: mapping.String("a\tb")}},
		{"date-like", mapping.Attribute{Name: "When", Value: mapping.String("Fri, 04 Mar 2011 08:49:37 GMT")}},
		{"char", mapping.Attribute{Name: "Letter", Value: mapping.Char('ж')}},
		{"not a token", mapping.Attribute{Name: "a b", Value: mapping.Int32(1)}},
		{"colon", mapping.Attribute{Name: "a:b", Value: mapping.Int32(1)}},
		{"empty name", mapping.Attribute{Name: "", Value: mapping.Int32(1)}},
		{"restricted", mapping.Attribute{Name: "Connection", Value: mapping.String("close")}},
		{"restricted lower", mapping.Attribute{Name: "expect", Value: mapping.String("100-continue")}},
		{"content prefix", mapping.Attribute{Name: "Content-Encoding", Value: mapping.String("gzip")}},
		{"proxy prefix", mapping.Attribute{Name: "Proxy-Authorization", Value: mapping.String("x")}},
		{"authorization", mapping.Attribute{Name: "Authorization", Value: mapping.String("x")}},
		{"x-ms", mapping.Attribute{Name: "x-ms-retrypolicy", Value: mapping.String("NoRetry")}},
		{"broker properties", mapping.Attribute{Name: "BrokerProperties", Value: mapping.String("{}")}},
		{"location", mapping.Attribute{Name: "Location", Value: mapping.String("x")}},
		{"diagnostic-id", mapping.Attribute{Name: "Diagnostic-Id", Value: mapping.String("x")}},
		{"dead-letter reason", mapping.Attribute{Name: "DeadLetterReason", Value: mapping.String("x")}},
		{"envelope", mapping.Attribute{Name: mapping.EnvelopeName, Value: mapping.String("{}")}},
		{"too large", mapping.Attribute{Name: "Big", Value: mapping.String(long)}},
	} {
		m := &mapping.Message{ID: "m", Body: []byte("b"), Attributes: []mapping.Attribute{
			{Name: "Keep", Value: mapping.Int32(7)}, tc.attr,
		}}
		policyCase(t, tc.name, m, attrField(tc.attr.Name), func(m *mapping.Message) { m.DeleteAttr(tc.attr.Name) })
	}
}

func TestDuplicateNameUpToCase(t *testing.T) {
	m := &mapping.Message{Attributes: []mapping.Attribute{
		{Name: "Priority", Value: mapping.String("high")}, {Name: "priority", Value: mapping.String("low")},
	}}
	policyCase(t, "dup", m, `attribute "priority"`, func(m *mapping.Message) { m.Attributes = m.Attributes[:1] })
}

// A value no JSON can carry cannot be encoded reversibly: Encode rejects too.
func TestInvalidUTF8Attribute(t *testing.T) {
	m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "Bad", Value: mapping.String("\xff")}}}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
		if _, err := Encode(m, mapping.Options{Policy: p}); !mapping.IsReject(err) {
			t.Errorf("%v: %v", p, err)
		}
	}
	dropped := 0
	r, err := Encode(m, mapping.Options{Policy: mapping.Drop, OnDrop: func(string, string) { dropped++ }})
	if err != nil || dropped != 1 || len(r.Header) != 0 {
		t.Fatalf("Drop: %v %d %v", err, dropped, r.Header)
	}
	m = &mapping.Message{Subject: "\xff"}
	if _, err := Encode(m, mapping.Options{Policy: mapping.Encode}); !mapping.IsReject(err) {
		t.Errorf("Label: %v", err)
	}
}

func TestSessionPartitionPolicy(t *testing.T) {
	m := &mapping.Message{ID: "m", GroupKey: "s1", PartitionKey: "p1"}
	policyCase(t, "session/partition", m, "PartitionKey", func(m *mapping.Message) { m.PartitionKey = "" })
	r, err := Encode(m, mapping.Options{Policy: mapping.Encode})
	if err != nil {
		t.Fatal(err)
	}
	if bp := r.Header.Get("BrokerProperties"); !strings.Contains(bp, `"SessionId":"s1","PartitionKey":"s1"`) {
		t.Fatalf("Encode must send PartitionKey = SessionId: %s", bp)
	}
	// Equal keys, or only one of them, are fine under Reject.
	for _, m := range []*mapping.Message{{GroupKey: "k", PartitionKey: "k"}, {PartitionKey: "k"}, {GroupKey: "k"}} {
		if _, err := Encode(m, mapping.Options{}); err != nil {
			t.Error(err)
		}
	}
}

func TestLongIDsPolicy(t *testing.T) {
	long := strings.Repeat("i", MaxIDLength+1)
	policyCase(t, "MessageId", &mapping.Message{ID: long}, "MessageId", func(m *mapping.Message) { m.ID = "" })
	policyCase(t, "DedupID", &mapping.Message{ID: "x", DedupID: long}, "MessageId", func(m *mapping.Message) { m.ID, m.DedupID = "", "" })
	policyCase(t, "SessionId", &mapping.Message{GroupKey: long}, "SessionId", func(m *mapping.Message) { m.GroupKey = "" })
	policyCase(t, "PartitionKey", &mapping.Message{PartitionKey: long}, "PartitionKey", func(m *mapping.Message) { m.PartitionKey = "" })
	policyCase(t, "ReplyToSessionId", &mapping.Message{ReplyToGroup: long}, "ReplyToSessionId", func(m *mapping.Message) { m.ReplyToGroup = "" })
	if _, err := Encode(&mapping.Message{ID: strings.Repeat("i", MaxIDLength)}, mapping.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestContentTypePolicy(t *testing.T) {
	m := &mapping.Message{ContentType: "text/plain; name=\"Grüße\""}
	policyCase(t, "ContentType", m, "ContentType", func(m *mapping.Message) { m.ContentType = "" })
}

func TestTotalHeaderLimit(t *testing.T) {
	var attrs []mapping.Attribute
	for _, n := range []string{"A", "B", "C"} {
		attrs = append(attrs, mapping.Attribute{Name: n, Value: mapping.String(strings.Repeat(n, 30000))})
	}
	m := &mapping.Message{Attributes: attrs}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Encode} {
		_, err := Encode(m, mapping.Options{Policy: p, MaxMessageSize: 1 << 20})
		var r *mapping.RejectError
		if !asReject(err, &r) || r.Field != "properties" {
			t.Errorf("%v: %v", p, err)
		}
	}
	var dropped []string
	r, err := Encode(m, mapping.Options{Policy: mapping.Drop, MaxMessageSize: 1 << 20, OnDrop: func(f, _ string) { dropped = append(dropped, f) }})
	if err != nil || len(dropped) != 1 || len(r.Header) != 2 {
		t.Fatalf("Drop: %v dropped %v headers %d", err, dropped, len(r.Header))
	}
}

func TestMessageSizeLimit(t *testing.T) {
	m := &mapping.Message{Body: make([]byte, DefaultMaxMessageSize)}
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
		if _, err := Encode(m, mapping.Options{Policy: p}); !mapping.IsReject(err) {
			t.Errorf("%v: %v", p, err)
		}
	}
	if _, err := Encode(m, mapping.Options{MaxMessageSize: 1 << 20}); err != nil {
		t.Errorf("Premium limit: %v", err)
	}
	m.Attributes = []mapping.Attribute{{Name: "A", Value: mapping.Int32(1)}}
	m.Body = m.Body[:DefaultMaxMessageSize-3]
	if _, err := Encode(m, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("properties count towards the size: %v", err)
	}
	// At the limit without the envelope (its type note for A): sent, the
	// envelope shed.
	var shed []string
	m.Body = m.Body[:DefaultMaxMessageSize-4]
	r, err := Encode(m, mapping.Options{OnShed: func(f []string) { shed = f }})
	if err != nil || r.Header[mapping.EnvelopeName] != nil || !slices.Equal(shed, []string{"types"}) {
		t.Errorf("at the limit: %v, envelope %v, shed %v", err, r.Header[mapping.EnvelopeName], shed)
	}
}

// TTL keeps 100 ns on the wire and the rest in the envelope; a scheduled
// time goes out in whole seconds with the exact one in the envelope.
func TestTimePrecision(t *testing.T) {
	for _, tc := range []struct {
		ttl        time.Duration
		sched      time.Time
		wantBP     string
		noEnvelope bool
	}{
		{ttl: 1500 * time.Millisecond, wantBP: `{"TimeToLive":1.5}`, noEnvelope: true},
		{ttl: 100, wantBP: `{"TimeToLive":0.0000001}`, noEnvelope: true},
		{ttl: 150, wantBP: `{"TimeToLive":0.0000001}`},
		{ttl: 1, wantBP: `{"TimeToLive":0.0000001}`},
		{ttl: -time.Second, wantBP: ``},
		{sched: time.Unix(1299228577, 0), wantBP: `{"ScheduledEnqueueTimeUtc":"Fri, 04 Mar 2011 08:49:37 GMT"}`, noEnvelope: true},
		{sched: time.Unix(1299228577, 999), wantBP: `{"ScheduledEnqueueTimeUtc":"Fri, 04 Mar 2011 08:49:37 GMT"}`},
	} {
		m := &mapping.Message{TTL: tc.ttl, ScheduledAt: tc.sched}
		r, err := Encode(m, mapping.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header.Get("BrokerProperties"); got != tc.wantBP {
			t.Errorf("%+v: BrokerProperties %s, want %s", tc, got, tc.wantBP)
		}
		if _, has := r.Header[mapping.EnvelopeName]; has == tc.noEnvelope {
			t.Errorf("%+v: envelope %v", tc, r.Header[mapping.EnvelopeName])
		}
		back, err := Decode(r.Header, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if back.TTL != tc.ttl || !back.ScheduledAt.Equal(tc.sched) {
			t.Errorf("%+v: decoded TTL %v scheduled %v", tc, back.TTL, back.ScheduledAt)
		}
	}
}

// JSON times (the envelope) hold years 0-9999 only.
func TestScheduledOutOfRange(t *testing.T) {
	m := &mapping.Message{ScheduledAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := Encode(m, mapping.Options{Policy: mapping.Encode}); !mapping.IsReject(err) {
		t.Fatal(err)
	}
}

// The trace travels as Diagnostic-Id (a traceparent) and tracestate.
func TestTrace(t *testing.T) {
	tr, err := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if err != nil {
		t.Fatal(err)
	}
	tr.State = "congo=t61rcWkgMzE"
	r, err := Encode(&mapping.Message{Trace: tr}, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{
		"Diagnostic-Id": {`"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`},
		"tracestate":    {`"congo=t61rcWkgMzE"`},
	}
	if d := mappingtest.DiffHeaders(want, r.Header); d != "" {
		t.Fatal(d)
	}
	back, err := Decode(r.Header, nil)
	if err != nil || back.Trace != tr || len(back.Attributes) != 0 {
		t.Fatalf("%+v %v", back, err)
	}
	// An X-Ray trace with fields W3C cannot hold: Diagnostic-Id for Service
	// Bus consumers, the whole trace in the envelope for qbridge.
	x, err := mapping.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?;Lineage=a:1")
	if err != nil {
		t.Fatal(err)
	}
	r, err = Encode(&mapping.Message{Trace: x}, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Get("Diagnostic-Id") == "" || r.Header[mapping.EnvelopeName] == nil {
		t.Fatalf("%v", r.Header)
	}
	if back, err := Decode(r.Header, nil); err != nil || back.Trace != x {
		t.Fatalf("%+v %v", back.Trace, err)
	}
	// A trace without a parent span: no Diagnostic-Id, carried.
	r, err = Encode(&mapping.Message{Trace: mapping.Trace{TraceID: x.TraceID, State: "a=b"}}, mapping.Options{})
	if err != nil || r.Header.Get("Diagnostic-Id") != "" || r.Header["tracestate"] != nil {
		t.Fatalf("%v %v", r.Header, err)
	}
}

// As over AMQP: a message without an id of its own gets one from the
// source's name for it, the same on every send.
func TestEncodeIDFromSourceKey(t *testing.T) {
	m := &mapping.Message{Body: []byte("b"), Source: mapping.Source{Protocol: "nats", Address: "s", SequenceNumber: "7"}}
	want := mapping.IDFromSourceKey(m.SourceKey())
	for range 2 {
		r, err := Encode(m, mapping.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if bp := r.Header.Get("BrokerProperties"); !strings.Contains(bp, `"MessageId":"`+want+`"`) {
			t.Fatalf("BrokerProperties %s, want MessageId %s", bp, want)
		}
	}
}
