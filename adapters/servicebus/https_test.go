package servicebus

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func (c *bearerCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return azcore.AccessToken{Token: c.token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func restSource(t *testing.T, f *restFake, cfg SourceConfig) driver.Source {
	t.Helper()
	if cfg.ConnectionString == "" {
		cfg.ConnConfig = f.conn()
	}
	src, _ := newTestSource(t, cfg)
	return src
}

func restSink(t *testing.T, f *restFake, cfg SinkConfig) driver.Sink {
	t.Helper()
	if cfg.ConnectionString == "" {
		cfg.ConnConfig = f.conn()
	}
	snk, _ := newTestSink(t, cfg)
	return snk
}

// HTTPS send → peek-lock: the message comes back as sent (what REST cannot
// hold rides in the envelope), with the broker's facts; the fake saw the
// custom properties with the types Service Bus infers.
func TestHTTPSRoundTrip(t *testing.T) {
	t.Parallel()
	f := newRESTFake(t)
	f.addQueue("orders", false)
	// Encode: what a header cannot carry (the non-ASCII char '€') moves
	// into the envelope
	snk := restSink(t, f, SinkConfig{Queue: "orders", Policy: mapping.Encode})
	src := restSource(t, f, SourceConfig{Queue: "orders", ReceiveWait: "5s"})
	full := fullMessage("full-1")
	simple := &mapping.Message{ID: "simple-2", Body: []byte("hello"), ContentType: "text/plain", Subject: "greeting",
		Attributes: []mapping.Attribute{
			{Name: "Count", Value: mapping.Int64(3)},
			{Name: "Flag", Value: mapping.Bool(true)},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Priority", Value: mapping.String("High")},
			{Name: "When", Value: mapping.Timestamp(time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC))},
		}}
	start := time.Now().Add(-time.Second)
	for _, m := range []*mapping.Message{full, simple} { // one by one: single sends
		sendAll(t, snk, m)
	}
	// what Service Bus would have inferred from the headers
	st := f.stored("orders")
	kinds := map[string]string{}
	for _, p := range st[1].props {
		kinds[p.name] = p.kind
	}
	for name, want := range map[string]string{"Count": "Int64", "Flag": "Boolean", "Price": "Double", "Priority": "String", "When": "DateTime"} {
		if kinds[name] != want {
			t.Errorf("property %s inferred as %q, want %s (all: %v)", name, kinds[name], want, kinds)
		}
	}
	if _, ok := kinds["Qbridge.envelope"]; ok {
		t.Errorf("simple message carries an envelope: %v", kinds)
	}
	// concurrent peek-lock requests: in any order
	byID := map[string]driver.Delivery{}
	for _, d := range receiveN(t, src, 2, 10*time.Second) {
		byID[d.Message().ID] = d
	}
	for _, want := range []*mapping.Message{full, simple} {
		d := byID[want.ID]
		if d == nil {
			t.Fatalf("%s not received", want.ID)
		}
		if de := d.(driver.DecodeErrorer).DecodeError(); de != nil {
			t.Fatalf("decode: %v", de)
		}
		got := d.Message()
		mappingtest.Check(t, want, got)
		s := got.Source
		if s.Protocol != "servicebus" || s.Address != "orders" || s.DeliveryCount != 1 || s.SequenceNumber == "" || s.LockToken == "" ||
			s.EnqueuedTime.Before(start.Truncate(time.Second)) || s.LockedUntil.IsZero() {
			t.Errorf("source facts %+v", s)
		}
		if _, ok := d.(driver.DeadLetterer); ok {
			t.Error("an HTTPS delivery cannot dead-letter (REST has no such call)")
		}
		ack(t, d)
	}
	expectNone(t, src, 1200*time.Millisecond)
	if n := f.count("DELETE", "/orders/messages/"); n != 2 {
		t.Errorf("%d completes", n)
	}
}

// Complete, unlock (Nack), renew (Extend keeps the message past its 2 s
// lock), a Nack delay held with renewals, and lock expiry.
func TestHTTPSSettlement(t *testing.T) {
	t.Parallel()
	f := newRESTFake(t)
	f.addQueue("work", false)
	snk := restSink(t, f, SinkConfig{Queue: "work"})
	src := restSource(t, f, SourceConfig{Queue: "work", MaxMessages: 1, ReceiveWait: "1s", LockRenewal: "500ms"})
	sendAll(t, snk, textMsg("a"))

	d := receiveN(t, src, 1, 10*time.Second)[0]
	if err := d.Nack(ctxT(t, 5*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().Source.DeliveryCount != 2 {
		t.Fatalf("after unlock: delivery count %d", d.Message().Source.DeliveryCount)
	}
	// Extend past the lock
	for range 6 {
		// Time passes on the fake's lock clock: without the renewals the
		// 2 s lock would lapse.
		time.Sleep(700 * time.Millisecond)
		if err := d.Extend(ctxT(t, 5*time.Second), time.Minute); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	// a Nack delay of 3 s: held (renewed), then unlocked
	start := time.Now()
	if err := d.Nack(ctxT(t, 5*time.Second), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, src, 1, 10*time.Second)[0]
	if el := time.Since(start); el < 2900*time.Millisecond || d.Message().Source.DeliveryCount != 3 {
		t.Fatalf("after the Nack delay: %s, delivery count %d", el, d.Message().Source.DeliveryCount)
	}
	if n := f.count("POST", "/work/messages/"); n < 8 { // 6 extends + the held renewals (head is also POST .../messages/head)
		t.Errorf("%d renew requests", n)
	}
	// lock expiry: not settled for 2 s, redelivered; the stale lock fails
	again := receiveN(t, src, 1, 10*time.Second)[0]
	if again.Message().Source.DeliveryCount != 4 {
		t.Fatalf("after lock expiry: delivery count %d", again.Message().Source.DeliveryCount)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("ack with an expired lock: %v", err)
	}
	ack(t, again)
	expectNone(t, src, 1200*time.Millisecond)
}

// Batches: many messages in few requests (JSON batch body), split at the
// size limit; a message the codec or the size refuses fails alone and
// permanently; a topic fans out.
func TestHTTPSBatchesAndLimits(t *testing.T) {
	t.Parallel()
	f := newRESTFake(t)
	f.addQueue("bulk", false)
	f.addTopic("events", "a", "b")
	snk := restSink(t, f, SinkConfig{Queue: "bulk", MaxMessageSize: 64 << 10})
	var msgs []*mapping.Message
	for i := range 100 {
		m := textMsg(fmt.Sprintf("m%03d", i))
		m.Body = bytes.Repeat([]byte{'x'}, 2000)
		m.SetAttr("n", mapping.Int32(int32(i)))
		msgs = append(msgs, m)
	}
	tooBig := textMsg("too-big")
	tooBig.Body = bytes.Repeat([]byte{'y'}, 70<<10)
	bad := textMsg("bad")
	bad.SetAttr("Content-Length", mapping.String("x")) // a reserved header name
	errs := snk.Send(ctxT(t, 30*time.Second), append(append(msgs, tooBig), bad))
	for i, err := range errs[:100] {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	for _, err := range errs[100:] {
		if !driver.IsPermanent(err) {
			t.Fatalf("want a permanent error, got %v", err)
		}
	}
	posts := f.count("POST", "/bulk/messages")
	if posts < 4 || posts > 10 {
		t.Errorf("%d send requests for 100 × 2 KB in 64 KB batches", posts)
	}
	st := f.stored("bulk")
	if len(st) != 100 {
		t.Fatalf("%d stored", len(st))
	}
	for i, m := range st {
		if m.bp["MessageId"] != fmt.Sprintf("m%03d", i) {
			t.Fatalf("stored %d is %v", i, m.bp["MessageId"])
		}
	}
	src := restSource(t, f, SourceConfig{Queue: "bulk", MaxMessages: 8, ReceiveWait: "1s"})
	ds := receiveN(t, src, 100, 20*time.Second)
	for _, d := range ds {
		if v, ok := d.Message().Attr("n"); !ok || v.Kind != mapping.KindInt32 {
			t.Fatalf("attribute n: %v %v", v, ok)
		}
	}
	ack(t, ds...)

	tsnk := restSink(t, f, SinkConfig{Topic: "events"})
	sendAll(t, tsnk, textMsg("e1"))
	for _, sub := range []string{"a", "b"} {
		s := restSource(t, f, SourceConfig{Topic: "events", Subscription: sub, ReceiveWait: "1s"})
		d := receiveN(t, s, 1, 10*time.Second)[0]
		if d.Message().ID != "e1" || d.Message().Source.Address != "events/Subscriptions/"+sub {
			t.Fatalf("%s: %s at %s", sub, d.Message().ID, d.Message().Source.Address)
		}
		ack(t, d)
	}
}

// Authorization: the SAS token the adapter signs is accepted, a wrong key
// fails the source for good and each send of the sink (retried, never a
// message's dead letter), an expired pre-built token is explained, and a
// Microsoft Entra ID token goes as a bearer token.
func TestHTTPSAuthorization(t *testing.T) {
	t.Parallel()
	f := newRESTFake(t)
	f.addQueue("secure", false)
	f.addQueue("sessions", true)

	bad := f.conn()
	bad.ConnectionString = f.connString("wrong-key")
	src, _ := newTestSource(t, SourceConfig{ConnConfig: bad, Queue: "secure", ReceiveWait: "1s"})
	if _, err := src.Receive(ctxT(t, 10*time.Second), 1); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: %v", err)
	}
	// The sink's key is not the message's fault: the send fails, and is
	// not permanent, which would dead-letter every message (an audit's
	// whole queue went to the dead-letter destination).
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: bad, Queue: "secure"})
	if err := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{textMsg("x")})[0]; err == nil || driver.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key, send: %v; want a 401 that is not permanent", err)
	}

	// a pre-built token in the connection string: sent as it is
	exp := time.Now().Add(time.Hour)
	tok := sasSignature("https://"+f.namespace+"/", f.keyName, f.key, exp)
	pre := f.conn()
	pre.ConnectionString = "Endpoint=sb://" + f.namespace + "/;SharedAccessSignature=" + tok
	sendAll(t, restSink(t, f, SinkConfig{ConnConfig: pre, Queue: "secure"}), textMsg("with-token"))
	expired := f.conn()
	expired.ConnectionString = "Endpoint=sb://" + f.namespace + "/;SharedAccessSignature=" + sasSignature("https://"+f.namespace+"/", f.keyName, f.key, time.Now().Add(-time.Minute))
	if err := restSink(t, f, SinkConfig{ConnConfig: expired, Queue: "secure"}).Send(ctxT(t, 10*time.Second), []*mapping.Message{textMsg("late")})[0]; err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}

	// Microsoft Entra ID: a bearer token from the credential, cached
	cred := &bearerCred{token: f.bearer}
	set, err := (&SourceConfig{ConnConfig: ConnConfig{Namespace: f.namespace, Transport: "https", Endpoint: f.srv.URL}, Queue: "secure", ReceiveWait: "1s"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	log, _ := testLog(t)
	esrc, err := newSource(context.Background(), set, log, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer esrc.Close(context.Background())
	d := receiveN(t, esrc, 1, 10*time.Second)[0]
	if d.Message().ID != "with-token" {
		t.Fatalf("got %s", d.Message().ID)
	}
	ack(t, d)
	if cred.calls != 1 {
		t.Errorf("%d token requests, want 1 (cached)", cred.calls)
	}

	// sending to a session-enabled entity: default_session, or a permanent
	// error that says what to do
	sendAll(t, restSink(t, f, SinkConfig{Queue: "sessions", DefaultSession: "main"}), textMsg("in-session"))
	if st := f.stored("sessions"); len(st) != 1 || st[0].bp["SessionId"] != "main" {
		t.Fatalf("stored %+v", st)
	}
	err = restSink(t, f, SinkConfig{Queue: "sessions"}).Send(ctxT(t, 10*time.Second), []*mapping.Message{textMsg("loose")})[0]
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "default_session") {
		t.Fatalf("no session: %v", err)
	}

	// the REST API has no session receiver: a session-enabled entity fails
	ssrc := restSource(t, f, SourceConfig{Queue: "sessions", ReceiveWait: "1s"})
	if _, err := ssrc.Receive(ctxT(t, 10*time.Second), 1); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("session entity over HTTPS: %v", err)
	}
}

