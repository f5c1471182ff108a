package logpace

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(2, time.Minute)
		var logged []int64
		do := func() { p.Do(func(left int64) { logged = append(logged, left) }) }
		for range 10 {
			do()
		}
		// The first two; a third waits for the minute.
		if len(logged) != 2 || logged[0] != 0 || logged[1] != 0 {
			t.Fatalf("logged %v", logged)
		}
		time.Sleep(time.Minute)
		do()
		// The minute passed: logged, saying the 8 left out meanwhile.
		if len(logged) != 3 || logged[2] != 8 {
			t.Fatalf("logged %v", logged)
		}
	})
}

// Lines logged at once never say a negative number left out, and what
// they say adds up to the calls left out.
func TestPacerConcurrentNeverNegative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(50, time.Hour)
		var mu sync.Mutex
		var lines, said int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				p.Do(func(left int64) {
					mu.Lock()
					defer mu.Unlock()
					if left < 0 {
						t.Errorf("a line says %d left out", left)
					}
					lines++
					said += left
				})
			})
		}
		wg.Wait()
		time.Sleep(time.Hour)
		p.Do(func(left int64) { lines++; said += left })
		if lines != 51 || said != 150 {
			t.Errorf("%d lines saying %d left out; want 51 and 150", lines, said)
		}
	})
}
