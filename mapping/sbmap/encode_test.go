package sbmap

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestEncodeIDs(t *testing.T) {
	long := strings.Repeat("é", 129) // 129 UTF-16 units, 258 bytes
	ok128 := strings.Repeat("é", 128)
	tests := []struct {
		name      string
		m         mapping.Message
		policy    mapping.Policy
		messageID any
		groupID   string
		pk        string
		carried   func(*mapping.CarriedFields) bool
		dropped   []string
		reject    string
	}{
		{"id", mapping.Message{ID: "a"}, mapping.Reject, "a", "", "", nil, nil, ""},
		{"dedup id is the MessageId, the id is carried", mapping.Message{ID: "a", DedupID: "d"}, mapping.Reject, "d", "", "",
			func(c *mapping.CarriedFields) bool { return c.ID == "a" && c.DedupID == "d" }, nil, ""},
		{"typed id goes as a string, its kind carried", mapping.Message{ID: "42", IDKind: mapping.KindUint64}, mapping.Reject, "42", "", "",
			func(c *mapping.CarriedFields) bool { return c.IDKind == "ulong" }, nil, ""},
		{"128 characters fit", mapping.Message{ID: ok128}, mapping.Reject, ok128, "", "", nil, nil, ""},
		{"long id rejected", mapping.Message{ID: long}, mapping.Reject, nil, "", "", nil, nil, "MessageId"},
		{"long id dropped", mapping.Message{ID: long}, mapping.Drop, nil, "", "", nil, []string{"MessageId"}, ""},
		{"long id digested", mapping.Message{ID: long}, mapping.Encode, digest(long), "", "",
			func(c *mapping.CarriedFields) bool { return c.ID == long }, nil, ""},
		{"long reply-to session rejected", mapping.Message{ReplyToGroup: long}, mapping.Reject, nil, "", "", nil, nil, "ReplyToSessionId"},
		{"long session digested", mapping.Message{GroupKey: long}, mapping.Encode, nil, digest(long), "",
			func(c *mapping.CarriedFields) bool { return c.GroupKey != nil && *c.GroupKey == long }, nil, ""},
		{"long equal keys stay equal", mapping.Message{GroupKey: long, PartitionKey: long}, mapping.Encode, nil, digest(long), digest(long),
			func(c *mapping.CarriedFields) bool { return c.PartitionKey == long }, nil, ""},
		{"session and partition key equal", mapping.Message{GroupKey: "s", PartitionKey: "s"}, mapping.Reject, nil, "s", "s", nil, nil, ""},
		{"partition key differs: rejected", mapping.Message{GroupKey: "s", PartitionKey: "p"}, mapping.Reject, nil, "", "", nil, nil, "PartitionKey"},
		{"partition key differs: dropped", mapping.Message{GroupKey: "s", PartitionKey: "p"}, mapping.Drop, nil, "s", "", nil, []string{"PartitionKey"}, ""},
		{"partition key differs: SessionId sent, original carried", mapping.Message{GroupKey: "s", PartitionKey: "p"}, mapping.Encode, nil, "s", "s",
			func(c *mapping.CarriedFields) bool { return c.PartitionKey == "p" }, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dropped []string
			msg, err := Encode(&tt.m, collect(tt.policy, &dropped))
			if tt.reject != "" {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), "servicebus: "+tt.reject) {
					t.Fatalf("error %v, want a RejectError naming %s", err, tt.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var id any
			var gid string
			if msg.Properties != nil {
				id = msg.Properties.MessageID
				if msg.Properties.GroupID != nil {
					gid = *msg.Properties.GroupID
				}
			}
			pk, _ := msg.Annotations[AnnotationPartitionKey].(string)
			if !reflect.DeepEqual(id, tt.messageID) || gid != tt.groupID || pk != tt.pk {
				t.Errorf("message-id %#v group-id %q partition key %q, want %#v %q %q", id, gid, pk, tt.messageID, tt.groupID, tt.pk)
			}
			env := envelopeOf(t, msg)
			if tt.carried != nil && (env == nil || env.Fields == nil || !tt.carried(env.Fields)) {
				t.Errorf("envelope %+v", env)
			}
			if tt.carried == nil && env != nil {
				t.Errorf("unexpected envelope %+v", env.Fields)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("dropped %v, want %v", dropped, tt.dropped)
			}
			if tt.policy != mapping.Drop {
				mappingtest.Check(t, &tt.m, roundTrip(t, &tt.m, mapping.Options{Policy: tt.policy}))
			}
		})
	}
}

