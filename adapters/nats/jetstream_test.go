package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// jsFixture is a server with stream ORDERS on orders.> and a publisher.
type jsFixture struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newJSFixture(t *testing.T, streamCfg ...func(*jetstream.StreamConfig)) *jsFixture {
	t.Helper()
	srv := startServer(t)
	nc := connect(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}
	for _, f := range streamCfg {
		f(&cfg)
	}
	if _, err := js.CreateStream(ctxT(t, 5*time.Second), cfg); err != nil {
		t.Fatal(err)
	}
	return &jsFixture{srv: srv, nc: nc, js: js}
}

func (f *jsFixture) publish(t *testing.T, subject, body string, hdr ...string) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	if _, err := f.js.PublishMsg(ctxT(t, 5*time.Second), m); err != nil {
		t.Fatal(err)
	}
}

func (f *jsFixture) source(t *testing.T, mod ...func(*SourceConfig)) (driver.Source, *logBuf) {
	t.Helper()
	cfg := SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, JetStream: &JetStreamSourceConfig{
		Stream: "ORDERS", Durable: "bridge", FilterSubjects: []string{"orders.>"},
		AckWait: "1s", FetchWait: "300ms",
	}}
	for _, m := range mod {
		m(&cfg)
	}
	return mustSource(t, cfg)
}

func (f *jsFixture) consumerInfo(t *testing.T, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := f.js.Consumer(ctxT(t, 5*time.Second), "ORDERS", name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestJetStreamMetadataAndAck(t *testing.T) {
	f := newJSFixture(t)
	before := time.Now().Add(-time.Second)
	f.publish(t, "orders.a", "first", DefaultGroupHeader, "g1", "Nats-Msg-Id", "id-1")
	f.publish(t, "orders.b", "second")
	src, _ := f.source(t)

	ds := receiveN(t, src, 2, 5*time.Second)
	m := ds[0].Message()
	if m.Source.Protocol != "nats" || m.Source.Address != "orders.a" || m.Source.SequenceNumber != "1" ||
		m.Source.DeliveryCount != 1 || m.Source.EnqueuedTime.Before(before) || m.Source.EnqueuedTime.After(time.Now()) {
		t.Errorf("source facts = %+v", m.Source)
	}
	if m.GroupKey != "g1" || m.DedupID != "id-1" {
		t.Errorf("group %q dedup %q", m.GroupKey, m.DedupID)
	}
	if ds[1].Message().Source.SequenceNumber != "2" {
		t.Errorf("second sequence = %q", ds[1].Message().Source.SequenceNumber)
	}
	if _, ok := ds[0].(driver.DeadLetterer); !ok {
		t.Error("a JetStream delivery must be a DeadLetterer")
	}
	ackAll(t, ds)
	receiveNone(t, src, 1500*time.Millisecond) // longer than AckWait: acked means gone
	if info := f.consumerInfo(t, "bridge"); info.AckFloor.Stream != 2 || info.NumAckPending != 0 {
		t.Errorf("ack floor %d, pending %d", info.AckFloor.Stream, info.NumAckPending)
	}
}

func TestJetStreamUnackedIsRedelivered(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "x")
	src, _ := f.source(t)
	first := receiveN(t, src, 1, 5*time.Second)[0]
	_ = first // neither acked nor nacked: AckWait (1s) brings it back
	again := receiveN(t, src, 1, 5*time.Second)[0]
	if c := again.Message().Source.DeliveryCount; c != 2 {
		t.Errorf("delivery count = %d, want 2", c)
	}
	ackAll(t, []driver.Delivery{again})
}

func TestJetStreamNackWithDelay(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "x")
	src, _ := f.source(t, func(c *SourceConfig) { c.JetStream.AckWait = "30s" })
	d := receiveN(t, src, 1, 5*time.Second)[0]
	start := time.Now()
	if err := d.Nack(context.Background(), 700*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	again := receiveN(t, src, 1, 5*time.Second)[0]
	if el := time.Since(start); el < 600*time.Millisecond {
		t.Errorf("redelivered after %s, want >= 700ms", el)
	}
	if c := again.Message().Source.DeliveryCount; c != 2 {
		t.Errorf("delivery count = %d, want 2", c)
	}
	// Nack without delay: at once.
	start = time.Now()
	if err := again.Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	third := receiveN(t, src, 1, 20*time.Second)[0]
	if el := time.Since(start); el > 10*time.Second { // AckWait is 30 s: not redelivered by it
		t.Errorf("immediate nack redelivered after %s", el)
	}
	ackAll(t, []driver.Delivery{third})
}

func TestJetStreamExtendKeepsMessage(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "x")
	src, _ := f.source(t, func(c *SourceConfig) { c.JetStream.AckWait = "2s" })
	d := receiveN(t, src, 1, 5*time.Second)[0]
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { // the engine's lock renewal
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				if err := d.Extend(context.Background(), time.Second); err != nil {
					done <- err
					return
				}
			case <-stop:
				done <- nil
				return
			}
		}
	}()
	func() {
		defer func() {
			close(stop)
			if err := <-done; err != nil {
				t.Errorf("Extend: %v", err)
			}
		}()
		receiveNone(t, src, 5*time.Second) // 2.5 AckWaits without redelivery
	}()
	ackAll(t, []driver.Delivery{d})
	receiveNone(t, src, 2500*time.Millisecond)
}

