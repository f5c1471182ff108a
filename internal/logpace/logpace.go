// Package logpace paces a log line that can come once per message (a dead
// letter, a message handed back, an exporter's failure): the first few are
// logged, then at most one per interval, each saying how many like it were
// left out since the line before.
package logpace

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// LeftOutKey is the attribute under which a paced line says how many
// like it were left out since the line before.
const LeftOutKey = "like_it_since_the_last_line"

// Pacer lets the first First calls through, then one per Interval. The zero
// value lets every call through; set the fields before the first Do.
type Pacer struct {
	s    rate.Sometimes
	left atomic.Int64
}

// PerMessage returns the Pacer of a line that can come once per message
// (a dead letter, an undecodable message): the first 10, then one a
// second. The engine and every source pace such lines alike, so a
// producer writing bad messages cannot flood the log.
func PerMessage() *Pacer { return New(10, time.Second) }

// New returns a Pacer that lets first calls through, then one per every.
func New(first int, every time.Duration) *Pacer {
	return &Pacer{s: rate.Sometimes{First: first, Interval: every}}
}

// Do calls log when the pace allows, with the number of calls left out
// since the last one that logged. A nil Pacer lets every call through (a
// source a test builds by hand).
func (p *Pacer) Do(log func(leftOut int64)) {
	if p == nil {
		log(0)
		return
	}
	// A call counts itself only when it is left out: one that counted
	// itself first could have its count taken by another's line, and then
	// say -1 (two lines at once within First).
	logged := false
	p.s.Do(func() {
		logged = true
		log(p.left.Swap(0))
	})
	if !logged {
		p.left.Add(1)
	}
}
