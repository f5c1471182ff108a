package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/internal/e2etest"
)

// The e2e tests of issue 3: the real qbridge daemon, configured in HCL,
// between real nats-servers embedded in the test binary.

func natsIn(g int) string { return fmt.Sprintf("in.%s", natsGroup(g)) }

// TestNatsOrderManyGroups: 50 groups × 40 messages, published interleaved,
// reach the sink stream with every group in publish order and none
// missing, while the engine runs many groups concurrently (max_in_flight
// 2000, per_group 1).
func TestNatsOrderManyGroups(t *testing.T) {
	t.Parallel()
	const groups, per = 50, 40
	s := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, s.URL())
	natsCreateStream(t, js, "IN", "in.>")
	natsCreateStream(t, js, "OUT", "out.>")
	// Published before the daemon starts, so its first fetches hold many
	// messages of every group at once.
	natsPublishGrouped(t, js, natsIn, groups, per, 0)

	d := startDaemon(t, natsPipeline("order", s.URL(), "IN", "order", s.URL(), "out.{group}", ""))
	out := natsCollect(t, js, "OUT")
	out.WaitUnique(groups*per, 30*time.Second, d)
	if dups := natsCheckOrder(t, out.Records(), groups, per); dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	for _, r := range out.Records() {
		if want := "out." + natsGroup(r.Group); r.Subject != want {
			t.Fatalf("%s arrived on %s, want %s", r.Body, r.Subject, want)
		}
		if r.Header.Get("Qbridge-Group") != natsGroup(r.Group) {
			t.Fatalf("%s: group header %q", r.Body, r.Header.Get("Qbridge-Group"))
		}
	}
	eventually(t, 10*time.Second, "every message acked", func() bool {
		return d.metric("qbridge_messages_acked_total") == groups*per
	})
	if n := d.metric("qbridge_messages_sent_total"); n != groups*per {
		t.Errorf("sent_total = %v, want %d", n, groups*per)
	}
}

// TestNatsSinkOutage: the sink's server (a second nats-server) goes down
// for a few seconds in the middle of the stream and comes back; every
// message arrives, each group in order, and the retries show in the
// metrics.
func TestNatsSinkOutage(t *testing.T) {
	t.Parallel()
	const groups, per = 20, 50
	src := e2etest.StartNATS(t)
	dst := e2etest.StartNATS(t)
	_, sjs := e2etest.ConnectNATS(t, src.URL())
	_, djs := e2etest.ConnectNATS(t, dst.URL())
	natsCreateStream(t, sjs, "IN", "in.>")
	natsCreateStream(t, djs, "OUT", "out.>")

	d := startDaemon(t, natsPipeline("outage", src.URL(), "IN", "outage", dst.URL(), "out.{group}", ""))
	natsPublishGrouped(t, sjs, natsIn, groups, per/2, 0)
	eventually(t, 20*time.Second, "the first messages sent", func() bool {
		return d.metric("qbridge_messages_sent_total") >= 100
	})
	dst.Stop()
	// Publish the rest while the sink is down: they queue up in groups.
	natsPublishGrouped(t, sjs, natsIn, groups, per-per/2, per/2)
	eventually(t, 20*time.Second, "sends retried", func() bool {
		return d.metric("qbridge_messages_retried_total") > 0
	})
	// The sink stays down until the engine has retried again (it keeps
	// trying, rather than giving up after the first failure).
	retried := d.metric("qbridge_messages_retried_total")
	eventually(t, 20*time.Second, "a later retry", func() bool {
		return d.metric("qbridge_messages_retried_total") > retried
	})
	dst.Start()

	out := natsCollect(t, djs, "OUT")
	out.WaitUnique(groups*per, 40*time.Second, d)
	dups := natsCheckOrder(t, out.Records(), groups, per)
	retried = d.metric("qbridge_messages_retried_total")
	t.Logf("sink outage: %d messages, %v retries, %d duplicates at the sink", groups*per, retried, dups)
	eventually(t, 10*time.Second, "every message acked", func() bool {
		return d.metric("qbridge_messages_acked_total") >= groups*per
	})
	if n := d.metric("qbridge_messages_dead_lettered_total"); n != 0 {
		t.Errorf("dead_lettered_total = %v during a transient outage", n)
	}
}

