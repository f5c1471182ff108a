package e2e

// qbridge migrate with Service Bus (the project's test server, held honest
// by the official SDKs) on one side and SQS (fauxqs) or JetStream on the
// other.

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/migrate"
)

// migSQSTyped is message i with typed attributes.
func migSQSTyped(i int, group string) types.SendMessageBatchRequestEntry {
	e := types.SendMessageBatchRequestEntry{
		Id:          aws.String(strconv.Itoa(i % 10)),
		MessageBody: aws.String(fmt.Sprintf("body %05d", i)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"n":     {DataType: aws.String("Number.int"), StringValue: aws.String(strconv.Itoa(i))},
			"price": {DataType: aws.String("Number.double"), StringValue: aws.String("12.5")},
			"id":    {DataType: aws.String("String.uuid"), StringValue: aws.String("0f8fad5b-d9cb-469f-a165-70867728950e")},
			"tag":   {DataType: aws.String("String"), StringValue: aws.String("t" + strconv.Itoa(i%7))},
		},
	}
	if group != "" {
		e.MessageGroupId = aws.String(group)
		e.MessageDeduplicationId = aws.String(fmt.Sprintf("d%05d", i))
	}
	return e
}

// sqsAttrValue is an attribute's string value.
func sqsAttrValue(a types.MessageAttributeValue) string { return aws.ToString(a.StringValue) }

// migSBCount counts a queue's (or sub-queue's) messages by peeking them all.
func migSBCount(t testing.TB, c *azservicebus.Client, queue string, sub azservicebus.SubQueue) int {
	t.Helper()
	return len(migSBPeek(t, c, queue, sub))
}

// migSBPeek returns every message of a queue (or sub-queue) without locking
// any: peeks are management requests, so a large queue is read without
// holding thousands of deliveries open on one link.
func migSBPeek(t testing.TB, c *azservicebus.Client, queue string, sub azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var out []*azservicebus.ReceivedMessage
	from := int64(0)
	for {
		ms, err := r.PeekMessages(sbCtx(t, 10*time.Second), 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptrTo(from)})
		if err != nil {
			t.Fatalf("peek %s: %v", queue, err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
		from = *ms[len(ms)-1].SequenceNumber + 1
	}
}

// The worked example of docs/migrate.md: SQS standard → Service Bus with
// configs/sqs-to-servicebus.hcl, a dry run first (nothing changes), then the
// migration: every message with its typed attributes, the SQS queue empty.
func TestMigrateSQSToServiceBus(t *testing.T) {
	n := 2000
	if os.Getenv("QBRIDGE_E2E_LONG") != "" {
		n = 10000
	}
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"orders","lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	src, _ := sbSQSToServiceBusEnv(t, e, srv, srv.HTTP)
	var entries []types.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, migSQSTyped(i, ""))
	}
	e.sendBatch(t, src, entries)
	cfg := filepath.Join(sbRepoRoot(), "configs", "sqs-to-servicebus.hcl")

	code, rep, _ := migRun(t, 2*time.Minute, "-dry-run", "-sample", "50", "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("dry run: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if d := rep.Jobs[0].DryRun; d == nil || d.WouldWrite != 50 || !d.Sampled {
		t.Errorf("dry run report %+v", d)
	}
	// Every message is still at SQS (fauxqs's approximate counts show the
	// handed-back sample as not visible until the next receive; the move
	// below reads all n, which is the real check).
	if v, nv, _ := e.approx(t, src); v+nv != n {
		t.Fatalf("after the dry run SQS counts %d visible + %d not visible, want %d", v, nv, n)
	}
	if got := migSBCount(t, c, "orders", sbMain); got != 0 {
		t.Fatalf("the dry run wrote %d messages", got)
	}

	code, rep, _ = migRun(t, 5*time.Minute, "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.Written != int64(n) || j.DrainedBy != "count" || j.SourceAfter == nil || j.SourceAfter.Pending() != 0 {
		t.Errorf("written %d of %d, drained by %q, source after %+v", j.Written, n, j.DrainedBy, j.SourceAfter)
	}
	if j.SinkAfter == nil || j.SinkAfter.Ready != int64(n) {
		t.Errorf("sink count after: %+v, want %d ready", j.SinkAfter, n)
	}
	got := migSBPeek(t, c, "orders", sbMain)
	if len(got) != n {
		t.Fatalf("Service Bus queue holds %d, want %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[string(m.Body)] {
			t.Fatalf("duplicate %s", m.Body)
		}
		seen[string(m.Body)] = true
		i, _ := strconv.Atoi(string(m.Body[5:]))
		if v, ok := m.ApplicationProperties["n"].(int32); !ok || int(v) != i {
			t.Fatalf("%s: n = %#v (%T), want int32 %d", m.Body, m.ApplicationProperties["n"], m.ApplicationProperties["n"], i)
		}
		if v, ok := m.ApplicationProperties["price"].(float64); !ok || v != 12.5 {
			t.Fatalf("%s: price = %#v (%T)", m.Body, m.ApplicationProperties["price"], m.ApplicationProperties["price"])
		}
	}
	if v, nv, d := e.approx(t, src); v+nv+d != 0 {
		t.Errorf("SQS source holds %d/%d/%d", v, nv, d)
	}
}

