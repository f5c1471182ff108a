package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNextGrowsToMaxWithJitter(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for i, upper := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		upper *= time.Millisecond
		d := b.Next()
		if d < upper/2 || d > upper {
			t.Fatalf("attempt %d: %s, want within [%s, %s]", i, d, upper/2, upper)
		}
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: %s", d)
	}
}

func TestSleep(t *testing.T) {
	stopErr := errors.New("closed")
	if err := Sleep(context.Background(), nil, stopErr, time.Millisecond); err != nil {
		t.Fatalf("elapsed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, nil, stopErr, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := Sleep(context.Background(), stop, stopErr, time.Hour); err != stopErr {
		t.Fatalf("stopped: %v", err)
	}
}
