package monitor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qbridge/qbridge/bridge/driver"
)

// BacklogInterval is how often the brokers are asked: their counts are
// approximate and each call is a request (some brokers bill it), so the
// figure follows a poll, not the scrapes.
const BacklogInterval = 30 * time.Second

// backlogTimeout bounds one count.
const backlogTimeout = 10 * time.Second

// backlogRetry is the next poll's delay after a count failed: the first
// poll runs as the pipelines start (a stream the source creates may not
// exist yet), and the gauge was absent for the first 30 s.
const backlogRetry = 5 * time.Second

// Counter counts one pipeline's source entity (config.Pipeline.CountSource).
// An error wrapping errors.ErrUnsupported means the broker cannot tell (a
// core NATS subject, an AMQP queue): the pipeline is not asked again.
type Counter struct {
	Pipeline string
	Count    func(ctx context.Context) (driver.Backlog, error)
}

// Backlog exports qbridge_source_backlog_messages{pipeline,state}, the
// messages the source broker reports for each pipeline's entity: ready,
// in_flight, scheduled, dead_letter and sessions (where the broker reports
// them).
// A pipeline whose last count failed has no series rather than a stale one.
type Backlog struct {
	desc *prometheus.Desc
	log  *slog.Logger

	mu          sync.Mutex
	counts      map[string]driver.Backlog
	unsupported map[string]bool
	failing     map[string]int // failed polls in a row, to warn once and not for a start-up race

	refresh chan struct{} // Refresh: poll now
}

// NewBacklog returns the collector; register it and call Run.
func NewBacklog(log *slog.Logger) *Backlog {
	return &Backlog{
		desc: prometheus.NewDesc("qbridge_source_backlog_messages",
			"Messages the source broker reports for the pipeline's entity, by state (ready, in_flight, scheduled, dead_letter; sessions: the Service Bus sessions with messages), polled every 30s; absent where the broker cannot count.",
			[]string{"pipeline", "state"}, nil),
		log:         log,
		counts:      map[string]driver.Backlog{},
		unsupported: map[string]bool{},
		failing:     map[string]int{},
		refresh:     make(chan struct{}, 1),
	}
}

// Refresh makes Run poll now (after a reload: new pipelines get their
// series, removed ones lose theirs, without waiting for the interval).
func (b *Backlog) Refresh() {
	select {
	case b.refresh <- struct{}{}:
	default: // a poll is already due
	}
}

// Describe implements prometheus.Collector.
func (b *Backlog) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

// Collect implements prometheus.Collector.
func (b *Backlog) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, c := range b.counts {
		for _, s := range []struct {
			state string
			n     int64
			known bool
		}{
			{"ready", c.Ready, true},
			{"in_flight", c.InFlight, true},
			{"scheduled", c.Scheduled, true},
			{"dead_letter", c.DeadLetter, c.DeadLetter != 0},
			{"sessions", c.Sessions, c.HasSessions},
		} {
			if s.known {
				ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, float64(s.n), name, s.state)
			}
		}
	}
}

// Run polls every interval until ctx ends; counters is asked for the
// current pipelines at each poll (a reload changes them).
func (b *Backlog) Run(ctx context.Context, interval time.Duration, counters func() []Counter) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		wait := interval
		if failed := b.poll(ctx, counters()); failed {
			wait = min(interval, backlogRetry)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.refresh:
		}
	}
}

// poll counts each pipeline's source once; failed says some count failed.
func (b *Backlog) poll(ctx context.Context, counters []Counter) (failed bool) {
	live := map[string]bool{}
	for _, c := range counters {
		live[c.Pipeline] = true
		b.mu.Lock()
		skip := b.unsupported[c.Pipeline]
		b.mu.Unlock()
		if skip {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		n, err := c.Count(cctx)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		b.mu.Lock()
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			b.unsupported[c.Pipeline] = true
			delete(b.counts, c.Pipeline)
		case err != nil:
			failed = true
			// The first poll runs as the pipelines start: a JetStream
			// stream or a queue the source creates may not exist yet. A
			// count that fails twice in a row is worth a warning.
			b.failing[c.Pipeline]++
			switch b.failing[c.Pipeline] {
			case 1:
				b.log.Debug("cannot count the source's backlog yet", "pipeline", c.Pipeline, "error", err)
			case 2:
				b.log.Warn("cannot count the source's backlog; qbridge_source_backlog_messages is absent until it can", "pipeline", c.Pipeline, "error", err)
			}
			delete(b.counts, c.Pipeline)
		default:
			delete(b.failing, c.Pipeline)
			b.counts[c.Pipeline] = n
		}
		b.mu.Unlock()
	}
	// Pipelines removed by a reload lose their series.
	b.mu.Lock()
	for name := range b.counts {
		if !live[name] {
			delete(b.counts, name)
		}
	}
	for name := range b.unsupported {
		if !live[name] {
			delete(b.unsupported, name)
		}
	}
	for name := range b.failing {
		if !live[name] {
			delete(b.failing, name)
		}
	}
	b.mu.Unlock()
	return failed
}
