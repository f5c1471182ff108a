package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
	"github.com/qbridge/qbridge/mapping/sqsmap"
)

// sqsTypedAttrs are ten typed attributes (SQS's limit) with custom labels,
// a 38-digit Number and Unicode values.
func sqsTypedAttrs(i int) map[string]types.MessageAttributeValue {
	s := func(dt, v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String(dt), StringValue: aws.String(v)}
	}
	bin := func(dt string, v []byte) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String(dt), BinaryValue: v}
	}
	return map[string]types.MessageAttributeValue{
		"str":       s("String", fmt.Sprintf("plain %d", i)),
		"doc":       s("String.json", `{"a":[1,2,{"b":"c"}],"ü":"ñ"}`),
		"num":       s("Number", "-12.50e3"),
		"qty":       s("Number.int", strconv.Itoa(40+i)),
		"ratio":     s("Number.float", "0.1"),
		"big":       s("Number", "12345678901234567890123456789012345678"),
		"raw":       bin("Binary", []byte{0, 1, 2, 0xfe, 0xff, byte(i)}),
		"img":       bin("Binary.png", []byte("\x89PNG\r\n\x1a\n\x00\x00")),
		"greeting":  s("String", "héllo wörld — Привет 你好 ☃ \uFFFD"),
		"my-label_": s("String.my-label_9", "ø"),
	}
}

// TestSqsTypedAttributesSurvive: SQS → qbridge → SQS keeps every typed
// attribute (custom labels, 38-digit Number, binary, Unicode values) and the
// body byte for byte, on a standard and a FIFO pair of queues; fauxqs's
// MD5OfMessageAttributes of what arrived equals sqsmap.MD5OfAttributes of
// what was sent.
func TestSqsTypedAttributesSurvive(t *testing.T) {
	e := sqsSetup(t)
	srcStd, dstStd := e.createQueue(t, "src", false, nil), e.createQueue(t, "dst", false, nil)
	srcFifo, dstFifo := e.createQueue(t, "src", true, nil), e.createQueue(t, "dst", true, nil)
	pipe := func(name, src, dst string) string {
		return fmt.Sprintf(`
pipeline %q {
  source "sqs" {
%s  }
  sink "sqs" {
%s  }
}
`, name, e.conn(src, `wait_time = "1s"`), e.conn(dst))
	}
	startDaemon(t, pipe("std", srcStd, dstStd)+pipe("fifo", srcFifo, dstFifo))

	const n = 5
	for _, q := range []struct{ src, dst string }{{srcStd, dstStd}, {srcFifo, dstFifo}} {
		fifo := strings.HasSuffix(q.src, ".fifo")
		var entries []types.SendMessageBatchRequestEntry
		want := map[string]map[string]types.MessageAttributeValue{}
		for i := range n {
			body := fmt.Sprintf("msg %d: ünïcødé ✓ 日本語 <xml> & \t\r\n", i)
			en := types.SendMessageBatchRequestEntry{MessageBody: aws.String(body), MessageAttributes: sqsTypedAttrs(i)}
			if fifo {
				en.MessageGroupId = aws.String("g" + strconv.Itoa(i%2))
				en.MessageDeduplicationId = aws.String("d" + strconv.Itoa(i))
			}
			entries = append(entries, en)
			want[body] = sqsTypedAttrs(i)
		}
		e.sendBatch(t, q.src, entries)
		got := e.collect(t, q.dst, n, 20*time.Second)
		if len(got) != n {
			t.Fatalf("%s: %d of %d messages arrived", q.dst, len(got), n)
		}
		for _, m := range got {
			body := aws.ToString(m.Body)
			w, ok := want[body]
			if !ok {
				t.Errorf("unexpected body %q", body)
				continue
			}
			delete(want, body)
			if aws.ToString(m.MD5OfBody) != sqsmap.MD5OfBody(body) {
				t.Errorf("MD5OfBody %s, want %s", aws.ToString(m.MD5OfBody), sqsmap.MD5OfBody(body))
			}
			if len(m.MessageAttributes) != len(w) {
				t.Errorf("%q: %d attributes, want %d: %v", body, len(m.MessageAttributes), len(w), slices.Sorted(maps.Keys(m.MessageAttributes)))
			}
			for name, wa := range w {
				ga, ok := m.MessageAttributes[name]
				if !ok {
					t.Errorf("%q: attribute %q missing", body, name)
					continue
				}
				if sqsAttr(ga) != sqsAttr(wa) || (wa.BinaryValue != nil && !bytes.Equal(ga.BinaryValue, wa.BinaryValue)) {
					t.Errorf("%q: attribute %q = %s, want %s", body, name, sqsAttr(ga), sqsAttr(wa))
				}
			}
			if got, want := aws.ToString(m.MD5OfMessageAttributes), sqsmap.MD5OfAttributes(w); got != want {
				t.Errorf("%q: server MD5OfMessageAttributes %s, want sqsmap's %s of the source attributes", body, got, want)
			}
			if fifo {
				if g := m.Attributes["MessageGroupId"]; g != "g0" && g != "g1" {
					t.Errorf("MessageGroupId %q", g)
				}
			}
		}
	}
}

