package sqs

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A probe never waits for a hung endpoint once an answer is known: it gets
// the last answer at once while the next check runs, and the check's
// answer when it comes. Only the first answer is waited for, up to the
// caller's deadline.
func TestReadyCacheNeverBlocksOnAHungCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := make(chan struct{})
		var hung bool
		r := &readyCache{check: func(ctx context.Context) error {
			if !hung {
				return nil
			}
			select {
			case <-hang:
				return errors.New("queue gone")
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		ctx := context.Background()
		if err := r.get(ctx); err != nil {
			t.Fatalf("first answer: %v", err)
		}
		hung = true
		time.Sleep(readyTTL) // the answer is stale now
		start := time.Now()
		if err := r.get(ctx); err != nil {
			t.Fatalf("stale answer while checking: %v", err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the probe waited %s for the check", took)
		}
		close(hang)
		synctest.Wait() // the check ends and records its answer
		if err := r.get(ctx); err == nil || err.Error() != "queue gone" {
			t.Fatalf("after the check: %v, want its answer", err)
		}

		// A check that never answers ends at its own deadline, and that
		// is the answer.
		r2 := &readyCache{check: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := r2.get(pctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first probe with a 1 s deadline: %v", err)
		}
		time.Sleep(readyCheckTimeout)
		synctest.Wait()
		if err := r2.get(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("after the check's deadline: %v", err)
		}

		// Close ends a running check and starts no other.
		time.Sleep(readyTTL)
		_ = r2.get(ctx) // starts a check that waits for its deadline
		r2.close()
		synctest.Wait() // the check has ended: the bubble has no goroutine left but ours
		if err := r2.get(ctx); !errors.Is(err, errClosed) {
			t.Fatalf("after close: %v", err)
		}
	})
}