// TestNatsKillAndRestart: the daemon is killed with SIGKILL while it moves
// 2,000 grouped messages and started again on the same configuration.
// Every message arrives at least once, the first arrivals of every group
// are in publish order, and the sink's Nats-Msg-Id deduplication removes
// the redelivered copies.
func TestNatsKillAndRestart(t *testing.T) {
	t.Parallel()
	const groups, per, rounds = 40, 50, 10
	s := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, s.URL())
	natsCreateStream(t, js, "IN", "in.>")
	outStream := natsCreateStream(t, js, "OUT", "out.>")

	// ack_wait is 5s: the killed daemon's unacknowledged messages come back
	// that long after the kill, and the second daemon fetches nothing new
	// until they did (so each group stays in order).
	d := startDaemon(t, natsPipeline("kill", s.URL(), "IN", "kill", s.URL(), "out.{group}", ""))
	// Published while the daemon runs, paced, so that the kill lands in
	// the middle of the stream.
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range rounds {
			natsPublishGrouped(t, js, natsIn, groups, per/rounds, r*per/rounds)
			time.Sleep(50 * time.Millisecond)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	stored := func() uint64 {
		info, err := outStream.Info(natsCtx(t, 5*time.Second))
		if err != nil {
			return 0
		}
		return info.State.Msgs
	}
	for stored() < groups*per/3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	d.Kill()
	before := stored()
	wg.Wait()
	out := natsCollect(t, js, "OUT")

	d2 := startDaemonConfig(t, d.config)
	out.WaitUnique(groups*per, 40*time.Second, d2)
	// Let late redeliveries land before counting duplicates.
	eventually(t, 15*time.Second, "the consumer settled", func() bool {
		cons, err := js.Consumer(natsCtx(t, 5*time.Second), "IN", "kill")
		if err != nil {
			return false
		}
		info, err := cons.Info(natsCtx(t, 5*time.Second))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	dups, disorder := natsCheckOrderAfterRestart(t, out.Records(), groups, per)
	st, err := js.Stream(natsCtx(t, 5*time.Second), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 after %d of %d messages: %d duplicates in the sink stream (%d stored), %v received by the second daemon, %d first arrivals out of group order",
		before, groups*per, dups, st.CachedInfo().State.Msgs, d2.metric("qbridge_messages_received_total"), disorder)
}

// TestNatsDeadLetter: messages the mapping cannot handle (group_key needs
// the attribute "tenant", which they lack) go to the dead-letter sink with
// DeadLetterReason "mapping" and the error as DeadLetterErrorDescription;
// the good ones flow on, and the metric counts the dead letters. A second
// pipeline with dead_letter { native = true } terminates them in JetStream
// (the reason is in the server's MSG_TERMINATED advisory).
func TestNatsDeadLetter(t *testing.T) {
	t.Parallel()
	s := e2etest.StartNATS(t)
	nc, js := e2etest.ConnectNATS(t, s.URL())
	natsCreateStream(t, js, "IN", "in.>")
	natsCreateStream(t, js, "IN2", "in2.>")
	natsCreateStream(t, js, "OUT", "out.>")
	natsCreateStream(t, js, "DLQ", "dlq")
	adv, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.IN2.native")
	if err != nil {
		t.Fatal(err)
	}

	cfg := natsPipeline("dlq", s.URL(), "IN", "dlq", s.URL(), "out.{group}", fmt.Sprintf(`
  dead_letter {
    sink "nats" {
      url     = %q
      subject = "dlq"
      jetstream {
        stream = "DLQ"
      }
    }
  }`, s.URL()))
	native := strings.Replace(natsPipeline("native", s.URL(), "IN2", "native", s.URL(), "out.native.{group}", `
  dead_letter {
    native = true
  }`), `"in.>"`, `"in2.>"`, 1)
	d := startDaemon(t, cfg+native)

	const good, bad = 30, 5
	for i := range good + bad {
		for _, prefix := range []string{"in.", "in2."} {
			m := nats.NewMsg(prefix + "x")
			m.Data = []byte(natsBody(0, i))
			if i%7 != 3 || i/7 >= bad { // 5 without tenant: i = 3, 10, 17, 24, 31
				m.Header.Set("tenant", natsGroup(0))
			} else {
				m.Data = []byte(fmt.Sprintf("bad:%d", i))
				m.Header.Set("note", "no tenant")
			}
			if _, err := js.PublishMsg(natsCtx(t, 5*time.Second), m); err != nil {
				t.Fatal(err)
			}
		}
	}

	dlq := natsCollect(t, js, "DLQ")
	goodOut := natsCollect(t, js, "OUT", "out.tenant-000")
	nativeOut := natsCollect(t, js, "OUT", "out.native.tenant-000")
	dlq.WaitUnique(bad, 20*time.Second, d)
	goodOut.WaitUnique(good, 20*time.Second, d)
	nativeOut.WaitUnique(good, 20*time.Second, d)
	for _, r := range dlq.Records() {
		if !strings.HasPrefix(r.Body, "bad:") {
			t.Errorf("dead-lettered a good message: %q", r.Body)
		}
		if got := r.Header.Get("DeadLetterReason"); got != "mapping" {
			t.Errorf("%s: DeadLetterReason = %q, want mapping", r.Body, got)
		}
		if desc := r.Header.Get("DeadLetterErrorDescription"); !strings.Contains(desc, "tenant") {
			t.Errorf("%s: DeadLetterErrorDescription = %q, want it to name the attribute", r.Body, desc)
		}
		if r.Header.Get("note") != "no tenant" {
			t.Errorf("%s: the dead letter lost the original attribute: %v", r.Body, r.Header)
		}
	}
	// The good messages are in order, the bad ones left out of their group.
	var seqs []int
	for _, r := range goodOut.Records() {
		seqs = append(seqs, r.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("good messages out of order: %v", seqs)
		}
	}
	eventually(t, 10*time.Second, "dead letters counted", func() bool {
		return d.metric("qbridge_messages_dead_lettered_total", "pipeline=dlq", "reason=mapping") == bad &&
			d.metric("qbridge_messages_dead_lettered_total", "pipeline=native", "reason=mapping") == bad
	})
	// Native: each bad message was terminated with its reason.
	for range bad {
		m, err := adv.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("MSG_TERMINATED advisory: %v", err)
		}
		if !strings.Contains(string(m.Data), `"reason":"mapping: `) || !strings.Contains(string(m.Data), "tenant") {
			t.Errorf("advisory without the reason: %s", m.Data)
		}
	}
	eventually(t, 10*time.Second, "native consumer settled", func() bool {
		cons, err := js.Consumer(natsCtx(t, 5*time.Second), "IN2", "native")
		if err != nil {
			return false
		}
		info, err := cons.Info(natsCtx(t, 5*time.Second))
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
}

// TestNatsGracefulShutdownInFlight: the sink's server is down, so sends
// are retried and messages are held. SIGTERM makes the daemon exit 0 within
// shutdown_timeout, having acknowledged only what the sink confirmed; after
// a restart with the sink back, everything arrives in order.
func TestNatsGracefulShutdownInFlight(t *testing.T) {
	t.Parallel()
	const groups, per = 10, 30
	src := e2etest.StartNATS(t)
	dst := e2etest.StartNATS(t)
	_, sjs := e2etest.ConnectNATS(t, src.URL())
	_, djs := e2etest.ConnectNATS(t, dst.URL())
	natsCreateStream(t, sjs, "IN", "in.>")
	natsCreateStream(t, djs, "OUT", "out.>")

	d := startDaemon(t, natsPipeline("drain", src.URL(), "IN", "drain", dst.URL(), "out.{group}", ""))
	natsPublishGrouped(t, sjs, natsIn, groups, 5, 0)
	eventually(t, 20*time.Second, "the first messages acked", func() bool {
		return d.metric("qbridge_messages_acked_total") == groups*5
	})
	dst.Stop()
	natsPublishGrouped(t, sjs, natsIn, groups, per-5, 5)
	eventually(t, 20*time.Second, "messages held and retried", func() bool {
		return d.metric("qbridge_messages_retried_total") > 0 && d.metric("qbridge_in_flight") == groups*(per-5)
	})
	acked := d.metric("qbridge_messages_acked_total")
	start := time.Now()
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, e2etest.Tail(d.Logs(), 30))
	}
	took := time.Since(start)
	t.Logf("SIGTERM with %d messages in flight: exit 0 after %s (shutdown_timeout 5s); %v acked before", groups*(per-5), took.Round(time.Millisecond), acked)
	if took > 5*time.Second+3*time.Second {
		t.Errorf("stop took %s, more than shutdown_timeout (5s) + 3s", took)
	}
	if acked != groups*5 {
		t.Errorf("acked %v messages while the sink was down, want %d", acked, groups*5)
	}
	// The source agrees: its ack floor is the last message the sink
	// confirmed, and everything after it is still there to deliver.
	cons, err := sjs.Consumer(natsCtx(t, 5*time.Second), "IN", "drain")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(natsCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != groups*5 {
		t.Errorf("source ack floor at stream seq %d, want %d", info.AckFloor.Stream, groups*5)
	}

	dst.Start()
	d2 := startDaemonConfig(t, d.config)
	out := natsCollect(t, djs, "OUT")
	out.WaitUnique(groups*per, 30*time.Second, d2)
	dups, disorder := natsCheckOrderAfterRestart(t, out.Records(), groups, per)
	t.Logf("after the restart: all %d arrived, %d duplicates, %d first arrivals out of group order", groups*per, dups, disorder)
}

// TestNatsValidate: qbridge validate reports bad configurations with
// file:line:col and what it expected (exit 1), and accepts every example
// in configs/ (exit 0).
func TestNatsValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name, src string
		want      []string // each must appear in stderr
	}{
		{"unknown-field", `
pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
    bogus   = 1
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "b"
  }
}
`, []string{"unknown-field.hcl:6:5", `An argument named "bogus" is not expected here`}},
		{"missing-required", `
pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
  }
  sink "nats" {
    url = "nats://127.0.0.1:4222"
  }
}
`, []string{"missing-required.hcl:7:3", "subject: required"}},
		{"missing-sink", `
pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
  }
}
`, []string{"missing-sink.hcl:2:1", "needs a sink block"}},
		{"bad-duration", `
pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "b"
  }
  retry {
    initial = "5x"
  }
}
`, []string{"bad-duration.hcl:12:15", `"5x" for "initial" is not a duration`, `"500ms"`}},
		{"unknown-kind", `
pipeline "p" {
  source "kafka" {
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "b"
  }
}
`, []string{"unknown-kind.hcl:3:10", `Unknown adapter kind "kafka"`, `"nats"`}},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name+".hcl")
		if err := os.WriteFile(path, []byte(c.src), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runQbridge(t, "validate", path)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s", c.name, code, stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, w, stderr)
			}
		}
	}

	files, err := filepath.Glob("../configs/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs/*.hcl (%v)", err)
	}
	// env("NAME") without a default is an error when unset: give every
	// variable the examples name a dummy value.
	envRe := regexp.MustCompile(`env\(\s*"([A-Za-z_][A-Za-z0-9_]*)"`)
	var env []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envRe.FindAllStringSubmatch(string(b), -1) {
			env = append(env, m[1])
		}
	}
	environ := os.Environ()
	for _, name := range env {
		if os.Getenv(name) == "" {
			environ = append(environ, name+"="+natsDummyEnv(name))
		}
	}
	for _, f := range files {
		cmd := exec.Command(qbridgeBin, "validate", f)
		cmd.Env = environ
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": ok") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}

