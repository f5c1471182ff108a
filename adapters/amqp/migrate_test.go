package amqp

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// RabbitMQ 3.10's AMQP 1.0 plugin echoes distribution-mode copy in its
// attach reply, yet the messages a copy link reads are gone from the queue
// afterwards (tried while writing this adapter). So a browsing source on
// RabbitMQ 3.x fails to open, naming the broker, before it attaches
// anything, and the queue keeps its messages.
func TestBrowseRabbitMQ(t *testing.T) {
	url := brokerURL(t)
	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("m1"), textMsg("m2")})

	cfg, err := Browse(SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q}, 0)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := testLog(t)
	src, err := NewSource(ctxT(t, 30*time.Second), cfg, log)
	if err == nil {
		_ = src.Close(context.Background())
		t.Fatal("a browsing source opened on RabbitMQ 3.x")
	}
	if !errors.Is(err, driver.ErrCannotBrowse) || !strings.Contains(err.Error(), "RabbitMQ 3.") {
		t.Fatalf("NewSource in browse mode: %v; want ErrCannotBrowse naming RabbitMQ 3.x", err)
	}
	t.Logf("refused: %v", err)
	plain, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	for _, want := range []string{"m1", "m2"} { // credit 1 on RabbitMQ 3.x: ack each to get the next
		d := receiveN(t, plain, 1, 10*time.Second)[0]
		if d.Message().ID != want {
			t.Fatalf("after the refused browse the queue holds %q, want %q", d.Message().ID, want)
		}
		if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// The dry-run sink reaches the sink's verdicts without a connection.
func TestDrySink(t *testing.T) {
	t.Parallel()
	cfg := SinkConfig{ConnConfig: ConnConfig{URL: "amqp://127.0.0.1:1"}, Address: "/queue/{attr.region}", MaxMessageSize: 1024}
	snk, err := NewDrySink(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := textMsg("fine")
	ok.SetAttr("region", mapping.String("eu"))
	big := textMsg("big")
	big.SetAttr("region", mapping.String("eu"))
	big.Body = []byte(strings.Repeat("x", 4096))
	errs := snk.Send(context.Background(), []*mapping.Message{ok, big, textMsg("no region")})
	if errs[0] != nil {
		t.Errorf("fine: %v", errs[0])
	}
	for i := 1; i < 3; i++ {
		if !driver.IsPermanent(errs[i]) {
			t.Errorf("message %d: %v, want a permanent refusal", i, errs[i])
		}
	}
	if _, err := Browse(SourceConfig{}, 5); !errors.Is(err, driver.ErrCannotBrowse) {
		t.Errorf("Browse after 5: %v", err)
	}
	// The engine asks every sink whether it is ready: a dry sink has no
	// connection, and is (it panicked on the redialer it never had).
	if err := snk.(driver.ReadyChecker).Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// A migration's source does not create its queue: RabbitMQ 3.x declares
// /queue/NAME on attach, so a mistyped address "completed" with nothing
// read. Attached as /amq/queue/NAME, a missing queue fails for good, and
// an existing one is read as before.
func TestMigrateSourceDoesNotCreateQueue(t *testing.T) {
	url := brokerURL(t)
	missing := queue(t)
	log, _ := testLog(t)
	src, err := NewSource(ctxT(t, 30*time.Second), ForMigration(SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: missing}), log)
	if err == nil {
		_ = src.Close(context.Background())
		t.Fatal("a migration's source opened on a queue that does not exist")
	}
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "does not exist, and a migration does not create its source") {
		t.Fatalf("NewSource: %v; want a permanent error saying the queue does not exist", err)
	}
	// Not created: attaching where RabbitMQ declares nothing still fails.
	if _, err := NewSource(ctxT(t, 30*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: "/amq" + missing}, log); !isNotFound(err) {
		t.Fatalf("the queue exists after the migration's attach: %v", err)
	}

	q := queue(t)
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("m1")})
	mcfg := ForMigration(SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q})
	set, err := mcfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSource(ctxT(t, 30*time.Second), set, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	d := receiveN(t, s, 1, 10*time.Second)[0]
	if d.Message().ID != "m1" || d.Message().Source.Address != q {
		t.Fatalf("read %q from %q, want m1 from %q", d.Message().ID, d.Message().Source.Address, q)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// A password the broker refuses is permanent at the open, for the source
// and the sink: a migration fails at once instead of retrying for
// -connect-timeout (the engine still retries). go-amqp gives the SASL
// outcome as text only; this test is what notices if that text changes.
func TestRefusedCredentialsArePermanent(t *testing.T) {
	u, err := neturl.Parse(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), "wrong")
	log, _ := testLog(t)
	q := queue(t)
	src, err := NewSource(ctxT(t, 30*time.Second), SourceConfig{ConnConfig: ConnConfig{URL: u.String()}, Address: q}, log)
	if err == nil {
		_ = src.Close(context.Background())
		t.Fatal("the source opened with a wrong password")
	}
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("NewSource: %v; want a permanent credentials error that does not show the password", err)
	}
	snk, err := NewSink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: ConnConfig{URL: u.String()}, Address: q}, nil, log)
	if err == nil {
		_ = snk.Close(context.Background())
		t.Fatal("the sink opened with a wrong password")
	}
	if !driver.IsPermanent(err) {
		t.Fatalf("NewSink: %v; want a permanent error", err)
	}
}

