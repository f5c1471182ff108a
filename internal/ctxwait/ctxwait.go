// Package ctxwait waits for a sync.WaitGroup no longer than a context
// allows: the shutdown of adapters whose workers must be waited for, but
// whose Close must return by its deadline.
package ctxwait

import (
	"context"
	"sync"
)

// Group waits until wg's count is zero or ctx ends, and returns ctx's error
// in the second case. The goroutine that waits on wg lives until the count
// is zero: the workers it waits for end on their own (their stop was
// signalled before), just after the deadline.
func Group(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
