package servicebus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// A Nack delay longer than the lock (2 s) holds the message, renewing its
// lock, and abandons it when the delay ends; closing the source abandons
// held messages at once.
func TestNackDelay(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("nackdelay")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, srcLogs := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1, LockRenewal: "500ms"})
	defer func() {
		if t.Failed() {
			t.Log(srcLogs.String())
		}
	}()
	other, otherLogs := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	defer func() {
		if t.Failed() {
			t.Log(otherLogs.String())
		}
	}()
	sendAll(t, snk, textMsg("later"))
	d := receiveN(t, src, 1, 10*time.Second)[0]
	start := time.Now()
	if err := d.Nack(ctxT(t, 5*time.Second), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	again := receiveN(t, other, 1, 15*time.Second)[0]
	if el := time.Since(start); el < 2900*time.Millisecond {
		t.Fatalf("redelivered after %s, before the 3 s delay", el)
	}
	if again.Message().ID != "later" || again.Message().Source.DeliveryCount < 2 {
		t.Fatalf("redelivery %s count %d", again.Message().ID, again.Message().Source.DeliveryCount)
	}

	ack(t, again)

	// Close abandons a held message at once; max_nack_delay = 0s abandons
	// at Nack. On a queue with a 60 s lock, so that "at once" is told from
	// the lock lapsing by a wide margin (with the 2 s lock above, a bound
	// of 1.5 s could fail on a loaded machine, or miss a regression).
	q2 := entity("nackdelay-close")
	snk2, _ := newTestSink(t, SinkConfig{Queue: q2})
	holder, _ := newTestSource(t, SourceConfig{Queue: q2, MaxMessages: 1})
	sendAll(t, snk2, textMsg("held"))
	held := receiveN(t, holder, 1, 10*time.Second)[0]
	if err := held.Nack(ctxT(t, 5*time.Second), time.Hour); err != nil {
		t.Fatal(err)
	}
	now, _ := newTestSource(t, SourceConfig{Queue: q2, MaxMessages: 1, MaxNackDelay: "0s"})
	start = time.Now()
	if err := holder.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	third := receiveN(t, now, 1, 40*time.Second)[0]
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("redelivered %s after close: not abandoned at close", el)
	}
	if err := third.Nack(ctxT(t, 5*time.Second), time.Hour); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	fourth := receiveN(t, now, 1, 40*time.Second)[0]
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("max_nack_delay 0s: redelivered after %s", el)
	}
	ack(t, fourth)
}

// ScheduledEnqueueTimeUtc: the message appears at its time, which the
// receiver reads back.
func TestScheduledMessage(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("sched")
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	src, _ := newTestSource(t, SourceConfig{Queue: q})
	at := time.Now().Add(2 * time.Second).Truncate(time.Millisecond).UTC()
	m := textMsg("scheduled")
	m.ScheduledAt = at
	sendAll(t, snk, textMsg("now"), m)
	first := receiveN(t, src, 1, 10*time.Second)[0]
	if first.Message().ID != "now" {
		t.Fatalf("first %s", first.Message().ID)
	}
	ack(t, first)
	d := receiveN(t, src, 1, 15*time.Second)[0]
	if now := time.Now(); now.Before(at.Add(-200 * time.Millisecond)) {
		t.Fatalf("received at %s, scheduled for %s", now.Format(time.StampMilli), at.Format(time.StampMilli))
	}
	if got := d.Message(); got.ID != "scheduled" || !got.ScheduledAt.Equal(at) {
		t.Fatalf("got %s scheduled %s, want %s", got.ID, got.ScheduledAt, at)
	}
	ack(t, d)
}

// rewriteConn replaces byte patterns in what the client writes: the SDK
// cannot send a decimal or a char, so tests send a uuid or an int and turn
// it into one on the wire (what a .NET producer sends).
type rewriteConn struct {
	net.Conn
	from, to [][]byte
}

