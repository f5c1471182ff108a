package sqs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/qbridge/qbridge/internal/backoff"
	"github.com/qbridge/qbridge/internal/ctxwait"
)

// errClosed is returned by calls made after Close.
var errClosed = errors.New("sqs: closed")

// flushTimeout bounds one batch call with its retries: a batch serves
// several callers, so it runs on its own context, not on one caller's.
const flushTimeout = 30 * time.Second

// batchReq is one caller's item waiting for its batch call.
type batchReq[T any] struct {
	item T
	err  error
	done chan struct{}
}

// coalescer gathers items from concurrent callers into batch calls of at
// most maxBatch items: a batch goes out when it is full or linger after its
// first item arrived. flush returns one error per item.
type coalescer[T any] struct {
	linger time.Duration
	flush  func(ctx context.Context, items []T) []error

	mu      sync.Mutex
	pending []*batchReq[T]
	timer   *time.Timer
	gen     uint64 // bumps each time pending is cut, so a stale timer does nothing
	closed  bool
	wg      sync.WaitGroup
}

func newCoalescer[T any](linger time.Duration, flush func(context.Context, []T) []error) *coalescer[T] {
	return &coalescer[T]{linger: linger, flush: flush}
}

// do adds item to the next batch and waits for its result. When ctx ends
// first, do returns ctx's error; the item may still be applied.
func (c *coalescer[T]) do(ctx context.Context, item T) error {
	r := &batchReq[T]{item: item, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	c.pending = append(c.pending, r)
	switch {
	case len(c.pending) >= maxBatch:
		c.cutLocked()
	case len(c.pending) == 1:
		gen := c.gen
		c.timer = time.AfterFunc(c.linger, func() { c.onTimer(gen) })
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *coalescer[T]) onTimer(gen uint64) {
	c.mu.Lock()
	if gen == c.gen && len(c.pending) > 0 {
		c.cutLocked()
	}
	c.mu.Unlock()
}

// cutLocked sends the pending items as one batch call.
func (c *coalescer[T]) cutLocked() {
	batch := c.pending
	c.pending = nil
	c.gen++
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		items := make([]T, len(batch))
		for i, r := range batch {
			items[i] = r.item
		}
		errs := c.flush(ctx, items)
		for i, r := range batch {
			r.err = errs[i]
			close(r.done)
		}
	}()
}

// close sends what is pending, refuses new items and waits (until ctx ends)
// for the batch calls in flight.
func (c *coalescer[T]) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	if len(c.pending) > 0 {
		c.cutLocked()
	}
	c.mu.Unlock()
	return ctxwait.Group(ctx, &c.wg)
}

// entryRetryBase and entryRetryMax bound the wait before runEntries
// retries the entries that failed.
const (
	entryRetryBase = 100 * time.Millisecond
	entryRetryMax  = time.Second
)

// runEntries runs a batch call for n entries and retries the entries that
// failed for a reason that may pass (a server fault, throttling), up to
// attempts times in all. call returns the per-entry errors (nil: done) and
// whether each failure may be retried; a whole-call error applies to every
// entry.
func runEntries(ctx context.Context, n, attempts int, call func(ctx context.Context, idx []int) (errs []error, retry []bool)) []error {
	errs := make([]error, n)
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	// Jittered so that the entries of concurrent batches that failed
	// together (throttling) do not come back together.
	bo := backoff.Backoff{Base: entryRetryBase, Max: entryRetryMax}
	for attempt := 1; len(todo) > 0; attempt++ {
		res, again := call(ctx, todo)
		var next []int
		for k, i := range todo {
			errs[i] = res[k]
			if res[k] != nil && again[k] && attempt < attempts {
				next = append(next, i)
			}
		}
		todo = next
		if len(todo) > 0 && backoff.Sleep(ctx, nil, nil, bo.Next()) != nil {
			break
		}
	}
	return errs
}
