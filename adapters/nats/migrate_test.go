package nats

import (
	"context"
	"errors"
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

// Tests of the qbridge migrate hooks (migrate.go) on a real embedded
// server.

func (f *jsFixture) sourceConfig() SourceConfig {
	return SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, JetStream: &JetStreamSourceConfig{
		Stream: "ORDERS", Durable: "bridge", FilterSubjects: []string{"orders.eu.>"},
		AckWait: "30s", FetchWait: "300ms",
	}}
}

// Before the durable exists the stream's messages on its filter are all
// ready; once it holds some unacknowledged, they are in flight.
func TestMigrateCountSource(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	for _, subj := range []string{"orders.eu.1", "orders.eu.2", "orders.eu.3", "orders.us.1"} {
		f.publish(t, subj, subj)
	}
	cfg := f.sourceConfig()
	ctx := ctxT(t, 20*time.Second)
	entity := `nats server ` + strings.TrimPrefix(f.srv.ClientURL(), "nats://") + ` stream "ORDERS" filter orders.eu.>`
	st, err := f.js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	// The stream's creation time, which a copy's checkpoint keeps (a
	// stream made again numbers from 1 again).
	created := st.CachedInfo().Created
	if got, err := CountSource(ctx, cfg, nil); err != nil || got != (driver.Backlog{Ready: 3, Ordered: true, Exact: true, Entity: entity, Created: created,
		ReceivesCounted: true, DeliveriesOf: entity + " consumer " + cfg.JetStream.Durable}) {
		t.Fatalf("without the consumer: %+v, %v; want Ready 3, created %v", got, err, created)
	}
	src, _ := mustSource(t, cfg)
	d := receiveN(t, src, 1, 10*time.Second)
	if got, err := CountSource(ctx, cfg, nil); err != nil || got.Ready+got.InFlight != 3 || got.InFlight < 1 {
		t.Fatalf("with one received: %+v, %v; want 3 in all, at least 1 in flight", got, err)
	}
	ackAll(t, d)

	core := SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.>"}
	if _, err := CountSource(ctx, core, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("core NATS count: %v, want ErrUnsupported", err)
	}
	if _, err := CountSink(ctx, SinkConfig{ConnConfig: core.ConnConfig, Subject: "x"}, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("core NATS sink count: %v, want ErrUnsupported", err)
	}
}

// A JetStream sink counts the stream that holds its subject; duplicates
// (same Nats-Msg-Id in the window) are reported.
func TestMigrateCountSinkAndDuplicates(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	cfg := SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.in", JetStream: &JetStreamSinkConfig{}}
	snk, _ := mustSink(t, cfg)
	sendOK(t, snk, &mapping.Message{ID: "a", Body: []byte("a")}, &mapping.Message{ID: "b", Body: []byte("b")})
	sendOK(t, snk, &mapping.Message{ID: "a", Body: []byte("a again")})
	dr, ok := snk.(driver.DuplicateReporter)
	if !ok || dr.Duplicates() != 1 {
		t.Fatalf("DuplicateReporter %v, duplicates %d; want 1", ok, dr.Duplicates())
	}
	// The stream drops a Nats-Msg-Id it stored within its window.
	entity := `nats server ` + strings.TrimPrefix(f.srv.ClientURL(), "nats://") + ` stream "ORDERS"`
	if got, err := CountSink(ctxT(t, 10*time.Second), cfg, nil); err != nil || got != (driver.Backlog{Ready: 2, Deduplicates: true, Ordered: true, Exact: true, Entity: entity}) {
		t.Fatalf("CountSink = %+v, %v; want Ready 2, deduplicating, entity %s", got, err, entity)
	}
	// The entity is the stream the server files the subject under, which
	// a block that names no stream does not say: a sink and a dead-letter
	// sink are one entity only when this is the same (qbridge migrate's
	// verification counts the dead letters into the sink then).
	if _, err := f.js.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq"}}); err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]string{
		"orders.dlq": entity,
		"dlq":        `nats server ` + strings.TrimPrefix(f.srv.ClientURL(), "nats://") + ` stream "DLQ"`,
	} {
		other := cfg
		other.Subject = subject
		if got, err := CountSink(ctxT(t, 10*time.Second), other, nil); err != nil || got.Entity != want {
			t.Errorf("CountSink of %s: entity %q, %v; want %q", subject, got.Entity, err, want)
		}
	}
	// A subject no stream stores: publishing would fail until the
	// connect timeout, so the count says so for good.
	missing := cfg
	missing.Subject = "nowhere.x"
	if _, err := CountSink(ctxT(t, 10*time.Second), missing, nil); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "create_stream = true") {
		t.Fatalf("CountSink of a subject no stream stores: %v, want a permanent error", err)
	}
}

