// Package lru is a cache of the most recently used values, each made on
// first use, such as a sink's sender links by address.
package lru

import (
	"container/list"
	"context"
	"sync"
)

// Cache holds at most max values by key. A value is made once, by the first
// caller that asks for it and outside the cache's lock: a make that waits
// for a broker (attaching a link) holds up neither the other keys nor the
// callers of a cached value, and callers asking for the same key meanwhile
// wait for that make instead of making it twice.
type Cache[K, V comparable] struct {
	max int

	mu     sync.Mutex
	order  list.List // of *entry[K, V], most recent first
	byKey  map[K]*list.Element
	making map[K]*making[V]
}

type entry[K, V comparable] struct {
	key K
	v   V
}

// making is a make in progress; done is closed once v and err are set.
type making[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// New returns a cache of at most n values (at least one).
func New[K, V comparable](n int) *Cache[K, V] {
	return &Cache[K, V]{max: max(n, 1), byKey: map[K]*list.Element{}, making: map[K]*making[V]{}}
}

// Get returns the value of key, calling create to make it when the cache
// holds none and no other caller is making it; a caller that waits for
// another's make gets its result, or ctx's error if ctx ends first. A made
// value is kept (a failed make is not); the values that it pushed out of
// the cache are returned for the caller to close.
func (c *Cache[K, V]) Get(ctx context.Context, key K, create func() (V, error)) (v V, evicted []V, err error) {
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*entry[K, V]).v, nil, nil
	}
	if m, ok := c.making[key]; ok {
		c.mu.Unlock()
		select {
		case <-m.done:
			return m.v, nil, m.err
		case <-ctx.Done():
			return v, nil, ctx.Err()
		}
	}
	m := &making[V]{done: make(chan struct{})}
	c.making[key] = m
	c.mu.Unlock()

	m.v, m.err = create()

	c.mu.Lock()
	delete(c.making, key)
	if m.err == nil {
		c.byKey[key] = c.order.PushFront(&entry[K, V]{key: key, v: m.v})
		for c.order.Len() > c.max {
			old := c.order.Remove(c.order.Back()).(*entry[K, V])
			delete(c.byKey, old.key)
			evicted = append(evicted, old.v)
		}
	}
	c.mu.Unlock()
	close(m.done)
	return m.v, evicted, m.err
}

// Remove forgets key if the cache holds v for it (not a value made since,
// when v broke), and reports whether it did.
func (c *Cache[K, V]) Remove(key K, v V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok || e.Value.(*entry[K, V]).v != v {
		return false
	}
	c.order.Remove(e)
	delete(c.byKey, key)
	return true
}

// Drain empties the cache and returns its values, most recent first, for
// the caller to close. A make in progress still adds its value afterwards.
func (c *Cache[K, V]) Drain() []V {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]V, 0, c.order.Len())
	for e := c.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*entry[K, V]).v)
	}
	c.order.Init()
	clear(c.byKey)
	return out
}

// Len is the number of values held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