// SQS FIFO with 50 groups → a Service Bus session queue: each group's
// messages in order in its session.
func TestMigrateSQSFIFOToSessions(t *testing.T) {
	const groups, per = 50, 8
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"sessions","requiresSession":true,"requiresDuplicateDetection":true,"lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	src := e.createQueue(t, "src", true, nil)
	sbSetAWSEnv(t)
	t.Setenv("QBRIDGE_SERVICEBUS_CONNECTION_STRING", srv.Conn)
	t.Setenv("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE", "sessions")
	t.Setenv("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE_URL", src)
	t.Setenv("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_ENDPOINT", e.endpoint)
	var entries []types.SendMessageBatchRequestEntry
	for i := range per {
		for g := range groups {
			entries = append(entries, migSQSTyped(i*groups+g, fmt.Sprintf("g%02d", g)))
		}
	}
	e.sendBatch(t, src, entries)
	cfg := filepath.Join(sbRepoRoot(), "configs", "sqs-fifo-to-servicebus-sessions.hcl")
	code, rep, _ := migRun(t, 3*time.Minute, "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if j := rep.Jobs[0]; j.Written != groups*per || j.Groups != groups {
		t.Errorf("written %d, groups %d", j.Written, j.Groups)
	}
	for range groups {
		sr, err := c.AcceptNextSessionForQueue(sbCtx(t, 10*time.Second), "sessions", nil)
		if err != nil {
			t.Fatalf("accept next session: %v", err)
		}
		var ms []*azservicebus.ReceivedMessage
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for len(ms) < per {
			got, err := sr.ReceiveMessages(ctx, 1, nil)
			if err != nil {
				t.Fatalf("session %s: %v", sr.SessionID(), err)
			}
			for _, m := range got {
				if err := sr.CompleteMessage(ctx, m, nil); err != nil {
					t.Fatal(err)
				}
			}
			ms = append(ms, got...)
		}
		cancel()
		_ = sr.Close(context.Background())
		slices.SortFunc(ms, func(a, b *azservicebus.ReceivedMessage) int { return int(*a.SequenceNumber - *b.SequenceNumber) })
		last := -1
		for _, m := range ms {
			n, _ := m.ApplicationProperties["n"].(int32)
			if int(n) <= last {
				t.Fatalf("session %s: %d after %d", sr.SessionID(), n, last)
			}
			last = int(n)
		}
	}
}