// Browsing reads the filter's messages with their stream sequences, acks
// nothing (the durable's count is unchanged), is drained at the end, and
// resumes after a sequence.
func TestMigrateBrowse(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	for _, subj := range []string{"orders.eu.1", "orders.us.1", "orders.eu.2", "orders.eu.3"} {
		f.publish(t, subj, subj)
	}
	cfg := f.sourceConfig()
	bcfg, err := Browse(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := mustSource(t, bcfg)
	got := receiveN(t, src, 3, 10*time.Second)
	var seqs []string
	for i, d := range got {
		if want := []string{"orders.eu.1", "orders.eu.2", "orders.eu.3"}[i]; string(d.Message().Body) != want {
			t.Fatalf("browsed %d: %q, want %q", i, d.Message().Body, want)
		}
		seqs = append(seqs, d.Message().Source.SequenceNumber)
		if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if seqs[0] != "1" || seqs[1] != "3" || seqs[2] != "4" {
		t.Fatalf("sequence numbers %v, want [1 3 4]", seqs)
	}
	// Drained only once the batch with the last message was handed over:
	// at the next Receive (which finds nothing more).
	if src.(driver.Browser).Drained() {
		t.Fatal("drained while the batch with the last message was still on its way to the engine")
	}
	if ds, err := src.Receive(ctxT(t, 10*time.Second), 10); err != nil || len(ds) != 0 {
		t.Fatalf("receive after the end: %d messages, %v", len(ds), err)
	}
	if !src.(driver.Browser).Drained() {
		t.Fatal("not drained after the stream's last message was handed over")
	}
	if got, err := CountSource(ctxT(t, 10*time.Second), cfg, nil); err != nil || got.Ready != 3 || got.InFlight != 0 {
		t.Fatalf("count after browsing: %+v, %v; want Ready 3 (nothing acknowledged)", got, err)
	}

	after, _ := strconv.ParseUint(seqs[0], 10, 64)
	bcfg, _ = Browse(cfg, after)
	src2, _ := mustSource(t, bcfg)
	if d := receiveN(t, src2, 1, 10*time.Second)[0]; string(d.Message().Body) != "orders.eu.2" {
		t.Fatalf("browse after %d: %q, want orders.eu.2", after, d.Message().Body)
	}

	// A checkpoint past the stream's last sequence is of a stream deleted
	// and made again: refused, where it copied nothing and was complete.
	bcfg, _ = Browse(cfg, 5)
	if src, err := NewSource(ctxT(t, 10*time.Second), bcfg, nil); err == nil {
		_ = src.Close(context.Background())
		t.Fatal("browse after sequence 5 of a stream whose last is 4 opened")
	} else if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "past the end of stream") {
		t.Fatalf("browse past the end: %v, want a permanent error that says so", err)
	}

	core := SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "orders.>"}
	if _, err := Browse(core, 0); !errors.Is(err, driver.ErrCannotBrowse) {
		t.Fatalf("core NATS browse: %v, want ErrCannotBrowse", err)
	}
}