func TestJetStreamDeadLetterTerminates(t *testing.T) {
	f := newJSFixture(t)
	adv, err := f.nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.nc.Flush()
	f.publish(t, "orders.a", "poison")
	src, _ := f.source(t)
	d := receiveN(t, src, 1, 5*time.Second)[0]
	if err := d.(driver.DeadLetterer).DeadLetter(context.Background(), "mapping", "bad\nattribute"); err != nil {
		t.Fatal(err)
	}
	receiveNone(t, src, 1500*time.Millisecond) // not after AckWait either
	a, err := adv.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no MSG_TERMINATED advisory: %v", err)
	}
	var body struct {
		Reason    string `json:"reason"`
		StreamSeq uint64 `json:"stream_seq"`
	}
	_ = json.Unmarshal(a.Data, &body)
	if body.Reason != "mapping: bad attribute" || body.StreamSeq != 1 {
		t.Errorf("advisory = %s", a.Data)
	}
}

func TestJetStreamMaxDeliver(t *testing.T) {
	f := newJSFixture(t)
	adv, _ := f.nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>")
	_ = f.nc.Flush()
	f.publish(t, "orders.a", "x")
	src, _ := f.source(t, func(c *SourceConfig) { c.JetStream.MaxDeliver = 3 })
	if info := f.consumerInfo(t, "bridge"); info.Config.MaxDeliver != 3 {
		t.Fatalf("consumer MaxDeliver = %d", info.Config.MaxDeliver)
	}
	for want := 1; want <= 3; want++ {
		d := receiveN(t, src, 1, 5*time.Second)[0]
		if c := d.Message().Source.DeliveryCount; c != want {
			t.Fatalf("delivery count = %d, want %d", c, want)
		}
		if err := d.Nack(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
	}
	receiveNone(t, src, 1500*time.Millisecond)
	a, err := adv.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal("the last failure did not terminate the message")
	}
	if !strings.Contains(string(a.Data), "max_deliver (3) reached") {
		t.Errorf("advisory = %s", a.Data)
	}
}