// A Service Bus queue and its dead-letter queue → SQS: the dead letters go
// to the pipeline's dead-letter sink (an SQS queue) with DeadLetterReason
// and DeadLetterErrorDescription kept; both Service Bus queues end empty.
func TestMigrateServiceBusWithDeadLetters(t *testing.T) {
	const live, dead = 40, 6
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"orders","lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	var msgs []*azservicebus.Message
	for i := range live + dead {
		msgs = append(msgs, &azservicebus.Message{
			MessageID: ptrTo(fmt.Sprintf("m%03d", i)), Body: []byte(fmt.Sprintf("body %d", i)),
			ApplicationProperties: map[string]any{"n": int64(i)},
		})
	}
	sbSend(t, c, "orders", msgs...)
	// Dead-letter the first six, with a reason.
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < dead {
		ms, err := r.ReceiveMessages(sbCtx(t, 10*time.Second), dead-len(got), nil)
		if err != nil {
			t.Fatalf("received %d: %v", len(got), err)
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if err := r.DeadLetterMessage(sbCtx(t, 10*time.Second), m, &azservicebus.DeadLetterOptions{
			Reason: ptrTo("OrderInvalid"), ErrorDescription: ptrTo("no customer " + m.MessageID),
		}); err != nil {
			t.Fatal(err)
		}
	}
	_ = r.Close(context.Background())

	out := e.createQueue(t, "out", false, nil)
	outDLQ := e.createQueue(t, "outdlq", false, nil)
	sbSetAWSEnv(t)
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sb-to-sqs" {
  source "servicebus" {
%s    queue = "orders"
  }
  sink "sqs" {
%s  }
  dead_letter {
    sink "sqs" {
%s    }
  }
}
`, sbConn(srv), e.conn(out), e.conn(outDLQ)))
	code, rep, _ := migRun(t, 3*time.Minute, "-include-dead-letters", "-idle", "2s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete || len(rep.Jobs) != 2 {
		t.Fatalf("exit %d, outcome %s, %d jobs: %s", code, rep.Outcome, len(rep.Jobs), rep.Reason)
	}
	if rep.Jobs[0].Written != live || rep.Jobs[1].Written != dead || rep.Jobs[1].Queue != "dead-letter" {
		t.Errorf("main wrote %d, dead-letter job (%s) wrote %d", rep.Jobs[0].Written, rep.Jobs[1].Queue, rep.Jobs[1].Written)
	}
	if n := len(e.collect(t, out, live, 30*time.Second)); n != live {
		t.Errorf("SQS queue holds %d, want %d", n, live)
	}
	for _, m := range e.collect(t, outDLQ, dead, 30*time.Second) {
		if r := sqsAttrValue(m.MessageAttributes["DeadLetterReason"]); r != "OrderInvalid" {
			t.Errorf("%s: DeadLetterReason %q", aws.ToString(m.Body), r)
		}
		if d := sqsAttrValue(m.MessageAttributes["DeadLetterErrorDescription"]); !strings.HasPrefix(d, "no customer ") {
			t.Errorf("%s: DeadLetterErrorDescription %q", aws.ToString(m.Body), d)
		}
	}
	if n := migSBCount(t, c, "orders", sbMain) + migSBCount(t, c, "orders", azservicebus.SubQueueDeadLetter); n != 0 {
		t.Errorf("Service Bus still holds %d", n)
	}
}

// Copy mode on Service Bus: the source is peeked, not consumed; a copy with
// -state killed midway and run again goes on after its checkpoint; the
// JetStream sink deduplicates what was written twice (MessageId becomes
// Nats-Msg-Id).
func TestMigrateCopyServiceBusResumes(t *testing.T) {
	t.Parallel()
	const n = 600
	srv := sbStartServer(t, `{"queues":[{"name":"orders","lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	var msgs []*azservicebus.Message
	for i := range n {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptrTo(fmt.Sprintf("m%04d", i)), Body: []byte(fmt.Sprintf("body %d", i))})
	}
	sbSend(t, c, "orders", msgs...)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_COPY", "copy.out")
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sb-copy" {
  source "servicebus" {
%s    queue = "orders"
  }
  sink "nats" {
    url     = %q
    subject = "copy.out"
    jetstream {
      ack_timeout = "5s"
    }
  }
}
`, sbConn(srv), ns.URL()))
	state := filepath.Join(t.TempDir(), "state.json")
	first := migStart(t, "-yes", "-copy", "-state", state, "-rate", "150", "-progress", "off", cfg)
	eventually(t, 60*time.Second, "a checkpoint", func() bool {
		return migCheckpoint(t, state, "sb-copy") > 0 && migStreamMsgs(t, js, "MIG_COPY") >= 150
	})
	_ = first.cmd.Process.Kill()
	first.wait(t, 10*time.Second)
	copied := migStreamMsgs(t, js, "MIG_COPY")

	code, rep, _ := migRun(t, 2*time.Minute, "-copy", "-state", state, "-idle", "1s", "-progress", "log", "-progress-every", "2s", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	j := rep.Jobs[0]
	if j.ResumedFrom == 0 || j.Written >= n {
		t.Errorf("the copy started over: resumed from %d, wrote %d (the first run copied %d)", j.ResumedFrom, j.Written, copied)
	}
	if got := migStreamMsgs(t, js, "MIG_COPY"); got != n {
		t.Errorf("sink stream holds %d, want %d", got, n)
	}
	if got := migSBCount(t, c, "orders", sbMain); got != n {
		t.Errorf("the copy changed the source: %d messages, want %d", got, n)
	}
	// The sink has each MessageId once.
	seen := map[string]bool{}
	for _, m := range sqsReadStream(t, js, "MIG_COPY", n) {
		id := m.Headers().Get(nats.MsgIdHdr)
		if seen[id] {
			t.Errorf("duplicate %s", id)
		}
		seen[id] = true
	}
}

// SQS FIFO → SQS FIFO, and the dedup window cutting both ways: a
// deliberate re-run of the same messages within SQS's 5-minute window is
// accepted by SQS and silently dropped (the ids are kept, which is what makes
// a resume safe), unless -new-dedup-ids names the run. Per-group order holds.
func TestMigrateSQSFIFODedupWindow(t *testing.T) {
	t.Parallel()
	const groups, per = 5, 12
	e := sqsSetup(t)
	dst := e.createQueue(t, "dst", true, nil)
	load := func(suffix string) string {
		src := e.createQueue(t, suffix, true, nil)
		var entries []types.SendMessageBatchRequestEntry
		for seq := range per {
			for g := range groups {
				entries = append(entries, migSQSTyped(seq*groups+g, fmt.Sprintf("g%d", g)))
			}
		}
		e.sendBatch(t, src, entries)
		return migWriteConfig(t, fmt.Sprintf(`
pipeline "fifo" {
  source "sqs" {
%s    wait_time = "1s"
  }
  sink "sqs" {
%s  }
}
`, e.conn(src), e.conn(dst)))
	}
	drain := func() []types.Message {
		var got []types.Message
		for {
			ms := e.receive(t, dst, 1, true)
			if len(ms) == 0 {
				return got
			}
			got = append(got, ms...)
		}
	}
	// -verify-wait 1s: the re-run leaves the target short for good, which
	// the default 15 s of recounting only confirms.
	run := func(cfg string, extra ...string) *migrate.Report {
		code, rep, _ := migRun(t, 2*time.Minute, append([]string{"-idle", "1s", "-verify-wait", "1s", "-progress", "off"}, append(extra, cfg)...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, rep.Reason)
		}
		return rep
	}

	run(load("a"))
	first := drain()
	if len(first) != groups*per {
		t.Fatalf("first run: %d messages at the target, want %d", len(first), groups*per)
	}
	last := map[string]int{}
	for _, m := range first {
		g := m.Attributes["MessageGroupId"]
		n, _ := strconv.Atoi(sqsAttrValue(m.MessageAttributes["n"]))
		if p, ok := last[g]; ok && n <= p {
			t.Fatalf("group %s: %d after %d", g, n, p)
		}
		last[g] = n
	}

	// The same messages again from another queue, ids kept: SQS accepts
	// every send and stores none.
	rep := run(load("b"))
	if w := rep.Jobs[0].Written; w != groups*per {
		t.Errorf("re-run wrote %d (SQS accepted them), want %d", w, groups*per)
	}
	if got := drain(); len(got) != 0 {
		t.Errorf("SQS stored %d duplicates inside its deduplication window", len(got))
	}
	// With -new-dedup-ids the re-run is stored.
	run(load("c"), "-new-dedup-ids", "rerun-1")
	if got := drain(); len(got) != groups*per {
		t.Errorf("re-run with -new-dedup-ids: %d stored, want %d", len(got), groups*per)
	}
}

// JetStream stream → SQS FIFO: the group key becomes MessageGroupId and each
// group arrives in stream order.
func TestMigrateJetStreamToSQSFIFO(t *testing.T) {
	const groups, per = 6, 25
	e := sqsSetup(t)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "MIG_IN", "in.>")
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	dst := e.createQueue(t, "dst", true, nil)
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "js-to-fifo" {
  source "nats" {
    url     = %q
    subject = "in.>"
    jetstream {
      stream  = "MIG_IN"
      durable = "fifo"
    }
  }
  sink "sqs" {
%s  }
  mapping {
    group_key = "{attr.tenant}"
  }
}
`, ns.URL(), e.conn(dst)))
	code, rep, _ := migRun(t, 2*time.Minute, "-idle", "1s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if j := rep.Jobs[0]; j.Written != groups*per || j.Groups != groups {
		t.Errorf("written %d, groups %d", j.Written, j.Groups)
	}
	got := e.collect(t, dst, groups*per, 60*time.Second)
	if len(got) != groups*per {
		t.Fatalf("SQS FIFO holds %d, want %d", len(got), groups*per)
	}
	last := map[string]int{}
	for _, m := range got {
		g, seq, ok := natsParse([]byte(aws.ToString(m.Body)))
		group := m.Attributes["MessageGroupId"]
		if !ok || group != natsGroup(g) {
			t.Fatalf("message %q in group %q", aws.ToString(m.Body), group)
		}
		if p, ok := last[group]; ok && seq <= p {
			t.Fatalf("group %s: %d after %d", group, seq, p)
		}
		last[group] = seq
	}
}

