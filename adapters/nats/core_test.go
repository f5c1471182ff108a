package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/faultproxy"
	"github.com/qbridge/qbridge/mapping"
)

func TestCorePubSub(t *testing.T) {
	srv := startServer(t)
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "demo.>"})
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "demo.{group}"})

	m1 := msg("one", "k", "v")
	m1.GroupKey = "g1"
	m1.SetAttr("n", mapping.Int32(42)) // typed: natsmap carries the type
	m2 := msg("two", "x", "y")
	sendOK(t, snk, m1, m2)

	ds := receiveN(t, src, 2, 5*time.Second)
	got := ds[0].Message()
	if string(got.Body) != "one" || got.GroupKey != "g1" || got.Source.Address != "demo.g1" || got.Source.Protocol != "nats" {
		t.Errorf("first = body %q group %q address %q protocol %q", got.Body, got.GroupKey, got.Source.Address, got.Source.Protocol)
	}
	if v, ok := got.Attr("k"); !ok || v.Str() != "v" {
		t.Errorf("attribute k = %v, %v", v, ok)
	}
	if v, ok := got.Attr("n"); !ok || !v.Equal(mapping.Int32(42)) {
		t.Errorf("attribute n = %v, %v; want Number.int 42", v, ok)
	}
	if a := ds[1].Message().Source.Address; a != "demo._" {
		t.Errorf("no group: address %q, want the default token demo._", a)
	}
	// The sink encodes a call's messages into one scratch message: nothing
	// of the first one's headers reaches the second.
	if m := ds[1].Message(); m.GroupKey != "" || len(m.Attributes) != 1 || m.Attributes[0].Name != "x" {
		t.Errorf("second message: group %q, attributes %v; want no group and x alone", m.GroupKey, m.Attributes)
	}
	// Core settlement is a no-op and never fails.
	for _, d := range ds {
		if err := d.Extend(context.Background(), time.Second); err != nil {
			t.Error(err)
		}
		if _, ok := d.(driver.DeadLetterer); ok {
			t.Error("a core delivery must not claim a native dead-letter")
		}
	}
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Error(err)
	}
	if err := ds[1].Nack(context.Background(), time.Second); err != nil {
		t.Error(err)
	}
	receiveNone(t, src, 200*time.Millisecond) // no redelivery on core
}

func TestCoreReceiveBatch(t *testing.T) {
	srv := startServer(t)
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "b"})
	nc := connect(t, srv.ClientURL())
	for i := range 10 {
		if err := nc.Publish("b", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// All ten in the source's buffer, so that one Receive can take four.
	ch := src.(*coreSource).out
	deadline := time.Now().Add(5 * time.Second)
	for len(ch) < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 10 messages reached the source", len(ch))
		}
		runtime.Gosched()
	}
	ds, err := src.Receive(ctxT(t, 5*time.Second), 4)
	if err != nil || len(ds) != 4 {
		t.Fatalf("Receive(4) = %d, %v", len(ds), err)
	}
	rest := receiveN(t, src, 6, 5*time.Second)
	for i, d := range append(ds, rest...) {
		if string(d.Message().Body) != fmt.Sprint(i) {
			t.Errorf("message %d = %q: order lost", i, d.Message().Body)
		}
	}
}

func TestCoreQueueGroup(t *testing.T) {
	srv := startServer(t)
	a, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "q", QueueGroup: "workers"})
	b, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "q", QueueGroup: "workers"})
	nc := connect(t, srv.ClientURL())
	const n = 200
	for i := range n {
		_ = nc.Publish("q", []byte(fmt.Sprint(i)))
	}
	_ = nc.Flush()
	seen := map[string]bool{}
	ctx := ctxT(t, 5*time.Second)
	for len(seen) < n {
		for _, src := range []driver.Source{a, b} {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			ds, _ := src.Receive(rctx, n)
			cancel()
			for _, d := range ds {
				body := string(d.Message().Body)
				if seen[body] {
					t.Fatalf("%s delivered twice in one queue group", body)
				}
				seen[body] = true
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d", len(seen), n)
		}
	}
}