func TestJetStreamFetchBatchLatency(t *testing.T) {
	f := newJSFixture(t)
	for i := range 10 {
		f.publish(t, "orders.a", strconv.Itoa(i))
	}
	// A fetch that waited for a full batch would take FetchWait (60 s);
	// the bounds below are far under it and far over what a loaded
	// machine takes (0.4 s).
	src, _ := f.source(t, func(c *SourceConfig) { c.JetStream.FetchWait = "60s"; c.JetStream.FetchBatch = 4 })
	start := time.Now()
	ds, err := src.Receive(ctxT(t, 30*time.Second), 100)
	if err != nil || len(ds) != 4 {
		t.Fatalf("Receive = %d, %v; want fetch_batch 4", len(ds), err)
	}
	ds2, err := src.Receive(ctxT(t, 30*time.Second), 3)
	if err != nil || len(ds2) != 3 {
		t.Fatalf("Receive(3) = %d, %v", len(ds2), err)
	}
	rest := receiveN(t, src, 3, 30*time.Second)
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("available messages took %s: Receive waited for a full batch", el)
	}
	all := append(append(ds, ds2...), rest...)
	for i, d := range all {
		if string(d.Message().Body) != strconv.Itoa(i) {
			t.Errorf("message %d = %q", i, d.Message().Body)
		}
	}
	ackAll(t, all)
	// An idle source answers as soon as one message arrives.
	published := make(chan error, 1)
	go func() {
		waitPulling(t, f.js, "ORDERS", "bridge") // Receive waits on the server
		_, err := f.js.Publish(context.Background(), "orders.a", []byte("late"))
		published <- err
	}()
	start = time.Now()
	late := receiveN(t, src, 1, 30*time.Second)
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("idle receive took %s", el)
	}
	if m := late[0].Message(); string(m.Body) != "late" {
		t.Errorf("idle receive got %q (delivery %d, seq %s)", m.Body, m.Source.DeliveryCount, m.Source.SequenceNumber)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	ackAll(t, late)
}

func TestJetStreamConsumerSetup(t *testing.T) {
	t.Run("bind requires an existing consumer", func(t *testing.T) {
		f := newJSFixture(t)
		_, err := NewSource(ctxT(t, 5*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()},
			JetStream: &JetStreamSourceConfig{Stream: "ORDERS", Durable: "nope", Bind: true}}, nil)
		if err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing stream", func(t *testing.T) {
		f := newJSFixture(t)
		_, err := NewSource(ctxT(t, 5*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "x",
			JetStream: &JetStreamSourceConfig{Stream: "NOPE", Durable: "d"}}, nil)
		if err == nil || !strings.Contains(err.Error(), "create_stream") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("existing consumer is bound as it is", func(t *testing.T) {
		f := newJSFixture(t)
		st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
		if _, err := st.CreateConsumer(ctxT(t, 5*time.Second), jetstream.ConsumerConfig{
			Durable: "bridge", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 7 * time.Second, MaxDeliver: 2,
		}); err != nil {
			t.Fatal(err)
		}
		_, logs := f.source(t)
		logs.waitFor(t, "differs from the configuration")
		if info := f.consumerInfo(t, "bridge"); info.Config.AckWait != 7*time.Second {
			t.Errorf("the bound consumer was changed: %+v", info.Config)
		}
	})
	t.Run("ack none refused", func(t *testing.T) {
		f := newJSFixture(t)
		st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
		_, _ = st.CreateConsumer(ctxT(t, 5*time.Second), jetstream.ConsumerConfig{Durable: "bridge", AckPolicy: jetstream.AckNonePolicy})
		_, err := NewSource(ctxT(t, 5*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()},
			JetStream: &JetStreamSourceConfig{Stream: "ORDERS", Durable: "bridge"}}, nil)
		if err == nil || !strings.Contains(err.Error(), "explicit") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("create stream and consumer settings", func(t *testing.T) {
		srv := startServer(t)
		src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "new.*", JetStream: &JetStreamSourceConfig{
			Stream: "NEW", Consumer: "c1", CreateStream: true, AckWait: "12s", MaxAckPending: 5, MaxDeliver: 4}})
		_ = src
		js, _ := jetstream.New(connect(t, srv.ClientURL()))
		st, err := js.Stream(ctxT(t, 5*time.Second), "NEW")
		if err != nil {
			t.Fatal(err)
		}
		if s := st.CachedInfo().Config.Subjects; len(s) != 1 || s[0] != "new.*" {
			t.Errorf("stream subjects %v", s)
		}
		c, err := st.Consumer(ctxT(t, 5*time.Second), "c1")
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.CachedInfo().Config
		if cfg.AckWait != 12*time.Second || cfg.MaxAckPending != 5 || cfg.MaxDeliver != 4 ||
			cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.FilterSubject != "new.*" || cfg.Durable != "c1" {
			t.Errorf("consumer config %+v", cfg)
		}
	})
	t.Run("consumer deleted while running is recreated", func(t *testing.T) {
		f := newJSFixture(t)
		src, logs := f.source(t)
		if err := f.js.DeleteConsumer(ctxT(t, 5*time.Second), "ORDERS", "bridge"); err != nil {
			t.Fatal(err)
		}
		published := make(chan error, 1)
		go func() {
			// Published once Receive found the consumer gone; the new one
			// delivers all, so it gets the message.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "consumer is gone"); {
				if time.Now().After(deadline) {
					break // receiveN reports the failure
				}
				time.Sleep(10 * time.Millisecond) // a poll, as logBuf.waitFor's

			}
			_, err := f.js.Publish(context.Background(), "orders.z", []byte("after"))
			published <- err
		}()
		d := receiveN(t, src, 1, 10*time.Second)
		if string(d[0].Message().Body) != "after" {
			t.Errorf("body %q", d[0].Message().Body)
		}
		if err := <-published; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "setting it up again") {
			t.Errorf("log:\n%s", logs)
		}
	})
}

