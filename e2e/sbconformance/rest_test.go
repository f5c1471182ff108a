package sbconformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The REST data plane shares the store with AMQP (docs/wire-servicebus.md
// §7). No official SDK speaks it, so these requests are hand-made
// from the documentation.

func restURL(path string) string { return fmt.Sprintf("http://127.0.0.1:%d/%s", httpPort, path) }

func restDo(t *testing.T, method, url string, body []byte, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 15*time.Second), method, url, bytes.NewReader(body))
	must(t, "request", err)
	entity := strings.SplitN(strings.TrimPrefix(url, restURL("")), "/messages", 2)[0]
	req.Header.Set("Authorization", sasToken(restURL(entity), keyName, keyVal, time.Now().Add(time.Hour)))
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header[k] = []string{v} // as written, not canonicalised
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, method+" "+url, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, "read body", err)
	return resp, b
}

func TestRESTSendThenAMQPReceive(t *testing.T) {
	requireServer(t)
	t.Parallel()
	// a header that cannot be typed rejects the message (docs/wire-servicebus.md §7)
	resp, _ := restDo(t, "POST", restURL("rest-in/messages"), []byte("x"), map[string]string{"Customer": "12345,ABC"})
	mustEqual(t, "status for an untyped custom property", resp.StatusCode, http.StatusBadRequest)

	resp, b := restDo(t, "POST", restURL("rest-in/messages?timeout=60"), []byte(`{"order":1}`), map[string]string{
		"Content-Type":     "application/json",
		"BrokerProperties": `{"Label":"M1","MessageId":"rest-1","CorrelationId":"c-1","ReplyTo":"r","To":"t","TimeToLive":90,"DeliveryCount":99,"SequenceNumber":12345}`,
		"Priority":         `"High"`,
		"Count":            "42",
		"Ratio":            "1.5",
		"Flag":             "true",
		"When":             `"Sun, 06 Nov 1994 08:49:37 GMT"`,
		"Quoted42":         `"42"`,
	})
	mustEqual(t, "send status", resp.StatusCode, http.StatusCreated)
	_ = b
	c := newClient(t)
	r := newReceiver(t, c, "rest-in", nil)
	m := receiveN(t, r, 1, 5*time.Second)[0]
	mustEqual(t, "body", string(m.Body), `{"order":1}`)
	mustEqual(t, "Subject", str(m.Subject), "M1")
	mustEqual(t, "MessageID", m.MessageID, "rest-1")
	mustEqual(t, "CorrelationID", str(m.CorrelationID), "c-1")
	mustEqual(t, "ReplyTo", str(m.ReplyTo), "r")
	mustEqual(t, "To", str(m.To), "t")
	mustEqual(t, "ContentType", str(m.ContentType), "application/json")
	mustEqual(t, "TimeToLive", *m.TimeToLive, 90*time.Second)
	mustEqual(t, "get-only DeliveryCount ignored", m.DeliveryCount, uint32(1))
	if *m.SequenceNumber == 12345 {
		t.Fatal("get-only SequenceNumber must be ignored")
	}
	want := map[string]any{"Priority": "High", "Count": int64(42), "Ratio": 1.5, "Flag": true, "Quoted42": "42"}
	for k, v := range want {
		if m.ApplicationProperties[k] != v {
			t.Fatalf("property %s = %#v (%T), want %#v (%T)", k, m.ApplicationProperties[k], m.ApplicationProperties[k], v, v)
		}
	}
	when, ok := m.ApplicationProperties["When"].(time.Time)
	if !ok || !when.Equal(time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)) {
		t.Fatalf("When = %#v, want the DateTime 1994-11-06T08:49:37Z", m.ApplicationProperties["When"])
	}
	must(t, "complete", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))

	// batch
	batch := `[{"Body":"first","BrokerProperties":{"Label":"M1","TimeToLiveTimeSpan":"0.00:00:40"}},
	           {"Body":"second","BrokerProperties":{"Label":"M2"},"UserProperties":{"Priority":"Low"}}]`
	resp, _ = restDo(t, "POST", restURL("rest-batch/messages"), []byte(batch), map[string]string{"Content-Type": "application/vnd.microsoft.servicebus.json"})
	mustEqual(t, "batch status", resp.StatusCode, http.StatusCreated)
	rb := newReceiver(t, c, "rest-batch", nil)
	got := receiveN(t, rb, 2, 5*time.Second)
	mustEqual(t, "first", string(got[0].Body), "first")
	mustEqual(t, "first TTL", *got[0].TimeToLive, 40*time.Second)
	mustEqual(t, "second label", str(got[1].Subject), "M2")
	mustEqual(t, "second prop", got[1].ApplicationProperties["Priority"], any("Low"))

	// too large, no such entity, no token, wrong key
	resp, _ = restDo(t, "POST", restURL("rest-in/messages"), bytes.Repeat([]byte("x"), 300*1024), nil)
	mustEqual(t, "too large", resp.StatusCode, http.StatusForbidden)
	resp, _ = restDo(t, "POST", restURL("no-such-queue/messages"), []byte("x"), nil)
	mustEqual(t, "no entity", resp.StatusCode, http.StatusGone)
	resp, _ = restDo(t, "POST", restURL("rest-in/messages"), []byte("x"), map[string]string{"Authorization": ""})
	mustEqual(t, "no token", resp.StatusCode, http.StatusUnauthorized)
	resp, _ = restDo(t, "POST", restURL("rest-in/messages"), []byte("x"), map[string]string{
		"Authorization": sasToken(restURL("rest-in"), keyName, "wrong", time.Now().Add(time.Hour)),
	})
	mustEqual(t, "wrong key", resp.StatusCode, http.StatusUnauthorized)
	resp, _ = restDo(t, "POST", restURL("sess/messages/head?timeout=1"), nil, nil)
	mustEqual(t, "no session receive over REST", resp.StatusCode, http.StatusBadRequest)
	receiveNone(t, r, 300*time.Millisecond)
}

