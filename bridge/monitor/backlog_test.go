package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/testlog"
)

// The gauge follows the broker's counts at each poll, not at each scrape;
// a kind that cannot count is asked once; a failing count removes the
// series; a pipeline removed by a reload loses its series.
func TestBacklogPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBacklog(slog.New(slog.DiscardHandler))
		reg := prometheus.NewRegistry()
		reg.MustRegister(b)

		var mu sync.Mutex
		calls := map[string]int{}
		sqsCount := driver.Backlog{Ready: 7, InFlight: 2, Scheduled: 1}
		var sqsErr error
		pipelines := []string{"sqs", "amqp"}
		counters := func() []Counter {
			mu.Lock()
			defer mu.Unlock()
			var cs []Counter
			for _, p := range pipelines {
				cs = append(cs, Counter{Pipeline: p, Count: func(context.Context) (driver.Backlog, error) {
					mu.Lock()
					defer mu.Unlock()
					calls[p]++
					if p == "amqp" {
						return driver.Backlog{}, fmt.Errorf("counting an amqp source: %w", errors.ErrUnsupported)
					}
					return sqsCount, sqsErr
				}})
			}
			return cs
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { b.Run(ctx, BacklogInterval, counters); close(done) }()

		check := func(step, want string) {
			t.Helper()
			synctest.Wait()
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qbridge_source_backlog_messages"); err != nil {
				t.Errorf("%s: %v", step, err)
			}
		}
		const help = "# HELP qbridge_source_backlog_messages Messages the source broker reports for the pipeline's entity, by state (ready, in_flight, scheduled, dead_letter; sessions: the Service Bus sessions with messages), polled every 30s; absent where the broker cannot count.\n# TYPE qbridge_source_backlog_messages gauge\n"
		check("first poll", help+`qbridge_source_backlog_messages{pipeline="sqs",state="in_flight"} 2
qbridge_source_backlog_messages{pipeline="sqs",state="ready"} 7
qbridge_source_backlog_messages{pipeline="sqs",state="scheduled"} 1
`)
		mu.Lock()
		sqsCount = driver.Backlog{Ready: 3, DeadLetter: 4, Sessions: 5, HasSessions: true}
		mu.Unlock()
		check("scrape between polls keeps the polled figure", help+`qbridge_source_backlog_messages{pipeline="sqs",state="in_flight"} 2
qbridge_source_backlog_messages{pipeline="sqs",state="ready"} 7
qbridge_source_backlog_messages{pipeline="sqs",state="scheduled"} 1
`)
		time.Sleep(BacklogInterval)
		check("second poll", help+`qbridge_source_backlog_messages{pipeline="sqs",state="dead_letter"} 4
qbridge_source_backlog_messages{pipeline="sqs",state="in_flight"} 0
qbridge_source_backlog_messages{pipeline="sqs",state="ready"} 3
qbridge_source_backlog_messages{pipeline="sqs",state="scheduled"} 0
qbridge_source_backlog_messages{pipeline="sqs",state="sessions"} 5
`)
		mu.Lock()
		sqsErr = errors.New("AccessDenied")
		mu.Unlock()
		time.Sleep(BacklogInterval)
		check("failing count", "")
		mu.Lock()
		sqsErr = nil
		mu.Unlock()
		time.Sleep(BacklogInterval)
		check("count back", help+`qbridge_source_backlog_messages{pipeline="sqs",state="dead_letter"} 4
qbridge_source_backlog_messages{pipeline="sqs",state="in_flight"} 0
qbridge_source_backlog_messages{pipeline="sqs",state="ready"} 3
qbridge_source_backlog_messages{pipeline="sqs",state="scheduled"} 0
qbridge_source_backlog_messages{pipeline="sqs",state="sessions"} 5
`)
		mu.Lock()
		pipelines = []string{"amqp"}
		mu.Unlock()
		time.Sleep(BacklogInterval)
		check("pipeline removed", "")
		mu.Lock()
		if calls["amqp"] != 1 || calls["sqs"] != 4 {
			t.Errorf("calls %v, want amqp asked once and sqs at each of its 4 polls", calls)
		}
		mu.Unlock()
		cancel()
		<-done
	})
}

// TestBacklogWarnsOnSecondFailure: the first poll runs while the pipelines
// start (a stream the source creates may not exist yet), so a failing count
// is warned about once, at its second failed poll in a row, and again only
// after it counted in between.
func TestBacklogWarnsOnSecondFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testlog.Buffer
		b := NewBacklog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
		var mu sync.Mutex
		fails := []bool{true, true, true, false, true, true}
		poll := 0
		counters := func() []Counter {
			return []Counter{{Pipeline: "p", Count: func(context.Context) (driver.Backlog, error) {
				mu.Lock()
				defer mu.Unlock()
				fail := fails[min(poll, len(fails)-1)]
				poll++
				if fail {
					return driver.Backlog{}, errors.New("stream not found")
				}
				return driver.Backlog{Ready: 1}, nil
			}}}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { b.Run(ctx, BacklogInterval, counters); close(done) }()
		warnings := func() int {
			synctest.Wait()
			return strings.Count(logs.String(), "cannot count the source's backlog")
		}
		for i, want := range []int{0, 1, 1, 1, 1, 2} {
			if i > 0 {
				// After a failed count the next poll comes sooner: the
				// gauge was absent for the first 30 s of every start.
				delay := BacklogInterval
				if fails[i-1] {
					delay = backlogRetry
				}
				time.Sleep(delay)
			}
			if got := warnings(); got != want {
				t.Fatalf("after poll %d (failing %v): %d warnings, want %d\n%s", i+1, fails[i], got, want, logs.String())
			}
		}
		cancel()
		<-done
	})
}

// Refresh polls at once (a reload: a new pipeline's series appears, a
// removed one's goes, without waiting up to 30 s).
func TestBacklogRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBacklog(slog.New(slog.DiscardHandler))
		reg := prometheus.NewRegistry()
		reg.MustRegister(b)
		var mu sync.Mutex
		pipelines := []string{"a"}
		counters := func() []Counter {
			mu.Lock()
			defer mu.Unlock()
			var cs []Counter
			for _, p := range pipelines {
				cs = append(cs, Counter{Pipeline: p, Count: func(context.Context) (driver.Backlog, error) {
					return driver.Backlog{Ready: 1}, nil
				}})
			}
			return cs
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { b.Run(ctx, BacklogInterval, counters); close(done) }()
		synctest.Wait()
		mu.Lock()
		pipelines = []string{"b"}
		mu.Unlock()
		b.Refresh()
		synctest.Wait() // no time passes
		const help = "# HELP qbridge_source_backlog_messages Messages the source broker reports for the pipeline's entity, by state (ready, in_flight, scheduled, dead_letter; sessions: the Service Bus sessions with messages), polled every 30s; absent where the broker cannot count.\n# TYPE qbridge_source_backlog_messages gauge\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(help+`qbridge_source_backlog_messages{pipeline="b",state="in_flight"} 0
qbridge_source_backlog_messages{pipeline="b",state="ready"} 1
qbridge_source_backlog_messages{pipeline="b",state="scheduled"} 0
`), "qbridge_source_backlog_messages"); err != nil {
			t.Fatalf("after the refresh: %v", err)
		}
		cancel()
		<-done
	})
}
