package amqp

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/qbridge/qbridge/internal/backoff"
)

// redialer is the reconnect state of a source or a sink: the backoff after
// failures and when the next attempt is due, the URL to dial first, and the
// last failure (Ready reports it). Its own lock keeps it apart from the
// owner's: it never takes the owner's.
type redialer struct {
	cs   *connSettings
	stop <-chan struct{} // the owner's Close: ends a wait with errClosed

	mu      sync.Mutex
	bo      backoff.Backoff
	retryAt time.Time
	next    int // endpoint to dial first
	lastErr error
}

func newRedialer(cs *connSettings, stop <-chan struct{}) *redialer {
	return &redialer{cs: cs, stop: stop, bo: backoff.Backoff{Base: cs.backoff, Max: cs.backoffMax}}
}

// wait waits until the next attempt is due; its error is ctx's, or
// errClosed once the owner closes.
func (r *redialer) wait(ctx context.Context) error {
	r.mu.Lock()
	d := time.Until(r.retryAt)
	r.mu.Unlock()
	return backoff.Sleep(ctx, r.stop, errClosed, d)
}

// dial makes one pass over the URLs, from the one that worked last (wrap:
// see dialAny).
func (r *redialer) dial(ctx context.Context, wrap func(net.Conn) net.Conn) (*dialed, error) {
	r.mu.Lock()
	next := r.next
	r.mu.Unlock()
	d, err := dialAny(ctx, r.cs, &next, wrap)
	r.mu.Lock()
	r.next = next
	r.mu.Unlock()
	return d, err
}

// failed records a failed connect or a lost connection: err is what Ready
// reports, and the next attempt waits the backoff that it returns.
func (r *redialer) failed(err error) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	d := r.bo.Next()
	r.retryAt = time.Now().Add(d)
	return d
}

// reset starts the backoff over: the connection worked.
func (r *redialer) reset() {
	r.mu.Lock()
	r.bo.Reset()
	r.mu.Unlock()
}

// err is the last failure; nil before any.
func (r *redialer) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}
