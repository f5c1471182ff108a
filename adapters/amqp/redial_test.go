package amqp

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestRedialer: a failure makes the next attempt wait its backoff (growing
// until reset), Ready's error is the last failure, and Close ends a wait.
func TestRedialer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		r := newRedialer(&connSettings{backoff: time.Second, backoffMax: 8 * time.Second}, stop)
		ctx := context.Background()
		waited := func() time.Duration {
			t0 := time.Now()
			if err := r.wait(ctx); err != nil {
				t.Fatal(err)
			}
			return time.Since(t0)
		}
		if d := waited(); d != 0 || r.err() != nil {
			t.Fatalf("before a failure: waited %v, err %v", d, r.err())
		}
		boom := errors.New("refused")
		for i, max := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
			d := r.failed(boom)
			if d < max/2 || d > max {
				t.Fatalf("failure %d: backoff %v, want %v..%v", i+1, d, max/2, max)
			}
			if w := waited(); w != d {
				t.Fatalf("failure %d: waited %v, want the backoff %v", i+1, w, d)
			}
		}
		if !errors.Is(r.err(), boom) {
			t.Fatalf("err = %v", r.err())
		}
		r.reset()
		if d := r.failed(boom); d > time.Second {
			t.Fatalf("after reset: backoff %v, want the base again", d)
		}
		close(stop)
		if err := r.wait(ctx); !errors.Is(err, errClosed) {
			t.Fatalf("wait after Close: %v, want errClosed", err)
		}
	})
}
