package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestEach(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, limit int
	}{
		{"none", 0, 4},
		{"one item", 1, 4},
		{"limit 1", 5, 1},
		{"limit 0", 3, 0},
		{"fewer items than the limit", 3, 8},
		{"more items than the limit", 100, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[int]int{}
			var now, most atomic.Int64
			Each(tc.n, tc.limit, func(i int) {
				c := now.Add(1)
				for {
					m := most.Load()
					if c <= m || most.CompareAndSwap(m, c) {
						break
					}
				}
				mu.Lock()
				seen[i]++
				mu.Unlock()
				now.Add(-1)
			})
			if len(seen) != tc.n {
				t.Fatalf("called for %d items, want %d", len(seen), tc.n)
			}
			for i, c := range seen {
				if c != 1 || i < 0 || i >= tc.n {
					t.Errorf("item %d called %d times", i, c)
				}
			}
			if m := most.Load(); m > int64(max(tc.limit, 1)) {
				t.Errorf("%d calls at once, limit %d", m, tc.limit)
			}
		})
	}
}
