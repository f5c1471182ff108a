package e2e

// qbridge migrate from JetStream into sinks that deduplicate (SQS FIFO,
// Service Bus with duplicate detection) across a kill -9, into a sink that
// refuses some messages, and dry runs that must leave both sides as they
// were.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
)

// migJSSourceTo is a pipeline from the JetStream stream (subjects "in.>",
// durable "mig") into sink, which is a whole sink block. The group key is
// the "tenant" header, one message in flight per group.
func migJSSourceTo(url, stream, sink string) string {
	return fmt.Sprintf(`
pipeline "mig" {
  source "nats" {
    url            = %[1]q
    subject        = "in.>"
    reconnect_wait = "200ms"
    jetstream {
      stream          = %[2]q
      durable         = "mig"
      ack_wait        = "3s"
      fetch_wait      = "300ms"
      max_ack_pending = 2000
    }
  }
%[3]s
  mapping {
    group_key = "{attr.tenant}"
  }
  ordering {
    per_group = 1
  }
  retry {
    initial = "50ms"
    max     = "500ms"
  }
  lock {
    extend_every = "1s" # shorter than ack_wait
  }
  shutdown_timeout = "5s"
}
`, url, stream, sink)
}

// kill -9 in the middle of a migration into a sink that deduplicates, then
// the same command again: every message exactly once at the sink (what was
// in flight at the kill is re-sent with the same id and dropped by the
// broker), each group in order, the source drained.
func TestMigrateKillAndResumeDedupSinks(t *testing.T) {
	t.Parallel()
	const groups, per = 20, 30
	const n = groups * per
	type sinkUnderTest struct {
		block string
		count func() int      // messages stored at the sink, without consuming them
		drain func() []string // every stored body, in the order the sink delivers them per group
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) sinkUnderTest
	}{
		{"sqs-fifo", func(t *testing.T) sinkUnderTest {
			e := sqsSetup(t)
			q := e.createQueue(t, "dst", true, nil)
			return sinkUnderTest{
				block: fmt.Sprintf("  sink \"sqs\" {\n%s  }\n", e.conn(q)),
				count: func() int { v, nv, d := e.approx(t, q); return v + nv + d },
				drain: func() []string {
					// A FIFO receive may come back empty while messages
					// remain: collect up to the count, then the queue must be
					// empty.
					var bodies []string
					for _, m := range e.collect(t, q, n, time.Minute) {
						bodies = append(bodies, *m.Body)
					}
					if v, nv, d := e.approx(t, q); v+nv+d != 0 {
						t.Errorf("%d/%d/%d left in the queue after %d received", v, nv, d, len(bodies))
					}
					return bodies
				},
			}
		}},
		{"servicebus-duplicate-detection", func(t *testing.T) sinkUnderTest {
			srv := sbStartServer(t, `{"queues":[{"name":"orders","requiresDuplicateDetection":true,"lockDuration":"PT30S"}]}`)
			c := sbClient(t, srv)
			return sinkUnderTest{
				block: fmt.Sprintf("  sink \"servicebus\" {\n%s    queue = \"orders\"\n  }\n", sbConn(srv)),
				count: func() int { return migSBCount(t, c, "orders", sbMain) },
				drain: func() []string {
					var bodies []string
					for _, m := range sbReceive(t, c, "orders", sbMain, migSBCount(t, c, "orders", sbMain), time.Minute) {
						bodies = append(bodies, string(m.Body))
					}
					return bodies
				},
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := tc.setup(t)
			ns := e2etest.StartNATS(t)
			_, js := e2etest.ConnectNATS(t, ns.URL())
			natsCreateStream(t, js, "MIG_IN", "in.>")
			natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
			cfg := migWriteConfig(t, migJSSourceTo(ns.URL(), "MIG_IN", sink.block))

			first := migStart(t, "-yes", "-idle", "1s", "-rate", "150", "-progress", "off", cfg)
			eventually(t, 90*time.Second, "a quarter migrated", func() bool { return sink.count() >= n/4 })
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code := first.wait(t, 10*time.Second); code != -int(syscall.SIGKILL) {
				t.Fatalf("first run exit %d, want killed", code)
			}
			before := sink.count()
			if before >= n {
				t.Fatalf("the kill came too late to test a resume (%d of %d moved)", before, n)
			}

			code, rep, _ := migRun(t, 3*time.Minute, "-idle", "1s", "-progress", "off", cfg)
			if code != 0 || rep.Outcome != migrate.OutcomeComplete {
				t.Fatalf("second run: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
			}
			// The second run accounts for the rest: it wrote at least what
			// was not at the sink (plus what was in flight at the kill).
			j := rep.Jobs[0]
			if rest := int64(n - before); j.Written < rest || j.Written != j.Acknowledged || !j.Drained {
				t.Errorf("second run: written %d, acknowledged %d, drained %v; %d were left", j.Written, j.Acknowledged, j.Drained, rest)
			}
			if p, ap := migConsumerPending(t, js, "MIG_IN", "mig"); p != 0 || ap != 0 {
				t.Errorf("source consumer: %d pending, %d ack pending", p, ap)
			}
			if got := sink.count(); got != n {
				t.Errorf("sink holds %d, want %d (lost or duplicated across the kill)", got, n)
			}
			bodies := sink.drain()
			seen := map[string]bool{}
			last := map[int]int{}
			for _, b := range bodies {
				if seen[b] {
					t.Errorf("duplicate %s", b)
				}
				seen[b] = true
				g, seq, ok := natsParse([]byte(b))
				if !ok {
					t.Fatalf("foreign body %q", b)
				}
				if p, ok := last[g]; ok && seq <= p && tc.name == "sqs-fifo" {
					t.Errorf("group %d: %d after %d", g, seq, p)
				}
				last[g] = seq
			}
			if len(seen) != n {
				t.Errorf("%d distinct messages at the sink, want %d", len(seen), n)
			}
		})
	}
}

// JetStream → SQS: SQS cannot hold attribute names starting with "AWS." nor
// a message over its size limit. Both are dead-lettered with their reason
// (the JetStream dead-letter stream gets DeadLetterReason), the report
// counts them by reason, the progress lines count them, the exit code is 3.
func TestMigrateDeadLettersRejectedAndTooLarge(t *testing.T) {
	env := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_SRC", "in.>")
	natsCreateStream(t, js, "MIG_DLQ", "dlq")
	// A queue of 256 KiB, the most before AWS raised the limit in 2025
	// (fauxqs makes 1 MiB ones): the sink encodes for the queue's limit.
	queue := env.createQueue(t, "dst", false, map[string]string{"MaximumMessageSize": "262144"})
	const n = 80
	want := map[string]int64{} // reason → count
	for i := range n {
		m := nats.NewMsg("in.x")
		m.Data = []byte(fmt.Sprintf("body %d", i))
		m.Header.Set("n", strconv.Itoa(i))
		m.Header.Set("tenant", natsGroup(i%4)) // the pipeline's group key
		switch {
		case i%10 == 3:
			m.Header.Set("AWS.internal", "reserved by SQS")
			want["rejected"]++
		case i%10 == 7:
			m.Data = []byte(strings.Repeat("x", 300<<10)) // over the queue's 256 KiB
			want["too-large"]++
		}
		if _, err := js.PublishMsg(natsCtx(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	bad := want["rejected"] + want["too-large"]
	cfg := migWriteConfig(t, migJSSourceTo(ns.URL(), "MIG_SRC", fmt.Sprintf(`  sink "sqs" {
%s  }
  dead_letter {
    sink "nats" {
      url     = %q
      subject = "dlq"
      jetstream {
        ack_timeout = "5s"
      }
    }
  }
`, env.conn(queue), ns.URL())))

	code, rep, m := migRun(t, 2*time.Minute, "-idle", "1s", "-progress", "log", "-progress-every", "200ms", cfg)
	if code != migrate.ExitDeadLettered || rep.Outcome != migrate.OutcomeDeadLettered || rep.ExitCode != migrate.ExitDeadLettered {
		t.Fatalf("exit %d (report %d), outcome %s: %s", code, rep.ExitCode, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != n-bad || j.DeadLetteredTotal != bad || j.Written+j.DeadLetteredTotal != j.Read-j.Dropped-j.Skipped {
		t.Errorf("read %d, written %d, dead-lettered %d (want %d and %d)", j.Read, j.Written, j.DeadLetteredTotal, n-bad, bad)
	}
	for reason, c := range want {
		if j.DeadLettered[reason] != c {
			t.Errorf("dead-lettered %q: %d, want %d (all: %v)", reason, j.DeadLettered[reason], c, j.DeadLettered)
		}
		if ex, ok := j.Examples[reason]; !ok || ex.Description == "" {
			t.Errorf("no example with a description for %q: %+v", reason, ex)
		}
	}
	if !strings.Contains(j.Examples["rejected"].Description, "AWS.internal") {
		t.Errorf("the rejected example does not name the attribute: %+v", j.Examples["rejected"])
	}
	finish := regexp.MustCompile(`msg="migration finished" pipeline=mig moved=(\d+) .*dead_lettered=(\d+) `).FindStringSubmatch(m.errb.String())
	if finish == nil || finish[2] != strconv.FormatInt(bad, 10) {
		t.Errorf("the last progress line does not count %d dead letters: %q", bad, finish)
	}
	if got := len(env.collect(t, queue, int(n-bad), 30*time.Second)); got != int(n-bad) {
		t.Errorf("SQS queue holds %d, want %d", got, n-bad)
	}
	got := map[string]int64{}
	for _, d := range sqsReadStream(t, js, "MIG_DLQ", int(bad)) {
		got[d.Headers().Get("DeadLetterReason")]++
	}
	for reason, c := range want {
		if got[reason] != c {
			t.Errorf("dead-letter stream: %d with DeadLetterReason %q, want %d (all: %v)", got[reason], reason, c, got)
		}
	}
}

// -progress log -progress-every 200ms: the start line has the total, each
// progress line has moved ≤ total, moved never goes back, a rate, no dead
// letters; several lines fall in the middle of the run; the last says 100 %.
func TestMigrateProgressLogFigures(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 10, 150
	const n = groups * per
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))

	// The cap makes the run last about 3 s: room for a dozen lines.
	code, rep, m := migRun(t, 90*time.Second, "-idle", "1s", "-rate", "500", "-progress", "log", "-progress-every", "200ms", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	logs := m.errb.String()
	line := regexp.MustCompile(`msg="migration progress" pipeline=mig moved=(\d+) total=(\d+)(?: percent=([\d.]+))? rate=([\d.]+)/s .*written=(\d+) dead_lettered=(\d+) `)
	var middle, withRate int
	prev := int64(-1)
	for _, s := range line.FindAllStringSubmatch(logs, -1) {
		moved, _ := strconv.ParseInt(s[1], 10, 64)
		total, _ := strconv.ParseInt(s[2], 10, 64)
		rate, _ := strconv.ParseFloat(s[4], 64) // a decimal below 10 msg/s
		written, _ := strconv.ParseInt(s[5], 10, 64)
		if total != n || moved > total || moved < prev || written > moved || s[6] != "0" {
			t.Errorf("progress line %q: want total %d, moved ≤ total and not going back (previous %d), written ≤ moved, no dead letters", s[0], n, prev)
		}
		if s[3] != "" {
			if pct, _ := strconv.ParseFloat(s[3], 64); pct < 100*float64(moved)/float64(total)-0.1 || pct > 100*float64(moved)/float64(total)+0.1 {
				t.Errorf("progress line %q: percent does not match moved/total", s[0])
			}
		}
		if moved > 0 && moved < total {
			middle++
			if rate > 0 {
				withRate++
			}
		}
		prev = moved
	}
	if middle < 3 || withRate == 0 {
		t.Errorf("%d progress lines in the middle of the run (%d with a rate), want ≥ 3:\n%s", middle, withRate, e2etest.Tail(logs, 30))
	}
	fin := regexp.MustCompile(`msg="migration finished" pipeline=mig moved=(\d+) total=(\d+) percent=100.0 rate=([\d.]+)/s`).FindStringSubmatch(logs)
	if fin == nil || fin[1] != strconv.Itoa(n) || fin[2] != strconv.Itoa(n) {
		t.Fatalf("finish line: %q\n%s", fin, e2etest.Tail(logs, 10))
	}
	// The line's rate is the report's (messages over active time) and it
	// honours the cap, give or take the first second's burst.
	rate, _ := strconv.ParseFloat(fin[3], 64)
	if j := rep.Jobs[0]; rate < j.Rate-1 || rate > j.Rate+1 || rate > 500*1.5 {
		t.Errorf("finish line rate %.0f/s, report %.1f/s, cap 500/s", rate, j.Rate)
	}
}

// A dry run JetStream → JetStream translates every message without acking
// any and writes nothing: the source stream and its consumer's pending
// count, and the sink stream, are as before; the report says what would
// be written.
func TestMigrateDryRunJetStreamUnchanged(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 10, 30
	const n = groups * per
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))

	code, rep, _ := migRun(t, 90*time.Second, "-dry-run", "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete || rep.Mode != migrate.ModeDryRun {
		t.Fatalf("exit %d, mode %s, outcome %s: %s", code, rep.Mode, rep.Outcome, rep.Reason)
	}
	if d := rep.Jobs[0].DryRun; d == nil || d.WouldWrite != n || d.Sampled || len(d.WouldReject) != 0 {
		t.Errorf("dry run report %+v, want %d would be written, not sampled", d, n)
	}
	if got := migStreamMsgs(t, js, "MIG_IN"); got != n {
		t.Errorf("source stream holds %d, want %d", got, n)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != 0 {
		t.Errorf("the dry run wrote %d messages to the sink", got)
	}
	// The durable (if the dry run made one) still has everything pending
	// once unacked deliveries expire: the real migration then moves all.
	code, rep, _ = migRun(t, 90*time.Second, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Jobs[0].Written != n {
		t.Fatalf("the migration after the dry run: exit %d, wrote %d of %d: %s", code, rep.Jobs[0].Written, n, rep.Reason)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != n {
		t.Errorf("sink stream holds %d after the migration, want %d", got, n)
	}
}

// SIGINT during SQS → JetStream: exit 130 and the report so far; what was
// received but not written (prefetched, in flight) is made visible again at
// once, not when the 2-minute visibility timeout lapses: source + sink
// account for every message within seconds, each once.
func TestMigrateInterruptSQSHandsBack(t *testing.T) {
	env := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_FROM_SQS", "from.sqs")
	queue := env.createQueue(t, "src", false, nil)
	const n = 1500
	var entries []types.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i % 10)), MessageBody: aws.String(fmt.Sprintf("body %d", i)),
		})
	}
	env.sendBatch(t, queue, entries)
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sqs-int" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "from.sqs"
    jetstream {
      ack_timeout = "5s"
    }
  }
  shutdown_timeout = "10s"
}
`, env.conn(queue, `wait_time = "1s"`, `visibility_timeout = "120s"`), ns.URL()))
	report := filepath.Join(t.TempDir(), "report.json")
	m := migStart(t, "-yes", "-rate", "200", "-progress", "off", "-report", report, cfg)
	eventually(t, 60*time.Second, "some migrated", func() bool { return migStreamMsgs(t, js, "MIG_FROM_SQS") >= 200 })
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
	j := rep.Jobs[0]
	if j.Written == 0 || j.Written >= n {
		t.Fatalf("written %d: the interrupt came too early or too late", j.Written)
	}
	if j.Read-j.HandedBack != j.Written+j.DeadLetteredTotal+j.Skipped {
		t.Errorf("report does not account for what it read: read %d − handed back %d ≠ written %d + dead-lettered %d + skipped %d",
			j.Read, j.HandedBack, j.Written, j.DeadLetteredTotal, j.Skipped)
	}
	var sink uint64
	eventually(t, 20*time.Second, "source + sink to hold every message, none invisible", func() bool {
		v, nv, d := env.approx(t, queue)
		sink = migStreamMsgs(t, js, "MIG_FROM_SQS")
		return nv == 0 && d == 0 && uint64(v)+sink == n
	})
	if int64(sink) != j.Written {
		t.Errorf("sink holds %d, the report says %d written", sink, j.Written)
	}
	seen := map[string]bool{}
	for _, msg := range sqsReadStream(t, js, "MIG_FROM_SQS", int(sink)) {
		if seen[string(msg.Data())] {
			t.Errorf("duplicate %q", msg.Data())
		}
		seen[string(msg.Data())] = true
	}
}

// Copy mode on JetStream reads the stream without acking: the source stream
// and the pipeline's durable are left as they were. A copy with -state
// killed midway and run again continues after its checkpoint; the sink
// stream ends with each message once; a move afterwards still finds all.
func TestMigrateCopyJetStreamCheckpoint(t *testing.T) {
	t.Parallel()
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	const groups, per = 10, 60
	const n = groups * per
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))
	state := filepath.Join(t.TempDir(), "state.json")

	first := migStart(t, "-yes", "-copy", "-state", state, "-rate", "150", "-progress", "off", cfg)
	eventually(t, 60*time.Second, "a checkpoint", func() bool {
		return migCheckpoint(t, state, "mig") > 0 && migStreamMsgs(t, js, "MIG_OUT") >= 150
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 10*time.Second)
	copied := migStreamMsgs(t, js, "MIG_OUT")
	if copied >= n {
		t.Fatalf("the kill came too late (%d of %d copied)", copied, n)
	}

	code, rep, _ := migRun(t, 90*time.Second, "-copy", "-state", state, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete || rep.Mode != migrate.ModeCopy {
		t.Fatalf("exit %d, mode %s, outcome %s: %s", code, rep.Mode, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.ResumedFrom == 0 || j.Written >= n || j.Written < int64(n)-int64(copied) {
		t.Errorf("resumed from %d, wrote %d: the first run copied %d of %d", j.ResumedFrom, j.Written, copied, n)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != n {
		t.Errorf("sink stream holds %d, want %d", got, n)
	}
	if got := migStreamMsgs(t, js, "MIG_IN"); got != n {
		t.Errorf("the copy changed the source stream: %d messages, want %d", got, n)
	}
	// The durable saw nothing: a move now takes every message (the sink
	// stream drops them all as duplicates of the copy).
	code, rep, _ = migRun(t, 90*time.Second, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Jobs[0].Written != n {
		t.Errorf("the move after the copy: exit %d, wrote %d of %d: %s", code, rep.Jobs[0].Written, n, rep.Reason)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != n {
		t.Errorf("sink stream holds %d after the move, want %d", got, n)
	}
}

// A copy's checkpoint is a position in the stream as it was: a stream
// deleted and made again numbers from 1 again. Refilled past the
// checkpoint, the resumed copy used to skip the new stream's first
// messages (those up to the old checkpoint) and say complete; it is
// refused, naming both creation times, and nothing is written.
func TestMigrateCopyRefusesRecreatedStream(t *testing.T) {
	t.Parallel()
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.>")
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, 2, 10, 0)
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))
	state := filepath.Join(t.TempDir(), "state.json")
	if code, rep, _ := migRun(t, 60*time.Second, "-copy", "-state", state, "-idle", "1s", "-progress", "off", cfg); code != 0 {
		t.Fatalf("first copy: exit %d: %s", code, rep.Reason)
	}
	if got := migCheckpoint(t, state, "mig"); got != 20 {
		t.Fatalf("checkpoint after the first copy: %d, want 20", got)
	}
	if err := js.DeleteStream(natsCtx(t, 10*time.Second), "MIG_IN"); err != nil {
		t.Fatal(err)
	}
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, 2, 15, 100)
	before := migStreamMsgs(t, js, "MIG_OUT")

	code, rep, _ := migRun(t, 60*time.Second, "-copy", "-state", state, "-idle", "1s", "-progress", "off", cfg)
	if code != migrate.ExitFailed || rep.Outcome != migrate.OutcomeFailed || !strings.Contains(rep.Reason, "deleted and made again") {
		t.Fatalf("copy of the stream made again: exit %d, outcome %s: %s; want refused (exit %d)", code, rep.Outcome, rep.Reason, migrate.ExitFailed)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != before {
		t.Errorf("the refused copy wrote %d messages", got-before)
	}
}

// A message the source cannot decode (a malformed qbridge.envelope header
// on JetStream) is not forwarded by a migration, as by the daemon: it is
// dead-lettered with reason "corrupt", counted by reason, exit 3.
func TestMigrateCorruptDeadLettered(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsCreateStream(t, js, "MIG_OUT", "out.x")
	natsCreateStream(t, js, "MIG_DLQ", "dlq")
	const n, corrupt = 30, 3
	for i := range n {
		m := nats.NewMsg("in.x")
		m.Data = []byte(fmt.Sprintf("body %d", i))
		m.Header.Set("tenant", natsGroup(i%3))
		if i%10 == 5 {
			m.Header.Set("qbridge.envelope", "not an envelope")
		}
		if _, err := js.PublishMsg(natsCtx(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
	cfg := migWriteConfig(t, migJSSourceTo(ns.URL(), "MIG_IN", fmt.Sprintf(`  sink "nats" {
    url     = %[1]q
    subject = "out.x"
    jetstream {
      ack_timeout = "5s"
    }
  }
  dead_letter {
    sink "nats" {
      url     = %[1]q
      subject = "dlq"
      jetstream {
        ack_timeout = "5s"
      }
    }
  }
