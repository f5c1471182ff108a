package bridge

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// recycledLogHandler counts log records that name a recycled message.
type recycledLogHandler struct{ l *recycledLog }

// recycledLog counts the log records that named a recycled message.
type recycledLog struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (l *recycledLog) logger() *slog.Logger { return slog.New(recycledLogHandler{l}) }

func (h recycledLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recycledLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		h.check("with", a)
	}
	return h
}
func (h recycledLogHandler) WithGroup(string) slog.Handler { return h }
func (h recycledLogHandler) check(msg string, a slog.Attr) {
	if a.Value.Kind() == slog.KindString && a.Value.String() == "recycled" {
		if h.l.n.Add(1) == 1 {
			h.l.mu.Lock()
			h.l.first = msg + ": " + a.Key
			h.l.mu.Unlock()
		}
	}
}
func (h recycledLogHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool { h.check(r.Message, a); return true })
	return nil
}

func roll(id string, attempt int, salt string) uint32 {
	f := fnv.New32a()
	fmt.Fprintf(f, "%s|%d|%s", id, attempt, salt)
	return f.Sum32() % 100
}

// TestRecycleStress runs recycling deliveries (driver.Recycler) through
// random transient and permanent failures, pipelining, two in flight per
// group, a Transform, both dead-letter destinations, a fast heartbeat,
// source restarts and a short drain: a recycled message is scribbled over,
// so any read of it after its ack shows in the sink, the dead-letter sink or
// the logs, and under -race as a race.
func TestRecycleStress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ordered   bool
		perGroup  int
		transform bool
		native    bool
		restarts  bool
	}{
		{"plain", false, 1, false, false, false},
		{"pipelined", true, 1, false, false, false},
		{"pipelined-restarts", true, 1, false, false, true},
		{"pergroup2-restarts", false, 2, false, false, true},
		{"transform-restarts", true, 1, true, false, true},
		{"native-restarts", true, 1, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			q.recycle = true
			const n = 3000
			var msgs []*mapping.Message
			for i := range n {
				g := fmt.Sprintf("g%d", i%13)
				if i%5 == 0 {
					g = ""
				}
				msgs = append(msgs, msg(g, i))
			}
			q.push(msgs...)
			if tc.restarts {
				q.receiveErr = func(calls int) error {
					if calls%7 == 0 {
						return errors.New("connection lost")
					}
					return nil
				}
			}
			sink := newSink(t)
			sink.ordered = tc.ordered
			sink.fail = func(m *mapping.Message, attempt int) error {
				r := roll(m.ID, attempt, "f")
				switch {
				case r < 15:
					return errTransient
				case r < 17:
					return driver.Permanent(errors.New("no"))
				}
				return nil
			}
			sink.delay = func(m *mapping.Message) time.Duration {
				return time.Duration(roll(m.ID, 0, "d")%3) * time.Millisecond
			}
			dlq := newSink(t)
			opt := fastOptions()
			opt.Ordering.PerGroup = tc.perGroup
			opt.Ordering.MaxInFlight = 200
			opt.Batch.Size = 8
			opt.Batch.Concurrency = 6
			opt.Lock = Lock{ExtendEvery: 2 * time.Millisecond, ExtendBy: time.Second}
			opt.ShutdownTimeout = 3 * time.Millisecond
			var log recycledLog
			cfg := Config{Options: opt, Logger: log.logger()}
			if tc.native {
				cfg.DeadLetter = DeadLetter{Native: true}
			} else {
				cfg.DeadLetter = DeadLetter{Sink: dlq.open, SinkKind: "mem"}
			}
			if tc.transform {
				cfg.Transform = func(m *mapping.Message) error { m.Subject = "t"; return nil }
			}
			checkRecycled(t, start(t, cfg, q, sink), q, &log, map[string]*memSink{"sink": sink, "dlq": dlq})
		})
	}
}

type batchMemSource struct{ *memSource }

func (s batchMemSource) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	errs := make([]error, len(ds))
	for i, d := range ds {
		errs[i] = d.Ack(ctx)
	}
	return errs
}

// TestRecycleStressBatchAcker is TestRecycleStress's pipelined case with a
// source that acks in batches (driver.BatchAcker), as the core source does.
func TestRecycleStressBatchAcker(t *testing.T) {
	q := newQueue(t)
	q.recycle = true
	const n = 3000
	for i := range n {
		q.push(msg(fmt.Sprintf("g%d", i%17), i))
	}
	q.receiveErr = func(calls int) error {
		if calls%9 == 0 {
			return errors.New("connection lost")
		}
		return nil
	}
	sink := newSink(t)
	sink.ordered = true
	sink.fail = func(m *mapping.Message, attempt int) error {
		if roll(m.ID, attempt, "f") < 20 {
			return errTransient
		}
		return nil
	}
	sink.delay = func(m *mapping.Message) time.Duration {
		return time.Duration(roll(m.ID, 0, "d")%3) * time.Millisecond
	}
	opt := fastOptions()
	opt.Ordering.MaxInFlight = 300
	opt.Batch.Size = 16
	opt.Batch.Concurrency = 8
	opt.Lock = Lock{ExtendEvery: 2 * time.Millisecond, ExtendBy: time.Second}
	opt.ShutdownTimeout = 5 * time.Millisecond
	var log recycledLog
	so := &sourceOpener{q: q}
	cfg := Config{Options: opt, Logger: log.logger(),
		Source: func(ctx context.Context) (driver.Source, error) {
			s, err := so.open(ctx)
			if err != nil {
				return nil, err
			}
			return batchMemSource{s.(*memSource)}, nil
		}}
	checkRecycled(t, start(t, cfg, q, sink), q, &log, map[string]*memSink{"sink": sink})
}

// checkRecycled lets h work through q for up to 20 s, stops it, and fails
// t for each recycled message that one of sinks or a log record saw.
func checkRecycled(t *testing.T, h *harness, q *memQueue, log *recycledLog, sinks map[string]*memSink) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if q.pendingLen() == 0 {
			if out, _ := q.stats(); out == 0 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = h.stop()
	for name, s := range sinks {
		if a := sinkAttempts(s, "recycled"); a != 0 {
			t.Errorf("%s got a recycled message %d times", name, a)
		}
	}
	if c := log.n.Load(); c != 0 {
		log.mu.Lock()
		defer log.mu.Unlock()
		t.Errorf("%d log records named a recycled message (first: %s)", c, log.first)
	}
	// Without recycling there is nothing a sink or a log could misuse, and
	// the checks above would pass for nothing.
	var rec int64
	for _, d := range q.deliveries() {
		rec += d.recycles.Load()
	}
	if rec == 0 {
		t.Errorf("no delivery was recycled: the engine never called Recycle")
	}
	t.Logf("recycled %d deliveries", rec)
}
