package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Where there is no cgroup to read, there is no limit to follow and no
// warning; a cgroup that cannot be read is worth one.
func TestMemoryLimitProblem(t *testing.T) {
	unreadable := errors.New("open /sys/fs/cgroup/memory.max: permission denied")
	for _, tc := range []struct {
		err, want error
	}{
		{nil, nil},
		{fmt.Errorf("failed to set GOMEMLIMIT: %w", memlimit.ErrCgroupsNotSupported), nil},
		{fmt.Errorf("failed to set GOMEMLIMIT: %w", memlimit.ErrNoCgroup), nil},
		{unreadable, unreadable},
	} {
		if got := memoryLimitProblem(tc.err); got != tc.want {
			t.Errorf("memoryLimitProblem(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
