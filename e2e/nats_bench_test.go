package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
)

// Benchmarks of the bridge against the broker used directly, measured in
// the same run on the same embedded nats-server: a publisher and a
// subscriber, either connected by one subject/stream (the baseline), or
// with a qbridge pipeline (built in-process from HCL, as the daemon does)
// between an "in" and an "out" subject/stream. Each message carries its
// publish time; the subscriber measures the end-to-end latency. The
// publisher keeps at most natsBenchWindow messages unreceived, so neither
// path is driven into drops (core NATS is at most once) and both run at
// their sustainable rate.

const (
	natsBenchWindow = 1000
	natsBenchBody   = 1024
	natsBenchGroups = 100
)

// natsBenchRun is one measured pass.
type natsBenchRun struct {
	rate      float64 // messages per second
	p50, p99  time.Duration
	cpuPerMsg float64 // µs of the process's CPU (getrusage) per message
}

// natsBenchPass publishes n messages through publish (which must make the
// message arrive at the subscriber started by subscribe) and measures.
func natsBenchPass(b *testing.B, n int, grouped bool,
	publish func(m *nats.Msg) error, subscribe func(func(data []byte)) (stop func())) natsBenchRun {
	b.Helper()
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	window := make(chan struct{}, natsBenchWindow)
	done := make(chan struct{})
	got := 0
	stop := subscribe(func(data []byte) {
		ts, err := strconv.ParseInt(string(data[:19]), 10, 64)
		if err != nil {
			return
		}
		d := time.Since(time.Unix(0, ts))
		mu.Lock()
		lat = append(lat, d)
		got++
		if got == n {
			close(done)
		}
		mu.Unlock()
		<-window
	})
	defer stop()
	body := make([]byte, natsBenchBody)
	for i := range body {
		body[i] = 'x'
	}
	start, cpu := time.Now(), cpuNow(b)
	timeout := time.After(2*time.Minute + time.Duration(n)*time.Millisecond)
	for i := range n {
		select {
		case window <- struct{}{}:
		case <-timeout:
			b.Fatalf("timed out after %d of %d published", i, n)
		}
		m := nats.NewMsg("")
		data := slices.Clone(body)
		copy(data, fmt.Sprintf("%019d", time.Now().UnixNano()))
		m.Data = data
		if grouped {
			m.Header.Set("Qbridge-Group", "g"+strconv.Itoa(i%natsBenchGroups))
		}
		if err := publish(m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-timeout:
		mu.Lock()
		b.Fatalf("timed out: %d of %d received", got, n)
	}
	elapsed, cpu := time.Since(start), cpuNow(b)-cpu
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	return natsBenchRun{
		rate:      float64(n) / elapsed.Seconds(),
		p50:       lat[len(lat)/2],
		p99:       lat[len(lat)*99/100],
		cpuPerMsg: float64(cpu.Microseconds()) / float64(n),
	}
}

// natsBenchPipeline builds and runs a pipeline from HCL, in-process, until
// the benchmark ends, and waits until it is ready.
func natsBenchPipeline(b *testing.B, hcl string) {
	b.Helper()
	p, stop := runBenchPipeline(b, hcl, nil)
	b.Cleanup(stop)
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for p.Ready(ctx) != nil {
		if time.Now().After(deadline) {
			b.Fatalf("pipeline not ready: %v", p.Ready(ctx))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func natsReport(b *testing.B, direct, bridged natsBenchRun) {
	b.ReportMetric(bridged.rate, "msg/s")
	b.ReportMetric(float64(bridged.p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(bridged.p99.Microseconds()), "p99-µs")
	b.ReportMetric(direct.rate, "baseline-msg/s")
	b.ReportMetric(float64(direct.p50.Microseconds()), "baseline-p50-µs")
	b.ReportMetric(float64(direct.p99.Microseconds()), "baseline-p99-µs")
	b.ReportMetric(bridged.rate/direct.rate, "ratio")
	b.ReportMetric(bridged.cpuPerMsg, "cpu-µs/msg")
	b.ReportMetric(direct.cpuPerMsg, "baseline-cpu-µs/msg")
	b.ReportMetric(bridged.cpuPerMsg/direct.cpuPerMsg, "cpu-ratio")
}

// BenchmarkNatsJetStream: JetStream → qbridge → JetStream against
// JetStream publisher → stream → pull consumer, b.N messages of 1 KiB.
func BenchmarkNatsJetStream(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		name := "ungrouped"
		if grouped {
			name = "grouped"
		}
		b.Run(name, func(b *testing.B) {
			s := startNATS(b)
			nc, js := e2etest.ConnectNATS(b, s.ClientURL())
			for _, st := range []string{"DIRECT", "IN", "OUT"} {
				natsCreateStream(b, js, st, st+".>")
			}
			natsBenchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "nats" {
    url     = %q
    subject = "IN.>"
    jetstream {
      stream          = "IN"
      durable         = "bench"
      max_ack_pending = 10000
      fetch_batch     = 256
    }
  }
  sink "nats" {
    url     = %q
    subject = "OUT.x"
    jetstream {}
  }
  ordering {
    max_in_flight = 2000
    per_group     = 1
  }
}
`, s.ClientURL(), s.ClientURL()))
			publish := func(subject string) func(m *nats.Msg) error {
				return func(m *nats.Msg) error {
					m.Subject = subject
					_, err := js.PublishMsgAsync(m)
					return err
				}
			}
			subscribe := func(stream string) func(func([]byte)) func() {
				return func(f func([]byte)) func() {
					c, err := js.CreateConsumer(natsCtx(b, 10*time.Second), stream, jetstream.ConsumerConfig{
						AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
					})
					if err != nil {
						b.Fatal(err)
					}
					cc, err := c.Consume(func(m jetstream.Msg) { f(m.Data()) }, jetstream.PullMaxMessages(2000))
					if err != nil {
						b.Fatal(err)
					}
					return cc.Stop
				}
			}
			_ = nc
			b.ResetTimer()
			direct := natsBenchPass(b, b.N, grouped, publish("DIRECT.x"), subscribe("DIRECT"))
			bridged := natsBenchPass(b, b.N, grouped, publish("IN.x"), subscribe("OUT"))
			b.StopTimer()
			natsReport(b, direct, bridged)
		})
	}
}

// BenchmarkNatsCore: core → qbridge → core against core publish →
// subscribe, b.N messages of 1 KiB.
func BenchmarkNatsCore(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		name := "ungrouped"
		if grouped {
			name = "grouped"
		}
		b.Run(name, func(b *testing.B) {
			s := startNATS(b)
			pub, _ := e2etest.ConnectNATS(b, s.ClientURL())
			sub, _ := e2etest.ConnectNATS(b, s.ClientURL())
			natsBenchPipeline(b, fmt.Sprintf(`
pipeline "bench" {
  source "nats" {
    url         = %q
    subject     = "in"
    buffer_size = 65536
  }
  sink "nats" {
    url     = %q
    subject = "out"
  }
  ordering {
    max_in_flight = 2000
    per_group     = 1
  }
}
`, s.ClientURL(), s.ClientURL()))
			publish := func(subject string) func(m *nats.Msg) error {
				return func(m *nats.Msg) error {
					m.Subject = subject
					return pub.PublishMsg(m)
				}
			}
			subscribe := func(subject string) func(func([]byte)) func() {
				return func(f func([]byte)) func() {
					s, err := sub.Subscribe(subject, func(m *nats.Msg) { f(m.Data) })
					if err != nil {
						b.Fatal(err)
					}
					_ = s.SetPendingLimits(-1, -1)
					if err := sub.Flush(); err != nil {
						b.Fatal(err)
					}
					return func() { _ = s.Unsubscribe() }
				}
			}
			b.ResetTimer()
			direct := natsBenchPass(b, b.N, grouped, publish("direct"), subscribe("direct"))
			bridged := natsBenchPass(b, b.N, grouped, publish("in"), subscribe("out"))
			b.StopTimer()
			natsReport(b, direct, bridged)
		})
	}
}

// BenchmarkNatsMemory moves b.N × 10,000 grouped messages (1 KiB, 1,000
// rotating groups) JetStream → JetStream through an in-process pipeline and
// samples HeapInuse after a GC every 10,000 messages; it reports the first
// and the last sample. The heap includes the embedded server and the test
// clients. Run with -benchtime 20x for 200,000 messages.
func BenchmarkNatsMemory(b *testing.B) {
	s := startNATS(b)
	_, js := e2etest.ConnectNATS(b, s.ClientURL())
	// A minute per 100,000 messages at least (-benchtime 1000x is
	// 10,000,000 messages).
	ctx := natsCtx(b, max(10*time.Minute, time.Duration(b.N)*6*time.Second))
	// Work-queue input (acked messages are removed) and a bounded output:
	// the server's storage does not grow with the run.
	for _, c := range []jetstream.StreamConfig{
		{Name: "IN", Subjects: []string{"IN.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.MemoryStorage},
		{Name: "OUT", Subjects: []string{"OUT.>"}, MaxMsgs: 5000, Storage: jetstream.MemoryStorage},
	} {
		if _, err := js.CreateStream(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	natsBenchPipeline(b, fmt.Sprintf(`
pipeline "mem" {
  source "nats" {
    url     = %q
    subject = "IN.>"
    jetstream {
      stream          = "IN"
      durable         = "mem"
      max_ack_pending = 10000
      fetch_batch     = 256
    }
  }
  sink "nats" {
    url     = %q
    subject = "OUT.{group}"
    jetstream {}
  }
}
`, s.ClientURL(), s.ClientURL()))
	cons, err := js.CreateConsumer(ctx, "OUT", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		b.Fatal(err)
	}
	received := make(chan struct{}, 1<<20)
	cc, err := cons.Consume(func(jetstream.Msg) { received <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	body := make([]byte, natsBenchBody)
	const chunk = 10_000
	var samples []uint64
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for c := range b.N {
		for i := range chunk {
			m := nats.NewMsg("IN.x")
			m.Data = body
			m.Header.Set("Qbridge-Group", "g"+strconv.Itoa((c*chunk+i)%1000))
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
			if i%500 == 499 { // keep the input bounded
				select {
				case <-js.PublishAsyncComplete():
				case <-ctx.Done():
					b.Fatal("publish timed out")
				}
			}
		}
		for range chunk {
			select {
			case <-received:
			case <-ctx.Done():
				b.Fatal("timed out waiting for messages")
			}
		}
		samples = append(samples, heap())
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Allocations of the whole process (server, clients and qbridge) per
	// message: an upper bound of qbridge's own.
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*chunk), "process-allocs/msg")
	b.ReportMetric(float64(b.N*chunk)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(samples[0])/(1<<20), "heap-first-MiB")
	b.ReportMetric(float64(samples[len(samples)-1])/(1<<20), "heap-last-MiB")
	b.ReportMetric(float64(slices.Max(samples))/(1<<20), "heap-max-MiB")
}
