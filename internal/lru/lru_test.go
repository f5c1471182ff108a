package lru

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func made(v string) func() (string, error) { return func() (string, error) { return v, nil } }

// closes records the values a cache closed, in order.
type closes struct {
	mu   sync.Mutex
	vals []string
}

func (r *closes) close(_ context.Context, v string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = append(r.vals, v)
	return nil
}

func (r *closes) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.vals)
}

// TestEviction: the least recently used value that no caller holds goes
// first and is closed at once; one in use stays until its last release.
// A step "+k" acquires k (and holds it), "-k" releases the last hold of k;
// closed is every value closed once the step's closes are done.
func TestEviction(t *testing.T) {
	type step struct {
		op     string
		closed []string
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
		held  []string // at the end, most recent first
	}{
		{"under the limit", 3, []step{{"+a", nil}, {"-a", nil}, {"+b", nil}, {"-b", nil}, {"+c", nil}, {"-c", nil}}, []string{"c", "b", "a"}},
		{"unheld oldest out at once", 2, []step{{"+a", nil}, {"-a", nil}, {"+b", nil}, {"-b", nil}, {"+c", []string{"a"}}}, []string{"c", "b"}},
		{"a use refreshes", 2, []step{{"+a", nil}, {"-a", nil}, {"+b", nil}, {"-b", nil}, {"+a", nil}, {"-a", nil}, {"+c", []string{"b"}}}, []string{"c", "a"}},
		{"a hit evicts nothing", 2, []step{{"+a", nil}, {"-a", nil}, {"+b", nil}, {"-b", nil}, {"+b", nil}}, []string{"b", "a"}},
		{"max below one is one", 0, []step{{"+a", nil}, {"-a", nil}, {"+b", []string{"a"}}}, []string{"b"}},
		{"held oldest goes at its release", 1, []step{{"+a", nil}, {"+b", nil}, {"-a", []string{"a"}}, {"-b", []string{"a"}}}, []string{"b"}},
		{"the unheld one goes, not the held", 2, []step{{"+a", nil}, {"+b", nil}, {"-b", nil}, {"+c", []string{"b"}}}, []string{"c", "a"}},
		{"every holder counts", 1, []step{{"+a", nil}, {"+a", nil}, {"+b", nil}, {"-b", []string{"b"}}, {"-a", []string{"b"}}, {"+c", []string{"b"}}, {"-a", []string{"b", "a"}}}, []string{"c"}},
		{"over max while all are held", 1, []step{{"+a", nil}, {"+b", nil}, {"+c", nil}, {"-c", []string{"c"}}, {"-b", []string{"c", "b"}}}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec closes
				c := New[string, string](tc.max, rec.close)
				holds := map[string][]func(){}
				for i, s := range tc.steps {
					k := s.op[1:]
					if s.op[0] == '+' {
						v, release, err := c.Acquire(context.Background(), k, made(k))
						if err != nil || v != k {
							t.Fatalf("step %d: Acquire(%s) = %q, %v", i, k, v, err)
						}
						holds[k] = append(holds[k], release)
					} else {
						n := len(holds[k]) - 1
						holds[k][n]()
						holds[k] = holds[k][:n]
					}
					synctest.Wait() // the closes started
					if got := rec.got(); !slices.Equal(got, s.closed) {
						t.Fatalf("step %d (%s): closed %q, want %q", i, s.op, got, s.closed)
					}
				}
				var held []string
				for el := c.order.Front(); el != nil; el = el.Next() {
					held = append(held, el.Value.(*entry[string, string]).v)
				}
				if !slices.Equal(held, tc.held) || c.Len() != len(tc.held) {
					t.Errorf("held %q (Len %d), want %q", held, c.Len(), tc.held)
				}
			})
		})
	}
}

// TestReleaseTwice: a second call of a release func does nothing.
func TestReleaseTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec closes
		c := New[string, string](1, rec.close)
		_, r1, _ := c.Acquire(context.Background(), "a", made("a"))
		_, r2, _ := c.Acquire(context.Background(), "a", made("a"))
		_, rb, _ := c.Acquire(context.Background(), "b", made("b"))
		rb()
		r1()
		r1()
		synctest.Wait()
		if got := rec.got(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("closed %q while a is still held once", got)
		}
		r2()
		synctest.Wait()
		if got := rec.got(); !slices.Equal(got, []string{"b"}) || c.Len() != 1 {
			t.Fatalf("closed %q, Len %d", got, c.Len())
		}
	})
}

