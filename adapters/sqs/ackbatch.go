package sqs

import (
	"context"
	"fmt"
	"sync"

	"github.com/qbridge/qbridge/bridge/driver"
)

// ackParallel bounds the DeleteMessageBatch calls one AckBatch runs at once.
const ackParallel = 8

// AckBatch deletes the deliveries with DeleteMessageBatch, ten receipt
// handles per call and up to ackParallel calls at once (driver.BatchAcker):
// the engine hands over what the sink confirmed since its last call, so the
// batches fill without waiting for the coalescer's linger.
func (s *Source) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	errs := make([]error, len(ds))
	idx := make([]int, 0, len(ds))
	handles := make([]string, 0, len(ds))
	for i, d := range ds {
		sd, ok := d.(*delivery)
		if !ok || sd.src != s {
			errs[i] = d.Ack(ctx)
			continue
		}
		if !sd.settled.CompareAndSwap(false, true) {
			errs[i] = errSettled
			continue
		}
		idx = append(idx, i)
		handles = append(handles, sd.handle)
	}
	sem := make(chan struct{}, ackParallel)
	var wg sync.WaitGroup
	for start := 0; start < len(handles); start += maxBatch {
		end := min(start+maxBatch, len(handles))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res := s.deleteBatch(ctx, handles[start:end])
			for k, err := range res {
				if err != nil {
					i := idx[start+k]
					errs[i] = fmt.Errorf("sqs: ack message %s: %w", ds[i].(*delivery).id, err)
				}
			}
		})
	}
	wg.Wait()
	return errs
}
