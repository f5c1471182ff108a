package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
)

func natsCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// natsCreateStream creates a file stream on the given subjects.
func natsCreateStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(natsCtx(t, 10*time.Second), jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage,
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	return st
}

// natsBody is the body of message seq of group g; natsParse reads it back.
func natsBody(g, seq int) string { return fmt.Sprintf("g%03d:%05d", g, seq) }

func natsGroup(g int) string { return fmt.Sprintf("tenant-%03d", g) }

func natsParse(body []byte) (g, seq int, ok bool) {
	a, b, found := strings.Cut(string(body), ":")
	if !found || len(a) < 2 || a[0] != 'g' {
		return 0, 0, false
	}
	g, err1 := strconv.Atoi(a[1:])
	seq, err2 := strconv.Atoi(b)
	return g, seq, err1 == nil && err2 == nil
}

// natsPublishGrouped publishes groups×perGroup messages to JetStream,
// interleaved (message 0 of every group, then message 1...), each with the
// attribute "tenant" (a header) naming its group and a unique Nats-Msg-Id.
// It waits for every PubAck. subject renders the subject of group g.
func natsPublishGrouped(t testing.TB, js jetstream.JetStream, subject func(g int) string, groups, perGroup, from int) {
	t.Helper()
	ctx := natsCtx(t, 60*time.Second)
	var futures []jetstream.PubAckFuture
	for seq := from; seq < from+perGroup; seq++ {
		for g := range groups {
			m := nats.NewMsg(subject(g))
			m.Data = []byte(natsBody(g, seq))
			m.Header.Set("tenant", natsGroup(g))
			m.Header.Set(nats.MsgIdHdr, natsBody(g, seq))
			f, err := js.PublishMsgAsync(m)
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			futures = append(futures, f)
		}
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish ack: %v", err)
		case <-ctx.Done():
			t.Fatal("publish acks: timed out")
		}
	}
}

// natsRec is one message read back from a stream.
type natsRec struct {
	Subject string
	Header  nats.Header
	Body    string
	Group   int
	Seq     int
}

// natsCollector reads a stream from its start through an ordered consumer,
// in stream order, for as long as the test runs.
type natsCollector struct {
	t    testing.TB
	mu   sync.Mutex
	recs []natsRec
	cc   jetstream.ConsumeContext
}

func natsCollect(t testing.TB, js jetstream.JetStream, stream string, filter ...string) *natsCollector {
	t.Helper()
	c := &natsCollector{t: t}
	cons, err := js.OrderedConsumer(natsCtx(t, 10*time.Second), stream, jetstream.OrderedConsumerConfig{FilterSubjects: filter})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", stream, err)
	}
	c.cc, err = cons.Consume(func(m jetstream.Msg) {
		r := natsRec{Subject: m.Subject(), Header: m.Headers(), Body: string(m.Data())}
		r.Group, r.Seq, _ = natsParse(m.Data())
		c.mu.Lock()
		c.recs = append(c.recs, r)
		c.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.cc.Stop)
	return c
}

// Records returns a copy of what was read so far.
func (c *natsCollector) Records() []natsRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]natsRec(nil), c.recs...)
}

// Unique returns how many distinct bodies were read.
func (c *natsCollector) Unique() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]struct{}, len(c.recs))
	for _, r := range c.recs {
		seen[r.Body] = struct{}{}
	}
	return len(seen)
}

// WaitUnique waits until n distinct messages were read.
func (c *natsCollector) WaitUnique(n int, timeout time.Duration, d *daemon) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := c.Unique()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			logs := ""
			if d != nil {
				logs = e2etest.Tail(d.Logs(), 40)
			}
			c.t.Fatalf("after %s: %d of %d messages arrived\n%s", timeout, got, n, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// natsCheckOrder checks that every message (group g < groups, seq in
// [0, perGroup)) arrived and that the first arrivals of each group are in
// publish order; a violation fails the test. It returns how many arrivals
// were duplicates.
func natsCheckOrder(t testing.TB, recs []natsRec, groups, perGroup int) (dups int) {
	t.Helper()
	missing, disorder, dups, detail := natsOrderReport(recs, groups, perGroup)
	if missing+disorder > 0 {
		t.Errorf("%d missing, %d out of order in %d records (%d duplicates):\n%s", missing, disorder, len(recs), dups, detail)
	}
	return dups
}

// natsOrderReport counts missing messages and first arrivals out of
// publish order (a message arriving before an earlier one of its group),
// with the first few cases described.
func natsOrderReport(recs []natsRec, groups, perGroup int) (missing, disorder, dups int, detail string) {
	var b strings.Builder
	note := func(format string, args ...any) {
		if strings.Count(b.String(), "\n") < 10 {
			fmt.Fprintf(&b, format+"\n", args...)
		}
	}
	seen := map[string]bool{}
	maxSeq := make([]int, groups)
	for i := range maxSeq {
		maxSeq[i] = -1
	}
	for _, r := range recs {
		if seen[r.Body] {
			dups++
			continue
		}
		seen[r.Body] = true
		if r.Group < 0 || r.Group >= groups || r.Seq < 0 || r.Seq >= perGroup {
			note("unexpected message %q on %s", r.Body, r.Subject)
			disorder++
			continue
		}
		if r.Seq < maxSeq[r.Group] {
			disorder++
			note("group %d: seq %d arrived after seq %d", r.Group, r.Seq, maxSeq[r.Group])
		}
		maxSeq[r.Group] = max(maxSeq[r.Group], r.Seq)
	}
	for g := range groups {
		for seq := range perGroup {
			if !seen[natsBody(g, seq)] {
				missing++
				note("group %d: seq %d missing", g, seq)
			}
		}
	}
	return missing, disorder, dups, b.String()
}

// natsCheckOrderAfterRestart is natsCheckOrder for the restart cases
// (kill -9, SIGTERM with messages in flight): a loss or a first arrival out
// of group order fails the test. It returns the duplicates and the order
// violations for the test's log line.
func natsCheckOrderAfterRestart(t testing.TB, recs []natsRec, groups, perGroup int) (dups, disorder int) {
	t.Helper()
	missing, disorder, dups, detail := natsOrderReport(recs, groups, perGroup)
	if missing > 0 {
		t.Errorf("%d messages missing (%d records):\n%s", missing, len(recs), detail)
	}
	if disorder > 0 {
		t.Errorf("%d first arrivals out of group order after the restart:\n%s", disorder, detail)
	}
	return dups, disorder
}

// natsPipeline renders a JetStream → JetStream pipeline whose group key is
// the "tenant" attribute. extra goes inside the pipeline block.
func natsPipeline(name, srcURL, srcStream, durable, sinkURL, sinkSubject, extra string) string {
	return fmt.Sprintf(`
pipeline %q {
  source "nats" {
    url            = %q
    subject        = "in.>"
    reconnect_wait = "200ms"
    jetstream {
      stream          = %q
      durable         = %q
      ack_wait        = "5s"
      fetch_wait      = "500ms"
      max_ack_pending = 5000
      fetch_batch     = 256
    }
  }
  sink "nats" {
    url            = %q
    subject        = %q
    reconnect_wait = "200ms"
    jetstream {
      ack_timeout = "2s"
    }
  }
  mapping {
    group_key = "{attr.tenant}"
  }
  ordering {
    max_in_flight = 2000
    per_group     = 1
  }
  retry {
    initial = "50ms"
    max     = "500ms"
  }
  lock {
    extend_every = "1s"
    extend_by    = "5s"
  }
  shutdown_timeout = "5s"
%s
}
`, name, srcURL, srcStream, durable, sinkURL, sinkSubject, extra)
}