func TestJetStreamSinkDedupAndResults(t *testing.T) {
	f := newJSFixture(t, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 2048 })
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.{group}", JetStream: &JetStreamSinkConfig{Stream: "ORDERS"}})

	dup1, dup2 := msg("a"), msg("a again")
	dup1.DedupID, dup2.DedupID = "same", "same"
	big := msg(strings.Repeat("x", 4096))
	big.GroupKey = "g"
	errs := snk.Send(ctxT(t, 5*time.Second), []*mapping.Message{dup1, big, dup2, msg("b")})
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if errs[1] == nil || !driver.IsPermanent(errs[1]) {
		t.Errorf("message over the stream's max_msg_size: %v, want permanent", errs[1])
	}
	st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
	info, _ := st.Info(ctxT(t, 5*time.Second))
	if info.State.Msgs != 2 {
		t.Errorf("stream holds %d messages, want 2 (the duplicate stored once)", info.State.Msgs)
	}
	raw, err := st.GetMsg(ctxT(t, 5*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("Nats-Msg-Id") != "same" || raw.Subject != "orders._" || len(raw.Header) != 1 {
		t.Errorf("stored %s %v", raw.Subject, raw.Header)
	}
}

func TestJetStreamSinkManyAsync(t *testing.T) {
	f := newJSFixture(t)
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.bulk",
		JetStream: &JetStreamSinkConfig{MaxPending: 64}})
	msgs := make([]*mapping.Message, 1000)
	for i := range msgs {
		msgs[i] = msg(strconv.Itoa(i))
	}
	sendOK(t, snk, msgs...) // more than one window of max_pending
	st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
	info, _ := st.Info(ctxT(t, 5*time.Second))
	if info.State.Msgs != 1000 {
		t.Errorf("stream holds %d", info.State.Msgs)
	}
	last, _ := st.GetMsg(ctxT(t, 5*time.Second), 1000)
	if string(last.Data) != "999" {
		t.Errorf("order: last is %q", last.Data)
	}
}

func TestJetStreamSinkErrors(t *testing.T) {
	f := newJSFixture(t)
	// orders.x is captured by ORDERS, other.x by no stream.
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "{group}.x", JetStream: &JetStreamSinkConfig{AckTimeout: "2s"}})
	a, b := msg("a"), msg("b")
	a.GroupKey, b.GroupKey = "orders", "other"
	errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{a, b})
	if errs[0] != nil {
		t.Errorf("captured subject: %v", errs[0])
	}
	if errs[1] == nil || driver.IsPermanent(errs[1]) {
		t.Errorf("no stream for the subject: %v, want a transient error", errs[1])
	}

	// jetstream.stream must exist at start.
	if _, err := NewSink(ctxT(t, 5*time.Second), SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.x",
		JetStream: &JetStreamSinkConfig{Stream: "MISSING"}}, nil, nil); err == nil || !strings.Contains(err.Error(), "create_stream") {
		t.Errorf("missing stream: %v", err)
	}
}

