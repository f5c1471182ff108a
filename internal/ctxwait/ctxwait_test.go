package ctxwait

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		release := make(chan struct{})
		wg.Go(func() { <-release })

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := Group(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a worker past the deadline: got %v, want the deadline's error", err)
		}
		close(release)
		if err := Group(t.Context(), &wg); err != nil {
			t.Fatalf("every worker done: got %v", err)
		}
		synctest.Wait() // the first call's waiter has ended too
	})
}
