package lru

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func made(v string) func() (string, error) { return func() (string, error) { return v, nil } }

// TestEviction: the least recently used value goes first, and is handed
// back for closing.
func TestEviction(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		max     int
		gets    []string
		evicted []string // by the last get
		held    []string // after it, most recent first
	}{
		{"under the limit", 3, []string{"a", "b", "c"}, nil, []string{"c", "b", "a"}},
		{"oldest out", 2, []string{"a", "b", "c"}, []string{"a"}, []string{"c", "b"}},
		{"a use refreshes", 2, []string{"a", "b", "a", "c"}, []string{"b"}, []string{"c", "a"}},
		{"a hit evicts nothing", 2, []string{"a", "b", "b"}, nil, []string{"b", "a"}},
		{"max below one is one", 0, []string{"a", "b"}, []string{"a"}, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, string](tc.max)
			var evicted []string
			for _, k := range tc.gets {
				v, ev, err := c.Get(ctx, k, made(k+"!"))
				if err != nil || v != k+"!" {
					t.Fatalf("Get(%s) = %q, %v", k, v, err)
				}
				evicted = ev
			}
			want := make([]string, len(tc.evicted))
			for i, k := range tc.evicted {
				want[i] = k + "!"
			}
			if !slices.Equal(evicted, want) {
				t.Errorf("evicted %q, want %q", evicted, want)
			}
			held := make([]string, len(tc.held))
			for i, k := range tc.held {
				held[i] = k + "!"
			}
			if got := c.Drain(); !slices.Equal(got, held) {
				t.Errorf("held %q, want %q", got, held)
			}
			if c.Len() != 0 {
				t.Errorf("Len after Drain = %d", c.Len())
			}
		})
	}
}

func TestFailedMakeIsNotKept(t *testing.T) {
	c := New[string, string](2)
	boom := errors.New("refused")
	if _, _, err := c.Get(context.Background(), "a", func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if v, _, err := c.Get(context.Background(), "a", made("a!")); err != nil || v != "a!" {
		t.Fatalf("after a failed make: %q, %v", v, err)
	}
}

func TestRemoveOnlyTheBrokenValue(t *testing.T) {
	ctx := context.Background()
	c := New[string, string](2)
	c.Get(ctx, "a", made("old"))
	if !c.Remove("a", "old") {
		t.Fatal("Remove of the held value failed")
	}
	c.Get(ctx, "a", made("new"))
	if c.Remove("a", "old") {
		t.Fatal("Remove of a stale value removed the new one")
	}
	if v, _, _ := c.Get(ctx, "a", made("other")); v != "new" {
		t.Fatalf("Get = %q, want the new value", v)
	}
}

// TestMakeOutsideTheLock: while one key is being made (a broker round
// trip), a cached key and another new key are served, and callers of the
// same key wait for that one make rather than making it again.
func TestMakeOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := New[string, string](4)
		c.Get(ctx, "cached", made("cached!"))
		release := make(chan struct{})
		var makes atomic.Int32
		slow := func() (string, error) {
			makes.Add(1)
			<-release
			return "slow!", nil
		}
		var wg sync.WaitGroup
		results := make([]string, 3)
		for i := range results {
			wg.Go(func() {
				v, _, err := c.Get(ctx, "slow", slow)
				if err != nil {
					t.Errorf("Get(slow): %v", err)
				}
				results[i] = v
			})
		}
		synctest.Wait() // the three wait: one in slow, two for it
		if v, _, err := c.Get(ctx, "cached", made("again")); err != nil || v != "cached!" {
			t.Errorf("cached key while another is made: %q, %v", v, err)
		}
		if v, _, err := c.Get(ctx, "other", made("other!")); err != nil || v != "other!" {
			t.Errorf("other key while another is made: %q, %v", v, err)
		}
		close(release)
		wg.Wait()
		if n := makes.Load(); n != 1 {
			t.Errorf("slow made %d times, want once", n)
		}
		for _, v := range results {
			if v != "slow!" {
				t.Errorf("results %q", results)
				break
			}
		}
	})
}

// TestWaiterStopsWithItsContext: a caller waiting for another's make
// leaves when its own context ends.
func TestWaiterStopsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[string, string](2)
		release := make(chan struct{})
		go c.Get(context.Background(), "k", func() (string, error) { <-release; return "v", nil })
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := c.Get(ctx, "k", made("second")); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want the waiter's context error", err)
		}
		close(release)
	})
}