func (r *rewriteConn) Write(b []byte) (int, error) {
	out := b
	for i := range r.from {
		if bytes.Contains(out, r.from[i]) {
			out = bytes.ReplaceAll(out, r.from[i], r.to[i])
		}
	}
	if _, err := r.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

var (
	magicUUID = amqp.UUID{0xde, 0xc1, 0x28, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}
	euroInt   = int32(0x20ac) // '€' as an AMQP int: 71 00 00 20 ac
)

// rawClient is an SDK client whose connection rewrites what it sends.
func rawClient(t *testing.T, rw func(net.Conn) net.Conn) *azservicebus.Client {
	t.Helper()
	cs, err := parseConnString(brokerConn)
	if err != nil {
		t.Fatal(err)
	}
	set := &connSettings{cs: cs, namespace: cs.fqdn, plain: cs.emulator}
	set.dialHost, set.dialPort = hostPort(cs.fqdn, map[bool]string{false: "5671", true: "5672"}[cs.emulator])
	c, err := azservicebus.NewClientFromConnectionString(brokerConn, &azservicebus.ClientOptions{
		NewWebSocketConn: func(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			nc, err := dialAMQP(ctx, set, guardSettings{})
			if err != nil {
				return nil, err
			}
			return rw(nc), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Messages the Go AMQP library cannot decode (a .NET decimal or char
// application property), and one the SDK cannot take (a DeadLetterReason
// that is not a string), between good ones: the source delivers them all in
// order without losing its link, the undecodable ones with their original
// bytes and a DecodeError, for the engine to dead-letter (as it does here);
// read from the dead-letter queue, the undecodable ones are deferred.
func TestPoisonMessagesDeadLettered(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("poison")
	raw := rawClient(t, func(c net.Conn) net.Conn {
		return &rewriteConn{Conn: c,
			from: [][]byte{append([]byte{0x98}, magicUUID[:]...), {0x71, 0x00, 0x00, 0x20, 0xac}},
			to:   [][]byte{append([]byte{0x94}, magicUUID[:]...), {0x73, 0x00, 0x00, 0x20, 0xac}}}
	})
	snd, err := raw.NewSender(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id string, props map[string]any) {
		t.Helper()
		if err := snd.SendMessage(ctxT(t, 10*time.Second), &azservicebus.Message{MessageID: &id, Body: []byte(id), ApplicationProperties: props}, nil); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	send("good-1", nil)
	send("poison-decimal", map[string]any{"price": magicUUID})
	send("poison-char", map[string]any{"grade": euroInt})
	send("poison-dlr", map[string]any{"DeadLetterReason": int64(5)})
	send("good-2", nil)

	src, logs := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	for _, want := range []struct{ id, decodeErr string }{
		{"good-1", ""},
		{"poison-decimal", "decimal128 not implemented"},
		{"poison-char", "char not implemented"},
		{"poison-dlr", "not a string"},
		{"good-2", ""},
	} {
		d := receiveN(t, src, 1, 15*time.Second)[0]
		m := d.Message()
		if m.ID != want.id {
			t.Fatalf("got %s, want %s", m.ID, want.id)
		}
		err := d.(driver.DecodeErrorer).DecodeError()
		if want.decodeErr == "" {
			if err != nil {
				t.Fatalf("%s: %v", m.ID, err)
			}
			ack(t, d)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want.decodeErr) {
			t.Fatalf("%s: decode error %v, want %q", m.ID, err, want.decodeErr)
		}
		// the original AMQP message, whole: its body section holds the id
		if m.ContentType != RawMessageContentType || !bytes.Contains(m.Body, []byte(want.id)) || len(m.Body) < 40 {
			t.Fatalf("%s: body %q (%s)", m.ID, m.Body, m.ContentType)
		}
		if err := d.(driver.DeadLetterer).DeadLetter(ctxT(t, 10*time.Second), "corrupt", err.Error()); err != nil {
			t.Fatal(err)
		}
	}
	expectNone(t, src, 300*time.Millisecond)
	l := logs.String()
	for _, want := range []string{"decimal128 not implemented", "char not implemented", `DeadLetterReason\" is int64`} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	if n := strings.Count(l, "handed to the pipeline to dead-letter"); n != 3 {
		t.Errorf("%d handed over as undecodable, want 3", n)
	}
	if strings.Contains(l, "receive failed") {
		t.Errorf("the receiver failed:\n%s", l)
	}

	dlq, dlqLogs := newTestSource(t, SourceConfig{Queue: q, SubQueue: "deadletter"})
	d := receiveN(t, dlq, 1, 15*time.Second)[0]
	m := d.Message()
	if m.ID != "poison-dlr" || m.Source.DeadLetterReason != "corrupt" || !strings.Contains(m.Source.DeadLetterDesc, "not a string") {
		t.Fatalf("dead-lettered: %s reason %q desc %q", m.ID, m.Source.DeadLetterReason, m.Source.DeadLetterDesc)
	}
	ack(t, d)
	eventually(t, 10*time.Second, "the undecodable ones deferred in the dead-letter queue", func() bool {
		return strings.Count(dlqLogs.String(), "deferred an undecodable message of the sub-queue") == 2
	})
}

// The source fails for good on a missing entity and on a bad key, and
// explains a plain source on a session-enabled queue: at the open, which
// connects (it said ready until the first receive failed).
func TestSourceFatalErrors(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	cases := map[string]struct {
		cfg  func(*SourceConfig)
		want string
	}{
		"no such queue": {func(c *SourceConfig) { c.Queue = "no-such-queue" }, "no-such-queue"},
		"bad key": {func(c *SourceConfig) {
			c.Queue = entity("settle")
			c.ConnectionString = strings.Replace(brokerConn, testKey, "wrong-key", 1)
		}, "settle"},
		"session queue": {func(c *SourceConfig) { c.Queue = entity("sess-idle") }, "sessions"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := SourceConfig{ConnConfig: fastConn()}
			tc.cfg(&cfg)
			log, _ := testLog(t)
			src, err := NewSource(ctxT(t, 20*time.Second), cfg, log)
			if err == nil {
				src.Close(context.Background())
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) || !driver.IsPermanent(err) {
				t.Fatalf("error %q lacks %q, or is not permanent", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// Sink: messages of one call go out in batches, in order; a topic fans out
// to its subscriptions; an entity template routes.
func TestSinkBatchesTopicsTemplates(t *testing.T) {
	needBroker(t)
	t.Parallel()
	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		q := entity("batch")
		snk, _ := newTestSink(t, SinkConfig{Queue: q})
		src, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 100})
		var msgs []*mapping.Message
		for i := range 300 {
			m := textMsg(fmt.Sprintf("m%03d", i))
			m.Body = bytes.Repeat([]byte{'x'}, 2000) // 300 × 2 KB: several 256 KB batches
			msgs = append(msgs, m)
		}
		start := time.Now()
		sendAll(t, snk, msgs...)
		t.Logf("sent 300 × 2 KB in %s", time.Since(start).Round(time.Millisecond))
		ds := receiveN(t, src, 300, 30*time.Second)
		// All of them; not necessarily in order: between two receive calls
		// the SDK releases what arrives on credit left over (back to the
		// queue, behind the others). Only sessions keep order.
		seen := map[string]bool{}
		for i, d := range ds {
			if want := fmt.Sprintf("m%03d", i); d.Message().ID != want {
				t.Logf("out of order: message %d is %s (delivery count %d)", i, d.Message().ID, d.Message().Source.DeliveryCount)
			}
			seen[d.Message().ID] = true
		}
		for _, m := range msgs {
			if !seen[m.ID] {
				t.Fatalf("%s not received", m.ID)
			}
		}
		ack(t, ds...)
	})
	t.Run("topic", func(t *testing.T) {
		t.Parallel()
		tp := entity("events")
		snk, _ := newTestSink(t, SinkConfig{Topic: tp})
		audit, _ := newTestSource(t, SourceConfig{Topic: tp, Subscription: "audit"})
		billing, _ := newTestSource(t, SourceConfig{Topic: tp, Subscription: "billing"})
		sendAll(t, snk, textMsg("e1"), textMsg("e2"))
		for _, src := range []driver.Source{audit, billing} {
			ds := receiveN(t, src, 2, 15*time.Second)
			if got := ids(ds); got[0] != "e1" || got[1] != "e2" {
				t.Fatalf("got %v", got)
			}
			if a := ds[0].Message().Source.Address; !strings.HasSuffix(a, "/Subscriptions/audit") && !strings.HasSuffix(a, "/Subscriptions/billing") {
				t.Fatalf("address %q", a)
			}
			ack(t, ds...)
		}
	})
	t.Run("template", func(t *testing.T) {
		t.Parallel()
		snk, _ := newTestSink(t, SinkConfig{Queue: entityPrefix + "template-{attr.dest}", MaxSenders: 1})
		a, _ := newTestSource(t, SourceConfig{Queue: entity("template-a")})
		b, _ := newTestSource(t, SourceConfig{Queue: entity("template-b")})
		var msgs []*mapping.Message
		for i, dest := range []string{"a", "b", "a", "b"} {
			m := textMsg(fmt.Sprintf("%s%d", dest, i))
			m.SetAttr("dest", mapping.String(dest))
			msgs = append(msgs, m)
		}
		noAttr := textMsg("nowhere")
		errs := snk.Send(ctxT(t, 30*time.Second), append(msgs, noAttr))
		for i, err := range errs[:4] {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if !driver.IsPermanent(errs[4]) {
			t.Fatalf("a message the template cannot route: %v, want a permanent error", errs[4])
		}
		if got := ids(receiveN(t, a, 2, 15*time.Second)); got[0] != "a0" || got[1] != "a2" {
			t.Fatalf("a: %v", got)
		}
		if got := ids(receiveN(t, b, 2, 15*time.Second)); got[0] != "b1" || got[1] != "b3" {
			t.Fatalf("b: %v", got)
		}
	})
}

// A message larger than the entity takes is a permanent error; the others
// of the call go through.
func TestSinkTooLarge(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("big") // 64 KB
	snk, _ := newTestSink(t, SinkConfig{Queue: q, MaxMessageSize: 1 << 20})
	src, _ := newTestSource(t, SourceConfig{Queue: q})
	big := textMsg("big")
	big.Body = bytes.Repeat([]byte{'x'}, 100<<10)
	errs := snk.Send(ctxT(t, 30*time.Second), []*mapping.Message{textMsg("small-1"), big, textMsg("small-2")})
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("small messages: %v, %v", errs[0], errs[2])
	}
	// Dead-lettered as too-large, as over the encoder's own limit (an
	// audit saw reason "permanent", citing a limit the message was under).
	if !driver.IsPermanent(errs[1]) || bridge.SinkReason(errs[1]) != bridge.ReasonTooLarge || !strings.Contains(errs[1].Error(), "the entity takes less than this message") {
		t.Fatalf("big: %v (reason %s), want a permanent too-large error", errs[1], bridge.SinkReason(errs[1]))
	}
	if got := ids(receiveN(t, src, 2, 15*time.Second)); got[0] != "small-1" || got[1] != "small-2" {
		t.Fatalf("got %v", got)
	}
	// over max_message_size: refused before sending
	snk2, _ := newTestSink(t, SinkConfig{Queue: q, MaxMessageSize: 32 << 10})
	if err := snk2.Send(ctxT(t, 10*time.Second), []*mapping.Message{big})[0]; !driver.IsPermanent(err) {
		t.Fatalf("over max_message_size: %v", err)
	}
}

// A connection string with a pre-built shared access signature (no key)
// authenticates the SDK's CBS put-token.
func TestSASTokenConnectionString(t *testing.T) {
	needBroker(t)
	t.Parallel()
	cs, err := parseConnString(brokerConn)
	if err != nil {
		t.Fatal(err)
	}
	tok := sasSignature("sb://"+cs.fqdn+"/", cs.keyName, cs.key, time.Now().Add(time.Hour))
	conn := "Endpoint=" + cs.endpoint + ";SharedAccessSignature=" + tok
	if cs.emulator {
		conn += ";UseDevelopmentEmulator=true"
	}
	q := entity("sastoken")
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{ConnectionString: conn}, Queue: q})
	src, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{ConnectionString: conn}, Queue: q})
	sendAll(t, snk, textMsg("signed"))
	d := receiveN(t, src, 1, 15*time.Second)[0]
	if d.Message().ID != "signed" || !strings.Contains(logs.String(), "sas-token") {
		t.Fatalf("got %s; log %s", d.Message().ID, logs.String())
	}
	ack(t, d)
}

// A sink with a fixed entity attaches at start: a wrong key or entity name
// fails NewSink, not the first message.
func TestSinkFailsAtStart(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	log, _ := testLog(t)
	for name, cfg := range map[string]SinkConfig{
		"bad key":   {ConnConfig: ConnConfig{ConnectionString: strings.Replace(brokerConn, testKey, "wrong", 1), MaxRetries: -1}, Queue: entity("batch")},
		"no entity": {ConnConfig: ConnConfig{ConnectionString: brokerConn, MaxRetries: -1}, Queue: "no-such-queue"},
	} {
		snk, err := NewSink(ctxT(t, 20*time.Second), cfg, nil, log)
		if err == nil {
			_ = snk.Close(context.Background())
			t.Fatalf("%s: NewSink succeeded", name)
		}
		t.Logf("%s: %v", name, err)
	}
}

// The adapter's own dialer does TLS (the SDK's TLS settings do not apply
// to a connection it is handed): through a TLS proxy in front of the test
// server, checked against the namespace's name.
func TestTLSDial(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	cs, err := parseConnString(brokerConn)
	if err != nil {
		t.Fatal(err)
	}
	_, port := hostPort(cs.fqdn, "")
	ln, pool := tlsProxy(t, "127.0.0.1:"+port, "localhost")
	_, proxyPort := hostPort(ln, "")
	conn := fmt.Sprintf("Endpoint=sb://localhost:%s/;SharedAccessKeyName=%s;SharedAccessKey=%s", proxyPort, testKeyName, testKey)
	// Its own queue: a receive on one another test sends to would take
	// that test's message (and return it here) when the machine is slow.
	set, err := (&SourceConfig{ConnConfig: ConnConfig{ConnectionString: conn}, Queue: entity("tls")}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if set.conn.plain || set.conn.dialPort != proxyPort {
		t.Fatalf("not TLS: %+v", set.conn)
	}
	set.conn.rootCAs = pool
	log, _ := testLog(t)
	src, err := newSource(context.Background(), set, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := src.Receive(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("receive over TLS: %v", err)
	}
	if err := src.(driver.ReadyChecker).Ready(context.Background()); err != nil {
		t.Fatalf("not ready: %v", err)
	}
	// a certificate for another name is refused
	set2 := *set
	c2 := *set.conn
	c2.namespace = "other.example:" + proxyPort
	c2.maxRetries = -1
	set2.conn = &c2
	// (at the open, which connects)
	src2, err := newSource(ctxT(t, 20*time.Second), &set2, log, nil)
	if err == nil {
		src2.Close(context.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") || !driver.IsPermanent(err) {
		t.Fatalf("wrong name: %v", err)
	}
}

// At the entity's size limit: what the encoder counts is what the SDK puts
// on the link (it adds empty properties and message-annotations sections
// to a message that has none), so a message the encoder lets through at
// exactly the limit is taken, one byte more is refused before it is sent,
// and an envelope is shed rather than cost the message. An audit saw the
// link refuse messages up to 16 bytes under the counted limit.
func TestSinkAtTheSizeLimit(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	const limit = 64 << 10 // the "big-limit" entity's
	q := entity("big-limit")
	snk, _ := newTestSink(t, SinkConfig{Queue: q, MaxMessageSize: limit})
	src, _ := newTestSource(t, SourceConfig{Queue: q})
	opt := mapping.Options{MaxMessageSize: limit, Envelope: mapping.EnvelopeOff}
	exact := func(m *mapping.Message) *mapping.Message {
		m.Body = bytes.Repeat([]byte{'x'}, 1000)
		enc, err := sbmap.Encode(m, opt)
		if err != nil {
			t.Fatal(err)
		}
		m.Body = bytes.Repeat([]byte{'x'}, 1000+limit-amqpmap.MessageSize(enc).Total)
		return m
	}
	plain := exact(textMsg("plain"))
	// A Number.float's exact text ("3.50") rides in the envelope, which
	// has no room at the limit: it is shed.
	typed := textMsg("typed")
	v, _ := mapping.ParseValue("Number.float", "3.50")
	typed.Attributes = []mapping.Attribute{{Name: "f", Value: v}}
	typed = exact(typed)
	over := exact(textMsg("over"))
	over.Body = append(over.Body, 'x')

	errs := snk.Send(ctxT(t, 30*time.Second), []*mapping.Message{plain, typed, over})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("at the limit: %v, %v", errs[0], errs[1])
	}
	if !driver.IsPermanent(errs[2]) || bridge.SinkReason(errs[2]) != bridge.ReasonTooLarge || !strings.Contains(errs[2].Error(), "exceeds the limit of 65536") {
		t.Fatalf("one byte over: %v (reason %s), want the encoder's too-large", errs[2], bridge.SinkReason(errs[2]))
	}
	got := receiveN(t, src, 2, 15*time.Second)
	if ids(got)[0] != "plain" || ids(got)[1] != "typed" || len(got[1].Message().Body) != len(typed.Body) {
		t.Fatalf("got %v", ids(got))
	}
	if a, ok := got[1].Message().Attr("f"); !ok || a.Kind != mapping.KindFloat64 || a.Float() != 3.5 {
		t.Fatalf("typed attribute: %#v %v, want the double 3.5 without its envelope", a, ok)
	}
}
