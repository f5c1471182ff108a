package main

import (
	"errors"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// memoryLimitErr is why the container's memory limit could not be read, for
// the daemon's start-up log.
var memoryLimitErr error

// setMemoryLimit makes 90 % of the container's memory limit (cgroup v1 or
// v2) the Go runtime's soft limit, unless GOMEMLIMIT is set or AUTOMEMLIMIT
// is "off": near the limit the garbage collector works harder instead of
// letting the heap grow to twice what is live and the kernel kill the
// process. A core NATS burst fills memory this way (its buffer follows the
// limit: adapters/nats AutoBufferBytes). Without a limit nothing changes.
func setMemoryLimit() {
	_, err := memlimit.Set(memlimit.WithRatio(0.9))
	memoryLimitErr = memoryLimitProblem(err)
}

// memoryLimitProblem is err unless it only says there is no cgroup to read
// (macOS, Windows, a process outside any cgroup): then there is no limit to
// follow, and nothing to warn about.
func memoryLimitProblem(err error) error {
	if errors.Is(err, memlimit.ErrCgroupsNotSupported) || errors.Is(err, memlimit.ErrNoCgroup) {
		return nil
	}
	return err
}

// memoryLimit is the runtime's soft memory limit, or 0 for none.
func memoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return 0
}