func TestJetStreamSinkCreateStream(t *testing.T) {
	srv := startServer(t)
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "out.{group}.{id}",
		JetStream: &JetStreamSinkConfig{Stream: "OUT", CreateStream: true, DuplicateWindow: "1m"}})
	m := msg("x")
	m.GroupKey, m.ID = "g", "i1"
	sendOK(t, snk, m)
	js, _ := jetstream.New(connect(t, srv.ClientURL()))
	st, err := js.Stream(ctxT(t, 5*time.Second), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if len(cfg.Subjects) != 1 || cfg.Subjects[0] != "out.*.*" || cfg.Duplicates != time.Minute {
		t.Errorf("stream config subjects %v duplicates %s", cfg.Subjects, cfg.Duplicates)
	}
	raw, _ := st.GetMsg(ctxT(t, 5*time.Second), 1)
	if raw == nil || raw.Subject != "out.g.i1" {
		t.Errorf("stored %+v", raw)
	}
}

func TestJetStreamEndToEndThroughAdapters(t *testing.T) {
	// source (JetStream) → sink (JetStream) keeps order per group and attributes.
	f := newJSFixture(t)
	if _, err := f.js.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}}); err != nil {
		t.Fatal(err)
	}
	src, _ := f.source(t, func(c *SourceConfig) { c.GroupFromSubjectToken = 2 })
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "out.{group}", JetStream: &JetStreamSinkConfig{Stream: "OUT"}})
	for i := range 20 {
		f.publish(t, fmt.Sprintf("orders.g%d", i%2), strconv.Itoa(i), "k", "v")
	}
	ds := receiveN(t, src, 20, 10*time.Second)
	msgs := make([]*mapping.Message, len(ds))
	for i, d := range ds {
		msgs[i] = d.Message()
	}
	sendOK(t, snk, msgs...)
	ackAll(t, ds)
	out, _ := f.js.Stream(ctxT(t, 5*time.Second), "OUT")
	for seq := uint64(1); seq <= 20; seq++ {
		raw, err := out.GetMsg(ctxT(t, 5*time.Second), seq)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(string(raw.Data))
		if raw.Subject != fmt.Sprintf("out.g%d", i%2) || raw.Header.Get("k") != "v" || i != int(seq-1) {
			t.Errorf("seq %d: %s %q %v", seq, raw.Subject, raw.Data, raw.Header)
		}
	}
}

func TestJetStreamSourceSurvivesServerRestart(t *testing.T) {
	srv := startServer(t)
	port, store := srv.Addr().(*net.TCPAddr).Port, srv.StoreDir()
	src, logs := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL(), ReconnectWait: "50ms"}, Subject: "re.>",
		JetStream: &JetStreamSourceConfig{Stream: "RE", Durable: "d", CreateStream: true, FetchWait: "300ms"}})
	got := make(chan driver.Delivery, 1)
	go func() {
		ds, err := src.Receive(ctxT(t, 20*time.Second), 1)
		if err == nil && len(ds) > 0 {
			got <- ds[0]
		}
		close(got)
	}()
	// Receive's pull is waiting on the server when it goes down.
	probe, _ := jetstream.New(connect(t, srv.ClientURL()))
	waitPulling(t, probe, "RE", "d")
	srv.Shutdown()
	srv.WaitForShutdown()
	logs.waitFor(t, "fetch failed; retrying") // Receive meets the outage and retries
	srv2 := startServer(t, func(o *server.Options) { o.Port = port; o.StoreDir = store })
	nc := connect(t, srv2.ClientURL())
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctxT(t, 5*time.Second), "re.x", []byte("after restart")); err != nil {
		t.Fatal(err)
	}
	d, ok := <-got
	if !ok {
		t.Fatalf("Receive gave up across the restart; log:\n%s", logs)
	}
	if string(d.Message().Body) != "after restart" {
		t.Errorf("body %q", d.Message().Body)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Error(err)
	}
}

