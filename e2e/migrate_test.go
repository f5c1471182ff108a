package e2e

// qbridge migrate end to end: the real binary against real brokers, checked
// by counting on the brokers themselves and by the JSON report.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/migrate"
	"github.com/qbridge/qbridge/internal/testlog"
)

// migWriteConfig writes pipeline blocks into a configuration file.
func migWriteConfig(t testing.TB, hcl string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "migrate.hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// migration is a running "qbridge migrate".
type migration struct {
	cmd       *exec.Cmd
	out, errb testlog.Buffer
	done      chan struct{}
	code      int
}

func migStart(t testing.TB, args ...string) *migration {
	t.Helper()
	m := &migration{done: make(chan struct{})}
	m.cmd = exec.Command(qbridgeBin, append([]string{"migrate"}, args...)...)
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.errb
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := m.cmd.Wait()
		m.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			m.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				m.code = -int(ws.Signal())
			}
		}
		close(m.done)
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("qbridge migrate stdout:\n%s\nstderr:\n%s", m.out.String(), e2etest.Tail(m.errb.String(), 60))
		}
	})
	return m
}

// wait returns the exit code (negative: killed by that signal).
func (m *migration) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-m.done:
		return m.code
	case <-time.After(timeout):
		t.Fatalf("qbridge migrate still running after %s:\n%s\n%s", timeout, m.out.String(), e2etest.Tail(m.errb.String(), 40))
		return 0
	}
}

// migRun runs a migration to its end and returns its exit code and report.
func migRun(t testing.TB, timeout time.Duration, args ...string) (int, *migrate.Report, *migration) {
	t.Helper()
	report := filepath.Join(t.TempDir(), fmt.Sprintf("report-%d.json", time.Now().UnixNano()))
	m := migStart(t, append([]string{"-yes", "-report", report}, args...)...)
	code := m.wait(t, timeout)
	return code, migReadReport(t, report), m
}

func migReadReport(t testing.TB, path string) *migrate.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the report: %v", err)
	}
	var r migrate.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("the report %s: %v", b, err)
	}
	return &r
}

