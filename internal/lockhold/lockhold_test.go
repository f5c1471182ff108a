package lockhold

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type fakeLock struct {
	mu        sync.Mutex
	renews    []time.Time
	abandoned time.Time
	lockFor   time.Duration
	renewErr  error
}

func (f *fakeLock) Renew(context.Context) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews = append(f.renews, time.Now())
	return time.Now().Add(f.lockFor), f.renewErr
}

func (f *fakeLock) Release(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandoned = time.Now()
	return nil
}

func (f *fakeLock) state() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.renews), f.abandoned
}

// The holder renews the lock (every renewEvery, or at half the remaining
// lock time when that is sooner) and abandons when the delay ends. Run in a
// synctest bubble: the timers run on the bubble's clock, so the counts are
// exact however loaded the machine is.
func TestHolderRenewsThenAbandons(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testHolderRenewsThenAbandons)
}

func testHolderRenewsThenAbandons(t *testing.T) {
	h := New(100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	f := &fakeLock{lockFor: time.Second}
	done := make(chan struct{})
	start := time.Now()
	if !h.Hold(550*time.Millisecond, start.Add(time.Second), f, "id", func() { close(done) }) {
		t.Fatal("hold refused")
	}
	<-done
	n, ab := f.state()
	if el := ab.Sub(start); el < 550*time.Millisecond || el > 900*time.Millisecond {
		t.Fatalf("abandoned after %s", el)
	}
	if n < 4 || n > 6 {
		t.Fatalf("%d renewals in 550 ms at 100 ms", n)
	}
	// a short lock: renewed at half its remaining time
	f2 := &fakeLock{lockFor: 80 * time.Millisecond}
	done2 := make(chan struct{})
	h.Hold(400*time.Millisecond, time.Now().Add(80*time.Millisecond), f2, "id2", func() { close(done2) })
	<-done2
	if n, _ := f2.state(); n < 8 {
		t.Fatalf("%d renewals of an 80 ms lock in 400 ms", n)
	}
	// close abandons at once
	f3 := &fakeLock{lockFor: time.Second}
	done3 := make(chan struct{})
	h.Hold(time.Hour, time.Time{}, f3, "id3", func() { close(done3) })
	start = time.Now()
	h.Close(context.Background())
	<-done3
	if _, ab := f3.state(); ab.IsZero() || ab.Sub(start) > 100*time.Millisecond {
		t.Fatalf("close: abandoned %v", ab)
	}
	if h.Hold(time.Second, time.Time{}, f3, "id4", func() {}) {
		t.Fatal("hold after close")
	}
}

// Held messages share the holder's one goroutine: during a sink outage
// thousands may be held, and each had a goroutine and a timer of its own.
func TestHolderGoroutinesFlat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
		before := runtime.NumGoroutine()
		const n = 500
		locks := make([]*fakeLock, n)
		var done sync.WaitGroup
		for i := range locks {
			locks[i] = &fakeLock{lockFor: time.Second}
			done.Add(1)
			if !h.Hold(time.Duration(i%10+1)*time.Second, time.Now().Add(time.Second), locks[i], "id", done.Done) {
				t.Fatal("hold refused")
			}
		}
		synctest.Wait()
		if grew := runtime.NumGoroutine() - before; grew > 1 {
			t.Errorf("%d goroutines more for %d held messages, want 1", grew, n)
		}
		done.Wait() // every delay ends
		for i, f := range locks {
			renews, ab := f.state()
			if ab.IsZero() {
				t.Fatalf("message %d not abandoned", i)
			}
			// renewed every 100 ms for its delay
			if want := (i%10 + 1) * 10; renews < want-1 || renews > want {
				t.Fatalf("message %d: %d renewals, want about %d", i, renews, want)
			}
		}
		h.Close(t.Context())
	})
}

// KeepLocked renews when the lock is due (renewAt: every, or half the
// remaining lock time), until wait says stop or a renewal fails.
func TestKeepLocked(t *testing.T) {
	errGone := errors.New("lock lost")
	for _, c := range []struct {
		name       string
		lockFor    time.Duration // what a renewal returns
		renewErr   error
		stopAfter  time.Duration // wait returns false then
		wantRenews int
		wantErr    error
	}{
		{name: "stopped before due", lockFor: time.Minute, stopAfter: 50 * time.Millisecond, wantRenews: 0},
		{name: "every", lockFor: time.Minute, stopAfter: 550 * time.Millisecond, wantRenews: 5},
		// a 100 ms lock is renewed at half its remaining time: every 50 ms
		{name: "short lock", lockFor: 100 * time.Millisecond, stopAfter: 520 * time.Millisecond, wantRenews: 10},
		{name: "renewal fails", lockFor: time.Minute, renewErr: errGone, stopAfter: time.Hour, wantRenews: 1, wantErr: errGone},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeLock{lockFor: c.lockFor, renewErr: c.renewErr}
				l := &Renewal{Every: 100 * time.Millisecond, RenewLock: f.Renew, LockedUntil: time.Now().Add(c.lockFor)}
				stop := time.After(c.stopAfter)
				err := KeepLocked(t.Context(), l, func(due <-chan time.Time) bool {
					select {
					case <-stop:
						return false
					case <-due:
						return true
					}
				})
				if !errors.Is(err, c.wantErr) {
					t.Errorf("error %v, want %v", err, c.wantErr)
				}
				if n, _ := f.state(); n != c.wantRenews {
					t.Errorf("%d renewals, want %d", n, c.wantRenews)
				}
			})
		})
	}
}

// orderLock records the order of the hand-backs it shares with others.
type orderLock struct {
	id  string
	log *[]string
	mu  *sync.Mutex
}

func (l orderLock) Renew(context.Context) (time.Time, error) {
	panic("a Holder without renewals renewed " + l.id)
}

func (l orderLock) Release(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.log = append(*l.log, l.id)
	return nil
}

// A Holder for messages without a lock (AMQP) renews nothing and hands
// back at the deadline; messages held for the same deadline go back in the
// order they were held (a group's, so that the broker gets them back in
// order).
func TestHolderWithoutLockKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(0, slog.New(slog.DiscardHandler), "test")
		var (
			mu  sync.Mutex
			got []string
			wg  sync.WaitGroup
		)
		start := time.Now()
		for _, id := range []string{"g/0", "g/1", "g/2"} {
			wg.Add(1)
			if !h.Hold(time.Second, time.Time{}, orderLock{id, &got, &mu}, id, wg.Done) {
				t.Fatal("hold refused")
			}
		}
		wg.Wait()
		if el := time.Since(start); el != time.Second {
			t.Errorf("handed back after %v, want the delay", el)
		}
		if want := []string{"g/0", "g/1", "g/2"}; !slices.Equal(got, want) {
			t.Errorf("handed back %v, want %v", got, want)
		}
		h.Close(t.Context())
	})
}