// A pull cut off by the server ("server shutdown", while the connection
// still stands) may have had messages on the way that never arrive: they
// come back only after ack_wait, so the source recovers (waits for them)
// before it takes anything new, as after a reconnect. In the chaos suite
// the next pull, still answered by the stopping server, brought a later
// message of the group, which was stored first.
func TestJetStreamFailedPullRecoversFirst(t *testing.T) {
	srv := startServer(t)
	src, logs := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL(), ReconnectWait: "50ms"}, Subject: "re.>",
		JetStream: &JetStreamSourceConfig{Stream: "RE", Durable: "d", CreateStream: true, FetchWait: "300ms"}})
	js := src.(*jsSource)
	pub, _ := jetstream.New(connect(t, srv.ClientURL()))
	if _, err := pub.Publish(ctxT(t, 5*time.Second), "re.x", []byte("first")); err != nil {
		t.Fatal(err)
	}
	ackAll(t, receiveN(t, src, 1, 5*time.Second)) // the start's recovery is over
	if js.needRecover() {
		t.Fatal("still recovering after the first delivery")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = src.Receive(ctx, 1) }()
	waitPulling(t, pub, "RE", "d")
	reconnects := js.conn.reconnects.Load()
	srv.Shutdown()
	srv.WaitForShutdown()
	logs.waitFor(t, "fetch failed; retrying")
	js.mu.Lock()
	recover := js.recover
	js.mu.Unlock()
	if js.conn.reconnects.Load() != reconnects {
		t.Fatal("reconnected to a server that is down")
	}
	if !recover {
		t.Errorf("after a pull cut off by the server the source would fetch new messages without recovering first; log:\n%s", logs)
	}
}

