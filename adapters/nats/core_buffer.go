package nats

import (
	"runtime/debug"
	"sync"

	"github.com/pbnjay/memory"
)

// autoBuffers is the one automatic buffer budget of the process
// (AutoBufferBytes), shared by the core sources that leave buffer_bytes
// out: each gets an equal part, at least nats.go's default. Were each given
// the whole, several core pipelines in one pod could together hold several
// times what the memory limit allows while their bursts overlap. A source
// that joins or leaves resizes the others' live subscriptions (nats.go
// takes new pending limits at any time; a subscription over its new limit
// drops new messages until it is under it again).
var autoBuffers = &bufferBudget{members: make(map[*coreSource]struct{})}

type bufferBudget struct {
	mu      sync.Mutex
	members map[*coreSource]struct{}
}

// join adds s, and gives every member its part of the budget.
func (b *bufferBudget) join(s *coreSource) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members[s] = struct{}{}
	b.shareLocked()
}

// leave removes s; the others get its part.
func (b *bufferBudget) leave(s *coreSource) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.members[s]; !ok {
		return
	}
	delete(b.members, s)
	b.shareLocked()
}

// shareLocked sets every member's limits to an equal part of the budget.
// b.mu is held.
func (b *bufferBudget) shareLocked() {
	if len(b.members) == 0 {
		return
	}
	part := max(AutoBufferBytes(debug.SetMemoryLimit(-1), memory.TotalMemory())/len(b.members), MinAutoBufferBytes)
	for s := range b.members {
		s.setBufferBytes(part)
	}
}

// setBufferBytes sets s's byte limit, and its message limit with it when
// buffer_size was left out too.
func (s *coreSource) setBufferBytes(n int) {
	size := s.set.bufferSize
	if s.set.autoBufferSize {
		size = AutoBufferSize(n)
	}
	if err := s.sub.SetPendingLimits(size, n); err != nil {
		s.log.Warn("nats: resizing the core source's buffer failed; it keeps its limits", "error", err)
	}
}