// The SAS token is the documented one: sr is the lower-cased, URL-encoded
// resource, sig the URL-encoded base64 HMAC-SHA256 of sr, a newline and
// se, keyed by the key's text.
func TestSASSignature(t *testing.T) {
	t.Parallel()
	exp := time.Unix(1700000000, 0)
	tok := sasSignature("https://MyNS.servicebus.windows.net/Orders", "send", "key=", exp)
	want := "SharedAccessSignature sr=https%3a%2f%2fmyns.servicebus.windows.net%2forders&sig="
	if !strings.HasPrefix(tok, want) || !strings.HasSuffix(tok, "&se=1700000000&skn=send") {
		t.Fatalf("token %s", tok)
	}
	// verified independently, the way the REST fake does
	f := &restFake{namespace: "myns.servicebus.windows.net", keyName: "send", key: "key="}
	r := httptestRequest(tok)
	if err := f.authorize(r, "Orders"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired token: %v", err)
	}
	tok = sasSignature("https://myns.servicebus.windows.net/orders", "send", "key=", time.Now().Add(time.Hour))
	if err := f.authorize(httptestRequest(tok), "orders/subscriptions/x"); err != nil {
		t.Fatalf("a token for the topic covers its subscriptions: %v", err)
	}
	if err := f.authorize(httptestRequest(tok), "other"); err == nil {
		t.Fatal("a token for one entity must not cover another")
	}
	// renewed before expiry
	now := time.Now()
	a := &sasKeyAuth{keyName: "k", key: "v", ttl: time.Hour, now: func() time.Time { return now }}
	t1, _ := a.authorization(context.Background(), "https://x/q")
	now = now.Add(50 * time.Minute)
	t2, _ := a.authorization(context.Background(), "https://x/q")
	now = now.Add(6 * time.Minute)
	t3, _ := a.authorization(context.Background(), "https://x/q")
	if t1 != t2 || t2 == t3 {
		t.Fatal("a token is reused until 5 minutes before its expiry, then renewed")
	}
}