// Credentials the broker refuses end the migration at once, with the
// broker's words, instead of after -connect-timeout (2 minutes by
// default) of retries: a Service Bus key that does not sign (source) and
// RabbitMQ's SASL refusal (sink). The daemon keeps retrying (the engine's
// open retries are untouched); only migrate gives up.
func TestMigrateRefusedCredentialsFailAtOnce(t *testing.T) {
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"orders"},{"name":"sess","requiresSession":true}]}`)
	sbSend(t, sbClient(t, srv), "orders", &azservicebus.Message{Body: []byte("kept")})
	out := e.createQueue(t, "out", false, nil)
	sbSetAWSEnv(t)
	wrongKey := strings.Replace(srv.Conn, sbKey, "d3Jvbmcga2V5IGZvciB0aGUgdGVzdA==", 1)
	if wrongKey == srv.Conn {
		t.Fatal("the connection string has no key to replace")
	}
	amqpURL, err := neturl.Parse(amqpURL(t))
	if err != nil {
		t.Fatal(err)
	}
	amqpURL.User = neturl.UserPassword(amqpURL.User.Username(), "wrong")
	sessionsMissing := fmt.Sprintf(`
pipeline "p" {
  source "servicebus" {
%s    queue = "sess"
  }
  sink "sqs" {
%s  }
}
`, sbConn(srv), e.conn(out))
	for _, tc := range []struct {
		name, hcl, want string
		dry             bool // a dry run: it browses (peeks) instead of receiving
	}{
		{"servicebus source", fmt.Sprintf(`
