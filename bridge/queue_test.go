package bridge

import (
	"slices"
	"testing"
)

// TestLiveSet: removing in any order leaves exactly the other items, each
// at the index it records.
func TestLiveSet(t *testing.T) {
	for _, order := range [][]int{
		{0, 1, 2, 3, 4},
		{4, 3, 2, 1, 0},
		{2, 0, 4, 1, 3},
		{1, 3, 0, 2, 4},
	} {
		var s liveSet
		items := make([]*item, 5)
		for i := range items {
			items[i] = &item{seq: uint64(i)}
			s.add(items[i])
		}
		left := map[*item]bool{}
		for _, it := range items {
			left[it] = true
		}
		for _, i := range order {
			s.remove(items[i])
			delete(left, items[i])
			if s.len() != len(left) {
				t.Fatalf("order %v: len %d after removing %d, want %d", order, s.len(), i, len(left))
			}
			for at, it := range s.items {
				if !left[it] || it.liveAt != at {
					t.Fatalf("order %v: after removing %d, item %d at %d records %d (still in: %v)", order, i, it.seq, at, it.liveAt, left[it])
				}
			}
		}
		if s.len() != 0 || slices.ContainsFunc(s.items[:cap(s.items)], func(it *item) bool { return it != nil }) {
			t.Fatalf("order %v: the set keeps references after removing everything", order)
		}
	}
}