func TestEncodeServiceBusShape(t *testing.T) {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tr, _ := mapping.ParseTraceparent(tp)
	tr.State = "k=v"
	m := &mapping.Message{
		BodyType: mapping.BodyValue, Body: []byte(`{"type":"int","value":1}`),
		ViaPartitionKey: "via", AbsoluteExpiry: time.Unix(100, 0).UTC(), Trace: tr,
		Annotations: mappingtest.Attrs("x-custom", mapping.Int32(1)),
		Attributes: mappingtest.Attrs(DeadLetterReasonProperty, mapping.String("user's"), "dl", mapping.String("d"),
			"sym", mapping.Symbol("s"), "u", mapping.URI("urn:x")),
	}
	msg, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Data) != 1 || string(msg.Data[0]) != string(m.Body) || msg.Value != nil {
		t.Errorf("body must be one data section: %q %#v", msg.Data, msg.Value)
	}
	if want := (amqp.Annotations{AnnotationViaPartitionKey: "via"}); !reflect.DeepEqual(msg.Annotations, want) {
		t.Errorf("annotations %#v, want only the broker's %#v", msg.Annotations, want)
	}
	if msg.Properties != nil && msg.Properties.AbsoluteExpiryTime != nil {
		t.Error("absolute-expiry-time is the broker's")
	}
	p := msg.ApplicationProperties
	if p[DiagnosticIDProperty] != tp || p["tracestate"] != "k=v" || p["traceparent"] != nil {
		t.Errorf("trace properties %v", p)
	}
	if p["sym"] != "s" {
		t.Errorf("symbol property %#v, want a plain string", p["sym"])
	}
	if reflect.TypeOf(p["u"]).Kind() != reflect.Struct {
		t.Errorf("uri property %#v, want a described value", p["u"])
	}
	env := envelopeOf(t, msg)
	for name, dt := range map[string]string{"sym": "String.symbol", DeadLetterReasonProperty: "String"} {
		if got, _ := env.TypeOf(name); got != dt {
			t.Errorf("type of %s %q, want %q", name, got, dt)
		}
	}
	if _, ok := env.TypeOf("u"); ok {
		t.Error("a described uri needs no type")
	}
	f := env.Fields
	if f == nil || f.BodyType != "value" || len(f.Annotations) != 1 || f.AbsoluteExpiry == nil {
		t.Errorf("carried %+v", f)
	}
	mappingtest.Check(t, m, roundTrip(t, m, mapping.Options{}))
}

func TestEncodeHeaderLimits(t *testing.T) {
	big := func(n int) mapping.Value { return mapping.String(strings.Repeat("x", n)) }
	tests := []struct {
		name    string
		attrs   []mapping.Attribute
		policy  mapping.Policy
		reject  string
		dropped []string
		kept    []string
	}{
		{"under the limits", mappingtest.Attrs("a", big(30000), "b", big(30000)), mapping.Reject, "", nil, []string{"a", "b"}},
		{"one property too large: rejected", mappingtest.Attrs("a", big(33000)), mapping.Reject, `"a"`, nil, nil},
		{"one property too large: Encode cannot help", mappingtest.Attrs("a", big(33000)), mapping.Encode, `"a"`, nil, nil},
		{"one property too large: dropped", mappingtest.Attrs("a", big(33000), "b", big(10)), mapping.Drop, "", []string{`application-properties "a"`}, []string{"b"}},
		{"header too large: rejected", mappingtest.Attrs("a", big(30000), "b", big(30000), "c", big(10000)), mapping.Reject, "header limit", nil, nil},
		{"header too large: largest dropped", mappingtest.Attrs("a", big(30000), "b", big(31000), "c", big(10000)), mapping.Drop, "",
			[]string{`application-properties "b"`}, []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dropped []string
			m := &mapping.Message{Attributes: tt.attrs}
			msg, err := Encode(m, collect(tt.policy, &dropped))
			if tt.reject != "" {
				if !mapping.IsReject(err) || !strings.Contains(err.Error(), tt.reject) {
					t.Fatalf("error %v, want a RejectError with %q", err, tt.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for k := range msg.ApplicationProperties {
				kept = append(kept, k)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tt.kept) || !slices.Equal(dropped, tt.dropped) {
				t.Errorf("kept %v dropped %v, want %v %v", kept, dropped, tt.kept, tt.dropped)
			}
			if len(m.Attributes) != len(tt.attrs) {
				t.Error("Encode modified its input")
			}
		})
	}
}

func TestEncodeMessageSize(t *testing.T) {
	m := &mapping.Message{Body: make([]byte, DefaultMaxMessageSize)}
	if _, err := Encode(m, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("256 KiB body plus sections: %v, want a RejectError", err)
	}
	if _, err := Encode(m, mapping.Options{MaxMessageSize: 1 << 20}); err != nil {
		t.Errorf("premium link limit: %v", err)
	}
}

func TestEncodePolicyReportsOnce(t *testing.T) {
	// A dropped PartitionKey and a dropped oversize attribute: each reported
	// once although the message is encoded twice.
	var dropped []string
	m := &mapping.Message{GroupKey: "s", PartitionKey: "p", Attributes: mappingtest.Attrs("a", mapping.String(strings.Repeat("x", 40000)))}
	if _, err := Encode(m, collect(mapping.Drop, &dropped)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"PartitionKey", `application-properties "a"`}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
}

// A message without an id of its own gets one made from the source's name
// for it, the same on every send, so that duplicate detection drops what a
// resumed migration writes again; a message the source names in no way
// gets none (the SDK makes one up).
func TestEncodeIDFromSourceKey(t *testing.T) {
	m := &mapping.Message{Body: []byte("b"), Source: mapping.Source{Protocol: "nats", Address: "s", SequenceNumber: "7"}}
	a, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(m.Clone(), mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := mapping.IDFromSourceKey(m.SourceKey())
	if a.Properties == nil || a.Properties.MessageID != want || b.Properties.MessageID != want || !strings.HasPrefix(want, mapping.MadeUpIDPrefix) {
		t.Fatalf("message-id %v / %v, want %q on both", a.Properties, b.Properties, want)
	}
	if back, err := Decode(a); err != nil || back.ID != "" {
		t.Errorf("decoded id %q (%v): want none, the made-up id is the encoder's", back.ID, err)
	}
	none, err := Encode(&mapping.Message{Body: []byte("b")}, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if none.Properties != nil && none.Properties.MessageID != nil {
		t.Errorf("a message the source names in no way got message-id %v", none.Properties.MessageID)
	}
}
