package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/internal/e2etest"
)

// BenchmarkMigrate compares "qbridge migrate" with the same pipeline run as
// a daemon ("qbridge run"), on the same brokers in the same run: each starts
// on a source holding n messages (the same n, published the same way) and
// is timed from its start until the sink holds all n. CPU is the child
// process's user+system time (getrusage), per message. Goal: migrate ≥ 0.9×
// the daemon's rate. n is QBRIDGE_BENCH_MESSAGES (default 5,000 for
// JetStream, 1,000 for SQS; docs/benchmarks.md has a 20,000 run).
func BenchmarkMigrate(b *testing.B) {
	b.Run("jetstream-to-jetstream", func(b *testing.B) {
		n := migBenchN(b, 5000)
		ns := e2etest.StartNATS(b)
		_, js := e2etest.ConnectNATS(b, ns.URL())
		for b.Loop() {
			var runs [2]migBenchRun
			for _, mode := range migBenchOrder {
				i := migBenchIndex[mode]
				in, out := fmt.Sprintf("BIN_%s_%d", mode, time.Now().UnixNano()), fmt.Sprintf("BOUT_%s_%d", mode, time.Now().UnixNano())
				natsCreateStream(b, js, in, in+".>")
				natsCreateStream(b, js, out, out+".x")
				natsPublishGrouped(b, js, func(g int) string { return fmt.Sprintf("%s.%d", in, g) }, 100, n/100, 0)
				cfg := migWriteConfig(b, migJSBenchPipeline(ns.URL(), in, out))
				runs[i] = runs[i].add(migBenchTime(b, mode, cfg, n, func() int { return int(migStreamMsgs(b, js, out)) }))
			}
			migBenchReport(b, n*2, runs[0], runs[1])
		}
	})
	b.Run("sqs-to-jetstream", func(b *testing.B) {
		n := migBenchN(b, 1000)
		e := sqsSetup(b)
		ns := e2etest.StartNATS(b)
		_, js := e2etest.ConnectNATS(b, ns.URL())
		for b.Loop() {
			var runs [2]migBenchRun
			for _, mode := range migBenchOrder {
				i := migBenchIndex[mode]
				q := e.createQueue(b, mode, false, nil)
				var entries []types.SendMessageBatchRequestEntry
				for k := range n {
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id: aws.String(strconv.Itoa(k % 10)), MessageBody: aws.String(fmt.Sprintf("body %d", k)),
						MessageAttributes: map[string]types.MessageAttributeValue{
							"n": {DataType: aws.String("Number.int"), StringValue: aws.String(strconv.Itoa(k))},
						},
					})
				}
				e.sendBatch(b, q, entries)
				out := fmt.Sprintf("BSQS_%s_%d", mode, time.Now().UnixNano())
				natsCreateStream(b, js, out, out+".x")
				cfg := migWriteConfig(b, fmt.Sprintf(`
http {
  listen = "127.0.0.1:0"
}
pipeline "bench" {
  source "sqs" {
%s    wait_time = "1s"
  }
  sink "nats" {
    url     = %q
    subject = "%s.x"
    jetstream {
      ack_timeout = "5s"
    }
  }
}
`, e.conn(q), ns.URL(), out))
				runs[i] = runs[i].add(migBenchTime(b, mode, cfg, n, func() int { return int(migStreamMsgs(b, js, out)) }))
			}
			migBenchReport(b, n*2, runs[0], runs[1])
		}
	})
}

// Each mode runs twice, in the order run, migrate, migrate, run: whichever
// runs first on a fresh broker pays for its warm-up, so each mode gets one
// first and one later place.
var (
	migBenchOrder = []string{"run", "migrate", "migrate", "run"}
	migBenchIndex = map[string]int{"migrate": 0, "run": 1}
)

func migBenchN(b *testing.B, def int) int {
	if s := os.Getenv("QBRIDGE_BENCH_MESSAGES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			b.Fatalf("QBRIDGE_BENCH_MESSAGES=%q: want a number ≥ 100", s)
		}
		return n / 100 * 100
	}
	return def
}

func migJSBenchPipeline(url, in, out string) string {
	return fmt.Sprintf(`
http {
  listen = "127.0.0.1:0"
}
pipeline "bench" {
  source "nats" {
    url     = %[1]q
    subject = "%[2]s.>"
    jetstream {
      stream          = %[2]q
      durable         = "bench"
      max_ack_pending = 5000
      fetch_batch     = 256
    }
  }
  sink "nats" {
    url     = %[1]q
    subject = "%[3]s.x"
    jetstream {
      ack_timeout = "5s"
    }
  }
  mapping {
    group_key = "{attr.tenant}"
  }
  ordering {
    max_in_flight = 2000
  }
}
`, url, in, out)
}

type migBenchRun struct {
	took time.Duration // start to the last message at the sink
	cpu  time.Duration // user + system of the qbridge process
}

func (r migBenchRun) add(o migBenchRun) migBenchRun {
	return migBenchRun{took: r.took + o.took, cpu: r.cpu + o.cpu}
}

// migBenchTime starts "qbridge migrate" or "qbridge run" on cfg and times it
// until count() reaches n; then the process is stopped (run) or left to
// finish (migrate) and its CPU read.
func migBenchTime(b *testing.B, mode, cfg string, n int, count func() int) migBenchRun {
	b.Helper()
	args := []string{"run", cfg}
	if mode == "migrate" {
		args = []string{"migrate", "-yes", "-idle", "1s", "-progress", "off", cfg}
	}
	cmd := exec.Command(qbridgeBin, args...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for count() < n {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			b.Fatalf("%s: %d of %d messages after 5 minutes", mode, count(), n)
		}
		select {
		case err := <-done:
			if count() < n {
				b.Fatalf("%s exited early (%v) with %d of %d messages at the sink", mode, err, count(), n)
			}
			done <- err
		case <-time.After(10 * time.Millisecond):
		}
	}
	took := time.Since(start)
	if mode == "run" {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-done:
		if err != nil {
			b.Fatalf("%s: %v", mode, err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		b.Fatalf("%s did not end", mode)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return migBenchRun{took: took, cpu: cpu}
}

// migBenchReport reports n messages moved by each mode (over its runs).
func migBenchReport(b *testing.B, n int, mig, daemon migBenchRun) {
	mr, dr := float64(n)/mig.took.Seconds(), float64(n)/daemon.took.Seconds()
	b.ReportMetric(mr, "migrate-msg/s")
	b.ReportMetric(dr, "daemon-msg/s")
	b.ReportMetric(mr/dr, "ratio")
	b.ReportMetric(float64(mig.cpu.Microseconds())/float64(n), "migrate-cpu-µs/msg")
	b.ReportMetric(float64(daemon.cpu.Microseconds())/float64(n), "daemon-cpu-µs/msg")
}