// A browse that gets nothing within its wait is not at the end while the
// stream still has messages for it: a loaded server or an ordered consumer
// being reset answers late, and a copy that took the empty fetch for the
// end stopped with messages still coming (the long chaos run: 64 of them).
func TestMigrateBrowseEmptyFetchIsNotTheEnd(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	for _, subj := range []string{"orders.eu.1", "orders.eu.2"} {
		f.publish(t, subj, subj)
	}
	bcfg, err := Browse(f.sourceConfig(), 0)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := mustSource(t, bcfg)
	bs := src.(*browseSource)
	bs.cons = &lateConsumer{Consumer: bs.cons, empty: 2} // the first two fetches answer nothing
	ctx := ctxT(t, 10*time.Second)
	for i := range 2 {
		if ds, err := bs.Receive(ctx, 10); err != nil || len(ds) != 0 {
			t.Fatalf("late fetch %d: %d messages, %v", i, len(ds), err)
		}
		if bs.Drained() {
			t.Fatalf("drained after an empty fetch with both messages still in the stream")
		}
	}
	got := receiveN(t, src, 2, 10*time.Second)
	if string(got[1].Message().Body) != "orders.eu.2" {
		t.Fatalf("last browsed %q", got[1].Message().Body)
	}
	if ds, err := bs.Receive(ctx, 10); err != nil || len(ds) != 0 || !bs.Drained() {
		t.Fatalf("after the last message: %d more, %v, drained %v", len(ds), err, bs.Drained())
	}
}

// lateConsumer answers its first empty fetches with nothing, as a server
// that answers after the fetch's wait does.
type lateConsumer struct {
	jetstream.Consumer
	empty int
}

func (c *lateConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	if c.empty > 0 {
		c.empty--
		return emptyBatch{}, nil
	}
	return c.Consumer.Fetch(n, opts...)
}

type emptyBatch struct{}

func (emptyBatch) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg)
	close(ch)
	return ch
}

func (emptyBatch) Error() error { return nats.ErrTimeout }

// The dry-run sink renders the subject and encodes without a server.
func TestMigrateDrySink(t *testing.T) {
	t.Parallel()
	cfg := SinkConfig{ConnConfig: ConnConfig{URL: "nats://127.0.0.1:1"}, Subject: "orders.{attr.region}", MaxMessageSize: 1024}
	snk, err := NewDrySink(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := msg(string(make([]byte, 4096)), "region", "eu")
	errs := snk.Send(context.Background(), []*mapping.Message{msg("fine", "region", "eu"), big})
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("verdicts %v; want nil and a size refusal", errs)
	}
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A dry run (or copy) browses from the durable's ack floor: what an
// earlier move acknowledged is gone to its sink, and reading it again
// counted 2004 where the real run would read 4.
func TestMigrateBrowseStartsAtTheDurablesAckFloor(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	for i := 1; i <= 5; i++ {
		f.publish(t, "orders.eu."+strconv.Itoa(i), "orders.eu."+strconv.Itoa(i))
	}
	cfg := f.sourceConfig()
	src, _ := mustSource(t, cfg)
	ackAll(t, receiveN(t, src, 3, 10*time.Second))
	deadline := time.Now().Add(10 * time.Second)
	for f.consumerInfo(t, "bridge").AckFloor.Stream < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("ack floor %d, want 3", f.consumerInfo(t, "bridge").AckFloor.Stream)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := src.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := 6; i <= 7; i++ {
		f.publish(t, "orders.eu."+strconv.Itoa(i), "orders.eu."+strconv.Itoa(i))
	}
	bcfg, err := Browse(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	bsrc, _ := mustSource(t, bcfg)
	got := receiveN(t, bsrc, 4, 10*time.Second)
	for i, d := range got {
		if want := "orders.eu." + strconv.Itoa(i+4); string(d.Message().Body) != want {
			t.Fatalf("browsed %d: %q, want %q", i, d.Message().Body, want)
		}
	}
	if ds, err := bsrc.Receive(ctxT(t, 10*time.Second), 10); err != nil || len(ds) != 0 || !bsrc.(driver.Browser).Drained() {
		t.Fatalf("after the last message: %d more, %v, drained %v", len(ds), err, bsrc.(driver.Browser).Drained())
	}
}

// A migration never creates its source's stream: a mistyped name with
// create_stream = true used to "complete" empty and leave a new stream.
func TestMigrateSourceNeverCreatesItsStream(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	cfg := SourceConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, JetStream: &JetStreamSourceConfig{
		Stream: "ORDRES", Durable: "bridge", FilterSubjects: []string{"ordres.>"}, CreateStream: true,
		AckWait: "30s", FetchWait: "300ms",
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mcfg := ForMigration(cfg)
	ctx := ctxT(t, 20*time.Second)
	if _, err := CountSource(ctx, mcfg, nil); !driver.IsPermanent(err) || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("count of a missing stream: %v; want a permanent stream-not-found error", err)
	}
	src, err := NewSource(ctx, mcfg, nil)
	if err == nil {
		_ = src.Close(context.Background())
		t.Fatal("NewSource opened a source on a stream that does not exist")
	}
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), `"ORDRES" does not exist, and a migration does not create`) {
		t.Fatalf("NewSource: %v; want a permanent error saying the stream does not exist", err)
	}
	if _, err := f.js.Stream(ctx, "ORDRES"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream ORDRES after the migration's open: %v; want not found (it was created)", err)
	}
}