// TestSqsFIFOOrderTwoDaemons: two qbridge daemons drain one FIFO queue of 60
// interleaved groups × 10 messages into a FIFO sink queue. Every group
// arrives complete and in order, and both daemons took part.
func TestSqsFIFOOrderTwoDaemons(t *testing.T) {
	e := sqsSetup(t)
	src, dst := e.createQueue(t, "src", true, nil), e.createQueue(t, "dst", true, nil)
	cfg := fmt.Sprintf(`
pipeline "fifo" {
  source "sqs" {
%s  }
  sink "sqs" {
%s  }
  batch { linger = "2ms" }
}
`, e.conn(src, `wait_time = "1s"`), e.conn(dst))
	d1, d2 := startDaemon(t, cfg), startDaemon(t, cfg)

	const groups, per = 60, 10
	var entries []types.SendMessageBatchRequestEntry
	for s := range per {
		for g := range groups {
			entries = append(entries, types.SendMessageBatchRequestEntry{
				MessageBody:            aws.String(fmt.Sprintf("g%02d-%03d", g, s)),
				MessageGroupId:         aws.String(fmt.Sprintf("g%02d", g)),
				MessageDeduplicationId: aws.String(fmt.Sprintf("g%02d-%03d", g, s)),
			})
		}
	}
	start := time.Now()
	e.sendBatch(t, src, entries)

	next := map[string]int{}
	dups, seen := 0, map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < groups*per && time.Now().Before(deadline) {
		for _, m := range e.receive(t, dst, 1, true) {
			body := aws.ToString(m.Body)
			g, sq, _ := strings.Cut(body, "-")
			if gid := m.Attributes["MessageGroupId"]; gid != g {
				t.Errorf("%s: MessageGroupId %q", body, gid)
			}
			if seen[body] {
				dups++
				continue
			}
			seen[body] = true
			n, _ := strconv.Atoi(sq)
			if n != next[g] {
				t.Errorf("group %s: got %d, want %d (order broken)", g, n, next[g])
			}
			next[g] = n + 1
		}
	}
	if len(seen) != groups*per {
		t.Fatalf("%d of %d messages arrived", len(seen), groups*per)
	}
	r1, r2 := d1.metric("qbridge_messages_received_total"), d2.metric("qbridge_messages_received_total")
	s1, s2 := d1.metric("qbridge_messages_sent_total"), d2.metric("qbridge_messages_sent_total")
	t.Logf("%d messages in %s; daemon 1 received %v sent %v, daemon 2 received %v sent %v; %d duplicates at the sink",
		groups*per, time.Since(start).Round(time.Millisecond), r1, s1, r2, s2, dups)
	if elapsed := time.Since(start); elapsed > 10*time.Second || os.Getenv("QBRIDGE_SQS_E2E_DEBUG") != "" {
		// Seen once under load: 30 s (the default visibility timeout) with
		// one daemon idle after its first batch. Show what the daemons said.
		t.Logf("slow FIFO run (%s): warnings and errors of the daemons follow", elapsed.Round(time.Millisecond))
		for i, d := range []*daemon{d1, d2} {
			for _, l := range strings.Split(d.Logs(), "\n") {
				if strings.Contains(l, `"WARN"`) || strings.Contains(l, `"ERROR"`) || strings.Contains(l, "xpire") {
					t.Logf("daemon %d: %.400s", i+1, l)
				}
			}
		}
	}
	if r1 == 0 || r2 == 0 {
		t.Errorf("one daemon did no work: received %v and %v", r1, r2)
	}
	if v, nv, _ := e.approx(t, src); v+nv != 0 {
		t.Errorf("source queue still holds %d visible + %d in flight", v, nv)
	}
}