func TestCoreSlowConsumerLogged(t *testing.T) {
	srv := startServer(t)
	src, logs := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "slow", BufferSize: 10})
	nc := connect(t, srv.ClientURL())
	for range 500 {
		_ = nc.Publish("slow", []byte("x"))
	}
	_ = nc.Flush()
	logs.waitFor(t, "slow consumer")
	// The source keeps working: it has at most its buffer, then new messages.
	ds, err := src.Receive(ctxT(t, 5*time.Second), 100)
	if err != nil || len(ds) == 0 || len(ds) >= 500 {
		t.Fatalf("after overflow Receive = %d deliveries, %v; want some, not all", len(ds), err)
	}
	// The drops are counted for the engine's metric (driver.LossCounter).
	lc, ok := src.(driver.LossCounter)
	if !ok {
		t.Fatal("the core source must be a driver.LossCounter")
	}
	if lost := lc.Lost(); lost == 0 || lost > uint64(500-len(ds)) {
		t.Errorf("Lost() = %d after %d of 500 were received", lost, len(ds))
	}
}

// With the default buffer (nats.go's pending limits), a burst far larger
// than the hand-off to the pipeline waits in the client: nothing is lost
// while Receive is not called.
func TestCoreBurstWaitsInClient(t *testing.T) {
	srv := startServer(t)
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "burst"})
	nc := connect(t, srv.ClientURL())
	const n = 20000
	for i := range n {
		if err := nc.Publish("burst", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ds := receiveN(t, src, n, 30*time.Second)
	for i, d := range ds {
		if string(d.Message().Body) != fmt.Sprint(i) {
			t.Fatalf("message %d = %q: order lost", i, d.Message().Body)
		}
	}
	if lost := src.(driver.LossCounter).Lost(); lost != 0 {
		t.Errorf("Lost() = %d", lost)
	}
}

func TestGroupFromSubjectToken(t *testing.T) {
	srv := startServer(t)
	nc := connect(t, srv.ClientURL())
	tests := []struct {
		name, filter, subject, header string
		token                         int
		want                          string
	}{
		{"token 2", "orders.*", "orders.g7", "", 2, "g7"},
		{"token wins over header", "orders.*", "orders.g7", "h", 2, "g7"},
		{"short subject keeps header", "orders.>", "orders.x", "h", 3, "h"},
		{"header only", "orders.*", "orders.g7", "h", 0, "h"},
		{"first token", "*.x", "abc.x", "", 1, "abc"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("t%d", i)
			filter, subject := prefix+"."+tt.filter, prefix+"."+tt.subject
			token := tt.token
			if token > 0 {
				token++ // the test prefix is one more token
			}
			src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: filter, GroupFromSubjectToken: token})
			m := nats.NewMsg(subject)
			if tt.header != "" {
				m.Header.Set(DefaultGroupHeader, tt.header)
			}
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			ds := receiveN(t, src, 1, 5*time.Second)
			if g := ds[0].Message().GroupKey; g != tt.want {
				t.Errorf("group = %q, want %q", g, tt.want)
			}
		})
	}
}

func TestCustomGroupHeader(t *testing.T) {
	srv := startServer(t)
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "gh", GroupHeader: "X-Tenant"})
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "gh", GroupHeader: "X-Tenant"})
	nc := connect(t, srv.ClientURL())
	sub, err := nc.SubscribeSync("gh")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	m := msg("x")
	m.GroupKey = "acme"
	sendOK(t, snk, m)
	raw, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("X-Tenant") != "acme" {
		t.Errorf("wire headers %v: want X-Tenant: acme", raw.Header)
	}
	if g := receiveN(t, src, 1, 5*time.Second)[0].Message().GroupKey; g != "acme" {
		t.Errorf("group = %q", g)
	}
}

func TestCoreSinkMaxPayloadPermanent(t *testing.T) {
	srv := startServer(t, func(o *server.Options) { o.MaxPayload = 1024 })
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "big"})
	errs := snk.Send(ctxT(t, 5*time.Second), []*mapping.Message{msg("small"), msg(strings.Repeat("x", 4096)), msg("small")})
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("small messages failed: %v", errs)
	}
	if errs[1] == nil || !driver.IsPermanent(errs[1]) {
		t.Errorf("oversized message: %v, want a permanent error", errs[1])
	}
}

