package amqp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// BenchmarkSourceDecodeGuard measures what the decode guard costs the whole
// AMQP source on a real broker: b.N messages (1 KiB body, 10 string
// properties) are queued on RabbitMQ, then received and accepted through
// the source with decode_guard off, scan and full, one after the other in
// the same run. cpu-ns/msg is this process's CPU time (user + system, all
// goroutines: go-amqp, the guard, amqpmap) per message while receiving,
// which the broker's own CPU and the machine's other load do not count in.
// Run: go test -run '^$' -bench SourceDecodeGuard -benchtime 3000x ./adapters/amqp/
func BenchmarkSourceDecodeGuard(b *testing.B) {
	url := os.Getenv("QBRIDGE_AMQP_URL")
	if url == "" {
		b.Skip(skipHelp)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, mode := range []string{"off", "scan", "full"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			q := fmt.Sprintf("/queue/qb-bench-guard-%s-%d", mode, time.Now().UnixNano())
			snk, err := NewSink(ctx, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: q}, nil, log)
			if err != nil {
				b.Fatal(err)
			}
			defer snk.Close(context.Background())
			for sent := 0; sent < b.N; {
				batch := make([]*mapping.Message, 0, 100)
				for ; sent < b.N && len(batch) < cap(batch); sent++ {
					m := &mapping.Message{ID: fmt.Sprintf("m%d", sent), Body: make([]byte, 1024), ContentType: "application/octet-stream"}
					for i := 0; i < 10; i++ {
						m.SetAttr(fmt.Sprintf("%c-prop", 'a'+i), mapping.String("value-of-the-property"))
					}
					batch = append(batch, m)
				}
				for _, err := range snk.Send(ctx, batch) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			src, err := NewSource(ctx, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: q, DecodeGuard: mode}, log)
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close(context.Background())
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for got := 0; got < b.N; {
				ds, err := src.Receive(ctx, 64)
				if err != nil {
					b.Fatalf("after %d of %d: %v", got, b.N, err)
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						b.Fatal(err)
					}
				}
				got += len(ds)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/msg")
		})
	}
}

// cpuTime is the CPU time this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
