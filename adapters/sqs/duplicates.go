package sqs

import "sync"

// dupWindow is how many of its latest message ids a FIFO sink remembers.
const dupWindow = 1 << 14

// sentIDs tells duplicates in what a FIFO queue answers: SQS accepts a send
// whose deduplication id it has seen within its 5-minute window and drops
// it without a word, answering with the message id of the first (which
// the official SDKs pass on as any MessageId). A message id seen again is
// such a drop. The sink remembers its last dupWindow ids (some 1.5 MB):
// enough for a retried batch or a merged run of ids, not every id of a
// long migration. The count is driver.DuplicateReporter's, which a
// migration's verification reads (a merged message exited 0 before).
type sentIDs struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string
	next int
	dups int64
}

func newSentIDs() *sentIDs {
	return &sentIDs{seen: make(map[string]struct{}, dupWindow), ring: make([]string, dupWindow)}
}

// sent records the id of a message SQS took.
func (s *sentIDs) sent(id string) {
	if s == nil || id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[id]; ok {
		s.dups++
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.seen, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.seen[id] = struct{}{}
}

func (s *sentIDs) count() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dups
}
