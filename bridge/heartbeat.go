package bridge

import (
	"context"
	"time"

	"github.com/qbridge/qbridge/internal/parallel"
)

// extendParallel bounds concurrent Extend calls per pipeline tick.
const extendParallel = 16

// heartbeat extends the lock of every unsettled delivery (queued, sending or
// waiting for a retry) about every Lock.ExtendEvery, so that a slow sink or
// a long retry does not let the broker redeliver it. It runs until ctx ends.
func (p *Pipeline) heartbeat(ctx context.Context) {
	every := p.opt.Lock.ExtendEvery
	// Ticking faster than ExtendEvery keeps each item's extension close to
	// its own schedule instead of extending everything at once.
	tick := max(every/4, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.extendDue(ctx, now, every-tick)
		}
	}
}

func (p *Pipeline) extendDue(ctx context.Context, now time.Time, age time.Duration) {
	var due []*item
	p.mu.Lock()
	for _, it := range p.live.items {
		// Settling items count too: a dead-letter send may take a while.
		if it.state != stDone && now.Sub(it.extendedAt) >= age {
			it.extendedAt = now
			due = append(due, it)
		}
	}
	p.mu.Unlock()
	if len(due) == 0 {
		return
	}
	// A fixed set of workers takes the due items in turn: a goroutine per
	// item was one per unsettled message on each tick.
	parallel.Each(len(due), extendParallel, func(i int) {
		if ctx.Err() == nil {
			p.extend(ctx, due[i])
		}
	})
}

func (p *Pipeline) extend(ctx context.Context, it *item) {
	// Skip a delivery being settled right now: settling holds dmu, and a
	// settled delivery needs no lock.
	if !it.dmu.TryLock() {
		return
	}
	defer it.dmu.Unlock()
	if it.settled {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := it.d.Extend(ctx, p.opt.Lock.ExtendBy); err != nil {
		p.met.errExtend.Inc()
		p.log.Warn("extending the message lock failed; it may be delivered again", "error", err, "group", it.group, "id", it.orig.ID)
	}
}
