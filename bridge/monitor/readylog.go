package monitor

import (
	"context"
	"log/slog"
	"time"
)

// ReadyLogInterval is how often LogReadiness asks.
const ReadyLogInterval = 10 * time.Second

// LogReadiness asks ready every interval until ctx ends and logs each
// pipeline's changes: a WARN when it stops being ready, with the reason,
// and an INFO when it is ready again. An outage that /readyz showed left
// no line in the log (an idle AMQP sink whose broker froze said nothing
// at any level until it reconnected).
func LogReadiness(ctx context.Context, interval time.Duration, ready func(context.Context) Readiness, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	was := map[string]string{} // the last reason of each pipeline ("": ready)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, readyTimeout)
		r := ready(rctx)
		cancel()
		if r.Err != nil || ctx.Err() != nil {
			continue // still starting, or stopping
		}
		seen := make(map[string]bool, len(r.Pipelines))
		for _, p := range r.Pipelines {
			seen[p.Name] = true
			now := ""
			if p.Err != nil {
				now = p.Err.Error()
			}
			prev, known := was[p.Name]
			was[p.Name] = now
			switch {
			case now != "" && (!known || prev == ""):
				log.Warn("pipeline not ready", "pipeline", p.Name, "reason", now, "readiness_ignored", p.Ignored)
			case now == "" && prev != "":
				log.Info("pipeline ready again", "pipeline", p.Name)
			}
		}
		for name := range was {
			if !seen[name] {
				delete(was, name) // removed by a reload
			}
		}
	}
}