// Credentials the server refuses are permanent at the count and the open: a
// migration fails at once instead of retrying for -connect-timeout.
func TestMigrateRefusedCredentials(t *testing.T) {
	t.Parallel()
	srv := startServer(t, func(o *server.Options) { o.Username, o.Password = "bridge", "right" })
	js := &JetStreamSourceConfig{Stream: "ORDERS", Durable: "bridge", FilterSubjects: []string{"orders.>"},
		CreateStream: true, AckWait: "30s", FetchWait: "300ms"}
	cfg := func(pass string) SourceConfig {
		c := SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL(), User: "bridge", Password: pass}, JetStream: js}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return ForMigration(c)
	}
	ctx := ctxT(t, 20*time.Second)
	if _, err := CountSource(ctx, cfg("wrong"), nil); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("count with a wrong password: %v; want a permanent credentials error", err)
	}
	if src, err := NewSource(ctx, cfg("wrong"), nil); err == nil {
		_ = src.Close(context.Background())
		t.Fatal("NewSource opened with a wrong password")
	} else if !driver.IsPermanent(err) {
		t.Fatalf("NewSource with a wrong password: %v; want a permanent error", err)
	}
	// The stream does not exist yet: the count's answer, past the login.
	if _, err := CountSource(ctx, cfg("right"), nil); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("count with the right password: %v; want stream not found", err)
	}
}

// A migration refuses an existing durable whose filter is not the
// configuration's, in all its modes: the move did, but a dry run said what
// the durable's filter gives, and a copy copied it.
func TestMigrateRefusesADurableWithAnotherFilter(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	f.publish(t, "orders.eu.1", "eu")
	f.publish(t, "orders.us.1", "us")
	wide := f.sourceConfig()
	js := *wide.JetStream
	js.FilterSubjects = []string{"orders.>"}
	wide.JetStream = &js
	src, _ := mustSource(t, wide) // the daemon creates the durable on orders.>
	if err := src.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cfg := f.sourceConfig() // orders.eu.>
	ctx := ctxT(t, 20*time.Second)
	if _, err := NewSource(ctx, ForMigration(cfg), nil); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "[orders.>]") {
		t.Errorf("move: %v; want the durable refused", err)
	}
	bcfg, err := Browse(ForMigration(cfg), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := NewSource(ctx, bcfg, nil); err == nil {
		_ = s.Close(context.Background())
		t.Error("browse (dry run, copy): opened through the durable's other filter")
	} else if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "[orders.>]") {
		t.Errorf("browse: %v; want the durable refused", err)
	}
	// The daemon binds to it as it is.
	if s, err := NewSource(ctx, cfg, nil); err != nil {
		t.Errorf("daemon: %v", err)
	} else {
		_ = s.Close(context.Background())
	}
}

