package nats

import (
	"context"
	"fmt"

	"github.com/qbridge/qbridge/bridge/driver"
)

// AckBatch acknowledges deliveries with pipelined acks (driver.BatchAcker):
// every ack but the last is published without waiting and the last is a
// double ack. nats-server queues a consumer's acks and handles them in
// arrival order, replying to an ack's request only once it is processed
// (server/consumer.go: pushAck, processInboundAcks), so the last
// confirmation covers the acks before it on this connection: one round trip
// per batch instead of one per message. All deliveries of a jsSource come
// from its one consumer.
func (s *jsSource) AckBatch(ctx context.Context, ds []driver.Delivery) []error {
	errs := make([]error, len(ds))
	last := -1
	for i, d := range ds {
		jd, ok := d.(*jsDelivery)
		if !ok || jd.src != s {
			errs[i] = d.Ack(ctx)
			continue
		}
		last = i
	}
	for i, d := range ds {
		jd, ok := d.(*jsDelivery)
		if !ok || jd.src != s || i == last {
			continue
		}
		jd.settle(true)
		if err := jd.m.Ack(); err != nil {
			jd.unsettled()
			errs[i] = fmt.Errorf("nats: ack: %w", err)
		}
	}
	if last < 0 {
		return errs
	}
	if err := ds[last].Ack(ctx); err != nil {
		// The earlier acks went out on the same connection; whether the
		// server got them is unknown: each may be delivered again.
		for i, d := range ds {
			if jd, ok := d.(*jsDelivery); ok && jd.src == s && errs[i] == nil {
				jd.unsettled()
				errs[i] = err
			}
		}
	}
	return errs
}
