package bridge

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// blockingExtend counts Extend calls, and those under way, until release
// is closed or the call's ctx ends.
type blockingExtend struct {
	driver.Delivery
	release         <-chan struct{}
	calls, now, max *atomic.Int64
}

func (d blockingExtend) Extend(ctx context.Context, _ time.Duration) error {
	d.calls.Add(1)
	n := d.now.Add(1)
	defer d.now.Add(-1)
	for m := d.max.Load(); n > m && !d.max.CompareAndSwap(m, n); m = d.max.Load() {
	}
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	return nil
}

// A tick extends every due item, at most extendParallel at a time, and
// stops taking items when ctx ends.
func TestExtendDueBounded(t *testing.T) {
	for _, c := range []struct {
		name      string
		items     int
		cancel    bool // cancel once the workers block, instead of releasing them
		wantMax   int64
		wantCalls int64
	}{
		{name: "fewer than the bound", items: 5, wantMax: 5, wantCalls: 5},
		{name: "many", items: 10 * extendParallel, wantMax: extendParallel, wantCalls: 10 * extendParallel},
		{name: "cancelled", items: 10 * extendParallel, cancel: true, wantMax: extendParallel, wantCalls: extendParallel},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// never opened: extendDue needs only the pipeline's state
				p, err := New(Config{Name: "hb",
					Source: func(context.Context) (driver.Source, error) { return nil, nil },
					Sink:   func(context.Context, func(string, string)) (driver.Sink, error) { return nil, nil }})
				if err != nil {
					t.Fatal(err)
				}
				release := make(chan struct{})
				var calls, now, maxNow atomic.Int64
				for range c.items {
					p.live.add(&item{
						d:    blockingExtend{release: release, calls: &calls, now: &now, max: &maxNow},
						orig: &mapping.Message{},
					})
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan struct{})
				go func() { p.extendDue(ctx, time.Now(), 0); close(done) }()
				synctest.Wait() // every worker blocks in Extend
				if n := now.Load(); n != c.wantMax {
					t.Errorf("%d Extend calls under way, want %d", n, c.wantMax)
				}
				if c.cancel {
					cancel()
				} else {
					close(release)
				}
				<-done
				if n := calls.Load(); n != c.wantCalls {
					t.Errorf("%d Extend calls, want %d", n, c.wantCalls)
				}
				if m := maxNow.Load(); m != c.wantMax {
					t.Errorf("at most %d at a time, want %d", m, c.wantMax)
				}
			})
		})
	}
}