// A message natsmap refuses is handed over with its DecodeError and what
// could be read, for the engine to dead-letter (driver.DecodeErrorer).
func TestUndecodableMessage(t *testing.T) {
	f := newJSFixture(t)
	core, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.>"})
	js, _ := f.source(t)
	f.publish(t, "orders.bad", "payload", "qbridge.envelope", "{not json", "k", "v", DefaultGroupHeader, "g", "Nats-Msg-Id", "d1")
	for name, src := range map[string]driver.Source{"core": core, "jetstream": js} {
		t.Run(name, func(t *testing.T) {
			d := receiveN(t, src, 1, 5*time.Second)[0]
			de, ok := d.(driver.DecodeErrorer)
			if !ok || de.DecodeError() == nil {
				t.Fatalf("no DecodeError for a malformed envelope")
			}
			m := d.Message()
			if string(m.Body) != "payload" || m.GroupKey != "g" || m.DedupID != "d1" || m.Source.Address != "orders.bad" {
				t.Errorf("raw message = body %q group %q dedup %q address %q", m.Body, m.GroupKey, m.DedupID, m.Source.Address)
			}
			if v, ok := m.Attr("k"); !ok || v.Str() != "v" {
				t.Errorf("attribute k = %v %v", v, ok)
			}
			if _, ok := m.Attr(mapping.EnvelopeName); ok {
				t.Error("the malformed envelope is exposed as an attribute")
			}
			// Its text travels on under another name, for whoever reads
			// the dead letter (the dead-letter sink writes an envelope of
			// its own, which replaced it).
			if v, ok := m.Attr(RefusedEnvelopeAttr); !ok || v.Str() != "{not json" {
				t.Errorf("%s = %v %v, want the refused text", RefusedEnvelopeAttr, v, ok)
			}
			if name == "jetstream" {
				if m.Source.SequenceNumber != "1" {
					t.Errorf("sequence %q", m.Source.SequenceNumber)
				}
				if err := d.(driver.DeadLetterer).DeadLetter(context.Background(), "decode", de.DecodeError().Error()); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestJetStreamRestartKeepsOrder: a source that stops without settling
// what it fetched (a crash) leaves unacknowledged messages; the next
// source fetches nothing new until they came back, so they come first.
func TestJetStreamRestartKeepsOrder(t *testing.T) {
	f := newJSFixture(t)
	for _, b := range []string{"m1", "m2"} {
		f.publish(t, "orders.a", b)
	}
	src, _ := f.source(t)
	first := receiveN(t, src, 2, 5*time.Second)
	_ = first // never settled: back after ack_wait (1s)
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"m3", "m4"} {
		f.publish(t, "orders.a", b)
	}
	src2, logs := f.source(t)
	start := time.Now()
	var got []string
	for _, d := range receiveN(t, src2, 4, 10*time.Second) {
		got = append(got, string(d.Message().Body))
	}
	if want := []string{"m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
		t.Errorf("after the restart got %v, want %v", got, want)
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("first delivery after %s: the unacknowledged ones cannot be back yet", el)
	}
	if !strings.Contains(logs.String(), "fetching nothing new") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}

// TestJetStreamNackAfterCancelledReceive: a Receive whose context ends
// while it waits leaves its pull open on the server; a message nacked
// right after is not lost to that pull until ack_wait: the next Receive
// gets it at once, ahead of later messages.
func TestJetStreamNackAfterCancelledReceive(t *testing.T) {
	f := newJSFixture(t)
	f.publish(t, "orders.a", "m1")
	src, _ := f.source(t, func(c *SourceConfig) { c.JetStream.AckWait = "30s"; c.JetStream.FetchWait = "800ms" })
	d := receiveN(t, src, 1, 5*time.Second)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	ds, _ := src.Receive(ctx, 10) // nothing there: cancelled while its pull waits
	cancel()
	if len(ds) != 0 {
		t.Fatalf("unexpected deliveries: %d", len(ds))
	}
	if err := d.Nack(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	f.publish(t, "orders.a", "m2")
	got := receiveN(t, src, 2, 5*time.Second)
	if b := string(got[0].Message().Body); b != "m1" {
		t.Errorf("first after the nack: %s, want m1", b)
	}
	ackAll(t, got)
}

// waitPulling returns once a pull request waits on the consumer: a
// Receive is under way on the server. Safe to call from a goroutine.
func waitPulling(t *testing.T, js jetstream.JetStream, stream, durable string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if cons, err := js.Consumer(ctx, stream, durable); err == nil {
			if info, err := cons.Info(ctx); err == nil && info.NumWaiting > 0 {
				return
			}
		}
		runtime.Gosched()
	}
	t.Errorf("no pull request waited on %s/%s", stream, durable)
}

// After a message of a call fails, the sink publishes nothing more of the
// call: a later message stored before the failed one's resend would break
// its group's order for good (the engine resends the failed one, then the
// rest). Here each message is its own window (max_pending 1), so the
// second one's failure is known before the third would go.
func TestJetStreamSinkPublishesNothingAfterAFailure(t *testing.T) {
	f := newJSFixture(t)
	// orders.x is captured by ORDERS, other.x by no stream.
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "{group}.x",
		JetStream: &JetStreamSinkConfig{AckTimeout: "2s", MaxPending: 1}})
	a, b, c := msg("1"), msg("2"), msg("3")
	a.GroupKey, b.GroupKey, c.GroupKey = "orders", "other", "orders"
	errs := snk.Send(ctxT(t, 10*time.Second), []*mapping.Message{a, b, c})
	if errs[0] != nil || errs[1] == nil || driver.IsPermanent(errs[1]) {
		t.Fatalf("errs = %v: want the first stored, the second failed (transient)", errs)
	}
	if errs[2] == nil || driver.IsPermanent(errs[2]) || !strings.Contains(errs[2].Error(), "not published") {
		t.Errorf("the message after the failure: %v, want a transient 'not published'", errs[2])
	}
	st, _ := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
	info, _ := st.Info(ctxT(t, 5*time.Second))
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1: a message after the failed one was published", info.State.Msgs)
	}
}

// Until the stream has stored a message on the connection (after a connect,
// a reconnect or a failed publish), a call's first message goes alone: a
// window whose first messages fail while later ones are stored (seen right
// after a sink outage) would let the later ones overtake them.
func TestJetStreamSinkProbesBeforePipelining(t *testing.T) {
	f := newJSFixture(t)
	// orders.x is captured by ORDERS, other.x by no stream (refused).
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "{group}.x",
		JetStream: &JetStreamSinkConfig{AckTimeout: "2s"}})
	stored := func() uint64 {
		st, err := f.js.Stream(ctxT(t, 5*time.Second), "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	in := func(group, body string) *mapping.Message {
		m := msg(body)
		m.GroupKey = group
		return m
	}
	send := func(ms ...*mapping.Message) []error { return snk.Send(ctxT(t, 10*time.Second), ms) }

	errs := send(in("other", "refused"), in("orders", "1"), in("orders", "2"))
	if errs[0] == nil || errs[1] == nil || errs[2] == nil {
		t.Fatalf("first call, its first message refused: errs = %v, want all failed", errs)
	}
	if n := stored(); n != 0 {
		t.Fatalf("stream holds %d messages after a call whose first message was refused, want 0", n)
	}
	if errs := send(in("orders", "1"), in("orders", "2")); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if errs := send(in("other", "refused")); errs[0] == nil {
		t.Fatal("a publish no stream takes succeeded")
	}
	errs = send(in("other", "refused"), in("orders", "3"))
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("after a failure, the first message refused again: errs = %v, want both failed", errs)
	}
	if n := stored(); n != 2 {
		t.Errorf("stream holds %d messages, want 2: a message after a refused first one was published", n)
	}
	if errs := send(in("orders", "3"), in("orders", "4")); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if n := stored(); n != 4 {
		t.Errorf("stream holds %d messages, want 4", n)
	}
}

