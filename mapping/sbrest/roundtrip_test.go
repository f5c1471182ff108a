package sbrest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// fullMessage sets every model field and an attribute of every kind.
func fullMessage() *mapping.Message {
	prio := uint8(7)
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tr.State = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	attrs := append(allKinds(),
		mapping.Attribute{Name: "lower-case", Value: mapping.String("name case is kept")},
		mapping.Attribute{Name: "camelCase", Value: mapping.Int32(5)},
	)
	return &mapping.Message{
		Body:            []byte("héllo, world"),
		BodyType:        mapping.BodyText,
		ID:              "701332e1-b37b-4d29-aa0a-e367906c206e",
		IDKind:          mapping.KindUUID,
		CorrelationID:   "42",
		CorrelationKind: mapping.KindUint64,
		ContentType:     "text/plain; charset=utf-8",
		ContentEncoding: "identity",
		Subject:         "Grüße",
		To:              "http://contoso.com",
		ReplyTo:         "http://fabrikam.com",
		ReplyToGroup:    "reply-session",
		GroupKey:        "session-1",
		GroupSequence:   3,
		PartitionKey:    "session-1",
		ViaPartitionKey: "via",
		DedupID:         "dedup-1",
		UserID:          []byte("user"),
		TTL:             90*time.Second + 150,
		ScheduledAt:     time.Unix(1299228577, 5e8).UTC(),
		CreationTime:    time.UnixMilli(1299228570001).UTC(),
		AbsoluteExpiry:  time.UnixMilli(1299228670001).UTC(),
		Durable:         true,
		Priority:        &prio,
		FirstAcquirer:   true,
		Annotations:     []mapping.Attribute{{Name: "x-opt-custom", Value: mapping.Int32(1)}},
		Trace:           tr,
		Attributes:      attrs,
	}
}

// overHTTP sends the request through net/http (client validation, server
// parsing, canonical header names) and returns what the server saw.
func overHTTP(t *testing.T, r *Request) (http.Header, []byte) {
	t.Helper()
	var gotH http.Header
	var gotB []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gotH = req.Header
		gotB, _ = io.ReadAll(req.Body)
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/q/messages", bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = r.Header
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return gotH, gotB
}

func TestRoundTripHeaderForm(t *testing.T) {
	m := fullMessage()
	r, err := Encode(m, mapping.Options{Policy: mapping.Encode})
	if err != nil {
		t.Fatal(err)
	}
	h, body := overHTTP(t, r)
	back, err := Decode(h, body)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Clone()
	sortAttributes(want.Attributes)
	want.Source = mapping.Source{Protocol: "servicebus", PartitionID: -1}
	if d := mappingtest.Diff(want, back, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}

// Under Encode, what headers cannot carry (non-ASCII, control characters,
// date-like strings) comes back through the envelope.
func TestRoundTripHeaderFormEncodePolicy(t *testing.T) {
	m := fullMessage()
	m.Attributes = append(m.Attributes,
		mapping.Attribute{Name: "City", Value: mapping.String("Zürich")},
		mapping.Attribute{Name: "Tab", Value: mapping.String("a\tb")},
		mapping.Attribute{Name: "Emoji", Value: mapping.Char('🙂')},
		mapping.Attribute{Name: "Looks-Like-Date", Value: mapping.String("Fri, 04 Mar 2011 08:49:37 GMT")},
		mapping.Attribute{Name: "Connection", Value: mapping.String("close")},
	)
	r, err := Encode(m, mapping.Options{Policy: mapping.Encode})
	if err != nil {
		t.Fatal(err)
	}
	h, body := overHTTP(t, r)
	back, err := Decode(h, body)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Clone()
	sortAttributes(want.Attributes)
	if d := mappingtest.Diff(want, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}

func TestRoundTripBatchForm(t *testing.T) {
	m := fullMessage()
	m.Attributes = append(m.Attributes, // JSON carries these directly
		mapping.Attribute{Name: "City", Value: mapping.String("Zürich")},
		mapping.Attribute{Name: "Tab", Value: mapping.String("a\tb\n")},
		mapping.Attribute{Name: "Emoji", Value: mapping.Char('🙂')},
	)
	bin := m.Clone()
	bin.Body = []byte{0xff, 0x00, 0xfe}
	bin.BodyType = mapping.BodyData
	for _, m := range []*mapping.Message{m, bin} {
		out, err := RenderJSON(m, mapping.Options{Policy: mapping.Encode})
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Clone()
		sortAttributes(want.Attributes)
		if d := mappingtest.Diff(want, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
			t.Fatalf("%s\n%s", d, out)
		}
		// Rendering is deterministic: the same message renders the same.
		again, err := RenderJSON(back, mapping.Options{Policy: mapping.Encode})
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("render -> parse -> render changed:\n%s\n%s", out, again)
		}
	}
}