// Ping is a round trip with the broker (driver.Pinger, for qbridge
// migrate's idle verdict: an AMQP broker cannot count a queue): answered
// on a live connection, an error once the source is closed.
func TestSourcePing(t *testing.T) {
	s, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: brokerURL(t)}, Address: queue(t)})
	if err := s.Ping(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctxT(t, 2*time.Second)); err == nil {
		t.Fatal("Ping answered on a closed source")
	}
}

// Credentials are refused for good only where every endpoint refused them:
// one endpoint refusing while another was unreachable may be a broker
// about to take them.
func TestAllRefused(t *testing.T) {
	refused := credentialsRefused(errors.New("SASL PLAIN auth failed with code 0x1: "))
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"one endpoint, refused", fmt.Errorf("amqp source: connect: %w", errors.Join(fmt.Errorf("a: %w", refused))), true},
		{"two endpoints, both refused", fmt.Errorf("amqp sink: connect: %w", errors.Join(fmt.Errorf("a: %w", refused), fmt.Errorf("b: %w", refused))), true},
		{"one refused, one down", fmt.Errorf("amqp sink: connect: %w", errors.Join(fmt.Errorf("a: %w", refused), fmt.Errorf("b: %w", down))), false},
		{"down", fmt.Errorf("amqp source: connect: %w", errors.Join(down)), false},
	} {
		if got := driver.IsPermanent(atOpen(tc.err)); got != tc.want {
			t.Errorf("%s: permanent %v, want %v", tc.name, got, tc.want)
		}
	}
}

// RabbitMQ 3.x attaches a sender to a missing /amq/queue/NAME and accepts
// every transfer to it, which it drops: the sink checks that the queue
// exists. A fixed address fails the start for good; a templated one
// refuses the messages it renders there, which go to the dead-letter
// destination; an existing queue takes them.
func TestSinkRefusesAMissingAmqQueue(t *testing.T) {
	url := brokerURL(t)
	missing := "/amq/queue/qb-missing-" + strings.TrimPrefix(queue(t), "/queue/")
	log, _ := testLog(t)
	_, err := NewSink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: missing}, nil, log)
	if err == nil || !driver.IsPermanent(err) || !errors.Is(err, errNoQueue) {
		t.Fatalf("a fixed missing /amq/queue/ address: %v; want a permanent errNoQueue", err)
	}
	// The queue exists once a /queue/ sender declared it.
	existing := queue(t)
	decl, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: existing, TargetDurable: true})
	sendAll(t, decl, []*mapping.Message{textMsg("declared")})
	// Declared durable, addressed as a non-durable /queue/ terminus: the
	// broker refuses (precondition-failed) until the address is mended,
	// so that fails the start for good too (a migration retried it until
	// -connect-timeout).
	if _, err := NewSink(ctxT(t, 30*time.Second), SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: existing}, nil, log); err == nil || !driver.IsPermanent(err) {
		t.Errorf("a durable queue as a non-durable terminus: %v; want a permanent refusal", err)
	}
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: "/amq/queue/{attr.q}"})
	there, lost := textMsg("there"), textMsg("lost")
	there.SetAttr("q", mapping.String(strings.TrimPrefix(existing, "/queue/")))
	lost.SetAttr("q", mapping.String(strings.TrimPrefix(missing, "/amq/queue/")))
	errs := snk.Send(ctxT(t, 30*time.Second), []*mapping.Message{there, lost, there})
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("to the existing queue: %v, %v", errs[0], errs[2])
	}
	if !driver.IsPermanent(errs[1]) || !errors.Is(errs[1], errNoQueue) {
		t.Errorf("to the missing queue: %v; want a permanent errNoQueue", errs[1])
	}
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: "/amq" + existing})
	var got []string
	for range 3 { // credit 1 on RabbitMQ 3.x: one at a time
		d := receiveN(t, src, 1, 30*time.Second)[0]
		got = append(got, string(d.Message().Body))
		if err := d.Ack(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[body of declared body of there body of there]" {
		t.Errorf("the existing queue holds %v", got)
	}
}
