package servicebus

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// migrateConn is fastConn with the test server's management endpoint (its
// HTTP port; a real namespace serves management on its own host).
// testNamespace is the namespace the test broker's connection names.
func testNamespace(t *testing.T) string {
	c := migrateConn()
	set, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return set.namespace
}

func migrateConn() ConnConfig {
	c := fastConn()
	c.ManagementEndpoint = brokerHTTP
	return c
}

// A session entity's count includes its sessions with messages, listed
// through the official client's session pager (the backlog gauge's
// "sessions", what a KEDA scaler of a session queue reads).
func TestCountSourceSessions(t *testing.T) {
	needBroker(t)
	q := entity("migrate-sess")
	cfg := SourceConfig{ConnConfig: migrateConn(), Queue: q, Sessions: &SessionsConfig{}}
	// Compared with the count before, so that the test runs again on the
	// same server (-count=N): each run adds three sessions of its own.
	before, err := CountSource(ctxT(t, 30*time.Second), cfg, nil)
	if err != nil || !before.HasSessions {
		t.Fatalf("CountSource before = %+v, %v", before, err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: fastConn(), Queue: q})
	sendAll(t, snk, sessionMsg("a"+run, 0), sessionMsg("b"+run, 0), sessionMsg("a"+run, 1), sessionMsg("c"+run, 0))
	want := driver.Backlog{Ready: before.Ready + 4, Sessions: before.Sessions + 3, HasSessions: true, Ordered: true, Created: before.Created,
		Entity: "servicebus " + strings.ToLower(testNamespace(t)) + "/" + q, ReceivesCounted: true}
	if got, err := CountSource(ctxT(t, 30*time.Second), cfg, nil); err != nil || got != want {
		t.Fatalf("CountSource = %+v, %v; want %+v", got, err, want)
	}
	cfg.Sessions = nil // the same entity read without sessions: no session count
	if got, err := CountSource(ctxT(t, 30*time.Second), cfg, nil); err != nil || got.HasSessions || got.Ordered {
		t.Fatalf("CountSource without sessions = %+v, %v", got, err)
	}
}

