package bridge

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Delay returns the wait before attempt n+1 after n failed attempts (n >= 1):
// Initial * Multiplier^(n-1), capped at Max, varied by ± Jitter.
func (b Backoff) Delay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(n-1))
	if d > float64(b.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(b.Max)
	}
	if b.Jitter > 0 {
		// Jitter spreads retries of many messages failing together.
		d *= 1 + b.Jitter*(2*rand.Float64()-1)
	}
	if d > float64(b.Max) {
		d = float64(b.Max)
	}
	return time.Duration(d)
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
