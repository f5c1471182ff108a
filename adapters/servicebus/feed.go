package servicebus

import (
	"context"
	"sync/atomic"

	"github.com/qbridge/qbridge/bridge/driver"
)

// feed hands deliveries from a source's worker goroutines (session workers,
// HTTPS peek-lock workers) to Receive, and carries the first fatal error.
type feed[D driver.Delivery] struct {
	out    chan D
	errc   chan error // closed on the first fatal error, kept in failed
	failed atomic.Pointer[errBox]
}

func newFeed[D driver.Delivery]() feed[D] {
	return feed[D]{out: make(chan D), errc: make(chan error)}
}

// receive blocks for the first delivery, then takes what is ready without
// waiting, up to limit.
func (f *feed[D]) receive(ctx context.Context, closed <-chan struct{}, limit int) ([]driver.Delivery, error) {
	var out []driver.Delivery
	select {
	case d := <-f.out:
		out = append(out, d)
	case <-f.errc:
		return nil, f.failed.Load().err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-closed:
		return nil, errClosed
	}
	for len(out) < limit {
		select {
		case d := <-f.out:
			out = append(out, d)
		default:
			return out, nil
		}
	}
	return out, nil
}

// fail records the first fatal error; receive returns it from then on.
func (f *feed[D]) fail(err error) {
	if f.failed.CompareAndSwap(nil, &errBox{err}) {
		close(f.errc)
	}
}