// A subject longer than the server's protocol line takes would make it
// close the connection, failing every later message: the sink refuses that
// one message (too large), core and JetStream, and the next one goes.
func TestSinkRefusesASubjectTooLong(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name string
		js   *JetStreamSinkConfig
	}{
		{"core", nil},
		{"jetstream", &JetStreamSinkConfig{Stream: "LONGSUBJ", CreateStream: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "long." + tc.name + ".{group}", JetStream: tc.js})
			long, fits := msg("long"), msg("fits")
			long.GroupKey = strings.Repeat("g", 5000)
			fits.GroupKey = strings.Repeat("g", 3000)
			errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{long, fits, msg("after")})
			if rej := (*mapping.RejectError)(nil); !errors.As(errs[0], &rej) || !rej.TooLarge {
				t.Errorf("a 5000-byte subject: %v, want a too-large refusal", errs[0])
			}
			if errs[1] != nil || errs[2] != nil {
				t.Errorf("the messages after it: %v, %v; the connection must stay up", errs[1], errs[2])
			}
		})
	}
}

// A connection nats.go closed for good (here the server's -ERR for a
// protocol line over max_control_line; also the same authorization error
// twice) is dialed again by the sink: it used to fail every later message
// until a restart, and Ready stayed "connection CLOSED".
func TestSinkRedialsAClosedConnection(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name string
		js   *JetStreamSinkConfig
	}{
		{"core", nil},
		{"jetstream", &JetStreamSinkConfig{Stream: "REDIAL", CreateStream: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "redial." + tc.name, JetStream: tc.js})
			s := snk.(*sink)
			old := s.conn.nc
			_ = old.Publish(strings.Repeat("x", 5000), nil) // the server answers -ERR and nats.go closes
			_ = old.Flush()
			deadline := time.Now().Add(10 * time.Second)
			for !old.IsClosed() {
				if time.Now().After(deadline) {
					t.Fatal("the connection was not closed: the test's premise")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{msg("after")}); errs[0] != nil {
				t.Fatalf("after the close: %v", errs[0])
			}
			if err := s.Ready(context.Background()); err != nil {
				t.Errorf("Ready after the redial: %v", err)
			}
			if s.conn.nc == old {
				t.Error("the closed connection is still the sink's")
			}
		})
	}
}

func TestReceiveStopsOnContextAndClose(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name string
		cfg  SourceConfig
	}{
		{"core", SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "idle"}},
		{"jetstream", SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "idle.js", JetStream: &JetStreamSourceConfig{
			Stream: "IDLE", Durable: "d", CreateStream: true, FetchWait: "10s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := mustSource(t, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := src.Receive(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Receive = %v, want deadline exceeded", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Receive took %s after its context ended", d)
			}
			done := make(chan error, 1)
			rctx := newStartedCtx(t)
			go func() {
				_, err := src.Receive(rctx, 1)
				done <- err
			}()
			select { // Receive is under way: Close must end it
			case <-rctx.started:
			case <-time.After(5 * time.Second):
				t.Fatal("Receive never waited on its context")
			}
			_ = src.Close(context.Background())
			select {
			case err := <-done:
				if err == nil {
					t.Error("Receive after Close returned no error")
				}
			case <-time.After(3 * time.Second):
				t.Fatal("Receive did not return after Close")
			}
		})
	}
}

// startedCtx closes started the first time Done is asked for: a Receive
// given it has begun and is about to wait on it.
type startedCtx struct {
	context.Context
	once    sync.Once
	started chan struct{}
}

func newStartedCtx(t *testing.T) *startedCtx {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &startedCtx{Context: ctx, started: make(chan struct{})}
}

func (c *startedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.started) })
	return c.Context.Done()
}

func TestReady(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr().(*net.TCPAddr)
	store := srv.StoreDir()
	url := srv.ClientURL()
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url, ReconnectWait: "50ms"}, Subject: "r"})
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url, ReconnectWait: "50ms"}, Subject: "r"})
	for _, rc := range []driver.ReadyChecker{src.(driver.ReadyChecker), snk.(driver.ReadyChecker)} {
		if err := rc.Ready(context.Background()); err != nil {
			t.Fatalf("Ready while connected: %v", err)
		}
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	waitReady(t, src.(driver.ReadyChecker), false)
	waitReady(t, snk.(driver.ReadyChecker), false)

	startServer(t, func(o *server.Options) { o.Port = addr.Port; o.StoreDir = store })
	waitReady(t, src.(driver.ReadyChecker), true)
	waitReady(t, snk.(driver.ReadyChecker), true)
}

