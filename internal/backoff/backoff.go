// Package backoff is the reconnect backoff the adapters share: exponential,
// capped, with jitter over the upper half so that many clients reconnecting
// after one outage spread out.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields growing delays from Base to Max. The zero value is not
// useful; Base and Max must be positive.
type Backoff struct {
	Base, Max time.Duration
	n         int
}

// Next returns the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Base
	for i := 0; i < b.n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	b.n++
	return d/2 + rand.N(d/2+1)
}

// Reset starts over after a success.
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