// sqsStreamBodies returns the bodies of the stored messages and how many
// stored messages repeat a body.
func sqsStreamBodies(msgs []interface{ Data() []byte }) (map[string]int, int) {
	bodies, dups := map[string]int{}, 0
	for _, m := range msgs {
		b := string(m.Data())
		if bodies[b] > 0 {
			dups++
		}
		bodies[b]++
	}
	return bodies, dups
}

// TestSqsNoLossSinkOutageAndKill: SQS → JetStream while the NATS server is
// stopped for longer than the visibility timeout and restarted, then while
// the daemon is SIGKILLed mid-stream and restarted. Every message arrives.
func TestSqsNoLossSinkOutageAndKill(t *testing.T) {
	t.Parallel()
	e := sqsSetup(t)
	src := e.createQueue(t, "src", false, map[string]string{"VisibilityTimeout": "4"})
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	sqsCreateStream(t, js, "OUT", "sqs.out")
	cfg := fmt.Sprintf(`
pipeline "loss" {
  source "sqs" {
%s  }
  sink "nats" {
    url            = %q
    subject        = "sqs.out"
    reconnect_wait = "100ms"
    jetstream {
      stream      = "OUT"
      ack_timeout = "1s"
    }
  }
  retry {
    initial = "100ms"
    max = "500ms"
  }
  lock {
    extend_every = "1s"
    extend_by = "4s"
  }
}
`, e.conn(src, `wait_time = "1s"`), ns.URL())
	d1 := startDaemon(t, cfg)

	batch := func(from, to int) []types.SendMessageBatchRequestEntry {
		var bs []string
		for i := from; i < to; i++ {
			bs = append(bs, fmt.Sprintf("m%04d", i))
		}
		return sqsBodies(bs...)
	}
	stored := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "OUT")
		if err != nil {
			return -1
		}
		info, err := s.Info(ctx)
		if err != nil {
			return -1
		}
		return int(info.State.Msgs)
	}

	// Phase 1: the sink's server goes away mid-stream for 5 s (longer than
	// the 4 s visibility timeout).
	e.sendBatch(t, src, batch(0, 200))
	eventually(t, 20*time.Second, "first messages at the sink", func() bool { return stored() >= 20 })
	ns.Stop()
	e.sendBatch(t, src, batch(200, 400))
	time.Sleep(5 * time.Second)
	retried := d1.metric("qbridge_messages_retried_total")
	ns.Start()

	// Phase 2: SIGKILL while messages are still being sent to the source and
	// bridged, then restart.
	eventually(t, 30*time.Second, "400 messages after the outage", func() bool { return stored() >= 400 })
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		for i := 400; i < 1000; i += 50 {
			e.sendBatch(t, src, batch(i, i+50))
		}
	}()
	eventually(t, 20*time.Second, "messages flowing again", func() bool { return stored() >= 450 })
	sent1 := d1.metric("qbridge_messages_sent_total")
	d1.Kill()
	killedAt := stored()
	<-sending
	e.sendBatch(t, src, batch(1000, 1100))
	d2 := startDaemon(t, cfg)

	const total = 1100
	eventually(t, 40*time.Second, "every message at the sink", func() bool { return stored() >= total })
	var msgs []interface{ Data() []byte }
	for _, m := range sqsStreamMsgs(t, js, "OUT", total, 5*time.Second) {
		msgs = append(msgs, m)
	}
	bodies, dups := sqsStreamBodies(msgs)
	for i := range total {
		if bodies[fmt.Sprintf("m%04d", i)] == 0 {
			t.Errorf("m%04d lost", i)
		}
	}
	sent2 := d2.metric("qbridge_messages_sent_total")
	t.Logf("sink outage: %v retries; SIGKILL with %d of 1000 sent stored; stream holds %d messages for %d unique (%d duplicates stored: JetStream drops re-sends by Nats-Msg-Id); sends confirmed: ≥ %v before the kill + %v after",
		retried, killedAt, len(msgs), len(bodies), dups, sent1, sent2)
	if retried == 0 {
		t.Errorf("no retries while the sink was down")
	}
	if v, nv, _ := e.approx(t, src); v+nv != 0 {
		t.Errorf("source queue still holds %d visible + %d in flight", v, nv)
	}
}