// A durable with no filter (the whole stream) is refused for a
// configuration that names one, by the browse as by the move: the dry run
// read what the configuration names while the count and the move took the
// whole stream.
func TestMigrateRefusesAnUnfilteredDurable(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	f.publish(t, "orders.eu.1", "eu")
	ctx := ctxT(t, 20*time.Second)
	if _, err := f.js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "bridge", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	cfg := f.sourceConfig()
	bcfg, err := Browse(ForMigration(cfg), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := NewSource(ctx, bcfg, nil); err == nil {
		_ = s.Close(context.Background())
		t.Error("browse opened through a durable with no filter")
	} else if !strings.Contains(err.Error(), "has no filter (the whole stream)") {
		t.Errorf("browse: %v", err)
	}
}

// The count of a stream that create_stream will make says the limits it
// will be made with (with no consumer yet): a migration into one made with
// stream_max_msgs 100 said complete, exit 0, after the stream dropped all
// but 100 (and with interest retention, all of them), where an existing
// stream with those limits is refused before anything moves (audit).
func TestCountSinkOfAStreamToBeMadeHasItsLimits(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t)
	for name, tc := range map[string]struct {
		lim         StreamLimitsConfig
		keepsAtMost int64
		keepsNone   bool
	}{
		"max_msgs": {lim: StreamLimitsConfig{MaxMsgs: 100}, keepsAtMost: 100},
		"interest": {lim: StreamLimitsConfig{Retention: "interest"}, keepsNone: true},
		"none":     {},
	} {
		cfg := SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: "new." + name,
			JetStream: &JetStreamSinkConfig{Stream: "NEW_" + name, CreateStream: true, StreamLimitsConfig: tc.lim}}
		got, err := CountSink(ctxT(t, 10*time.Second), cfg, nil)
		if err != nil {
			t.Fatalf("%s: CountSink: %v", name, err)
		}
		if got.KeepsAtMost != tc.keepsAtMost || got.KeepsNone != tc.keepsNone || (got.Limits == "") != (tc.keepsAtMost == 0 && !tc.keepsNone) || !got.Deduplicates || got.Ready != 0 {
			t.Errorf("%s: CountSink of a stream create_stream will make = %+v", name, got)
		}
	}
}

// A sink whose named stream does not store its subject cannot be counted,
// for good (a migration into it stalled for a minute and a half, and its
// dry run said complete): one that does, or a template, is counted.
func TestMigrateCountSinkRefusesAStreamWithoutItsSubject(t *testing.T) {
	t.Parallel()
	f := newJSFixture(t) // stream ORDERS stores orders.>
	for _, tc := range []struct {
		subject string
		refused bool
	}{
		{"orders.in", false},
		{"orders.eu.{attr.x}", false},
		{"nostream.orders", true},
		{"orders", true},
	} {
		cfg := SinkConfig{ConnConfig: ConnConfig{URL: f.srv.ClientURL()}, Subject: tc.subject, JetStream: &JetStreamSinkConfig{Stream: "ORDERS"}}
		_, err := CountSink(ctxT(t, 10*time.Second), cfg, nil)
		if refused := err != nil && driver.IsPermanent(err) && strings.Contains(err.Error(), "does not store the sink subject"); refused != tc.refused {
			t.Errorf("%s: %v; refused %v, want %v", tc.subject, err, refused, tc.refused)
		}
	}
}
