package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// BenchmarkJetStreamReplicas measures what replicas do to throughput on
// one JetStream stream, all in the same run: the baseline is one replica
// on one consumer; then two replicas on that consumer (pinned: one
// receives, so about the same), and two partitions with one replica each
// (both receive). Each drains the same backlog (groups interleaved) into
// the JetStream sink. Reported: messages per second of each, their ratios
// to the baseline, and the replicas' CPU µs per message (getrusage of the
// waited-for children).
//
//	go test ./e2e/chaos -run '^$' -bench JetStreamReplicas -benchtime 3x
func BenchmarkJetStreamReplicas(b *testing.B) {
	const messages, groups = 20000, 48
	type setup struct {
		name       string
		replicas   int
		partitions int
	}
	setups := []setup{{"1 replica", 1, 0}, {"2 replicas, pinned", 2, 0}, {"2 partitions", 2, 2}}
	rate := make([]float64, len(setups))
	cpu := make([]float64, len(setups))
	qbridge(b)                                     // built before any CPU time is counted
	_, _ = drainOnce(b, 1, 0, messages/10, groups) // a warm-up (page cache, binary), not counted
	for range b.N {
		for k, s := range setups {
			r, c := drainOnce(b, s.replicas, s.partitions, messages, groups)
			rate[k] += r / float64(b.N)
			cpu[k] += c / float64(b.N)
		}
	}
	for k, s := range setups {
		b.Logf("%-20s %8.0f msg/s (%.2f× the baseline), %.1f CPU µs/msg", s.name, rate[k], rate[k]/rate[0], cpu[k])
	}
	b.ReportMetric(rate[0], "msg/s-1replica")
	b.ReportMetric(rate[1]/rate[0], "ratio-2pinned")
	b.ReportMetric(rate[2]/rate[0], "ratio-2partitions")
	b.ReportMetric(cpu[0], "cpu-µs/msg-1replica")
	b.ReportMetric(cpu[2], "cpu-µs/msg-2partitions")
}

// drainOnce publishes the backlog, starts the replicas and returns the
// messages per second until the sink holds all, and the replicas' CPU time
// per message.
func drainOnce(b *testing.B, replicas, partitions, messages, groups int) (perSec, cpuPerMsg float64) {
	b.StopTimer()
	src := e2etest.StartNATS(b)
	_, js := e2etest.ConnectNATS(b, src.URL())
	snk := startSink(b)
	stream := jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.*"}, Storage: jetstream.FileStorage}
	durable, filter, extra := "bench", "in.*", ""
	if partitions > 0 {
		stream.SubjectTransform = &jetstream.SubjectTransformConfig{
			Source: "in.*", Destination: fmt.Sprintf("in.{{partition(%d,1)}}.{{wildcard(1)}}", partitions),
		}
		durable, filter = "bench-{partition}", "in.{partition}.*"
		extra = fmt.Sprintf("      partitions      = %d\n      partition       = env(\"QBRIDGE_PARTITION\")\n", partitions)
	}
	if _, err := js.CreateStream(ctxFor(b, 10*time.Second), stream); err != nil {
		b.Fatal(err)
	}
	var futures []jetstream.PubAckFuture
	for i := range messages {
		g := i % groups
		m := nats.NewMsg("in." + group(g))
		m.Data = []byte(body(g, i/groups))
		m.Header.Set("Qbridge-Group", group(g))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) < 1000 && i < messages-1 {
			continue
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			case <-time.After(30 * time.Second):
				b.Fatal("no publish ack")
			}
		}
		futures = futures[:0]
	}
	cfg := e2etest.WriteConfig(b, "info", fmt.Sprintf(`pipeline "bench" {
  source "nats" {
    url = %q
    jetstream {
      stream          = "IN"
      durable         = %q
      filter_subjects = [%q]
      max_ack_pending = 4000
%s    }
  }
%s  ordering {
    max_in_flight = 2000
    per_group     = 1
  }
}
`, src.URL(), durable, filter, extra, snk.block()))
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	reps := make([]*replica, replicas)
	for i := range reps {
		reps[i] = &replica{t: b, id: i, config: cfg, env: []string{fmt.Sprintf("QBRIDGE_PARTITION=%d", i%max(partitions, 1))}, logs: &testlog.Buffer{}}
	}
	for _, r := range reps {
		r.start()
	}
	// Timed from the first message at the sink to the last: the
	// processes' start is not the throughput.
	b.StartTimer()
	var start time.Time
	first := 0
	for deadline := time.Now().Add(2 * time.Minute); ; {
		n := snk.stored()
		if n > 0 && start.IsZero() {
			start, first = time.Now(), n
		}
		if n >= messages {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d stored after 2 minutes", n, messages)
		}
		time.Sleep(2 * time.Millisecond) // a poll of the sink's count
	}
	took := time.Since(start)
	b.StopTimer()
	for _, r := range reps {
		_ = r.stop(30 * time.Second)
	}
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	cpuTime := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	return float64(messages-first) / took.Seconds(), float64(cpuTime.Microseconds()) / float64(messages)
}
