// Package lru is a cache of the most recently used values, each made on
// first use, such as a sink's sender links by address.
package lru

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// ErrClosed is Acquire's error once the cache is closed.
var ErrClosed = errors.New("lru: cache closed")

// Cache holds at most max values by key, and counts the callers using each
// (Acquire to release). A value is made once, by the first caller that asks
// for it and outside the cache's lock: a make that waits for a broker
// (attaching a link) holds up neither the other keys nor the callers of a
// cached value, and callers asking for the same key meanwhile wait for that
// make instead of making it twice.
//
// A value is closed (by the close func given to New) once the cache has let
// go of it and no caller holds it: a value in use is never closed under its
// caller. The least recently used value that no caller holds is evicted
// when the cache is over max; so the cache holds more than max values only
// while more than max are in use, by at most the number in use, and an
// entry due for eviction meanwhile goes at its last release.
//
// Closes run in goroutines of their own, which the live count tracks and
// Close waits for: the caller that evicts a value is the Send of another
// message, and a slow detach (RabbitMQ 3.x answers none: the close waits
// out its deadline) would otherwise hold up that message and its batch.
type Cache[K, V comparable] struct {
	max   int
	close func(context.Context, V) error

	mu     sync.Mutex
	order  list.List // of *entry[K, V], most recent first
	byKey  map[K]*list.Element
	making map[K]*making[V]

	live     int  // values made or being made and not yet closed (nor removed)
	closed   bool // Close was called
	closeCtx context.Context
	closeErr []error       // of the closes since Close
	drained  chan struct{} // closed once closed and live is 0
}

type entry[K, V comparable] struct {
	key     K
	v       V
	refs    int           // callers holding v
	el      *list.Element // nil once the cache let go of v
	removed bool          // Remove: broken, never closed
}

// making is a make in progress; done is closed once err is set.
type making[V any] struct {
	done chan struct{}
	err  error
}

// New returns a cache of at most n values (at least one); close (nil: none)
// closes each value the cache lets go of, once it is released. The cache
// passes close context.Background() for an eviction (close bounds it itself)
// and Close's context at Close.
func New[K, V comparable](n int, close func(context.Context, V) error) *Cache[K, V] {
	if close == nil {
		close = func(context.Context, V) error { return nil }
	}
	return &Cache[K, V]{max: max(n, 1), close: close, byKey: map[K]*list.Element{},
		making: map[K]*making[V]{}, drained: make(chan struct{})}
}

// Acquire returns the value of key and the func that releases it, which
// the caller must call once done with the value (more calls do nothing).
// It calls create to make the value when the cache holds none and no other
// caller is making it; a caller that waits for another's make gets its
// value, its error, or ctx's error if ctx ends first. A made value is kept
// (a failed make is not).
func (c *Cache[K, V]) Acquire(ctx context.Context, key K, create func() (V, error)) (v V, release func(), err error) {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return v, nil, ErrClosed
		}
		if el, ok := c.byKey[key]; ok {
			c.order.MoveToFront(el)
			e := el.Value.(*entry[K, V])
			e.refs++
			c.mu.Unlock()
			return e.v, c.releaser(e), nil
		}
		m, ok := c.making[key]
		if !ok {
			break
		}
		c.mu.Unlock()
		select {
		case <-m.done:
		case <-ctx.Done():
			return v, nil, ctx.Err()
		}
		if m.err != nil {
			return v, nil, m.err
		}
		c.mu.Lock() // the made value, unless evicted or removed since
	}
	m := &making[V]{done: make(chan struct{})}
	c.making[key] = m
	c.live++
	c.mu.Unlock()

	v, m.err = create()

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(m.done)
	delete(c.making, key)
	if m.err != nil {
		c.live--
		c.settle()
		return v, nil, m.err
	}
	e := &entry[K, V]{key: key, v: v, refs: 1}
	if !c.closed { // else closed at its release
		e.el = c.order.PushFront(e)
		c.byKey[key] = e.el
		c.trim()
	}
	return v, c.releaser(e), nil
}

func (c *Cache[K, V]) releaser(e *entry[K, V]) func() {
	var once sync.Once
	return func() { once.Do(func() { c.release(e) }) }
}

func (c *Cache[K, V]) release(e *entry[K, V]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	switch {
	case e.refs > 0 || e.removed:
	case e.el == nil:
		c.startClose(e) // let go of while in use
	default:
		c.trim() // e may be due now
	}
}

// trim evicts the least recently used values that no caller holds while
// the cache holds more than max. Called with mu held.
func (c *Cache[K, V]) trim() {
	for el := c.order.Back(); el != nil && c.order.Len() > c.max; {
		e := el.Value.(*entry[K, V])
		el = el.Prev()
		if e.refs == 0 {
			c.letGo(e)
			c.startClose(e)
		}
	}
}

func (c *Cache[K, V]) letGo(e *entry[K, V]) {
	c.order.Remove(e.el)
	delete(c.byKey, e.key)
	e.el = nil
}

// startClose closes e's value in a goroutine that the live count tracks.
// Called with mu held.
func (c *Cache[K, V]) startClose(e *entry[K, V]) {
	ctx, atClose := context.Background(), c.closed
	if atClose {
		ctx = c.closeCtx
	}
	go func() {
		err := c.close(ctx, e.v)
		c.mu.Lock()
		defer c.mu.Unlock()
		if atClose && err != nil {
			c.closeErr = append(c.closeErr, err)
		}
		c.live--
		c.settle()
	}()
}

// settle marks the cache drained once it is closed and every value it made
// is closed. Called with mu held.
func (c *Cache[K, V]) settle() {
	if c.closed && c.live == 0 {
		select {
		case <-c.drained:
		default:
			close(c.drained)
		}
	}
}

// Remove forgets key if the cache holds v for it (not a value made since,
// when v broke), and reports whether it did. The cache does not close v.
func (c *Cache[K, V]) Remove(key K, v V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok || el.Value.(*entry[K, V]).v != v {
		return false
	}
	e := el.Value.(*entry[K, V])
	c.letGo(e)
	e.removed = true
	c.live--
	c.settle()
	return true
}

// Close empties the cache, closes its values with ctx (at once, each in a
// goroutine; a value still in use at its release) and waits until every
// value the cache made is closed, the closes of earlier evictions and a
// make in progress included; it returns the closes' errors, or ctx's if ctx
// ends first. Acquire fails with ErrClosed afterwards. Call it once the
// callers are done with their values (Close waits for their release).
func (c *Cache[K, V]) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.closed {
		c.closed, c.closeCtx = true, ctx
		for el := c.order.Front(); el != nil; {
			e := el.Value.(*entry[K, V])
			el = el.Next()
			c.letGo(e)
			if e.refs == 0 {
				c.startClose(e)
			}
		}
		c.settle()
	}
	c.mu.Unlock()
	select {
	case <-c.drained:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.closeErr...)
}

// Len is the number of values held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