// Counts through the official admin client, browsing by peek, and the
// dead-letter sub-queue, on one queue: two active messages, one scheduled
// an hour ahead, one dead-lettered.
func TestMigrateCountBrowseDeadLetter(t *testing.T) {
	needBroker(t)
	q := entity("migrate-count")
	emptyQueue(t, q)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: fastConn(), Queue: q})
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	sendAll(t, snk,
		&mapping.Message{ID: "dead", Body: []byte("dead")},
		&mapping.Message{ID: "a", Body: []byte("a")},
		&mapping.Message{ID: "b", Body: []byte("b")},
		&mapping.Message{ID: "later", Body: []byte("later"), ScheduledAt: later})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: fastConn(), Queue: q, MaxMessages: 1})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	if string(d.Message().Body) != "dead" {
		t.Fatalf("first message %q, want dead", d.Message().Body)
	}
	if err := d.(driver.DeadLetterer).DeadLetter(ctxT(t, 10*time.Second), "test", "for the count"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	cfg := SourceConfig{ConnConfig: migrateConn(), Queue: q}
	// The receiver may hold prefetched messages: their locks are not
	// counted apart (active includes locked), so the counts are exact.
	first, err := CountSource(ctx, cfg, nil)
	// The entity's CreatedAt, which a copy's checkpoint keeps (a queue
	// made again numbers from 1 again): set, and the same at every count.
	if err != nil || first.Created.IsZero() || first.Created.After(time.Now()) {
		t.Fatalf("CountSource = %+v, %v; want the queue's creation time", first, err)
	}
	want := driver.Backlog{Ready: 2, Scheduled: 1, DeadLetter: 1, Created: first.Created}
	// A source's count names the entity, whose every receive not completed
	// raises DeliveryCount (a dry run records what it raised under it).
	entity := "servicebus " + strings.ToLower(testNamespace(t)) + "/" + q
	srcWant := want
	srcWant.Entity, srcWant.ReceivesCounted = entity, true
	if got, err := CountSource(ctx, cfg, nil); err != nil || got != srcWant {
		t.Fatalf("CountSource = %+v, %v; want %+v", got, err, srcWant)
	}
	if got, err := CountSink(ctx, SinkConfig{ConnConfig: migrateConn(), Queue: q}, nil); err != nil || got != want {
		t.Fatalf("CountSink = %+v, %v; want %+v", got, err, want)
	}
	dl, err := DeadLetterSource(ctx, cfg, nil)
	if err != nil || dl.SubQueue != subQueueDeadLetter {
		t.Fatalf("DeadLetterSource = %+v, %v", dl.SubQueue, err)
	}
	if got, err := CountSource(ctx, dl, nil); err != nil || got != (driver.Backlog{Ready: 1, Created: first.Created, Entity: entity + "/$deadletterqueue", ReceivesCounted: true}) {
		t.Fatalf("CountSource(dead letters) = %+v, %v; want Ready 1", got, err)
	}
	if _, err := DeadLetterSource(ctx, dl, nil); !errors.Is(err, driver.ErrNoDeadLetterQueue) {
		t.Fatalf("DeadLetterSource of the dead-letter queue: %v", err)
	}
	_ = src.Close(ctx) // hand back what it prefetched before browsing

	// Browse from the start: every message, the scheduled one with its
	// time, in sequence order; settling changes nothing.
	bcfg, err := Browse(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	bsrc, _ := newTestSource(t, bcfg)
	got := receiveN(t, bsrc, 3, 10*time.Second)
	var seqs []uint64
	for i, d := range got {
		m := d.Message()
		if want := []string{"a", "b", "later"}[i]; string(m.Body) != want {
			t.Fatalf("browsed %d: %q, want %q", i, m.Body, want)
		}
		n, err := strconv.ParseUint(m.Source.SequenceNumber, 10, 64)
		if err != nil || (i > 0 && n <= seqs[i-1]) {
			t.Fatalf("browsed %d: sequence number %q after %v", i, m.Source.SequenceNumber, seqs)
		}
		seqs = append(seqs, n)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !got[2].Message().ScheduledAt.Equal(later) {
		t.Errorf("scheduled message: ScheduledAt %v, want %v", got[2].Message().ScheduledAt, later)
	}
	// Drained answers while Receive waits for more (the migration's
	// watcher asks it then).
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	done := make(chan []driver.Delivery, 1)
	go func() {
		more, _ := bsrc.Receive(rctx, 10)
		done <- more
	}()
	for drained := false; !drained; {
		ch := make(chan bool, 1)
		go func() { ch <- bsrc.(driver.Browser).Drained() }()
		select {
		case drained = <-ch:
		case <-time.After(time.Second):
			t.Fatal("Drained blocks while Receive waits")
		}
		if !drained {
			time.Sleep(20 * time.Millisecond) // poll: the peek that finds nothing is the source's
		}
	}
	cancel()
	if more := <-done; len(more) != 0 {
		t.Fatalf("after the last message: %d more", len(more))
	}
	if got, err := CountSource(ctx, cfg, nil); err != nil || got != srcWant {
		t.Fatalf("CountSource after browsing = %+v, %v; want %+v", got, err, srcWant)
	}

	// Resume after the first: the rest.
	bcfg, _ = Browse(cfg, seqs[0])
	bsrc2, _ := newTestSource(t, bcfg)
	if got := receiveN(t, bsrc2, 2, 10*time.Second); string(got[0].Message().Body) != "b" {
		t.Fatalf("browse after %d: first %q, want b", seqs[0], got[0].Message().Body)
	}
}

// emptyQueue removes what an earlier run (go test -count=N) left in q:
// active and dead-lettered messages, and scheduled ones.
func emptyQueue(t *testing.T, q string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	c, err := azservicebus.NewClientFromConnectionString(brokerConn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, sub := range []azservicebus.SubQueue{0, azservicebus.SubQueueDeadLetter} {
		r, err := c.NewReceiverForQueue(q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, SubQueue: sub})
		if err != nil {
			t.Fatal(err)
		}
		for {
			from := int64(0) // from the start each time: a receiver's peeks go on after its last
			peeked, err := r.PeekMessages(ctx, 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			if err != nil {
				t.Fatal(err)
			}
			var scheduled []int64
			active := 0
			for _, m := range peeked {
				if m.State == azservicebus.MessageStateScheduled {
					scheduled = append(scheduled, *m.SequenceNumber)
				} else {
					active++
				}
			}
			if len(scheduled) > 0 {
				s, err := c.NewSender(q, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CancelScheduledMessages(ctx, scheduled, nil); err != nil {
					t.Fatal(err)
				}
				_ = s.Close(ctx)
			}
			if active == 0 {
				break
			}
			if _, err := r.ReceiveMessages(ctx, active, nil); err != nil {
				t.Fatal(err)
			}
		}
		_ = r.Close(ctx)
	}
}

// What cannot be counted or browsed says so with the contract's errors.
func TestMigrateRefusals(t *testing.T) {
	t.Parallel()
	cs := "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
	conn := ConnConfig{ConnectionString: cs}
	for _, tc := range []struct {
		name string
		err  func() error
		want error
	}{
		{"topic sink", func() error {
			_, err := CountSink(context.Background(), SinkConfig{ConnConfig: conn, Topic: "t"}, nil)
			return err
		}, errors.ErrUnsupported},
		{"templated sink", func() error {
			_, err := CountSink(context.Background(), SinkConfig{ConnConfig: conn, Queue: "q-{attr.x}"}, nil)
			return err
		}, errors.ErrUnsupported},
		{"emulator over AMQP without management_endpoint", func() error {
			_, err := CountSource(context.Background(), SourceConfig{ConnConfig: conn, Queue: "q"}, nil)
			return err
		}, errors.ErrUnsupported},
		{"browse over https", func() error {
			c := conn
			c.Transport = transportHTTPS
			_, err := Browse(SourceConfig{ConnConfig: c, Queue: "q"}, 0)
			return err
		}, driver.ErrCannotBrowse},
		{"browse sessions", func() error {
			_, err := Browse(SourceConfig{ConnConfig: conn, Queue: "q", Sessions: &SessionsConfig{}}, 0)
			return err
		}, driver.ErrCannotBrowse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// The dead-letter queue of a session queue has no sessions: its source
// drops the sessions block (it was copied, and refused, so that
// -include-dead-letters failed the whole pipeline).
func TestDeadLetterSourceOfASessionQueue(t *testing.T) {
	t.Parallel()
	cs := "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
	cfg := SourceConfig{ConnConfig: ConnConfig{ConnectionString: cs}, Queue: "q", Sessions: &SessionsConfig{}}
	dl, err := DeadLetterSource(context.Background(), cfg, nil)
	if err != nil || dl.SubQueue != subQueueDeadLetter || dl.Sessions != nil {
		t.Fatalf("DeadLetterSource = sub-queue %q, sessions %v, %v", dl.SubQueue, dl.Sessions, err)
	}
	if cfg.Sessions == nil {
		t.Error("the main queue's configuration lost its sessions block")
	}
}

// The dry-run sink needs no network (the namespace is a closed port) and
// reaches the sink's verdicts over both transports.
func TestMigrateDrySink(t *testing.T) {
	t.Parallel()
	cs := "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
	for _, transport := range []string{transportAMQP, transportHTTPS} {
		t.Run(transport, func(t *testing.T) {
			cfg := SinkConfig{ConnConfig: ConnConfig{ConnectionString: cs, Transport: transport}, Queue: "orders-{attr.region}", MaxMessageSize: 1024}
			snk, err := NewDrySink(context.Background(), cfg, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			msgs := []*mapping.Message{
				msgWith("fine", "region", "eu"),
				msgWith(strings.Repeat("x", 4096), "region", "eu"),
				{Body: []byte("no region")},
			}
			errs := snk.Send(context.Background(), msgs)
			if errs[0] != nil {
				t.Errorf("fine: %v", errs[0])
			}
			for i := 1; i < 3; i++ {
				if errs[i] == nil || !driver.IsPermanent(errs[i]) {
					t.Errorf("message %d: %v, want a permanent refusal", i, errs[i])
				}
			}
			if err := snk.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func msgWith(body string, attr, value string) *mapping.Message {
	m := &mapping.Message{Body: []byte(body)}
	m.SetAttr(attr, mapping.String(value))
	return m
}

// Server-busy answers are throttling: transient, and marked.
func TestMigrateThrottled(t *testing.T) {
	t.Parallel()
	s := &sinkCommon{set: &sinkSettings{maxMessageSize: 1024}}
	for _, tc := range []struct {
		name      string
		err       error
		throttled bool
	}{
		{"amqp server-busy", &amqp.Error{Condition: serverBusy, Description: "busy"}, true},
		{"amqp internal error", &amqp.Error{Condition: amqp.ErrCondInternalError}, false},
		{"rest 503", &restError{op: "send", status: 503}, true},
		{"rest 429", &restError{op: "send", status: 429}, true},
		{"rest 500", &restError{op: "send", status: 500}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.sendErr("q", tc.err)
			if strings.HasPrefix(tc.name, "rest") {
				err = s.restSendErr("q", tc.err)
			}
			if err == nil || driver.IsPermanent(err) || driver.IsThrottled(err) != tc.throttled {
				t.Fatalf("%v: throttled %v, permanent %v; want throttled %v", err, driver.IsThrottled(err), driver.IsPermanent(err), tc.throttled)
			}
		})
	}
}

// The sink refuses a message without a group key for a session-enabled
// queue itself, as the dry run does, where the management API says the
// queue has sessions: left to the broker, each send took the SDK some 50 s
// of retries, and a migration stalled where its dry run had promised dead
// letters.
func TestSinkRefusesSessionlessMessageForSessionQueue(t *testing.T) {
	needBroker(t)
	q := entity("migrate-sess")
	log, _ := testLog(t)
	snk, err := NewSink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: migrateConn(), Queue: q}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close(context.Background())
	errs := snk.Send(ctxT(t, 2*time.Minute), []*mapping.Message{{Body: []byte("no group")}})
	// The sink's own refusal, not the broker's ("requires sessions").
	if errs[0] == nil || !driver.IsPermanent(errs[0]) || !strings.Contains(errs[0].Error(), "is session-enabled and the message has no group key") {
		t.Errorf("a message without a group key: %v", errs[0])
	}
}

// A dry run into a session-enabled queue: the dry sink asks the management
// API, and refuses a message without a group key as the queue would (a
// dry run said "would write 3" and the move dead-lettered all 3). Without
// a management endpoint it cannot know, and does not refuse.
func TestMigrateDrySinkSessionQueue(t *testing.T) {
	needBroker(t)
	q := entity("migrate-sess")
	for _, tc := range []struct {
		name   string
		conn   ConnConfig
		refuse bool
	}{
		{"management endpoint", migrateConn(), true},
		{"none", fastConn(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snk, err := NewDrySink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: tc.conn, Queue: q}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			errs := snk.Send(context.Background(), []*mapping.Message{{Body: []byte("no group")}, sessionMsg("s1", 0)})
			if errs[1] != nil {
				t.Errorf("a message with a group key: %v", errs[1])
			}
			if got := errs[0] != nil; got != tc.refuse || (got && (!driver.IsPermanent(errs[0]) || !strings.Contains(errs[0].Error(), "session-enabled"))) {
				t.Errorf("a message without a group key: %v, want refused %v", errs[0], tc.refuse)
			}
		})
	}
}

// The sink and the dry-run sink encode for the queue's own
// MaxMessageSizeInKilobytes where the management API says it: a queue of
// 64 KiB dead-lettered, as too large at the broker, what a dry run had
// said it would write (migration audit). Without a management endpoint
// the default stays.
func TestSinksTakeTheQueuesSizeLimit(t *testing.T) {
	needBroker(t)
	q := entity("big") // 64 KiB
	big := &mapping.Message{Body: bytes.Repeat([]byte{'x'}, 100<<10)}
	for _, tc := range []struct {
		name string
		conn ConnConfig
		want int
	}{
		{"management endpoint", migrateConn(), 64 << 10},
		{"none", fastConn(), DefaultMaxMessageSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dry, err := NewDrySink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: tc.conn, Queue: q}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := dry.(*drySink).set.opt.MaxMessageSize; got != tc.want {
				t.Errorf("dry sink: limit %d, want %d", got, tc.want)
			}
			errs := dry.Send(context.Background(), []*mapping.Message{big})
			if refused := bridge.SinkReason(errs[0]) == bridge.ReasonTooLarge; refused != (tc.want < 100<<10) {
				t.Errorf("a 100 KiB message: %v, want refused as too large %v", errs[0], tc.want < 100<<10)
			}
			log, _ := testLog(t)
			snk, err := NewSink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: tc.conn, Queue: q}, nil, log)
			if err != nil {
				t.Fatal(err)
			}
			defer snk.Close(context.Background())
			if got := sinkSettingsOf(t, snk).opt.MaxMessageSize; got != tc.want {
				t.Errorf("sink: limit %d, want %d", got, tc.want)
			}
		})
	}
}

// sinkSettingsOf is the settings an opened sink encodes with.
func sinkSettingsOf(t *testing.T, s driver.Sink) *sinkSettings {
	t.Helper()
	switch x := s.(type) {
	case *amqpSink:
		return x.set
	case *httpsSink:
		return x.set
	}
	t.Fatalf("a sink of type %T", s)
	return nil
}
