package sbrest

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// readResponse parses a raw HTTP response as net/http presents it to the
// adapter (canonical header names).
func readResponse(t *testing.T, raw string) (http.Header, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.Header, body.Bytes()
}

// The peek-lock response of the REST docs (docs/wire-servicebus.md §7).
func TestDecodePeekLockResponse(t *testing.T) {
	h, body := readResponse(t, `HTTP/1.1 201 Created
Transfer-Encoding: chunked
Content-Type: application/atom+xml;type=entry;charset=utf-8
Location: https://your-namespace.servicebus.windows.net/httpclientsamplequeue/messages/2/7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547
Server: Microsoft-HTTPAPI/2.0
BrokerProperties: {"DeliveryCount":1,"EnqueuedSequenceNumber":0,"EnqueuedTimeUtc":"Wed, 02 Jul 2014 01:32:27 GMT","Label":"M1","LockToken":"7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547","LockedUntilUtc":"Wed, 02 Jul 2014 01:33:27 GMT","MessageId":"31907572164743c38741631acd554d6f","SequenceNumber":2,"State":"Active","TimeToLive":10}
Priority: "High"
Customer: "12345,ABC"
Price: 299.98
Order-Time: "Fri, 04 Mar 2011 08:49:37 GMT"
Strict-Transport-Security: max-age=31536000
Date: Wed, 02 Jul 2014 01:32:30 GMT

c
This is a me
7
ssage.1
0

`)
	m, err := Decode(h, body)
	if err != nil {
		t.Fatal(err)
	}
	want := &mapping.Message{
		Body:        []byte("This is a message.1"),
		ID:          "31907572164743c38741631acd554d6f",
		ContentType: "application/atom+xml;type=entry;charset=utf-8",
		Subject:     "M1",
		TTL:         10 * time.Second,
		Attributes: []mapping.Attribute{
			{Name: "Customer", Value: mapping.String("12345,ABC")},
			{Name: "Order-Time", Value: mapping.Timestamp(date("Fri, 04 Mar 2011 08:49:37 GMT"))},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Priority", Value: mapping.String("High")},
		},
		Source: mapping.Source{
			Protocol:       "servicebus",
			EnqueuedTime:   date("Wed, 02 Jul 2014 01:32:27 GMT"),
			SequenceNumber: "2",
			DeliveryCount:  1,
			LockToken:      "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547",
			LockedUntil:    date("Wed, 02 Jul 2014 01:33:27 GMT"),
			ExpiresAt:      date("Wed, 02 Jul 2014 01:32:37 GMT"),
			PartitionID:    -1,
		},
	}
	if d := mappingtest.Diff(want, m, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
	l, ok, err := LockLocation(h)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if l.Entity != "httpclientsamplequeue" || l.MessageRef != "2" || l.LockToken != m.Source.LockToken {
		t.Fatalf("%+v", l)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     http.Header
		field string
	}{
		{"unquoted string", http.Header{"Priority": {"High"}}, `header "Priority"`},
		{"repeated", http.Header{"Priority": {`"a"`, `"b"`}}, `header "Priority"`},
		{"same name up to case", http.Header{"priority": {`"a"`}, "Priority": {`"b"`}}, `property "priority"`},
		{"bad broker properties", http.Header{"Brokerproperties": {`{"TimeToLive":"x"}`}}, "BrokerProperties.TimeToLive"},
		{"envelope not JSON", http.Header{"Qbridge.envelope": {`"nope"`}}, mapping.EnvelopeName},
		{"envelope version", http.Header{"Qbridge.envelope": {`"{"v":9}"`}}, mapping.EnvelopeName},
		{"envelope unquoted", http.Header{"Qbridge.envelope": {`42`}}, mapping.EnvelopeName},
		{"type does not parse", http.Header{"Qbridge.envelope": {`"{"v":1,"types":{"B":"Binary"}}"`}, "B": {`"not base64!"`}}, `property "B"`},
		{"bad body encoding", http.Header{"Qbridge.envelope": {`"{"v":1,"body":"rot13"}"`}}, "body"},
	} {
		_, err := Decode(tc.h, nil)
		var r *mapping.RejectError
		if !asReject(err, &r) || r.Field != tc.field {
			t.Errorf("%s: got %v, want a RejectError on %s", tc.name, err, tc.field)
		}
	}
}

func TestDecodeSpecialHeaders(t *testing.T) {
	h := http.Header{
		"Date":                       {"Wed, 02 Jul 2014 01:32:30 GMT"},
		"Brokerproperties":           {`{"TimeToLive":60}`},
		"Deadletterreason":           {`"MaxDeliveryCountExceeded"`},
		"Deadlettererrordescription": {`"Message could not be consumed after 10 delivery attempts."`},
		"Diagnostic-Id":              {`"|0af7651916cd43dd8448eb211c80319c.b7ad6b7169203331."`},
		"Tracestate":                 {`"a=b"`},
		"User-Agent":                 {"Go-http-client/1.1"},
		"Content-Length":             {"0"},
		"Accept-Encoding":            {"gzip"},
		"X-Ms-Request-Id":            {"abc"},
	}
	m, err := Decode(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Attributes) != 0 {
		t.Errorf("attributes %v", m.Attributes)
	}
	if m.Source.DeadLetterReason != "MaxDeliveryCountExceeded" || !strings.HasPrefix(m.Source.DeadLetterDesc, "Message could") {
		t.Errorf("%+v", m.Source)
	}
	// EnqueuedTimeUtc comes from Date when BrokerProperties lacks it
	// (docs/wire-servicebus.md §7).
	if !m.Source.EnqueuedTime.Equal(date("Wed, 02 Jul 2014 01:32:30 GMT")) || !m.Source.ExpiresAt.Equal(date("Wed, 02 Jul 2014 01:33:30 GMT")) {
		t.Errorf("%+v", m.Source)
	}
	if m.Trace.State != "a=b" || m.Trace.Traceparent() != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" {
		t.Errorf("%+v", m.Trace)
	}
	// A Diagnostic-Id that is not a trace stays an application property.
	m, err = Decode(http.Header{"Diagnostic-Id": {`"hello"`}, "Tracestate": {`"a=b"`}}, nil)
	if err != nil || len(m.Attributes) != 2 || !m.Trace.IsZero() {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		loc  string
		want Lock
		ok   bool
	}{
		{"https://ns.servicebus.windows.net/q/messages/31907572164743c38741631acd554d6f/7DA9CFD5-40D5-4BB1-8D64-EC5A52E1C547",
			Lock{Entity: "q", MessageRef: "31907572164743c38741631acd554d6f", LockToken: "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"}, true},
		{"https://ns.servicebus.windows.net/t/subscriptions/s/messages/12/7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547?api-version=2015-01",
			Lock{Entity: "t/subscriptions/s", MessageRef: "12", LockToken: "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"}, true},
		{"https://ns/q/messages/%7Bid%7D/7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547", Lock{Entity: "q", MessageRef: "{id}", LockToken: "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"}, true},
		{"https://ns/q/messages/head", Lock{}, false},
		{"https://ns/q/messages/2/not-a-token", Lock{}, false},
		{"https://ns/messages/2/7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547", Lock{}, false},
		{"::", Lock{}, false},
	} {
		got, err := ParseLocation(tc.loc)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.loc, err)
			continue
		}
		tc.want.URL = got.URL
		if tc.ok && (got != tc.want || got.URL != tc.loc) {
			t.Errorf("%s: %+v", tc.loc, got)
		}
	}
	if _, ok, err := LockLocation(http.Header{}); ok || err != nil {
		t.Error("no Location")
	}
}
