// Package backoff is qbridge's one exponential backoff: the growth (Exp) and
// two ways to spread it (Spread, around the delay, for the engine's
// configurable retry and restart backoff; Backoff.Next, over the upper
// half, for the adapters' reconnects), so that many clients retrying after
// one outage spread out.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Exp returns initial × multiplier^(n−1) for attempt n ≥ 1, capped at max.
func Exp(initial, max time.Duration, multiplier float64, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(initial) * math.Pow(multiplier, float64(n-1))
	if d > float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		return max
	}
	return time.Duration(d)
}

// Spread varies d by ± jitter (a fraction, 0 to 1), never above max.
func Spread(d, max time.Duration, jitter float64) time.Duration {
	if jitter > 0 {
		d = time.Duration(float64(d) * (1 + jitter*(2*rand.Float64()-1)))
	}
	return min(d, max)
}

// Backoff yields growing delays from Base to Max. The zero value is not
// useful; Base and Max must be positive.
type Backoff struct {
	Base, Max time.Duration
	n         int
}

// Next returns the delay before the next attempt: the doubling delay,
// drawn from its upper half.
func (b *Backoff) Next() time.Duration {
	b.n++
	d := Exp(b.Base, b.Max, 2, b.n)
	return d/2 + rand.N(d/2+1)
}

func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits d, or until ctx ends (its error) or stop is closed (stopErr).
func Sleep(ctx context.Context, stop <-chan struct{}, stopErr error, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return stopErr
	}
}
