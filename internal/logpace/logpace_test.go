package logpace

import (
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