// migCheckpoint is the checkpoint a copy's -state file holds for job (0
// while there is none: the file is written first with the copy's lease,
// before any checkpoint).
func migCheckpoint(t testing.TB, state, job string) uint64 {
	t.Helper()
	b, err := os.ReadFile(state)
	if err != nil || len(b) == 0 {
		return 0
	}
	var st struct {
		Checkpoints map[string]struct {
			After uint64 `json:"after"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0 // being written
	}
	return st.Checkpoints[job].After
}

// migJSPipeline is the e2e JetStream → JetStream pipeline (natsPipeline)
// named "mig", whose group key is the "tenant" header.
func migJSPipeline(url, srcStream, durable, sinkSubject string) string {
	return natsPipeline("mig", url, srcStream, durable, url, sinkSubject, "")
}

func migStreamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	st, err := js.Stream(natsCtx(t, 10*time.Second), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(natsCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func migConsumerPending(t testing.TB, js jetstream.JetStream, stream, durable string) (pending uint64, ackPending int) {
	t.Helper()
	c, err := js.Consumer(natsCtx(t, 10*time.Second), stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(natsCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending, info.NumAckPending
}

// JetStream stream → JetStream: every message, per-group order exact, the
// report's counts, progress log lines with the figures.
func TestMigrateJetStreamToJetStream(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 40, 50
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	out := natsCollect(t, js, "MIG_OUT")
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))

	code, rep, m := migRun(t, 90*time.Second, "-idle", "1s", "-progress", "log", "-progress-every", "200ms", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != groups*per || j.Acknowledged != groups*per || j.Groups != groups || !j.Drained {
		t.Errorf("report: written %d, acknowledged %d, groups %d, drained %v", j.Written, j.Acknowledged, j.Groups, j.Drained)
	}
	if j.DrainedBy != "count" {
		t.Errorf("drained by %q: JetStream counts (consumer pending)", j.DrainedBy)
	}
	if j.SourceBefore == nil || j.SourceBefore.Pending() != groups*per || j.SourceAfter == nil || j.SourceAfter.Pending() != 0 {
		t.Errorf("source counts: before %+v, after %+v", j.SourceBefore, j.SourceAfter)
	}
	out.WaitUnique(groups*per, 30*time.Second, nil)
	if dups := natsCheckOrder(t, out.Records(), groups, per); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if n := migStreamMsgs(t, js, "MIG_OUT"); n != groups*per {
		t.Errorf("sink stream holds %d, want %d", n, groups*per)
	}
	// Progress lines carry the figures; the last says it finished.
	logs := m.errb.String()
	if !regexp.MustCompile(`msg="migration started" pipeline=mig total=2000`).MatchString(logs) {
		t.Errorf("no start line with the total:\n%s", e2etest.Tail(logs, 20))
	}
	if !regexp.MustCompile(`msg="migration finished" pipeline=mig moved=2000 total=2000 percent=100.0 rate=\d+/s .*dead_lettered=0 .*outcome=complete`).MatchString(logs) {
		t.Errorf("no finish line with the figures:\n%s", e2etest.Tail(logs, 20))
	}
	if !strings.Contains(m.out.String(), "written 2000, acknowledged 2000") {
		t.Errorf("summary:\n%s", m.out.String())
	}
}

// -parallel 3 with three JetStream pipelines whose sinks name their
// streams: each pipeline moves every message of its own stream, in order
// per group, and is verified against its own sink's count. The
// configuration's log level is warn; progress lines are written anyway.
func TestMigrateParallelJetStream(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	const groups, per = 10, 60
	var hcl strings.Builder
	outs := make([]*natsCollector, 3)
	for i := range 3 {
		natsCreateStream(t, js, fmt.Sprintf("PAR_IN%d", i), fmt.Sprintf("in%d.>", i))
		natsCreateStream(t, js, fmt.Sprintf("PAR_OUT%d", i), fmt.Sprintf("out%d.>", i))
		natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in%d.%d", i, g) }, groups, per, 0)
		outs[i] = natsCollect(t, js, fmt.Sprintf("PAR_OUT%d", i))
		p := natsPipeline(fmt.Sprintf("par%d", i), ns.URL(), fmt.Sprintf("PAR_IN%d", i), "mig", ns.URL(), fmt.Sprintf("out%d.x", i), "")
		p = strings.Replace(p, `subject        = "in.>"`, fmt.Sprintf(`subject        = "in%d.>"`, i), 1)
		p = strings.Replace(p, `ack_timeout = "2s"`, fmt.Sprintf("ack_timeout = \"2s\"\n      stream      = \"PAR_OUT%d\"", i), 1)
		hcl.WriteString(p)
	}
	// A sidecar's log level: progress lines are written all the same.
	cfg := migWriteConfig(t, "log {\n  level = \"warn\"\n}\n"+hcl.String())

	code, rep, m := migRun(t, 2*time.Minute, "-parallel", "3", "-idle", "1s", "-progress", "log", "-progress-every", "500ms", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if len(rep.Jobs) != 3 {
		t.Fatalf("%d jobs in the report, want 3", len(rep.Jobs))
	}
	for i, j := range rep.Jobs {
		if j.Pipeline != fmt.Sprintf("par%d", i) || j.Written != groups*per || j.Verification == nil || !j.Verification.Verified ||
			j.SinkBefore == nil || j.SinkAfter == nil || j.SinkAfter.Ready-j.SinkBefore.Ready != groups*per {
			t.Errorf("job %d: %s written %d, sink %+v → %+v, verification %+v", i, j.Pipeline, j.Written, j.SinkBefore, j.SinkAfter, j.Verification)
		}
		outs[i].WaitUnique(groups*per, 30*time.Second, nil)
		if dups := natsCheckOrder(t, outs[i].Records(), groups, per); dups != 0 {
			t.Errorf("par%d: %d duplicates", i, dups)
		}
	}
	if rep.Totals.Written != 3*groups*per {
		t.Errorf("totals: written %d", rep.Totals.Written)
	}
	for i := range 3 {
		if !strings.Contains(m.errb.String(), fmt.Sprintf(`msg="migration finished" pipeline=par%d `, i)) {
			t.Errorf("no finish line for par%d:\n%s", i, e2etest.Tail(m.errb.String(), 20))
		}
	}
}

// kill -9 in the middle, then the same command: nothing lost, no duplicate
// stored (the sink stream deduplicates on Nats-Msg-Id), order per group.
func TestMigrateKillAndResume(t *testing.T) {
	t.Parallel()
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 20, 150
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	out := natsCollect(t, js, "MIG_OUT")
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))

	first := migStart(t, "-yes", "-idle", "1s", "-rate", "600", "-progress", "off", cfg)
	eventually(t, 60*time.Second, "a third migrated", func() bool { return out.Unique() >= groups*per/3 })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t, 10*time.Second); code != -int(syscall.SIGKILL) {
		t.Fatalf("first run exit %d, want killed", code)
	}
	before := out.Unique()
	if before >= groups*per {
		t.Fatalf("the kill came too late to test a resume (%d of %d moved)", before, groups*per)
	}

	code, rep, _ := migRun(t, 120*time.Second, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("second run: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	out.WaitUnique(groups*per, 30*time.Second, nil)
	if n := migStreamMsgs(t, js, "MIG_OUT"); n != groups*per {
		t.Errorf("sink stream holds %d messages, want %d: duplicates were stored", n, groups*per)
	}
	if _, disorder := natsCheckOrderAfterRestart(t, out.Records(), groups, per); disorder != 0 {
		t.Errorf("%d out of order within their group", disorder)
	}
	// The second run wrote at least what was left (and the messages in
	// flight at the kill, which the sink deduplicated).
	j := rep.Jobs[0]
	if rest := int64(groups*per - before); j.Written < rest {
		t.Errorf("second run wrote %d, but %d were left", j.Written, rest)
	}
	if j.DuplicatesDropped != j.Written-int64(groups*per-before) {
		t.Logf("second run: written %d, left %d, duplicates the sink dropped %d", j.Written, groups*per-before, j.DuplicatesDropped)
	}
	if p, ap := migConsumerPending(t, js, "MIG_IN", "mig"); p != 0 || ap != 0 {
		t.Errorf("source consumer: %d pending, %d ack pending", p, ap)
	}
}

// SIGINT stops a migration cleanly: exit 130, the report so far, nothing
// lost (what is not at the sink is still at the source).
func TestMigrateInterrupt(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 10, 200
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	out := natsCollect(t, js, "MIG_OUT")
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))
	report := filepath.Join(t.TempDir(), "report.json")
	m := migStart(t, "-yes", "-rate", "400", "-progress", "off", "-report", report, cfg)
	eventually(t, 60*time.Second, "some migrated", func() bool { return out.Unique() >= 200 })
	if err := m.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := m.wait(t, 30*time.Second); code != migrate.ExitInterrupted {
		t.Fatalf("exit %d, want %d", code, migrate.ExitInterrupted)
	}
	rep := migReadReport(t, report)
	if rep.Outcome != migrate.OutcomeInterrupted || !strings.Contains(m.out.String(), "interrupted") {
		t.Errorf("outcome %s; summary:\n%s", rep.Outcome, m.out.String())
	}
	written := rep.Jobs[0].Written
	if written == 0 || written >= groups*per {
		t.Fatalf("written %d: the interrupt came too early or too late", written)
	}
	// Everything not written is still at the source. What the migration
	// had received and not sent was handed back with a nak (JetStream has no
	// release that leaves the delivery count alone): those wait in the
	// consumer's ack-pending for their redelivery, which is immediate, not
	// an ack wait (30 s) later.
	var pending uint64
	var handedBack int
	eventually(t, 30*time.Second, "the source to hold the rest", func() bool {
		pending, handedBack = migConsumerPending(t, js, "MIG_IN", "mig")
		return int64(pending)+int64(handedBack)+int64(out.Unique()) == groups*per
	})
	if handedBack > 0 {
		c, err := js.Consumer(natsCtx(t, 10*time.Second), "MIG_IN", "mig")
		if err != nil {
			t.Fatal(err)
		}
		// qbridge's JetStream consumers are pinned in priority group
		// "qbridge" (the pin of the stopped migration was released); the
		// server serves redeliveries before new messages.
		batch, err := c.Fetch(handedBack, jetstream.FetchMaxWait(5*time.Second), jetstream.FetchPriorityGroup("qbridge"))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
				got++
			}
		}
		if got != handedBack {
			t.Errorf("%d of the %d handed-back messages redelivered within 5 s: the rest stayed locked", got, handedBack)
		}
	}
}

// AMQP 1.0 queue (RabbitMQ) → JetStream: AMQP brokers cannot count, so the
// queue is drained after -idle with credit outstanding.
func TestMigrateAMQPToJetStream(t *testing.T) {
	url := amqpURL(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_AMQP", "amqp.out")
	q := "/queue/" + amqpQueueName(t, "mig")
	snd := amqpSender(t, url, q)
	const n = 300
	for i := range n {
		msg := amqpText(fmt.Sprintf("id-%04d", i), fmt.Sprintf("body %d", i))
		msg.ApplicationProperties = map[string]any{"n": int32(i)}
		amqpSendAll(t, snd, msg)
	}
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "amqp-mig" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "nats" {
    url     = %q
    subject = "amqp.out"
    jetstream {
      ack_timeout = "5s"
    }
  }
}
`, url, q, ns.URL()))
	code, rep, _ := migRun(t, 90*time.Second, "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.DrainedBy != "idle" || j.Written != n || j.SourceBefore != nil || j.CountErrors["source"] == "" {
		t.Errorf("drained by %q, written %d, source count %+v (%v)", j.DrainedBy, j.Written, j.SourceBefore, j.CountErrors)
	}
	msgs := sqsReadStream(t, js, "MIG_AMQP", n)
	for i, m := range msgs {
		if got := string(m.Data()); got != fmt.Sprintf("body %d", i) {
			t.Fatalf("message %d: %q (queue order lost)", i, got)
		}
	}
	// The queue is empty: a receiver gets nothing.
	amqpExpectNone(t, amqpReceiver(t, url, q), 500*time.Millisecond)
}