pipeline "p" {
  source "servicebus" {
    connection_string = %q
    queue = "orders"
  }
  sink "sqs" {
%s  }
}
`, wrongKey, e.conn(out)), "nauthorized", false},
		{"servicebus https source", fmt.Sprintf(`
pipeline "p" {
  source "servicebus" {
    connection_string = %q
    transport = "https"
    endpoint  = %q
    queue = "orders"
  }
  sink "sqs" {
%s  }
}
`, wrongKey, srv.HTTP, e.conn(out)), "401", false},
		{"servicebus sink", fmt.Sprintf(`
pipeline "p" {
  source "sqs" {
%s  }
  sink "servicebus" {
    connection_string = %q
    queue = "orders"
  }
}
`, e.conn(out), wrongKey), "nauthorized", false},
		// Not credentials, but refused for good as well: a session queue
		// read without a sessions block waited out -connect-timeout.
		{"servicebus session queue without sessions", sessionsMissing, "add a sessions { } block to the source", false},
		// Its dry run restarted the peek with backoff for ever (an audit
		// stopped it after ten minutes).
		{"servicebus session queue without sessions, dry run", sessionsMissing, "add a sessions { } block to the source", true},
		{"amqp sink", fmt.Sprintf(`
pipeline "p" {
  source "servicebus" {
%s    queue = "orders"
  }
  sink "amqp" {
    url     = %q
    address = "/queue/qbridge-e2e-refused"
  }
}
`, sbConn(srv), amqpURL.String()), "refused the credentials", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			args := []string{"-progress", "off"}
			if tc.dry {
				args = append(args, "-dry-run")
			}
			code, rep, _ := migRun(t, 90*time.Second, append(args, migWriteConfig(t, tc.hcl))...)
			took := time.Since(start)
			t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), rep.Reason)
			if code == 0 || rep.Outcome != migrate.OutcomeFailed || !strings.Contains(rep.Reason, tc.want) {
				t.Fatalf("exit %d, outcome %s, reason %q; want a failure saying %q", code, rep.Outcome, rep.Reason, tc.want)
			}
			if took > 60*time.Second {
				t.Errorf("took %s: the default -connect-timeout (2m) would be a retry loop, not an answer", took)
			}
		})
	}
	if n := migSBCount(t, sbClient(t, srv), "orders", sbMain); n != 1 {
		t.Errorf("the source holds %d messages after the refusals, want 1", n)
	}
}

// Deferred messages (an application's DeferMessage) are receivable only by
// sequence number, so a move never gets them, and the queue's active count
// leaves them out: a move said complete and verified with them left
// behind. The count now finds them (the total less each counted state),
// and the move ends not drained, naming them.
func TestMigrateLeavesDeferredMessagesAndSaysSo(t *testing.T) {
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"src","lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	var msgs []*azservicebus.Message
	for i := range 10 {
		msgs = append(msgs, &azservicebus.Message{Body: []byte(fmt.Sprintf("m%d", i))})
	}
	sbSend(t, c, "src", msgs...)
	r, err := c.NewReceiverForQueue("src", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Received until all three came: the SDK credits the link for three,
	// and one left in its cache at Close stayed locked for the queue's
	// lock duration (30 s), which the move then waited out.
	var got []*azservicebus.ReceivedMessage
	for len(got) < 3 {
		ms, err := r.ReceiveMessages(sbCtx(t, 10*time.Second), 3-len(got), nil)
		if err != nil {
			t.Fatalf("received %d: %v", len(got), err)
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if err := r.DeferMessage(sbCtx(t, 10*time.Second), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = r.Close(context.Background())
	out := e.createQueue(t, "out", false, nil)
	sbSetAWSEnv(t)
	code, rep, _ := migRun(t, 2*time.Minute, "-idle", "2s", "-progress", "off", migWriteConfig(t, fmt.Sprintf(`