func httptestRequest(auth string) *http.Request {
	u, _ := url.Parse("http://127.0.0.1/")
	r := &http.Request{URL: u, Header: http.Header{}}
	r.Header.Set("Authorization", auth)
	return r
}

// A message's fate does not depend on what it was sent with: text an HTTP
// header cannot hold goes in a batch, of one when the message is alone,
// and a body that is not UTF-8 goes as a single send out of a batch, in
// order. Under the reject policy every one is accepted as it is, alone or
// together, and a dry run says the same.
func TestHTTPSFormDoesNotDependOnCompany(t *testing.T) {
	t.Parallel()
	f := newRESTFake(t)
	f.addQueue("forms", false)
	cfg := SinkConfig{Queue: "forms"}
	cfg.ConnConfig = f.conn()
	snk := restSink(t, f, cfg)
	city := func(id string) *mapping.Message {
		m := textMsg(id)
		m.SetAttr("city", mapping.String("Zürich"))
		return m
	}
	binary := func(id string) *mapping.Message {
		m := textMsg(id)
		m.Body = []byte{0xff, 0xfe, 0x00, 0x81}
		return m
	}
	sends := [][]*mapping.Message{
		{city("alone")},
		{textMsg("t1"), city("with-others"), textMsg("t2")},
		{binary("bin-alone")},
		{textMsg("t3"), binary("bin-with-others"), city("c3"), textMsg("t4")},
	}
	dry, err := NewDrySink(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, msgs := range sends {
		for i, err := range dry.Send(ctxT(t, 10*time.Second), msgs) {
			if err != nil {
				t.Errorf("dry run: %s would be refused: %v", msgs[i].ID, err)
			}
		}
		for i, err := range snk.Send(ctxT(t, 30*time.Second), msgs) {
			if err != nil {
				t.Errorf("%s refused: %v", msgs[i].ID, err)
			}
			want = append(want, msgs[i].ID)
		}
	}
	var got []string
	for _, m := range f.stored("forms") {
		id := fmt.Sprint(m.bp["MessageId"])
		got = append(got, id)
		if strings.HasPrefix(id, "bin-") && !bytes.Equal(m.body, []byte{0xff, 0xfe, 0x00, 0x81}) {
			t.Errorf("%s: body %q, want the bytes as sent", id, m.body)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored %v, want %v (in order)", got, want)
	}
	src := restSource(t, f, SourceConfig{Queue: "forms", MaxMessages: 8, ReceiveWait: "1s"})
	for _, d := range receiveN(t, src, len(want), 20*time.Second) {
		m := d.Message()
		if v, ok := m.Attr("city"); (m.ID == "alone" || m.ID == "with-others" || m.ID == "c3") && (!ok || v.Kind != mapping.KindString || v.Str() != "Zürich") {
			t.Errorf("%s: city %v %v", m.ID, v, ok)
		}
		ack(t, d)
	}
}