// TestSqsVisibilityExtendedWhileSinkDown: a 2 s visibility timeout and a
// sink that is down for 7 s: the lock heartbeat keeps the messages
// invisible, so SQS never hands them out again (received once, and
// ApproximateReceiveCount 1 carried to the destination).
func TestSqsVisibilityExtendedWhileSinkDown(t *testing.T) {
	e := sqsSetup(t)
	src := e.createQueue(t, "src", false, map[string]string{"VisibilityTimeout": "2"})
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	sqsCreateStream(t, js, "VIS", "vis.out")
	d := startDaemon(t, fmt.Sprintf(`
pipeline "vis" {
  source "sqs" {
%s  }
  sink "nats" {
    url            = %q
    subject        = "vis.out"
    reconnect_wait = "100ms"
    jetstream {
      stream      = "VIS"
      ack_timeout = "1s"
    }
  }
  mapping { carry_source = true }
  retry {
    initial = "200ms"
    max = "1s"
  }
  lock {
    extend_every = "500ms"
    extend_by = "2s"
  }
}
`, e.conn(src, `wait_time = "1s"`), ns.URL()))

	ns.Stop()
	const n = 8
	var bs []string
	for i := range n {
		bs = append(bs, fmt.Sprintf("slow-%d", i))
	}
	e.sendBatch(t, src, sqsBodies(bs...))
	eventually(t, 10*time.Second, "the messages received", func() bool { return d.metric("qbridge_messages_received_total") >= n })
	time.Sleep(7 * time.Second) // 3.5 × the visibility timeout
	if _, nv, _ := e.approx(t, src); nv != n {
		t.Errorf("%d messages in flight during the outage, want %d", nv, n)
	}
	retried := d.metric("qbridge_messages_retried_total")
	ns.Start()
	msgs := sqsStreamMsgs(t, js, "VIS", n, 20*time.Second)
	if len(msgs) != n {
		t.Fatalf("%d of %d messages stored", len(msgs), n)
	}
	for _, jm := range msgs {
		m, err := natsmap.Decode(&nats.Msg{Subject: jm.Subject(), Header: jm.Headers(), Data: jm.Data()}, natsmap.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Source.Protocol != "sqs" || m.Source.DeliveryCount != 1 {
			t.Errorf("%s: carried source %s, ApproximateReceiveCount %d; want sqs, 1", m.Body, m.Source.Protocol, m.Source.DeliveryCount)
		}
	}
	eventually(t, 10*time.Second, "acks", func() bool { return d.metric("qbridge_messages_acked_total") >= n })
	if got := d.metric("qbridge_messages_received_total"); got != n {
		t.Errorf("received %v times, want %d: SQS redelivered while the sink was down", got, n)
	}
	if retried == 0 {
		t.Errorf("no retries while the sink was down")
	}
	t.Logf("%v sink retries over 7 s with a 2 s visibility timeout; received %v, sent %v",
		retried, d.metric("qbridge_messages_received_total"), d.metric("qbridge_messages_sent_total"))
}

// TestSqsDeadLetter: the engine's dead-letter sink (an SQS queue) gets a
// message whose group_key template needs a missing attribute (reason
// mapping) and one too large for the NATS sink's limit (reason too-large),
// each as the source delivered it, with DeadLetterReason and
// DeadLetterErrorDescription; the others arrive. Without a dead_letter block,
// a message that keeps failing transiently is nacked until SQS's own
// RedrivePolicy (maxReceiveCount 2) moves it to the queue's native DLQ.
func TestSqsDeadLetter(t *testing.T) {
	e := sqsSetup(t)
	src, dlq := e.createQueue(t, "src", false, nil), e.createQueue(t, "dlq", false, nil)
	native := e.createQueue(t, "native-dlq", false, nil)
	src2 := e.createQueue(t, "src2", false, map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, e.queueArn(t, native)),
	})
	ns := startNATS(t)
	nc, _ := e2etest.ConnectNATS(t, ns.ClientURL())
	sub, err := nc.SubscribeSync("dl.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, fmt.Sprintf(`
pipeline "engine-dlq" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "dl.{group}"
  }
  mapping {
    group_key        = "{attr.tenant}"
    max_message_size = 1024
  }
  dead_letter {
    sink "sqs" {
%s    }
  }
}