pipeline "p" {
  source "servicebus" {
%s    queue = "src"
  }
  sink "sqs" {
%s  }
}
`, sbConn(srv, fmt.Sprintf("management_endpoint = %q", srv.HTTP)), e.conn(out))))
	deferred := int64(len(got))
	if code != 4 || rep.Outcome != migrate.OutcomeNotDrained || rep.Jobs[0].LeftBehind["deferred"] != deferred ||
		!strings.Contains(rep.Reason, "deferred messages stay at the source") {
		t.Fatalf("exit %d, outcome %s, left behind %v, source after %+v: %s", code, rep.Outcome, rep.Jobs[0].LeftBehind, rep.Jobs[0].SourceAfter, rep.Reason)
	}
	if w := rep.Jobs[0].Written; w != int64(len(msgs))-deferred {
		t.Errorf("written %d, want the %d not deferred", w, int64(len(msgs))-deferred)
	}
}

// A dry run of a session queue receives its sample and hands it back,
// which raises each sampled message's delivery count; the move after it
// took those for an interrupted run's deliveries and said "up to N of the
// messages may be there twice" after the dry run users are advised to do
// first. The dry run records what it raised, as for SQS, and reads its
// whole sample (it stopped at one message a session), or a part of the
// queue.
func TestMigrateSessionsDryRunIsNoEarlierWrite(t *testing.T) {
	const groups, per = 4, 5
	for _, sample := range []int{100, 7} {
		t.Run(fmt.Sprintf("sample %d", sample), func(t *testing.T) {
			e := sqsSetup(t)
			srv := sbStartServer(t, `{"queues":[{"name":"sessions","requiresSession":true,"lockDuration":"PT30S"}]}`)
			c := sbClient(t, srv)
			sbSend(t, c, "sessions", sbSessionMessages(groups, per)...)
			out := e.createQueue(t, "out", false, nil)
			sbSetAWSEnv(t)
			t.Setenv("XDG_STATE_HOME", t.TempDir()) // the dry run's record, this test's own
			cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sessions-to-sqs" {
  source "servicebus" {
%s    queue = "sessions"
    sessions {
      idle_timeout = "1s"
    }
  }
  sink "sqs" {
%s  }
}
`, sbConn(srv, fmt.Sprintf("management_endpoint = %q", srv.HTTP)), e.conn(out)))
			_, rep, _ := migRun(t, 3*time.Minute, "-dry-run", "-sample", fmt.Sprint(sample), "-idle", "2s", "-progress", "off", cfg)
			if want := min(sample, groups*per); rep.Jobs[0].DryRun == nil || rep.Jobs[0].DryRun.WouldWrite < int64(want) {
				t.Fatalf("dry run: outcome %s, %+v, want %d read: %s", rep.Outcome, rep.Jobs[0].DryRun, want, rep.Reason)
			}
			code, rep, _ := migRun(t, 3*time.Minute, "-idle", "2s", "-progress", "off", cfg)
			if code != 0 || rep.Outcome != migrate.OutcomeComplete {
				t.Fatalf("move: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
			}
			j := rep.Jobs[0]
			if j.Written != groups*per {
				t.Errorf("written %d, want %d", j.Written, groups*per)
			}
			if j.Verification == nil || !j.Verification.Verified || strings.Contains(j.Verification.Note, "twice") || j.Redelivered != 0 {
				t.Errorf("after a dry run: redelivered %d, verification %+v; want verified, no duplicate note", j.Redelivered, j.Verification)
			}
		})
	}
}

