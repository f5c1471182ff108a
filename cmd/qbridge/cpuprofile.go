//go:build pprof

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
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
	// $QBRIDGE_EXECTRACE also writes an execution trace (go tool trace):
	// which goroutine ran, waited or was runnable when, for a stage that
	// starves rather than works.
	var tf *os.File
	if tp := os.Getenv("QBRIDGE_EXECTRACE"); tp != "" {
		if tf, err = os.Create(tp); err == nil {
			err = trace.Start(tf)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "qbridge: QBRIDGE_EXECTRACE:", err)
			os.Exit(1)
		}
	}
	atExit = func() {
		if tf != nil {
			trace.Stop()
			_ = tf.Close()
		}
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
