//go:build pprof

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// A build with -tags pprof writes a CPU profile of the whole process to
// $QBRIDGE_CPUPROFILE, for profiling the daemon under a benchmark's load
// (docs/benchmarks.md). Release builds carry none of this.
func init() {
	path := os.Getenv("QBRIDGE_CPUPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qbridge: QBRIDGE_CPUPROFILE:", err)
		os.Exit(1)
	}
	// $QBRIDGE_MUTEXPROFILE also records where goroutines wait on locks
	// (every contended lock), for telling a stage that waits from one that
	// works.
	mutexPath := os.Getenv("QBRIDGE_MUTEXPROFILE")
	if mutexPath != "" {
		runtime.SetMutexProfileFraction(1)
	}
	atExit = func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		if mutexPath != "" {
			if mf, err := os.Create(mutexPath); err == nil {
				_ = pprof.Lookup("mutex").WriteTo(mf, 0)
				_ = mf.Close()
			}
		}
	}
}