// sbSessionMessages is per messages in each of sessions sessions (s0,
// s1, ...), interleaved, with ids m000, m001, ...
func sbSessionMessages(sessions, per int) []*azservicebus.Message {
	var msgs []*azservicebus.Message
	for i := range sessions * per {
		msgs = append(msgs, &azservicebus.Message{
			MessageID: ptrTo(fmt.Sprintf("m%03d", i)), SessionID: ptrTo(fmt.Sprintf("s%d", i%sessions)),
			Body: []byte(fmt.Sprintf("body %d", i)),
		})
	}
	return msgs
}

// A session queue with more sessions than the source holds at once, and
// no management endpoint to count it: a worker keeps an emptied session
// for idle_timeout before it takes the next, a quiet spell longer than
// -idle, and the move took the first sessions' end for the queue's:
// "complete", exit 0, with two thirds of the queue left behind. The job
// now waits out the source's quiet spell.
func TestMigrateSessionsWithoutCountMovesEverySession(t *testing.T) {
	const sessions, per = 6, 5
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"sessions","requiresSession":true,"lockDuration":"PT30S"}]}`)
	c := sbClient(t, srv)
	sbSend(t, c, "sessions", sbSessionMessages(sessions, per)...)
	out := e.createQueue(t, "out", false, nil)
	sbSetAWSEnv(t)
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "sessions-uncounted" {
  source "servicebus" {
%s    queue = "sessions"
    sessions {
      max_concurrent = 2
      idle_timeout   = "1500ms"
    }
  }
  sink "sqs" {
%s  }
}
`, sbConn(srv), e.conn(out)))
	code, rep, _ := migRun(t, 3*time.Minute, "-idle", "500ms", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("move: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if j := rep.Jobs[0]; j.Written != sessions*per {
		t.Errorf("written %d, want all %d: the job took a session's idle_timeout for the queue's end", j.Written, sessions*per)
	}
}