pipeline "native-redrive" {
  source "sqs" {
%s  }
  sink "nats" {
    url     = %q
    subject = "nostream.here" # JetStream publish without a stream: no responders, a transient error
    jetstream {
      ack_timeout = "1s"
    }
  }
  retry {
    max_attempts = 1
  }
}
`, e.conn(src, `wait_time = "1s"`), ns.ClientURL(), e.conn(dlq), e.conn(src2, `wait_time = "1s"`, `nack_backoff = "1s"`), ns.ClientURL()))

	tenant := func(v string) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String(v)},
			"qty":    {DataType: aws.String("Number.int"), StringValue: aws.String("7")},
		}
	}
	noTenant := map[string]types.MessageAttributeValue{
		"qty": {DataType: aws.String("Number.int"), StringValue: aws.String("7")},
		"img": {DataType: aws.String("Binary.png"), BinaryValue: []byte{0x89, 'P', 'N', 'G'}},
	}
	big := strings.Repeat("x", 2000)
	e.sendBatch(t, src, []types.SendMessageBatchRequestEntry{
		{MessageBody: aws.String("ok-a"), MessageAttributes: tenant("a")},
		{MessageBody: aws.String("no-tenant ✓"), MessageAttributes: noTenant},
		{MessageBody: aws.String(big), MessageAttributes: tenant("c")},
		{MessageBody: aws.String("ok-b"), MessageAttributes: tenant("b")},
	})
	e.sendBatch(t, src2, []types.SendMessageBatchRequestEntry{
		{MessageBody: aws.String("keeps failing"), MessageAttributes: tenant("z")},
	})

	got := map[string]string{}
	for range 2 {
		m, err := sub.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("NATS: %v (got %v)", err, got)
		}
		got[string(m.Data)] = m.Subject
	}
	if got["ok-a"] != "dl.a" || got["ok-b"] != "dl.b" {
		t.Errorf("at the sink: %v", got)
	}

	dead := e.collect(t, dlq, 2, 15*time.Second)
	if len(dead) != 2 {
		t.Fatalf("%d messages in the dead-letter queue, want 2", len(dead))
	}
	for _, m := range dead {
		body := aws.ToString(m.Body)
		reason := aws.ToString(m.MessageAttributes["DeadLetterReason"].StringValue)
		desc := aws.ToString(m.MessageAttributes["DeadLetterErrorDescription"].StringValue)
		var want map[string]types.MessageAttributeValue
		switch body {
		case "no-tenant ✓":
			if reason != "mapping" || !strings.Contains(desc, "tenant") {
				t.Errorf("missing attribute: reason %q, description %q", reason, desc)
			}
			want = noTenant
		case big:
			if reason != "too-large" || desc == "" {
				t.Errorf("too large: reason %q, description %q", reason, desc)
			}
			want = tenant("c")
		default:
			t.Errorf("unexpected dead letter %.40q", body)
			continue
		}
		for name, w := range want {
			if g := m.MessageAttributes[name]; sqsAttr(g) != sqsAttr(w) {
				t.Errorf("%.20q: dead-lettered attribute %s = %s, want %s", body, name, sqsAttr(g), sqsAttr(w))
			}
		}
		t.Logf("dead letter %.20q: %s: %s", body, reason, desc)
	}
	if n := d.metricReaches(1, "qbridge_messages_dead_lettered_total", "pipeline=engine-dlq", "reason=mapping"); n != 1 {
		t.Errorf("dead_lettered{reason=mapping} = %v", n)
	}
	if n := d.metricReaches(1, "qbridge_messages_dead_lettered_total", "pipeline=engine-dlq", "reason=too-large"); n != 1 {
		t.Errorf("dead_lettered{reason=too-large} = %v", n)
	}

	red := e.collect(t, native, 1, 20*time.Second)
	if len(red) != 1 || aws.ToString(red[0].Body) != "keeps failing" {
		t.Fatalf("native DLQ: %d messages", len(red))
	}
	if g := red[0].MessageAttributes["qty"]; sqsAttr(g) != "Number.int:7" {
		t.Errorf("redriven qty = %s", sqsAttr(g))
	}
	nacked := d.metric("qbridge_messages_nacked_total", "pipeline=native-redrive")
	t.Logf("native redrive after %v nacks, ApproximateReceiveCount %s", nacked, red[0].Attributes["ApproximateReceiveCount"])
	if nacked < 2 {
		t.Errorf("nacked %v times, want ≥ 2", nacked)
	}
	if n := d.metric("qbridge_messages_dead_lettered_total", "pipeline=native-redrive"); n != 0 {
		t.Errorf("native-redrive dead-lettered %v by the engine", n)
	}
}

// TestSqsDelayFromScheduledAt: NATS → standard SQS queue; a message whose
// model ScheduledAt is 3 s ahead becomes invisible (DelaySeconds) until
// then, and decodes back with its ScheduledAt; one without arrives at once.
func TestSqsDelayFromScheduledAt(t *testing.T) {
	e := sqsSetup(t)
	dst := e.createQueue(t, "dst", false, nil)
	ns := startNATS(t)
	startDaemon(t, fmt.Sprintf(`