`, ns.URL())))
	code, rep, _ := migRun(t, 90*time.Second, "-idle", "1s", "-progress", "off", cfg)
	j := rep.Jobs[0]
	if code != migrate.ExitDeadLettered || j.Written != n-corrupt || j.DeadLettered["corrupt"] != corrupt {
		t.Errorf("exit %d, written %d, dead-lettered %v: want exit %d, %d written, %d corrupt",
			code, j.Written, j.DeadLettered, migrate.ExitDeadLettered, n-corrupt, corrupt)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != n-corrupt {
		t.Errorf("sink stream holds %d, want %d: undecodable messages were forwarded", got, n-corrupt)
	}
	if got := migStreamMsgs(t, js, "MIG_DLQ"); got != corrupt {
		t.Errorf("dead-letter stream holds %d, want %d", got, corrupt)
	}
	// Both sinks name no stream: only the server knows that out.x and dlq
	// are in two streams. Taken for one, the dead letters were expected in
	// the sink too and the move was NOT verified ("holds 3 fewer").
	if v := j.Verification; v == nil || !v.Verified || v.Expected != n-corrupt {
		t.Errorf("verification %+v: want verified, %d expected", v, n-corrupt)
	}
}

// A move into a stream kept at its cap (max_msgs, discard old) that holds
// 90 of its 100: the 20 moved push out its 10 oldest, as the job warns
// before it moves anything. The verification passes and says so; it said
// NOT verified after recounting for 15 s.
func TestMigrateIntoStreamAtItsCap(t *testing.T) {
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	if _, err := js.CreateStream(natsCtx(t, 10*time.Second), jetstream.StreamConfig{
		Name: "MIG_OUT", Subjects: []string{"out.>"}, Storage: jetstream.FileStorage, MaxMsgs: 100, Discard: jetstream.DiscardOld,
	}); err != nil {
		t.Fatal(err)
	}
	natsPublishGrouped(t, js, func(int) string { return "out.old" }, 1, 90, 1000) // ids of their own
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, 2, 10, 0)
	cfg := migWriteConfig(t, migJSPipeline(ns.URL(), "MIG_IN", "mig", "out.x"))

	code, rep, m := migRun(t, 90*time.Second, "-idle", "1s", "-progress", "off", cfg)
	logs := m.errb.String()
	if code != 0 || rep.Outcome != migrate.OutcomeComplete || rep.Jobs[0].Written != 20 {
		t.Fatalf("exit %d, %s, wrote %d: %s\n%s", code, rep.Outcome, rep.Jobs[0].Written, rep.Reason, e2etest.Tail(logs, 20))
	}
	if !strings.Contains(logs, "pushes out the oldest") {
		t.Errorf("no warning before the move:\n%s", e2etest.Tail(logs, 20))
	}
	if v := rep.Jobs[0].Verification; v == nil || !v.Verified || !strings.Contains(v.Note, "pushed out 10 of its oldest messages") {
		t.Errorf("verification %+v", v)
	}
	if got := migStreamMsgs(t, js, "MIG_OUT"); got != 100 {
		t.Errorf("the sink stream holds %d, want 100", got)
	}
}
