package monitor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qbridge/qbridge/internal/testlog"
)

// A pipeline that stops being ready is logged once, with the reason, and
// once when it is ready again.
func TestLogReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		state := []error{nil, errors.New("sink: connection lost"), errors.New("sink: connection lost"), nil, nil}
		i := 0
		ready := func(context.Context) Readiness {
			mu.Lock()
			defer mu.Unlock()
			err := state[min(i, len(state)-1)]
			i++
			return Readiness{Pipelines: []PipelineReadiness{{Name: "p", Err: err}}}
		}
		var b testlog.Buffer
		log := slog.New(slog.NewTextHandler(&b, nil))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { LogReadiness(ctx, time.Second, ready, log); close(done) }()
		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		out := b.String()
		if strings.Count(out, "pipeline not ready") != 1 || !strings.Contains(out, `reason="sink: connection lost"`) ||
			strings.Count(out, "pipeline ready again") != 1 {
			t.Errorf("log:\n%s", out)
		}
	})
}