pipeline "delay" {
  source "nats" {
    url     = %q
    subject = "delay.in"
  }
  sink "sqs" {
%s  }
}
`, ns.ClientURL(), e.conn(dst)))
	nc, _ := e2etest.ConnectNATS(t, ns.ClientURL())
	at := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	for _, m := range []*mapping.Message{
		{Body: []byte("later"), ScheduledAt: at},
		{Body: []byte("now")},
	} {
		nm, err := natsmap.Encode(m, "delay.in", natsmap.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishMsg(nm); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	arrived := map[string]time.Time{}
	deadline := time.Now().Add(15 * time.Second)
	sawDelayed := false
	for len(arrived) < 2 && time.Now().Before(deadline) {
		for _, m := range e.receive(t, dst, 0, true) {
			arrived[aws.ToString(m.Body)] = time.Now()
			if aws.ToString(m.Body) == "later" {
				dm, err := sqsmap.Decode(m, sqsmap.DecodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !dm.ScheduledAt.Equal(at) {
					t.Errorf("ScheduledAt %v, want %v", dm.ScheduledAt, at)
				}
			}
		}
		if _, ok := arrived["now"]; ok && !sawDelayed {
			if _, _, delayed := e.approx(t, dst); delayed == 1 {
				sawDelayed = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	later, ok := arrived["later"]
	if !ok || arrived["now"].IsZero() {
		t.Fatalf("arrived: %v", arrived)
	}
	if later.Before(at) {
		t.Errorf("the scheduled message arrived %s before its time", at.Sub(later))
	}
	if later.After(at.Add(3 * time.Second)) {
		t.Errorf("the scheduled message arrived %s late", later.Sub(at))
	}
	if !arrived["now"].Before(at.Add(-time.Second)) {
		t.Errorf("the unscheduled message arrived only at %v", arrived["now"])
	}
	if !sawDelayed {
		t.Errorf("ApproximateNumberOfMessagesDelayed never showed the scheduled message")
	}
	t.Logf("scheduled for %s, visible %s after", at.Format(time.StampMilli), later.Sub(at).Round(time.Millisecond))
}

// TestSqsBatchEdges: a burst of 25 NATS messages goes to SQS in
// SendMessageBatch calls of at most 10 (seen through a recording proxy in
// front of fauxqs); one whose body exceeds the sink's max_message_size
// (1024) goes to the dead-letter queue with reason too-large while its
// batch-mates arrive.
func TestSqsBatchEdges(t *testing.T) {
	e := sqsSetup(t)
	dst, dlq := e.createQueue(t, "dst", false, nil), e.createQueue(t, "dlq", false, nil)
	proxy := sqsStartProxy(t, e.endpoint)
	ns := startNATS(t)
	d := startDaemon(t, fmt.Sprintf(`