// A sink publishes nothing into nats.go's reconnect buffer: what a call
// publishes while the server is down fails at once, and is not sent when
// the connection comes back (where it would be stored after the messages
// the engine resent first, or before the earlier ones lost with the old
// socket).
func TestJetStreamSinkBuffersNothingWhileReconnecting(t *testing.T) {
	srv := startServer(t)
	port, store := srv.Addr().(*net.TCPAddr).Port, srv.StoreDir()
	snk, logs := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: srv.ClientURL(), ReconnectWait: "50ms"}, Subject: "re.x",
		JetStream: &JetStreamSinkConfig{Stream: "RE", CreateStream: true, AckTimeout: "30s"}})
	srv.Shutdown()
	srv.WaitForShutdown()
	logs.waitFor(t, "nats disconnected")
	errs := snk.Send(ctxT(t, 60*time.Second), []*mapping.Message{msg("during the outage")})
	if errs[0] == nil || driver.IsPermanent(errs[0]) {
		t.Fatalf("publish while the server is down: %v, want a transient error", errs[0])
	}
	if !errors.Is(errs[0], nats.ErrReconnectBufExceeded) {
		t.Errorf("publish while the server is down: %v, want it refused at once (not buffered until the ack timeout)", errs[0])
	}
	startServer(t, func(o *server.Options) { o.Port = port; o.StoreDir = store })
	logs.waitFor(t, "nats reconnected")
	sendOK(t, snk, msg("after the outage"))
	js, _ := jetstream.New(connect(t, srv.ClientURL()))
	st, err := js.Stream(ctxT(t, 5*time.Second), "RE")
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctxT(t, 5*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctxT(t, 5*time.Second))
	if string(first.Data) != "after the outage" || info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, the first %q: the failed publish was sent on reconnect", info.State.Msgs, first.Data)
	}
}
