package bridge

import (
	"context"
	"errors"

	"github.com/qbridge/qbridge/bridge/driver"
)

// Acknowledgements are the one settlement every message needs, so they take
// no goroutine, timer or context of their own: senders queue confirmed
// items in p.acks, and a few ackers settle them in batches, each batch
// under one deadline, through driver.BatchAcker where the source has it
// (one call for the batch) and Ack per delivery otherwise.
const (
	// ackers is how many batches may be settling at once. Sources without
	// BatchAcker may take a broker round trip per Ack (a Service Bus
	// complete): the ackers then settle ackers deliveries at a time.
	ackers = 16
	// maxAckBatch bounds one BatchAcker call.
	maxAckBatch = 1024
)

// queueAcks hands confirmed items (state stSettling) to the ackers.
func (p *Pipeline) queueAcks(items []*item) {
	p.mu.Lock()
	p.acks = append(p.acks, items...)
	p.mu.Unlock()
	p.wakeAcker()
}

func (p *Pipeline) wakeAcker() {
	select {
	case p.ackWake <- struct{}{}:
	default: // an acker is already signalled
	}
}

// ackLoop settles queued acks until ctx ends.
func (p *Pipeline) ackLoop(ctx context.Context) {
	for {
		select {
		case <-p.ackWake:
		case <-ctx.Done():
			return
		}
		for {
			batch := p.takeAcks()
			if batch == nil {
				break
			}
			p.ackBatch(batch)
		}
	}
}

// takeAcks removes the next batch from p.acks: everything (up to
// maxAckBatch) for a BatchAcker source, else a share that leaves work for
// the other ackers. It wakes another acker if some remain.
func (p *Pipeline) takeAcks() []*item {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.acks)
	if n == 0 {
		return nil
	}
	if _, ok := p.acks[0].src.(driver.BatchAcker); ok {
		n = min(n, maxAckBatch)
	} else {
		n = (n + ackers - 1) / ackers
	}
	batch := make([]*item, n)
	copy(batch, p.acks)
	clear(p.acks[:n])
	p.acks = p.acks[n:]
	if len(p.acks) == 0 {
		p.acks = nil
	} else {
		p.wakeAcker()
	}
	return batch
}

// ackBatch acknowledges items at their sources and removes them.
func (p *Pipeline) ackBatch(items []*item) {
	ctx, cancel := context.WithTimeout(p.base, opTimeout)
	defer cancel()
	// Hold each delivery's lock: no Extend runs during settlement, and a
	// delivery settled meanwhile (by a drain) is left alone.
	todo := items[:0:0]
	for _, it := range items {
		it.dmu.Lock()
		if it.settled {
			it.dmu.Unlock()
			continue
		}
		it.settled = true
		todo = append(todo, it)
	}
	errs := make([]error, len(todo))
	for start := 0; start < len(todo); {
		// A batch goes to one source: items of a source that failed and
		// was reopened are not mixed with the new source's.
		end := start + 1
		for end < len(todo) && todo[end].src == todo[start].src {
			end++
		}
		run := todo[start:end]
		if ba, ok := run[0].src.(driver.BatchAcker); ok {
			ds := make([]driver.Delivery, len(run))
			for i, it := range run {
				ds[i] = it.d
			}
			res := ba.AckBatch(ctx, ds)
			if len(res) != len(ds) {
				err := errors.New("the source's AckBatch returned the wrong number of results")
				res = make([]error, len(ds))
				for i := range res {
					res[i] = err
				}
			}
			copy(errs[start:end], res)
		} else {
			for i, it := range run {
				errs[start+i] = it.d.Ack(ctx)
			}
		}
		start = end
	}
	acked := 0
	for i, it := range todo {
		it.dmu.Unlock()
		if err := errs[i]; err != nil {
			// The sink has the message; the source redelivers it (a
			// duplicate, never a loss).
			p.met.errAck.Inc()
			p.log.Warn("ack failed; the message may be delivered again", "error", err, "group", it.group, "id", it.msg.ID)
			continue
		}
		acked++
	}
	p.met.acked.Add(float64(acked))
	p.mu.Lock()
	for _, it := range items {
		p.finish(it)
	}
	p.mu.Unlock()
	// Finished and settled: nothing reads these deliveries or their
	// messages any more. That holds because every item is marked settled
	// under dmu before it is finished, and whatever may still hold it reads
	// d or the message only after seeing it unsettled (the heartbeat), or
	// reads before queueing it for ack (sendBatch), or copied what it needs
	// under p.mu (the retry log). Nacks, releases and dead letters never
	// recycle.
	for i, it := range todo {
		if r, ok := it.d.(driver.Recycler); ok && errs[i] == nil {
			r.Recycle()
		}
	}
}
