package sbrest

import (
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func date(s string) time.Time {
	t, err := time.Parse(time.RFC1123, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// The BrokerProperties example of the REST reference (docs/wire-servicebus.md
// §7, [REST]), with the get-only properties of a peek-lock response:
// settable ones go to the message, get-only ones to Source.
func TestDecodeBrokerPropertiesRESTExample(t *testing.T) {
	bp := `{"SessionId":"{27729E1-B37B-4D29-AA0A-E367906C206E}","MessageId":"{701332E1-B37B-4D29-AA0A-E367906C206E}",` +
		`"TimeToLive":90,"CorrelationId":"{701332F3-B37B-4D29-AA0A-E367906C206E}","SequenceNumber":12345,` +
		`"DeliveryCount":2,"To":"http://contoso.com","ReplyTo":"http://fabrikam.com",` +
		`"EnqueuedTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT","ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT",` +
		`"LockToken":"7DA9CFD5-40D5-4BB1-8D64-EC5A52E1C547","LockedUntilUtc":"Wed, 02 Jul 2014 01:33:27 GMT",` +
		`"EnqueuedSequenceNumber":7,"State":"Deferred","DeadLetterSource":"orders","Label":"M1","ReplyToSessionId":"rs",` +
		`"PartitionKey":"{27729E1-B37B-4D29-AA0A-E367906C206E}","SomeFutureProperty":{"x":[1,2]}}`
	m := newMessage()
	if _, err := decodeBrokerProperties(bp, m); err != nil {
		t.Fatal(err)
	}
	want := newMessage()
	want.GroupKey = "{27729E1-B37B-4D29-AA0A-E367906C206E}"
	want.PartitionKey = want.GroupKey
	want.ID = "{701332E1-B37B-4D29-AA0A-E367906C206E}"
	want.CorrelationID = "{701332F3-B37B-4D29-AA0A-E367906C206E}"
	want.TTL = 90 * time.Second
	want.To, want.ReplyTo, want.Subject, want.ReplyToGroup = "http://contoso.com", "http://fabrikam.com", "M1", "rs"
	want.ScheduledAt = date("Sun, 06 Nov 1994 08:49:37 GMT")
	want.Source.SequenceNumber = "12345"
	want.Source.DeliveryCount = 2
	want.Source.EnqueuedTime = date("Sun, 06 Nov 1994 08:49:37 GMT")
	want.Source.LockToken = "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"
	want.Source.LockedUntil = date("Wed, 02 Jul 2014 01:33:27 GMT")
	want.Source.EnqueuedSequence = 7
	want.Source.State = 1
	want.Source.DeadLetterSource = "orders"
	if d := mappingtest.Diff(want, m, mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}

func TestDecodeBrokerPropertiesMalformed(t *testing.T) {
	for _, tc := range []struct{ bp, field string }{
		{`[]`, "BrokerProperties"},
		{`{"Label":`, "BrokerProperties"},
		{`null`, "BrokerProperties"},
		{`{"MessageId":42}`, "BrokerProperties.MessageId"},
		{`{"TimeToLive":"90"}`, "BrokerProperties.TimeToLive"},
		{`{"TimeToLive":-1}`, "BrokerProperties.TimeToLive"},
		{`{"TimeToLiveTimeSpan":"forever"}`, "BrokerProperties.TimeToLiveTimeSpan"},
		{`{"ScheduledEnqueueTimeUtc":"2011-03-04T08:49:37Z"}`, "BrokerProperties.ScheduledEnqueueTimeUtc"},
		{`{"EnqueuedTimeUtc":1299228577}`, "BrokerProperties.EnqueuedTimeUtc"},
		{`{"LockToken":"not-a-guid"}`, "BrokerProperties.LockToken"},
		{`{"SequenceNumber":1.5}`, "BrokerProperties.SequenceNumber"},
		{`{"SequenceNumber":"12"}`, "BrokerProperties.SequenceNumber"},
		{`{"DeliveryCount":-1}`, "BrokerProperties.DeliveryCount"},
		{`{"State":"Lost"}`, "BrokerProperties.State"},
		{`{"State":true}`, "BrokerProperties.State"},
	} {
		_, err := decodeBrokerProperties(tc.bp, newMessage())
		var r *mapping.RejectError
		if !asReject(err, &r) || r.Field != tc.field || r.Wire != Wire {
			t.Errorf("%s: got %v, want a RejectError on %s", tc.bp, err, tc.field)
		}
	}
}

func TestDecodeBrokerPropertiesLenient(t *testing.T) {
	for _, tc := range []struct {
		bp    string
		check func(m *mapping.Message) bool
	}{
		{`{}`, func(m *mapping.Message) bool { return m.ID == "" }},
		{`  `, func(m *mapping.Message) bool { return m.ID == "" }},
		{`{"MessageId":null,"Label":null}`, func(m *mapping.Message) bool { return m.ID == "" }},
		{`{"State":2}`, func(m *mapping.Message) bool { return m.Source.State == 2 }},
		{`{"State":"Active"}`, func(m *mapping.Message) bool { return m.Source.State == 0 }},
		{`{"messageid":"lower"}`, func(m *mapping.Message) bool { return m.ID == "" }}, // names are case-sensitive: unknown
		{`{"TimeToLiveTimeSpan":"0.00:00:40"}`, func(m *mapping.Message) bool { return m.TTL == 40*time.Second }},
		{`{"TimeToLiveTimeSpan":"1.02:03:04.5"}`, func(m *mapping.Message) bool { return m.TTL == 26*time.Hour+3*time.Minute+4500*time.Millisecond }},
		{`{"TimeToLiveTimeSpan":"00:00:40","TimeToLive":1.5}`, func(m *mapping.Message) bool { return m.TTL == 1500*time.Millisecond }},
		{`{"TimeToLive":1.5,"TimeToLiveTimeSpan":"00:00:40"}`, func(m *mapping.Message) bool { return m.TTL == 1500*time.Millisecond }},
		{`{"TimeToLive":0.0000001}`, func(m *mapping.Message) bool { return m.TTL == 100 }},
		{`{"TimeToLive":1.23456789}`, func(m *mapping.Message) bool { return m.TTL == 1234567900 }},
		{`{"TimeToLive":1e3}`, func(m *mapping.Message) bool { return m.TTL == 1000*time.Second }},
		// TimeSpan.MaxValue, Service Bus's "never": longer than a Duration, so unset.
		{`{"TimeToLive":922337203685.47754}`, func(m *mapping.Message) bool { return m.TTL == 0 }},
		{`{"TimeToLive":9223372036.9}`, func(m *mapping.Message) bool { return m.TTL == 0 }},
		{`{"ScheduledEnqueueTimeUtc":"Mon, 01 Jan 0001 00:00:00 GMT"}`, func(m *mapping.Message) bool { return m.ScheduledAt.IsZero() }},
		{`{"ContentType":"application/json"}`, func(m *mapping.Message) bool { return true }},
	} {
		m := newMessage()
		if _, err := decodeBrokerProperties(tc.bp, m); err != nil {
			t.Errorf("%s: %v", tc.bp, err)
		} else if !tc.check(m) {
			t.Errorf("%s: decoded %+v", tc.bp, m)
		}
	}
}

func TestRenderBrokerProperties(t *testing.T) {
	p := brokerOut{
		MessageID: "m1", CorrelationID: "c1", SessionID: "s", PartitionKey: "s", Label: "Grüße \"x\"\n",
		To: "to", ReplyTo: "rt", ReplyToSessionID: "rs", TTLTicks: 900000001,
		Scheduled: date("Sun, 06 Nov 1994 08:49:37 GMT"),
	}
	got := string(appendBrokerProperties(nil, &p))
	want := `{"MessageId":"m1","CorrelationId":"c1","SessionId":"s","PartitionKey":"s",` +
		`"Label":"Gr\u00fc\u00dfe \"x\"\n","To":"to","ReplyTo":"rt","ReplyToSessionId":"rs",` +
		`"TimeToLive":90.0000001,"ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !headerSafe(got) {
		t.Fatal("BrokerProperties is not a valid header value")
	}
	m := newMessage()
	if _, err := decodeBrokerProperties(got, m); err != nil || m.Subject != p.Label || m.TTL != 90*time.Second+100 {
		t.Fatalf("decoded back %+v, %v", m, err)
	}
	if got := string(appendBrokerProperties(nil, &brokerOut{})); got != "{}" {
		t.Fatalf("empty: %s", got)
	}
}

func TestTTLSeconds(t *testing.T) {
	for _, d := range []time.Duration{100, 1500 * time.Millisecond, 90 * time.Second, 14 * 24 * time.Hour,
		time.Duration(maxTTLSeconds)*time.Second + 854775800} {
		text := formatSeconds7(int64(d / 100))
		got, ok, err := parseTTLSeconds(text)
		if err != nil || !ok || got != d {
			t.Errorf("%v -> %s -> %v %v %v", d, text, got, ok, err)
		}
	}
}

func TestParseTimeSpanRejects(t *testing.T) {
	for _, s := range []string{"", "40", "-00:00:40", "0.0:00:40", "00:60:00", "24:00:00", "00:00:40.", "00:00:40.12345678", "00:00:4x", "x.00:00:40"} {
		if d, err := parseTimeSpan(s); err == nil {
			t.Errorf("parseTimeSpan(%q) = %v, want an error", s, d)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         `"plain"`,
		"q\"b\\":        `"q\"b\\"`,
		"\x00\x1f\x7f":  `"\u0000\u001f\u007f"`,
		"ü🙂":            `"\u00fc\ud83d\ude42"`,
		"\u2028\t\r\n ": `"\u2028\t\r\n "`,
	} {
		if got := string(appendJSONString(nil, in, true)); got != want {
			t.Errorf("%q: got %s want %s", in, got, want)
		}
	}
	if got := string(appendJSONString(nil, "ü🙂", false)); got != `"ü🙂"` {
		t.Errorf("non-ascii mode: %s", got)
	}
	if got := asciiJSON(`{"a":"ü🙂"}`); got != `{"a":"\u00fc\ud83d\ude42"}` {
		t.Errorf("asciiJSON: %s", got)
	}
	if !strings.HasPrefix(asciiJSON(`{}`), "{") {
		t.Error("asciiJSON")
	}
}
