//go:build pprof

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// A build with -tags pprof writes to $QBRIDGE_HEAPPROFILE the heap profile
// taken when the heap in use was largest, polled every 100 ms: what a burst
// holds at its peak, which a profile at exit no longer shows
// (docs/benchmarks.md).
func init() {
	path := os.Getenv("QBRIDGE_HEAPPROFILE")
	if path == "" {
		return
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var peak uint64
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= peak {
				continue
			}
			peak = ms.HeapInuse
			if err := writeHeapProfile(path); err != nil {
				fmt.Fprintln(os.Stderr, "qbridge: QBRIDGE_HEAPPROFILE:", err)
				return
			}
		}
	}()
	prev := atExit
	atExit = func() {
		close(stop)
		<-stopped // a profile being written is whole before the process ends
		prev()
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
