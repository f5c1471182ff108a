package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/bytedance/gopkg/util/gctuner"
)

// TestGCFloor checks that the floor raises GOGC while the heap is small
// (this test's is a few MiB), and that GOGC in the environment turns it off.
func TestGCFloor(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) }) // runs last
	t.Cleanup(func() { gctuner.Tuning(0); gcFloorBytes = 0 })

	t.Setenv("GOGC", "150")
	setGCFloor()
	if gcFloorBytes != 0 {
		t.Fatalf("GOGC=150 in the environment: the floor must stay off, got %d bytes", gcFloorBytes)
	}

	t.Setenv("GOGC", "")
	setGCFloor()
	if gcFloorBytes == 0 || gcFloorBytes > gcFloor {
		t.Fatalf("floor = %d bytes, want (0, %d]", gcFloorBytes, gcFloor)
	}
	// The tuner runs after a collection, on the runtime's finalizer
	// goroutine; collect until it has (bounded: it runs after the first).
	deadline := time.Now().Add(30 * time.Second)
	for gctuner.GetGCPercent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after collections with a small heap; want above 100", gctuner.GetGCPercent())
		}
		runtime.GC()
		runtime.Gosched()
	}
	if got := debug.SetGCPercent(100); got <= 100 {
		t.Fatalf("the runtime's GOGC is %d, want the tuner's %d", got, gctuner.GetGCPercent())
	}
}
