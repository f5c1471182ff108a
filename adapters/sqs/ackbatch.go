package sqs

import (
	"context"
	"fmt"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/parallel"
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
	parallel.Each((len(handles)+maxBatch-1)/maxBatch, ackParallel, func(c int) {
		start := c * maxBatch
		end := min(start+maxBatch, len(handles))
		res := s.deleteBatch(ctx, handles[start:end])
		for k, err := range res {
			if err != nil {
				i := idx[start+k]
				errs[i] = fmt.Errorf("sqs: ack message %s: %w", ds[i].(*delivery).id, err)
			}
		}
	})
	return errs
}