// A key with Send and Listen but not Manage cannot count the entity (401
// "'Manage' claim required"): the count was retried as a lost connection,
// and a move that had moved everything failed after -connect-timeout. The
// entity is now moved as one that cannot be counted.
func TestMigrateServiceBusWithoutManageRightMoves(t *testing.T) {
	const n = 20
	e := sqsSetup(t)
	srv := sbStartServer(t, `{"queues":[{"name":"src"}],
	  "sharedAccessPolicies":[{"name":"sendlisten","key":"c2VuZGxpc3RlbmtleQ==","rights":["Send","Listen"]}]}`)
	c := sbClient(t, srv)
	var msgs []*azservicebus.Message
	for i := range n {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptrTo(fmt.Sprintf("m%03d", i)), Body: []byte(fmt.Sprintf("body %d", i))})
	}
	sbSend(t, c, "src", msgs...)
	out := e.createQueue(t, "out", false, nil)
	sbSetAWSEnv(t)
	conn := strings.NewReplacer("SharedAccessKeyName="+sbKeyName, "SharedAccessKeyName=sendlisten", "SharedAccessKey="+sbKey, "SharedAccessKey=c2VuZGxpc3RlbmtleQ==").Replace(srv.Conn)
	if conn == srv.Conn {
		t.Fatalf("the connection string %q names no key to replace", srv.Conn)
	}
	cfg := migWriteConfig(t, fmt.Sprintf(`
pipeline "no-manage" {
  source "servicebus" {
    connection_string   = %q
    management_endpoint = %q
    queue               = "src"
  }
  sink "sqs" {
%s  }
}
`, conn, srv.HTTP, e.conn(out)))
	code, rep, _ := migRun(t, 2*time.Minute, "-idle", "1s", "-connect-timeout", "20s", "-progress", "off", cfg)
	if code != 0 || rep.Outcome != migrate.OutcomeComplete {
		t.Fatalf("move: exit %d, outcome %s: %s", code, rep.Outcome, rep.Reason)
	}
	if j := rep.Jobs[0]; j.Written != n {
		t.Errorf("written %d, want %d", j.Written, n)
	}
}