// natsDummyEnv is a value for an environment variable an example config
// reads: shaped like what its name asks for, so the adapters' checks pass,
// and naming a queue or address of its own (one value for all would make a
// dead-letter queue the source, which validate refuses).
func natsDummyEnv(name string) string {
	n := strings.ToUpper(name)
	own := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch {
	case strings.Contains(n, "CONNECTION_STRING"):
		return "Endpoint=sb://example.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=ZHVtbXk="
	case strings.Contains(n, "QUEUE_URL") || strings.Contains(n, "SQS") && strings.HasSuffix(n, "_URL"):
		return "https://sqs.eu-west-1.amazonaws.com/123456789012/" + own
	case strings.Contains(n, "NATS") && strings.Contains(n, "URL"):
		return "nats://127.0.0.1:4222"
	case strings.Contains(n, "AMQP") && (strings.Contains(n, "URL") || strings.Contains(n, "ADDR")):
		return "amqp://guest:guest@127.0.0.1:5672/"
	case strings.Contains(n, "URL") || strings.Contains(n, "ENDPOINT"):
		return "http://127.0.0.1:9324"
	case strings.Contains(n, "REGION"):
		return "eu-west-1"
	case strings.Contains(n, "PORT"):
		return "4222"
	default:
		return own
	}
}