func waitReady(t *testing.T, rc driver.ReadyChecker, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := rc.Ready(context.Background())
		if (err == nil) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready = %v, want ready=%v", err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ping is a round trip with the server (driver.Pinger, for qbridge
// migrate's idle verdict on a subject that keeps no count): answered while
// the server runs, not once it is gone.
func TestCorePing(t *testing.T) {
	srv := startServer(t)
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "demo.>"})
	p, ok := src.(driver.Pinger)
	if !ok {
		t.Fatal("the core source is no driver.Pinger")
	}
	if err := p.Ping(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	srv.Shutdown()
	if err := p.Ping(ctxT(t, 500*time.Millisecond)); err == nil {
		t.Fatal("Ping answered with the server gone")
	}
}

// A server that stalls with the connection open (frozen here by a proxy:
// nothing gets through, nothing is closed) is found by the client's pings
// (ping_interval) and reported by Ready; with nats.go's default of 2
// minutes it looked connected for 4 to 6.
func TestStalledServerIsFoundByPings(t *testing.T) {
	srv := startServer(t)
	px := faultproxy.New(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	// A reconnect holds nats.go's lock for up to ConnectTimeout (8 s): a
	// Ready that waited on it would take that long, over the 3 s bounds
	// below, which a loaded machine stays well under (the closing of the
	// source at the end waits it out once).
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: "nats://" + px.Addr(), PingInterval: "100ms", ReconnectWait: "50ms", ConnectTimeout: "8s"}, Subject: "demo.>"})
	rc := src.(driver.ReadyChecker)
	if err := rc.Ready(ctxT(t, time.Second)); err != nil {
		t.Fatalf("Ready before the stall: %v", err)
	}
	// Reconnects reach a server that takes the connection and never
	// answers: nats.go holds its connection lock while it waits for the
	// INFO, and Ready (what /readyz and /metrics ask) must not wait on it.
	px.FreezeNew(true)
	px.Freeze()
	deadline := time.Now().Add(20 * time.Second)
	for {
		start := time.Now()
		err := rc.Ready(ctxT(t, 6*time.Second))
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("Ready took %s during the stall", took)
		}
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Ready still says connected 20 s into the stall")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 { // through the reconnect attempts
		start := time.Now()
		if err := rc.Ready(ctxT(t, 6*time.Second)); err == nil {
			t.Fatal("Ready says connected while every connection is frozen")
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("Ready took %s while the client reconnects", took)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A recycled core delivery decodes the next message from scratch: nothing
// of the message it held before (attributes, group, ids, trace) shows.
func TestCoreDeliveryRecycledClean(t *testing.T) {
	s := &coreSource{codec: newCodec("", mapping.Options{}), set: &sourceSettings{}, log: slog.New(slog.DiscardHandler)}
	first := &nats.Msg{Subject: "orders.new", Data: []byte("one"), Header: nats.Header{
		"Qbridge-Group": {"g1"}, "Nats-Msg-Id": {"id-1"}, "Tenant": {"acme"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}}
	d := s.wrap(first)
	if m := d.Message(); m.GroupKey != "g1" || m.DedupID != "id-1" || len(m.Attributes) != 1 || m.Trace.IsZero() {
		t.Fatalf("first message decoded as %+v", m)
	}
	d.Recycle()
	// The pool may or may not hand the same delivery back; either way the
	// second message must decode as if alone.
	for range 3 {
		d2 := s.wrap(&nats.Msg{Subject: "orders.old", Data: []byte("two")})
		m := d2.Message()
		if m.GroupKey != "" || m.DedupID != "" || len(m.Attributes) != 0 || !m.Trace.IsZero() ||
			string(m.Body) != "two" || m.Source.Address != "orders.old" || m.Source.PartitionID != -1 {
			t.Fatalf("a message decoded into a recycled delivery: %+v", m)
		}
		if d2.DecodeError() != nil {
			t.Fatal(d2.DecodeError())
		}
		d2.Recycle()
	}
}

// A named stream's max_msg_size bounds what the sink encodes: a larger
// message is refused as too large before it is published, where the
// stream refused it only at its PubAck (reason "permanent").
func TestJetStreamSinkTakesTheStreamsMaxMsgSize(t *testing.T) {
	f := newJSFixture(t, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 2000 })
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.capped", JetStream: &JetStreamSinkConfig{Stream: "ORDERS"}})
	errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{msg("small"), msg(strings.Repeat("x", 2500)), msg("after")})
	if rej := (*mapping.RejectError)(nil); !errors.As(errs[1], &rej) || !rej.TooLarge || !strings.Contains(errs[1].Error(), "limit of 2000") {
		t.Errorf("a message over the stream's max_msg_size: %v, want a too-large refusal naming 2000", errs[1])
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the others: %v, %v", errs[0], errs[2])
	}
}

