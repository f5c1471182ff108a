package bridge

import (
	"context"
	"time"

	"github.com/qbridge/qbridge/internal/backoff"
)

// Delay returns the wait before attempt n+1 after n failed attempts (n >= 1):
// Initial * Multiplier^(n-1), capped at Max, varied by ± Jitter (which
// spreads the retries of many messages failing together).
func (b Backoff) Delay(n int) time.Duration {
	return backoff.Spread(backoff.Exp(b.Initial, b.Max, b.Multiplier, n), b.Max, b.Jitter)
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	return backoff.Sleep(ctx, nil, nil, d) == nil
}
