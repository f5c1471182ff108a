package sqs

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// runEntries retries failed entries after a jittered, growing wait bounded
// by entryRetryMax, and stops retrying when ctx ends.
func TestRunEntriesBacksOff(t *testing.T) {
	errBusy := errors.New("throttled")
	for _, c := range []struct {
		name      string
		attempts  int
		cancelAt  time.Duration // 0: never
		wantCalls int
	}{
		{name: "one attempt", attempts: 1, wantCalls: 1},
		{name: "three attempts", attempts: 3, wantCalls: 3},
		// the 11th wait of a linear 100 ms step was 1.1 s
		{name: "capped", attempts: 12, wantCalls: 12},
		{name: "cancelled", attempts: 10, cancelAt: entryRetryBase / 4, wantCalls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if c.cancelAt > 0 {
					time.AfterFunc(c.cancelAt, cancel)
				}
				var calls []time.Time
				errs := runEntries(ctx, 2, c.attempts, func(ctx context.Context, idx []int) ([]error, []bool) {
					calls = append(calls, time.Now())
					res := make([]error, len(idx))
					again := make([]bool, len(idx))
					for k := range idx {
						res[k], again[k] = errBusy, true
					}
					return res, again
				})
				if len(calls) != c.wantCalls {
					t.Fatalf("%d calls, want %d", len(calls), c.wantCalls)
				}
				for i, err := range errs {
					if !errors.Is(err, errBusy) {
						t.Errorf("entry %d: %v, want the last failure", i, err)
					}
				}
				upper := entryRetryBase
				for i := 1; i < len(calls); i++ {
					if w := calls[i].Sub(calls[i-1]); w < upper/2 || w > upper {
						t.Errorf("wait %d: %s, want within [%s, %s]", i, w, upper/2, upper)
					}
					upper = min(2*upper, entryRetryMax)
				}
			})
		})
	}
}