// TestClose: Close closes every value (with its context, evicted ones
// with their own), waits for the closes in progress, an eviction's
// included, and for the values in use or being made to be released and
// closed; it returns the errors of its closes. Acquire fails afterwards.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var rec closes
		boom := errors.New("detach refused")
		type ctxKey struct{}
		closeCtx := context.WithValue(context.Background(), ctxKey{}, "close")
		var atCloseCtx []string
		c := New[string, string](2, func(ctx context.Context, v string) error {
			<-gate
			rec.close(ctx, v)
			if ctx.Value(ctxKey{}) != nil {
				rec.mu.Lock()
				atCloseCtx = append(atCloseCtx, v)
				rec.mu.Unlock()
			}
			if v == "c" {
				return boom
			}
			return nil
		})
		ctx := context.Background()
		for _, k := range []string{"a", "b", "c"} { // a evicted: its close waits for gate
			_, release, _ := c.Acquire(ctx, k, made(k))
			release()
		}
		_, releaseD, _ := c.Acquire(ctx, "d", made("d")) // b evicted; d held at Close
		making, releaseE := make(chan struct{}), make(chan struct{})
		go func() {
			_, release, err := c.Acquire(ctx, "e", func() (string, error) { <-making; return "e", nil })
			if err != nil {
				t.Errorf("the make in progress at Close: %v", err)
				return
			}
			<-releaseE
			release()
		}()
		synctest.Wait()
		var closeErr error
		returned := make(chan struct{})
		go func() { closeErr = c.Close(closeCtx); close(returned) }()
		synctest.Wait()
		if _, _, err := c.Acquire(ctx, "a", made("again")); !errors.Is(err, ErrClosed) {
			t.Errorf("Acquire after Close: %v", err)
		}
		if c.Len() != 0 {
			t.Errorf("Len after Close = %d", c.Len())
		}
		stillOpen := func(what string) {
			t.Helper()
			synctest.Wait()
			select {
			case <-returned:
				t.Fatalf("Close returned with %s", what)
			default:
			}
		}
		stillOpen("the closes of a, b and c in progress")
		close(gate)
		synctest.Wait()
		if got := rec.got(); len(got) != 3 {
			t.Errorf("closed %q before d's release and e's make, want a, b, c", got)
		}
		stillOpen("d in use")
		releaseD()
		stillOpen("e being made")
		close(making)
		stillOpen("e in use")
		cctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Close(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Close with an ended context while e is in use: %v", err)
		}
		close(releaseE)
		<-returned
		if !errors.Is(closeErr, boom) {
			t.Errorf("Close = %v, want c's close error", closeErr)
		}
		got := rec.got()
		slices.Sort(got)
		if !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
			t.Errorf("closed %q", got)
		}
		slices.Sort(atCloseCtx)
		if !slices.Equal(atCloseCtx, []string{"c", "d", "e"}) {
			t.Errorf("closed with Close's context: %q, want c, d, e (a and b were evicted)", atCloseCtx)
		}
	})
}

func TestFailedMakeIsNotKept(t *testing.T) {
	c := New[string, string](2, nil)
	boom := errors.New("refused")
	if _, _, err := c.Acquire(context.Background(), "a", func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	v, release, err := c.Acquire(context.Background(), "a", made("a!"))
	if err != nil || v != "a!" {
		t.Fatalf("after a failed make: %q, %v", v, err)
	}
	release()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveOnlyTheBrokenValue: Remove forgets the broken value (without
// closing it), not one made since.
func TestRemoveOnlyTheBrokenValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var rec closes
		c := New[string, string](2, rec.close)
		_, release, _ := c.Acquire(ctx, "a", made("old"))
		if !c.Remove("a", "old") {
			t.Fatal("Remove of the held value failed")
		}
		release()
		_, release, _ = c.Acquire(ctx, "a", made("new"))
		release()
		if c.Remove("a", "old") {
			t.Fatal("Remove of a stale value removed the new one")
		}
		if v, release, _ := c.Acquire(ctx, "a", made("other")); v != "new" {
			t.Fatalf("Acquire = %q, want the new value", v)
		} else {
			release()
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rec.got(); !slices.Equal(got, []string{"new"}) {
			t.Errorf("closed %q, want only the new value", got)
		}
	})
}

// TestMakeOutsideTheLock: while one key is being made (a broker round
// trip), a cached key and another new key are served, and callers of the
// same key wait for that one make rather than making it again.
func TestMakeOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := New[string, string](4, nil)
		c.Acquire(ctx, "cached", made("cached!"))
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
				v, _, err := c.Acquire(ctx, "slow", slow)
				if err != nil {
					t.Errorf("Acquire(slow): %v", err)
				}
				results[i] = v
			})
		}
		synctest.Wait() // the three wait: one in slow, two for it
		if v, _, err := c.Acquire(ctx, "cached", made("again")); err != nil || v != "cached!" {
			t.Errorf("cached key while another is made: %q, %v", v, err)
		}
		if v, _, err := c.Acquire(ctx, "other", made("other!")); err != nil || v != "other!" {
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
		c := New[string, string](2, nil)
		release := make(chan struct{})
		go c.Acquire(context.Background(), "k", func() (string, error) { <-release; return "v", nil })
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := c.Acquire(ctx, "k", made("second")); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want the waiter's context error", err)
		}
		close(release)
	})
}

// TestConcurrentUse: under concurrent Acquire and release over more keys
// than max, no value is closed while a caller holds it, every value made is
// closed exactly once by the end of Close, and the cache holds more than
// max only by the values in use (at most one a worker).
func TestConcurrentUse(t *testing.T) {
	const maxN, workers, rounds, keys = 3, 8, 200, 7
	type val struct {
		name   string
		users  atomic.Int32
		closed atomic.Int32
	}
	var mu sync.Mutex
	var all []*val
	c := New[string, *val](maxN, func(_ context.Context, v *val) error {
		if n := v.users.Load(); n != 0 {
			t.Errorf("%s closed with %d users", v.name, n)
		}
		v.closed.Add(1)
		return nil
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				k := fmt.Sprint((w*rounds + r*(w+1)) % keys)
				v, release, err := c.Acquire(ctx, k, func() (*val, error) {
					v := &val{name: k}
					mu.Lock()
					all = append(all, v)
					mu.Unlock()
					return v, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				v.users.Add(1)
				if v.closed.Load() != 0 {
					t.Errorf("%s in use after its close", v.name)
				}
				if l := c.Len(); l > maxN+workers {
					t.Errorf("%d held with at most %d in use", l, workers)
				}
				v.users.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		if n := v.closed.Load(); n != 1 {
			t.Errorf("%s closed %d times", v.name, n)
		}
	}
}
