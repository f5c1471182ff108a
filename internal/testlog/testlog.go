// Package testlog is test support: a buffer that a logger or a child
// process writes to while the test reads it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer keeps what is written to it; it may be read while writes go on.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
