// Package parallel calls a function over a number of items with a bounded
// number of goroutines.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Each calls fn(i) for every i in [0, n), at most limit at a time, and
// returns when all calls have returned. A fixed set of min(limit, n)
// goroutines takes the indexes in turn, so a call over many items (a
// message each, on the paths that use it) starts no goroutine per item;
// one item, or a limit of 1, runs on the caller's goroutine.
func Each(n, limit int, fn func(i int)) {
	if n == 1 || limit <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(limit, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