pipeline "batch" {
  source "nats" {
    url     = %q
    subject = "batch.in"
  }
  sink "sqs" {
    queue_url         = %q
    endpoint          = %q
    region            = %q
    access_key_id     = "test"
    secret_access_key = "test"
    max_message_size  = 1024
    linger            = "50ms"
  }
  batch {
    size   = 100
    linger = "200ms"
  }
  dead_letter {
    sink "sqs" {
%s    }
  }
}
`, ns.ClientURL(), dst, proxy.URL, e.region, e.conn(dlq)))
	nc, _ := e2etest.ConnectNATS(t, ns.ClientURL())
	const n, oversize = 25, 7
	for i := range n {
		body := fmt.Sprintf("burst-%02d", i)
		if i == oversize {
			body = strings.Repeat("o", 1500)
		}
		if err := nc.Publish("batch.in", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got := e.collect(t, dst, n-1, 15*time.Second)
	seen := map[string]bool{}
	for _, m := range got {
		seen[aws.ToString(m.Body)] = true
	}
	for i := range n {
		if b := fmt.Sprintf("burst-%02d", i); i != oversize && !seen[b] {
			t.Errorf("%s missing", b)
		}
	}
	if len(got) != n-1 {
		t.Errorf("%d messages arrived, want %d", len(got), n-1)
	}
	dead := e.collect(t, dlq, 1, 10*time.Second)
	if len(dead) != 1 || len(aws.ToString(dead[0].Body)) != 1500 {
		t.Fatalf("dead-letter queue: %d messages", len(dead))
	}
	if r := aws.ToString(dead[0].MessageAttributes["DeadLetterReason"].StringValue); r != "too-large" {
		t.Errorf("DeadLetterReason %q", r)
	}
	batches := proxy.Calls("SendMessageBatch")
	singles := proxy.Calls("SendMessage")
	sum := len(singles)
	for _, b := range batches {
		if b > 10 {
			t.Errorf("a SendMessageBatch of %d entries", b)
		}
		sum += b
	}
	if sum != n-1 || !slices.Contains(batches, 10) {
		t.Errorf("SendMessageBatch entries %v + %d SendMessage: want %d entries with a full batch of 10", batches, len(singles), n-1)
	}
	t.Logf("sink calls: SendMessageBatch %v, SendMessage %d; dead letter: %s", batches, len(singles),
		aws.ToString(dead[0].MessageAttributes["DeadLetterErrorDescription"].StringValue))
	if s := d.metricReaches(float64(n-1), "qbridge_messages_sent_total"); s != float64(n-1) {
		t.Errorf("sent_total %v", s)
	}
}

// TestSqsNatsConfigsBothWays runs the example pipelines
// configs/sqs-to-nats.hcl and configs/nats-to-sqs.hcl, filled in through
// their environment variables, chained: SQS queue A → JetStream → SQS
// queue B. Typed attributes arrive in NATS as headers with their types in
// the envelope, and at B byte for byte as they were at A (same
// MD5OfMessageAttributes).
func TestSqsNatsConfigsBothWays(t *testing.T) {
	e := sqsSetup(t)
	a, b, dlq := e.createQueue(t, "a", false, nil), e.createQueue(t, "b", false, nil), e.createQueue(t, "dlq", false, nil)
	ns := startNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.ClientURL())
	// Both pipelines would create FROM_SQS (on from-sqs.* and from-sqs.>);
	// the test makes it first.
	sqsCreateStream(t, js, "FROM_SQS", "from-sqs.>")
	for k, v := range map[string]string{
		"QBRIDGE_SQS_SOURCE_QUEUE_URL":  a,
		"QBRIDGE_SQS_SINK_QUEUE_URL":    b,
		"QBRIDGE_SQS_DLQ_URL":           dlq,
		"QBRIDGE_SQS_ENDPOINT":          e.endpoint,
		"QBRIDGE_SQS_REGION":            e.region,
		"QBRIDGE_SQS_ACCESS_KEY_ID":     "test",
		"QBRIDGE_SQS_SECRET_ACCESS_KEY": "test",
		"QBRIDGE_NATS_URL":              ns.ClientURL(),
		"QBRIDGE_NATS_TO_SQS_SUBJECT":   "from-sqs.>",
		"QBRIDGE_NATS_TO_SQS_STREAM":    "FROM_SQS",
	} {
		t.Setenv(k, v)
	}
	if code, out, errs := runQbridge(t, "validate", "../configs/sqs-to-nats.hcl", "../configs/nats-to-sqs.hcl"); code != 0 {
		t.Fatalf("validate: %d\n%s%s", code, out, errs)
	}
	dir := t.TempDir()
	for _, f := range []string{"sqs-to-nats.hcl", "nats-to-sqs.hcl"} {
		src, err := os.ReadFile(filepath.Join("..", "configs", f))
		if err != nil {
			t.Fatal(err)
		}
		// The examples long-poll for 20 s; a test stop should not wait that long.
		src = bytes.Replace(src, []byte(`wait_time          = "20s"`), []byte(`wait_time          = "1s" `), 1)
		if err := os.WriteFile(filepath.Join(dir, f), src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "00-e2e.hcl"), []byte("log {\n  level  = \"debug\"\n  format = \"json\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonConfig(t, dir)

	attrs := func(i int) map[string]types.MessageAttributeValue {
		s := func(dt, v string) types.MessageAttributeValue {
			return types.MessageAttributeValue{DataType: aws.String(dt), StringValue: aws.String(v)}
		}
		return map[string]types.MessageAttributeValue{
			"qty":   s("Number.int", strconv.Itoa(42+i)),
			"price": s("Number", "19.90"),
			"big":   s("Number", "99999999999999999999999999999999999999"),
			"ok":    s("String.bool", "true"),
			"id":    s("String.uuid", "0b0c6a4e-2f8d-4c3e-9b0a-5f6e7d8c9b0a"),
			"note":  s("String", "naïve café ✓ 漢字"),
			"img":   {DataType: aws.String("Binary.png"), BinaryValue: []byte{0x89, 'P', 'N', 'G', 0, byte(i)}},
		}
	}
	const n = 3
	var entries []types.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, types.SendMessageBatchRequestEntry{MessageBody: aws.String(fmt.Sprintf("round trip %d ✓", i)), MessageAttributes: attrs(i)})
	}
	e.sendBatch(t, a, entries)

	got := e.collect(t, b, n, 20*time.Second)
	if len(got) != n {
		t.Fatalf("%d of %d messages back in SQS", len(got), n)
	}
	for _, m := range got {
		var i int
		if _, err := fmt.Sscanf(aws.ToString(m.Body), "round trip %d ✓", &i); err != nil {
			t.Fatalf("body %q", aws.ToString(m.Body))
		}
		w := attrs(i)
		// The NATS leg made A's MessageId the dedup id (Nats-Msg-Id), which
		// a standard queue carries in the envelope: the one documented
		// difference (README, "not round trips, by nature").
		user := maps.Clone(m.MessageAttributes)
		if env, ok := user[mapping.EnvelopeName]; ok {
			delete(user, mapping.EnvelopeName)
			dm, err := sqsmap.Decode(m, sqsmap.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if dm.DedupID == "" || dm.ID != aws.ToString(m.MessageId) {
				t.Errorf("envelope %s: id %q, dedup id %q", aws.ToString(env.StringValue), dm.ID, dm.DedupID)
			}
		}
		if len(user) != len(w) {
			t.Errorf("%d user attributes back: %v", len(user), slices.Sorted(maps.Keys(user)))
		}
		for name, wa := range w {
			if ga := user[name]; sqsAttr(ga) != sqsAttr(wa) {
				t.Errorf("attribute %q back as %s, want %s", name, sqsAttr(ga), sqsAttr(wa))
			}
		}
		if got, want := sqsmap.MD5OfAttributes(user), sqsmap.MD5OfAttributes(w); got != want {
			t.Errorf("MD5 of the user attributes at B %s, want %s (A's)", got, want)
		}
		if got, want := aws.ToString(m.MD5OfMessageAttributes), sqsmap.MD5OfAttributes(m.MessageAttributes); got != want {
			t.Errorf("server MD5OfMessageAttributes at B %s, want sqsmap's %s", got, want)
		}
	}

	// What the NATS leg held: plain headers, the types in the envelope.
	msgs := sqsStreamMsgs(t, js, "FROM_SQS", n, 5*time.Second)
	if len(msgs) != n {
		t.Fatalf("%d messages in FROM_SQS", len(msgs))
	}
	for _, jm := range msgs {
		h := jm.Headers()
		if jm.Subject() != "from-sqs._" {
			t.Errorf("subject %q, want from-sqs._ (no group key)", jm.Subject())
		}
		q, _ := strconv.Atoi(h.Get("qty"))
		if q < 42 || q >= 42+n || h.Get("ok") != "true" || h.Get("note") != "naïve café ✓ 漢字" {
			t.Errorf("NATS headers %v", h)
		}
		if env := h.Get(mapping.EnvelopeName); !strings.Contains(env, "Number.int") && !strings.Contains(env, "int32") {
			t.Errorf("envelope header %q does not carry qty's type", env)
		}
		dm, err := natsmap.Decode(&nats.Msg{Subject: jm.Subject(), Header: h, Data: jm.Data()}, natsmap.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := dm.Attr("qty"); !ok || v.DataType() != "Number.int" || v.Kind != mapping.KindInt32 {
			t.Errorf("qty decoded from NATS as %v %q", v.Kind, v.DataType())
		}
	}
	if s := d.metricReaches(float64(n), "qbridge_messages_sent_total", "pipeline=nats-to-sqs"); s != float64(n) {
		t.Errorf("nats-to-sqs sent %v", s)
	}
}