// A target that refuses some messages: SQS keeps attribute names that start
// with "AWS." for itself. They are dead-lettered with the reason, counted by reason, exit 3.
func TestMigrateDeadLettersByReason(t *testing.T) {
	env := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	nc, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_SRC", "src.>")
	natsCreateStream(t, js, "MIG_DLQ", "dlq")
	queue := env.createQueue(t, "mig", false, nil)
	const n, bad = 60, 7
	for i := range n {
		m := nats.NewMsg("src.x")
		m.Data = []byte(fmt.Sprintf("body %d", i))
		m.Header.Set("n", strconv.Itoa(i))
		if i%9 == 0 && i/9 < bad {
			m.Header.Set("AWS.reserved", "SQS keeps names starting with AWS. for itself")
		}
		if _, err := js.PublishMsg(natsCtx(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "to-sqs" {
  source "nats" {
    url     = %[1]q
    subject = "src.>"
    jetstream {
      stream  = "MIG_SRC"
      durable = "mig"
    }
  }
  sink "sqs" {
%[2]s  }
  dead_letter {
    sink "nats" {
      url     = %[1]q
      subject = "dlq"
      jetstream {
        ack_timeout = "5s"
      }
    }
  }
}
`, ns.URL(), env.conn(queue)))
	code, rep, m := migRun(t, 90*time.Second, "-idle", "1s", "-progress", "off", cfg)
	if code != migrate.ExitDeadLettered || rep.Outcome != migrate.OutcomeDeadLettered {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != n-bad || j.DeadLettered["rejected"] != bad || j.DeadLetteredTotal != bad {
		t.Errorf("written %d, dead-lettered %v", j.Written, j.DeadLettered)
	}
	if ex := j.Examples["rejected"]; !strings.Contains(ex.Description, "AWS.reserved") {
		t.Errorf("example %+v does not name the attribute", ex)
	}
	if !strings.Contains(m.errb.String(), "complete-with-dead-letters") {
		t.Errorf("stderr does not give the outcome:\n%s", e2etest.Tail(m.errb.String(), 5))
	}
	if got := len(env.collect(t, queue, n-bad, 30*time.Second)); got != n-bad {
		t.Errorf("SQS queue holds %d, want %d", got, n-bad)
	}
	for _, d := range sqsReadStream(t, js, "MIG_DLQ", bad) {
		if r := d.Headers().Get("DeadLetterReason"); r != "rejected" {
			t.Errorf("dead letter reason %q", r)
		}
	}
}

// On a terminal the bar renders and ends at 100 %; on one that reports no
// rows (mpb would draw nothing) progress goes to log lines instead.
func TestMigrateProgressBarOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) from util-linux runs the command on a pseudo-terminal: %v", err)
	}
	for _, tc := range []struct {
		name, stty string
		bar        bool
		// zeros: the counters that are 0 fit beside a full bar all along
		zeros bool
	}{
		{"sized", "stty cols 160 rows 40", true, true},
		// The counters that are 0 took 40 of 100 columns and left the
		// bar 18 to draw in: they give way first.
		{"100 columns", "stty cols 100 rows 40", true, false},
		{"no rows", "stty cols 160 rows 0", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := e2etest.StartNATS(t)
			_, js := e2etest.ConnectNATS(t, ns.URL())
			natsCreateStream(t, js, "MIG_IN", "in.>")
			natsCreateStream(t, js, "MIG_OUT", "out.>")
			natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, 10, 50, 0)
			cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))
			// script's terminal has no size of its own: give it one, as a
			// real terminal has (or not).
			cmdline := fmt.Sprintf("%s; %s migrate -yes -idle 1s %s", tc.stty, qbridgeBin, cfg)
			var out bytes.Buffer
			cmd := exec.Command(script, "-qfec", cmdline, "/dev/null")
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.Env = append(os.Environ(), "TERM=xterm")
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("migrate on a terminal: %v\n%s", err, out.String())
				}
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("migrate on a terminal did not finish:\n%s", out.String())
			}
			screen := out.String()
			if !tc.bar {
				if !strings.Contains(screen, `msg="migration finished" pipeline=mig moved=500 total=500`) || strings.Contains(screen, "500 / 500") {
					t.Errorf("want log lines, no bar:\n%q", e2etest.Tail(screen, 8))
				}
				return
			}
			if !strings.Contains(screen, "500 / 500") || !strings.Contains(screen, "100 %") {
				t.Errorf("the bar did not end at 500 / 500, 100 %%:\n%q", e2etest.Tail(screen, 5))
			}
			if !strings.Contains(screen, "msg/s") || tc.zeros && !strings.Contains(screen, "dead-lettered 0  retried 0") {
				t.Errorf("the bar lacks its figures:\n%q", e2etest.Tail(screen, 5))
			}
			// Every frame's bar has its full width (barMaxWidth, 32 with
			// the brackets): the terminal has room for it.
			for _, bar := range regexp.MustCompile(`\[[=>-]*\]`).FindAllString(screen, -1) {
				if len(bar) != 32 {
					t.Errorf("a bar of %d columns: %s", len(bar), bar)
				}
			}
		})
	}
}

// SQS standard → JetStream, every message once, and the SQS queue empty.
func TestMigrateSQSToJetStream(t *testing.T) {
	env := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_FROM_SQS", "from.sqs")
	queue := env.createQueue(t, "src", false, nil)
	const n = 500
	var entries []types.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprintf("body %d", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"n": {DataType: aws.String("Number.int"), StringValue: aws.String(strconv.Itoa(i))},
			},
		})
	}
	env.sendBatch(t, queue, entries)
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sqs-mig" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "from.sqs"
    jetstream {
      ack_timeout = "5s"
    }
  }
}
`, env.conn(queue, `wait_time = "1s"`), ns.URL()))
	code, rep, _ := migRun(t, 120*time.Second, "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != n || j.DrainedBy != "count" || j.SourceBefore == nil || j.SourceBefore.Pending() != n || j.SourceAfter.Pending() != 0 {
		t.Errorf("written %d, drained by %q, source %+v → %+v", j.Written, j.DrainedBy, j.SourceBefore, j.SourceAfter)
	}
	seen := map[string]bool{}
	for _, m := range sqsReadStream(t, js, "MIG_FROM_SQS", n) {
		if seen[string(m.Data())] {
			t.Errorf("duplicate %q", m.Data())
		}
		seen[string(m.Data())] = true
	}
	if v, nv, d := env.approx(t, queue); v+nv+d != 0 {
		t.Errorf("SQS queue still holds %d/%d/%d", v, nv, d)
	}
}

// A queue migrated into itself, spelled two ways (queue_url on one side,
// queue_name on the other), passes the configuration check, which compares
// what the blocks say; the brokers' answer (the QueueArn of both counts)
// shows the loop, and the dry run and the move fail at once, moving
// nothing.
func TestMigrateIntoItselfSpelledTwoWays(t *testing.T) {
	env := sqsSetup(t)
	queue := env.createQueue(t, "self", false, nil)
	env.sendBatch(t, queue, []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("hello")}})
	name := queue[strings.LastIndexByte(queue, '/')+1:]
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "self" {
  source "sqs" {
%s  }
  sink "sqs" {
    queue_name        = %q
    endpoint          = %q
    region            = %q
    access_key_id     = "test"
    secret_access_key = "test"
  }
}
`, env.conn(queue, `wait_time = "1s"`), name, env.endpoint, env.region))
	for _, mode := range [][]string{{"-dry-run"}, {"-yes"}} {
		code, rep, _ := migRun(t, 60*time.Second, append(mode, "-idle", "1s", "-progress", "off", cfg)...)
		if code != migrate.ExitFailed || !strings.Contains(rep.Reason, "the sink writes into the source") {
			t.Errorf("%v: exit %d, reason %q", mode, code, rep.Reason)
		}
		if j := rep.Jobs[0]; j.Read != 0 || j.Written != 0 {
			t.Errorf("%v: read %d, written %d", mode, j.Read, j.Written)
		}
	}
	if v, nv, d := env.approx(t, queue); v+nv+d != 1 {
		t.Errorf("the queue holds %d/%d/%d, want the one message", v, nv, d)
	}
}

// A sink that does not exist (a mistyped SQS queue, a JetStream subject no
// stream stores) fails the dry run and the move at once, moving nothing; a
// JetStream sink that creates its stream counts 0 before and runs.
func TestMigrateMissingSinkFailsAtOnce(t *testing.T) {
	t.Parallel()
	env := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MISS_IN", "in.>")
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, 2, 5, 0)
	missing := strings.Replace(env.createQueue(t, "exists", false, nil), "-exists-", "-missing-", 1)
	for _, tc := range []struct {
		name, sink, want string
		code             int
	}{
		{"sqs queue", "sink \"sqs\" {\n" + env.conn(missing) + "  }", "the sink cannot be written", migrate.ExitFailed},
		{"no stream stores the subject", fmt.Sprintf("sink \"nats\" {\n    url = %q\n    subject = \"nowhere.x\"\n    jetstream {}\n  }", ns.URL()), "create_stream = true", migrate.ExitFailed},
		{"stream created by the sink", fmt.Sprintf("sink \"nats\" {\n    url = %q\n    subject = \"made.x\"\n    jetstream {\n      stream = \"MADE\"\n      create_stream = true\n      stream_subjects = [\"made.>\"]\n    }\n  }", ns.URL()), "", migrate.ExitComplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "miss" {
  source "nats" {
    url     = %q
    subject = "in.>"
    jetstream {
      stream  = "MISS_IN"
      durable = "miss"
    }
  }
  %s
}
`, ns.URL(), tc.sink))
			for _, mode := range [][]string{{"-dry-run"}, {"-yes"}} {
				start := time.Now()
				code, rep, _ := migRun(t, 60*time.Second, append(mode, "-idle", "1s", "-progress", "off", cfg)...)
				if code != tc.code || !strings.Contains(rep.Reason, tc.want) {
					t.Errorf("%v: exit %d, reason %q; want %d and %q", mode, code, rep.Reason, tc.code, tc.want)
				}
				if tc.code == migrate.ExitFailed && time.Since(start) > 30*time.Second {
					t.Errorf("%v: failed after %s, not at once", mode, time.Since(start).Round(time.Second))
				}
			}
		})
	}
}