// A stream stores at most 65,535 bytes of headers whatever max_payload
// allows: a message whose attributes come to more is refused as too large
// when it is encoded (under drop, its largest attribute goes), where the
// stream's PubAck refusal (err_code 10097) was retried for ever, holding
// its group. A core NATS sink has no such bound.
func TestJetStreamSinkBoundsHeaders(t *testing.T) {
	f := newJSFixture(t)
	big := func(body string) *mapping.Message {
		m := msg(body)
		m.SetAttr("big", mapping.String(strings.Repeat("x", 70_000)))
		m.SetAttr("small", mapping.String("kept"))
		return m
	}
	for _, tc := range []struct {
		name    string
		policy  mapping.Policy
		refused bool
	}{
		{"reject", mapping.Reject, true},
		{"drop", mapping.Drop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.hdr", Policy: tc.policy, JetStream: &JetStreamSinkConfig{Stream: "ORDERS"}})
			errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{msg("before"), big("big"), msg("after")})
			rej := (*mapping.RejectError)(nil)
			if got := errors.As(errs[1], &rej) && rej.TooLarge && driver.IsPermanent(errs[1]); got != tc.refused {
				t.Errorf("70 KB of headers: %v; want a too-large refusal: %v", errs[1], tc.refused)
			}
			if !tc.refused && errs[1] != nil {
				t.Errorf("under drop: %v", errs[1])
			}
			if errs[0] != nil || errs[2] != nil {
				t.Errorf("the others: %v, %v", errs[0], errs[2])
			}
		})
	}
	// The server's own refusal, should a message get past the encoder, is
	// a permanent too-large too.
	err := publishErr(&jetstream.APIError{Code: 400, ErrorCode: 10097, Description: "header size exceeds maximum allowed of 64k"})
	if rej := (*mapping.RejectError)(nil); !errors.As(err, &rej) || !rej.TooLarge || !driver.IsPermanent(err) {
		t.Errorf("publishErr(10097) = %v, want a permanent too-large refusal", err)
	}
}

// TestCoreSourcesShareTheAutomaticBuffer: core sources that leave
// buffer_bytes out share one budget, each a part of it and never less than
// nats.go's default; one that closes gives its part back; one with its own
// buffer_bytes keeps it and takes no part.
func TestCoreSourcesShareTheAutomaticBuffer(t *testing.T) {
	prev := debug.SetMemoryLimit(4 << 30) // a 1 GiB budget
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	srv := startServer(t)
	limits := func(src driver.Source) (int, int) {
		t.Helper()
		msgs, bytes, err := src.(*coreSource).sub.PendingLimits()
		if err != nil {
			t.Fatal(err)
		}
		return msgs, bytes
	}
	open := func(subject string, bufferBytes int) driver.Source {
		src, err := NewSource(ctxT(t, 10*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: subject, BufferBytes: bufferBytes}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close(context.Background()) })
		return src
	}
	a := open("a", 0)
	if msgs, bytes := limits(a); bytes != 1<<30 || msgs != 1<<20 {
		t.Fatalf("one source: %d messages, %d bytes; want %d, 1 GiB", msgs, bytes, 1<<20)
	}
	own := open("own", 8<<20)
	b := open("b", 0)
	for _, src := range []driver.Source{a, b} {
		if msgs, bytes := limits(src); bytes != 512<<20 || msgs != 512<<10 {
			t.Errorf("two sharing: %d messages, %d bytes; want %d, 512 MiB", msgs, bytes, 512<<10)
		}
	}
	if msgs, bytes := limits(own); bytes != 8<<20 || msgs != DefaultBufferSize {
		t.Errorf("its own buffer_bytes: %d messages, %d bytes; want %d, 8 MiB", msgs, bytes, DefaultBufferSize)
	}
	var many []driver.Source
	for i := range 30 {
		many = append(many, open(fmt.Sprint("m", i), 0))
	}
	if _, bytes := limits(a); bytes != MinAutoBufferBytes {
		t.Errorf("32 sharing: %d bytes each, want nats.go's default %d", bytes, MinAutoBufferBytes)
	}
	for _, src := range append(many, b) {
		if err := src.Close(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if msgs, bytes := limits(a); bytes != 1<<30 || msgs != 1<<20 {
		t.Errorf("the others closed: %d messages, %d bytes; want %d, 1 GiB", msgs, bytes, 1<<20)
	}
}
