package main

import (
	"os"

	"github.com/bytedance/gopkg/util/gctuner"
)

// gcFloor is the heap size below which the collector is let to wait longer
// than Go's default (GOGC=100) before it runs.
const gcFloor = 64 << 20

// gcFloorBytes is the floor in effect (0: off), for the daemon's start-up
// log.
var gcFloorBytes uint64

// setGCFloor keeps the collector from running every few megabytes while the
// live heap is small, without growing a large heap: gctuner raises GOGC (up
// to 500) so that the next collection starts near gcFloor, and leaves it at
// 100 once the live heap passes half of it, so a burst that fills a core
// NATS buffer peaks no higher than before. With the small heap of a steady
// moderate load the collector was the largest cost per message (see
// docs/benchmarks.md). The floor stays under half the soft memory limit
// (setMemoryLimit), and GOGC in the environment turns it off: the
// operator's setting applies as given.
func setGCFloor() {
	if os.Getenv("GOGC") != "" {
		return
	}
	floor := uint64(gcFloor)
	if l := memoryLimit(); l > 0 {
		floor = min(floor, uint64(l)/2)
	}
	gctuner.SetMinGCPercent(100)
	gctuner.SetMaxGCPercent(500)
	gctuner.Tuning(floor)
	gcFloorBytes = floor
}