// TestNatsReload: the sink subject changes in the file and SIGHUP applies
// it while messages keep coming. Nothing is lost, each group stays in
// order across the switch, and what is published after the reload goes to
// the new subject.
func TestNatsReload(t *testing.T) {
	t.Parallel()
	const groups = 10
	s := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, s.URL())
	natsCreateStream(t, js, "IN", "in.>")
	natsCreateStream(t, js, "OUT", "out.>")
	oldCfg := natsPipeline("reload", s.URL(), "IN", "reload", s.URL(), "out.old.{group}", "")
	d := startDaemon(t, oldCfg)
	cfg, err := os.ReadFile(d.config)
	if err != nil {
		t.Fatal(err)
	}

	// A publisher that keeps going through the second reload.
	var published atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			natsPublishGrouped(t, js, natsIn, groups, 1, seq)
			published.Store(int64(seq + 1))
			time.Sleep(5 * time.Millisecond) // paced: a steady stream across the reload
		}
	})
	out := natsCollect(t, js, "OUT")
	eventually(t, 20*time.Second, "messages on the old subject", func() bool { return out.Unique() >= 200 })

	newCfg := strings.Replace(string(cfg), `"out.old.{group}"`, `"out.new.{group}"`, 1)
	if err := os.WriteFile(d.config, []byte(newCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	eventually(t, 20*time.Second, "second reload", func() bool {
		return strings.Contains(d.Logs(), "configuration reloaded")
	})
	after := int(published.Load()) // every seq from here on is published after the reload
	d.waitReady(20 * time.Second)
	// The new configuration carries messages before the publisher stops.
	eventually(t, 20*time.Second, "messages on the new subject", func() bool {
		n := 0
		for _, r := range out.Records() {
			if strings.HasPrefix(r.Subject, "out.new.") {
				n++
			}
		}
		return n >= 100
	})
	close(stop)
	wg.Wait()
	per := int(published.Load())
	out.WaitUnique(groups*per, 30*time.Second, d)
	recs := out.Records()
	dups := natsCheckOrder(t, recs, groups, per)
	var oldN, newN int
	switched := make([]bool, groups)
	for _, r := range recs {
		isNew := strings.HasPrefix(r.Subject, "out.new.")
		if isNew {
			newN++
			switched[r.Group] = true
		} else {
			oldN++
			if switched[r.Group] {
				t.Errorf("%s on the old subject after its group moved to the new one", r.Body)
			}
			if r.Seq >= after+1 {
				t.Errorf("%s (published after the reload) on the old subject %s", r.Body, r.Subject)
			}
		}
	}
	if newN == 0 {
		t.Error("nothing arrived on the new subject")
	}
	t.Logf("reload under load: %d messages, %d on out.old, %d on out.new, %d duplicates", groups*per, oldN, newN, dups)
}
