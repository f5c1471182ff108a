package sbconformance

import (
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// Every property a Go sender can set survives send -> receive unchanged
// (§1 broker properties <-> AMQP sections, §2 application-property types).
func TestPropertiesRoundTrip(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	ts := time.Date(2024, 2, 29, 13, 14, 15, 123_000_000, time.UTC)
	appProps := map[string]any{
		"string": "héllo ✓", "empty": "",
		"bool-t": true, "bool-f": false,
		"int": int(-42), "int8": int8(-8), "int16": int16(-1600), "int32": int32(-320000), "int64": int64(-1 << 62),
		"uint": uint(42), "uint8": uint8(200), "uint16": uint16(60000), "uint32": uint32(4000000000), "uint64": uint64(1<<63 + 5),
		// Just past a double's 53 bits: rhea reads these as floats
		// unless the server reads them whole (an audit saw 2^53+1 come
		// back as 2^53).
		"int64-2^53+1": int64(1<<53 + 1), "int64-minus-2^53": int64(-1 << 53), "uint64-2^53+1": uint64(1<<53 + 1),
		"float32": float32(1.5), "float64": 3.141592653589793,
		"bytes": []byte{0, 1, 0xfe}, "time": ts,
		"uuid": amqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		"nil":  nil,
	}
	// what go-amqp decodes each value to
	want := map[string]any{}
	for k, v := range appProps {
		switch x := v.(type) {
		case int:
			want[k] = int64(x)
		case uint:
			want[k] = uint64(x)
		default:
			want[k] = v
		}
	}
	sched := time.Now().Add(400 * time.Millisecond).Truncate(time.Millisecond).UTC()
	ttl := 90 * time.Minute
	msg := &azservicebus.Message{
		Body:                  []byte{0, 1, 2, 3, 'b', 'o', 'd', 'y'},
		MessageID:             ptr("msg-id-1"),
		CorrelationID:         ptr("corr-1"),
		ContentType:           ptr("application/json; charset=utf-8"),
		Subject:               ptr("the subject"),
		To:                    ptr("sb://elsewhere/queue"),
		ReplyTo:               ptr("reply-queue"),
		ReplyToSessionID:      ptr("reply-session"),
		SessionID:             ptr("sess-props"),
		PartitionKey:          ptr("sess-props"), // must equal SessionID (§6.5)
		TimeToLive:            &ttl,
		ScheduledEnqueueTime:  &sched,
		ApplicationProperties: appProps,
	}
	s := newSender(t, c, "props")
	must(t, "send", s.SendMessage(ctxFor(t, 5*time.Second), msg, nil))
	r := newReceiver(t, c, "props", nil)
	m := receiveN(t, r, 1, 5*time.Second)[0]

	mustEqual(t, "Body", string(m.Body), string(msg.Body))
	mustEqual(t, "MessageID", m.MessageID, "msg-id-1")
	mustEqual(t, "CorrelationID", str(m.CorrelationID), "corr-1")
	mustEqual(t, "ContentType", str(m.ContentType), "application/json; charset=utf-8")
	mustEqual(t, "Subject", str(m.Subject), "the subject")
	mustEqual(t, "To", str(m.To), "sb://elsewhere/queue")
	mustEqual(t, "ReplyTo", str(m.ReplyTo), "reply-queue")
	mustEqual(t, "ReplyToSessionID", str(m.ReplyToSessionID), "reply-session")
	mustEqual(t, "SessionID", str(m.SessionID), "sess-props")
	mustEqual(t, "PartitionKey", str(m.PartitionKey), "sess-props")
	if m.TimeToLive == nil || *m.TimeToLive != ttl {
		t.Fatalf("TimeToLive %v, want %s", m.TimeToLive, ttl)
	}
	if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(sched) {
		t.Fatalf("ScheduledEnqueueTime %v, want %s", m.ScheduledEnqueueTime, sched)
	}
	if m.EnqueuedTime.Before(sched) {
		t.Fatalf("enqueued %s before the scheduled time %s", m.EnqueuedTime, sched)
	}
	if len(m.ApplicationProperties) != len(want) {
		t.Fatalf("application properties: got %d, want %d: %#v", len(m.ApplicationProperties), len(want), m.ApplicationProperties)
	}
	for k, w := range want {
		g, ok := m.ApplicationProperties[k]
		if !ok {
			t.Fatalf("application property %q missing", k)
		}
		if gt, ok := g.(time.Time); ok {
			if !gt.Equal(w.(time.Time)) {
				t.Fatalf("property %q = %s, want %s", k, gt, w)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("property %q = %#v (%T), want %#v (%T)", k, g, g, w, w)
		}
	}
	// raw AMQP view: the annotations the sender set are kept, the broker's are added
	ann := m.RawAMQPMessage.MessageAnnotations
	if ann["x-opt-partition-key"] != "sess-props" {
		t.Fatalf("x-opt-partition-key %v", ann["x-opt-partition-key"])
	}
	for _, k := range []string{"x-opt-enqueued-time", "x-opt-sequence-number", "x-opt-locked-until"} {
		if _, ok := ann[k]; !ok {
			t.Fatalf("broker annotation %s missing", k)
		}
	}
	must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
}