// A dry run on RabbitMQ 3.x, which grants no copy link: qbridge reads a
// sample, hands it back (released), and the queue keeps every message. The
// sample is read in full at RabbitMQ 3.x's credit of 1: each held message
// gives its credit back (before, the dry run read 1 and said complete).
func TestMigrateAMQPDryRunSamples(t *testing.T) {
	url := amqpURL(t)
	ns := e2etest.StartNATS(t)
	q := "/queue/" + amqpQueueName(t, "dry")
	snd := amqpSender(t, url, q)
	const n = 30
	for i := range n {
		amqpSendAll(t, snd, amqpText(fmt.Sprintf("id-%04d", i), fmt.Sprintf("body %d", i)))
	}
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "amqp-dry" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "nats" {
    url     = %q
    subject = "amqp.dry"
  }
}
`, url, q, ns.URL()))
	code, rep, m := migRun(t, 90*time.Second, "-dry-run", "-sample", "10", "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if d := rep.Jobs[0].DryRun; d == nil || !d.Sampled || d.WouldWrite != 10 {
		t.Errorf("dry run %+v, drained by %q", d, rep.Jobs[0].DrainedBy)
	}
	if !strings.Contains(m.errb.String(), "reads a sample instead") {
		t.Errorf("no word of the fallback to a sample:\n%s", e2etest.Tail(m.errb.String(), 10))
	}
	got := amqpReceiveN(t, amqpReceiver(t, url, q), n, 30*time.Second)
	if len(got) != n {
		t.Errorf("the queue holds %d after the dry run, want %d", len(got), n)
	}
}

// A RabbitMQ queue with one message the SQS sink cannot take (300 KB into a
// queue of 256 KiB) and no dead_letter: the dry run finds it in its sample,
// the move moves the others in order, counts it stuck once and ends
// not-drained, and the message stays on the queue. AMQP has no redelivery
// delay: before, the source handed it straight back and RabbitMQ put it at
// the head of the queue, so the move read it tens of thousands of times
// while the messages behind it waited.
func TestMigrateAMQPStuckMessageLetsTheRestMove(t *testing.T) {
	url := amqpURL(t)
	env := sqsSetup(t)
	queue := env.createQueue(t, "stuck", false, map[string]string{"MaximumMessageSize": "262144"})
	q := "/queue/" + amqpQueueName(t, "stuck")
	snd := amqpSender(t, url, q)
	const n, big = 30, 7
	for i := range n {
		body := fmt.Sprintf("body %d", i)
		if i == big {
			body = strings.Repeat("x", 300<<10)
		}
		amqpSendAll(t, snd, amqpText(fmt.Sprintf("id-%04d", i), body))
	}
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "amqp-stuck" {
  source "amqp" {
    url     = %q
    address = %q
  }
  sink "sqs" {
%s  }
}
`, url, q, env.conn(queue)))

	code, rep, _ := migRun(t, 90*time.Second, "-dry-run", "-sample", "30", "-idle", "1s", "-progress", "off", cfg)
	d := rep.Jobs[0].DryRun
	if code != migrate.ExitNotDrained || rep.Outcome != migrate.OutcomeNotDrained || d == nil {
		t.Fatalf("dry run: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if d.WouldWrite != n-1 || d.WouldStick["too-large"] != 1 {
		t.Errorf("dry run would write %d, would be stuck %v; want %d and 1 too-large", d.WouldWrite, d.WouldStick, n-1)
	}

	code, rep, _ = migRun(t, 90*time.Second, "-idle", "2s", "-progress", "off", cfg)
	j := rep.Jobs[0]
	if code != migrate.ExitNotDrained || rep.Outcome != migrate.OutcomeNotDrained {
		t.Fatalf("move: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if j.Written != n-1 || j.StuckTotal != 1 || j.Stuck["too-large"] != 1 {
		t.Errorf("written %d, stuck %v (%d); want %d and 1 too-large", j.Written, j.Stuck, j.StuckTotal, n-1)
	}
	// held for the retry backoff between tries: a handful of reads, not thousands
	if j.Read > 3*n {
		t.Errorf("read %d deliveries for %d messages: the stuck one came straight back", j.Read, n)
	}
	if !strings.Contains(rep.Reason, "delivery limit") {
		t.Errorf("the reason does not say what ends the redeliveries: %s", rep.Reason)
	}
	var order []int
	for _, m := range env.collect(t, queue, n-1, 30*time.Second) {
		var i int
		if _, err := fmt.Sscanf(aws.ToString(m.Body), "body %d", &i); err != nil {
			t.Fatalf("SQS body %.40q", aws.ToString(m.Body))
		}
		order = append(order, i)
	}
	if len(order) != n-1 || slices.Contains(order, big) {
		t.Errorf("SQS queue holds %v, want every message but %d", order, big)
	}
	left := amqpReceiveN(t, amqpReceiver(t, url, q), 1, 30*time.Second)
	if len(left) != 1 || amqpID(left[0]) != fmt.Sprintf("id-%04d", big) {
		t.Errorf("the queue holds %d messages after the move, want the stuck one", len(left))
	}
}

// A dry run of a whole SQS queue, then the move: the dry run's sample
// raised each message's receive count, and the record it keeps explains
// those, but its pollers also held batches received ahead of the engine
// when it stopped, handed back unseen at close; the move took their
// counts for an interrupted run's ("up to 20 of the messages may be there
// twice", on a queue that had never been moved). The source now stops
// receiving and hands out what it holds before the sample goes back, and
// the record covers those too.
func TestMigrateSQSDryRunThenMoveFindsNoEarlierWrite(t *testing.T) {
	e := sqsSetup(t)
	src := e.createQueue(t, "dry-src", false, nil)
	dst := e.createQueue(t, "dry-dst", false, nil)
	const n = 100
	var entries []types.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, types.SendMessageBatchRequestEntry{MessageBody: aws.String(fmt.Sprintf("body %d", i))})
	}
	e.sendBatch(t, src, entries)
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the dry run's record, this test's own
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "dry-then-move" {
  source "sqs" {
%s    wait_time = "1s"
  }
  sink "sqs" {
%s  }
}
`, e.conn(src), e.conn(dst)))
	_, rep, _ := migRun(t, 2*time.Minute, "-dry-run", "-sample", "40", "-idle", "1s", "-progress", "off", cfg)
	if d := rep.Jobs[0].DryRun; d == nil || d.WouldWrite < 40 {
		t.Fatalf("dry run: outcome %s, %+v: %s", rep.Outcome, d, rep.Reason)
	}
	code, rep, _ := migRun(t, 2*time.Minute, "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("move: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != n {
		t.Errorf("written %d, want %d", j.Written, n)
	}
	if j.Redelivered != 0 || j.Verification == nil || strings.Contains(j.Verification.Note, "twice") {
		t.Errorf("after a dry run: redelivered %d, verification %+v; want no duplicate note", j.Redelivered, j.Verification)
	}
}
