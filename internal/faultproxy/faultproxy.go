// Package faultproxy is a TCP forwarder on 127.0.0.1 for tests of network
// faults seen by both ends: connections cut, refused, or frozen (open, and
// nothing gets through: a stalled broker or a network that drops packets).
package faultproxy

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards each connection it accepts to its target.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	frozen []chan struct{} // per connection pair: closed = frozen
	down   bool
	// freezeNew: new connections are accepted and frozen at once (a
	// server that takes the connection and never answers).
	freezeNew bool
}

// New starts a proxy to target (host:port), closed at the test's end.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns rawURL with its host replaced by the proxy's.
func (p *Proxy) URL(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		freeze := make(chan struct{})
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.frozen = append(p.frozen, freeze)
		if p.freezeNew {
			close(freeze)
		}
		p.mu.Unlock()
		go func() { pump(u, c, freeze); u.Close() }()
		go func() { pump(c, u, freeze); c.Close() }()
	}
}

// pump copies src to dst until an error, swallowing everything once freeze
// is closed (a black hole: the connection stays open, nothing gets through).
func pump(dst, src net.Conn, freeze chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-freeze:
			n = 0
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze black-holes every current connection (new ones work).
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frozen {
		select {
		case <-f:
		default:
			close(f)
		}
	}
}

// Cut closes every proxied connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.frozen = nil
}

// FreezeNew makes new connections frozen from the start (true), or
// forwarded again (false).
func (p *Proxy) FreezeNew(on bool) {
	p.mu.Lock()
	p.freezeNew = on
	p.mu.Unlock()
}

// SetDown refuses (true) or accepts (false) new connections.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}
