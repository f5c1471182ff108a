package chaos

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Every message of a run has the body "g<group>:<seq>" (seq from 0 in its
// group) and the dedup id "g<group>-<seq>", so the sink's deduplication
// (Nats-Msg-Id) drops the copies a redelivery writes within its window.

func body(g, i int) string    { return fmt.Sprintf("g%d:%d", g, i) }
func dedupID(g, i int) string { return fmt.Sprintf("g%d-%d", g, i) }
func group(g int) string      { return fmt.Sprintf("g%d", g) }

// verdict is what the checker found in the sink, in the sink's order.
type verdict struct {
	stored     int      // messages in the sink
	lost       int      // never arrived
	duplicates int      // arrived again, past the sink's deduplication
	reordered  int      // arrived after a later message of its group
	foreign    int      // bodies that are not "g<group>:<seq>" of this run
	examples   []string // the first few findings, for the failure message
}

func (v verdict) String() string {
	s := fmt.Sprintf("%d stored: %d lost, %d duplicated past the sink's dedup, %d reordered within their group",
		v.stored, v.lost, v.duplicates, v.reordered)
	if v.foreign > 0 {
		s += fmt.Sprintf(", %d foreign", v.foreign)
	}
	if len(v.examples) > 0 {
		s += "; " + strings.Join(v.examples, "; ")
	}
	return s
}

// check reads bodies (in the order the sink stored them) against groups
// groups of per messages each.
func check(bodies []string, groups, per int) verdict {
	v := verdict{stored: len(bodies)}
	note := func(format string, args ...any) {
		if len(v.examples) < 5 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	seen := make([][]bool, groups)
	for g := range seen {
		seen[g] = make([]bool, per)
	}
	high := make([]int, groups)   // highest seq stored so far, -1 none
	highAt := make([]int, groups) // where it was stored
	for g := range high {
		high[g] = -1
	}
	for pos, b := range bodies {
		g, i, ok := parseBody(b)
		if !ok || g >= groups || i >= per {
			v.foreign++
			note("foreign body %q at %d", b, pos)
			continue
		}
		switch {
		case seen[g][i]:
			v.duplicates++
			note("g%d:%d again at %d", g, i, pos)
		case i < high[g]:
			v.reordered++
			seen[g][i] = true
			note("g%d:%d at %d after g%d:%d at %d", g, i, pos, g, high[g], highAt[g])
		default:
			seen[g][i] = true
			high[g], highAt[g] = i, pos
		}
	}
	for g := range seen {
		for i, ok := range seen[g] {
			if !ok {
				v.lost++
				note("g%d:%d lost", g, i)
			}
		}
	}
	return v
}

func parseBody(b string) (g, i int, ok bool) {
	rest, ok := strings.CutPrefix(b, "g")
	if !ok {
		return 0, 0, false
	}
	gs, is, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, 0, false
	}
	g, err1 := strconv.Atoi(gs)
	i, err2 := strconv.Atoi(is)
	return g, i, err1 == nil && err2 == nil && g >= 0 && i >= 0
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name                               string
		bodies                             []string
		lost, duplicates, reordered, alien int
	}{
		{"all in order, groups interleaved", []string{"g0:0", "g1:0", "g0:1", "g1:1"}, 0, 0, 0, 0},
		{"one lost", []string{"g0:0", "g1:0", "g1:1"}, 1, 0, 0, 0},
		{"a duplicate right after", []string{"g0:0", "g0:0", "g0:1", "g1:0", "g1:1"}, 0, 1, 0, 0},
		{"a duplicate late is a duplicate, not a reorder", []string{"g0:0", "g0:1", "g0:0", "g1:0", "g1:1"}, 0, 1, 0, 0},
		{"overtaken", []string{"g0:1", "g0:0", "g1:0", "g1:1"}, 0, 0, 1, 0},
		{"overtaken and lost", []string{"g0:1", "g1:0", "g1:1"}, 1, 0, 0, 0},
		{"other groups do not count", []string{"g1:0", "g0:0", "g1:1", "g0:1"}, 0, 0, 0, 0},
		{"foreign", []string{"g0:0", "x", "g0:1", "g1:0", "g1:1", "g7:0"}, 0, 0, 0, 2},
		{"nothing", nil, 4, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := check(tt.bodies, 2, 2)
			if v.lost != tt.lost || v.duplicates != tt.duplicates || v.reordered != tt.reordered || v.foreign != tt.alien {
				t.Errorf("%v; want %d lost, %d duplicates, %d reordered, %d foreign", v, tt.lost, tt.duplicates, tt.reordered, tt.alien)
			}
		})
	}
}

func TestPublishOrder(t *testing.T) {
	p := plan{messages: 120, groups: 6}
	all := publishOrder(p)
	next := make([]int, p.groups)
	adjacent := 0
	for k, r := range all {
		if r.i != next[r.g] {
			t.Fatalf("message %d: g%d:%d, want g%d:%d", k, r.g, r.i, r.g, next[r.g])
		}
		next[r.g]++
		if k > 0 && all[k-1].g == r.g {
			adjacent++
		}
	}
	for g, n := range next {
		if n != p.messages/p.groups {
			t.Errorf("group %d: %d messages", g, n)
		}
	}
	if adjacent < len(all)/4 || adjacent > len(all)*3/4 {
		t.Errorf("%d of %d messages follow one of their group", adjacent, len(all))
	}
}