func TestAMQPSendThenRESTReceive(t *testing.T) {
	requireServer(t)
	t.Parallel()
	c := newClient(t)
	s := newSender(t, c, "rest-out")
	must(t, "send", s.SendMessage(ctxFor(t, 5*time.Second), &azservicebus.Message{
		Body: []byte("payload"), MessageID: ptr("amqp-1"), Subject: ptr("L"), ContentType: ptr("text/plain"),
		ApplicationProperties: map[string]any{"Priority": "High", "Count": int64(7), "Flag": false},
	}, nil))
	resp, body := restDo(t, "POST", restURL("rest-out/messages/head?timeout=5"), nil, nil)
	mustEqual(t, "peek-lock status", resp.StatusCode, http.StatusCreated)
	mustEqual(t, "body", string(body), "payload")
	mustEqual(t, "Content-Type", resp.Header.Get("Content-Type"), "text/plain")
	var bp map[string]any
	must(t, "BrokerProperties JSON", json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp))
	mustEqual(t, "DeliveryCount", bp["DeliveryCount"], any(float64(1)))
	mustEqual(t, "Label", bp["Label"], any("L"))
	mustEqual(t, "MessageId", bp["MessageId"], any("amqp-1"))
	mustEqual(t, "State", bp["State"], any("Active"))
	token, _ := bp["LockToken"].(string)
	if len(token) != 36 {
		t.Fatalf("LockToken %q is not a GUID string", token)
	}
	if _, err := time.Parse(time.RFC1123, bp["LockedUntilUtc"].(string)); err != nil {
		t.Fatalf("LockedUntilUtc: %v", err)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasSuffix(loc, "/rest-out/messages/amqp-1/"+token) {
		t.Fatalf("Location %q", loc)
	}
	mustEqual(t, "Priority header", resp.Header.Get("Priority"), `"High"`)
	mustEqual(t, "Count header", resp.Header.Get("Count"), "7")
	mustEqual(t, "Flag header", resp.Header.Get("Flag"), "false")

	resp, _ = restDo(t, "POST", loc, nil, nil) // renew
	mustEqual(t, "renew", resp.StatusCode, http.StatusOK)
	resp, _ = restDo(t, "PUT", loc, nil, nil) // unlock = abandon
	mustEqual(t, "unlock", resp.StatusCode, http.StatusOK)
	resp, _ = restDo(t, "PUT", loc, nil, nil)
	mustEqual(t, "unlock with a released lock", resp.StatusCode, http.StatusNotFound)

	// the abandoned message is back; an AMQP receiver sees DeliveryCount 2
	r := newReceiver(t, c, "rest-out", nil)
	m := receiveN(t, r, 1, 5*time.Second)[0]
	mustEqual(t, "DeliveryCount after REST unlock", m.DeliveryCount, uint32(2))
	must(t, "abandon", r.AbandonMessage(ctxFor(t, 5*time.Second), m, nil))

	resp, _ = restDo(t, "POST", restURL("rest-out/messages/head?timeout=5"), nil, nil)
	mustEqual(t, "peek-lock again", resp.StatusCode, http.StatusCreated)
	loc = resp.Header.Get("Location")
	resp, _ = restDo(t, "DELETE", loc, nil, nil)
	mustEqual(t, "complete", resp.StatusCode, http.StatusOK)
	resp, _ = restDo(t, "DELETE", loc, nil, nil)
	mustEqual(t, "complete twice", resp.StatusCode, http.StatusNotFound)

	start := time.Now()
	resp, _ = restDo(t, "POST", restURL("rest-out/messages/head?timeout=1"), nil, nil)
	mustEqual(t, "empty queue", resp.StatusCode, http.StatusNoContent)
	if time.Since(start) < 900*time.Millisecond {
		t.Fatalf("an empty peek-lock returned after %s, before its 1 s timeout", time.Since(start))
	}

	// receive-and-delete
	sendBodies(t, s, "rnd")
	resp, body = restDo(t, "DELETE", restURL("rest-out/messages/head?timeout=5"), nil, nil)
	mustEqual(t, "receive-and-delete", resp.StatusCode, http.StatusOK)
	mustEqual(t, "body", string(body), "rnd")
	receiveNone(t, r, 300*time.Millisecond)
}
