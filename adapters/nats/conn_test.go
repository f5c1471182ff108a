package nats

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// blackhole accepts connections and never answers (a server that hangs
// before its INFO); accepted is told each connection.
func blackhole(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 16)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// dial gives up when ctx ends, not after connect_timeout for each URL:
// nats.Connect took no context, and a caller with a short deadline waited
// ConnectTimeout × URLs.
func TestDialHonoursContext(t *testing.T) {
	const connectTimeout = 10 * time.Second
	for _, c := range []struct {
		name   string
		urls   int
		cancel bool // cancel once the server accepted (else: a deadline)
		want   error
	}{
		{name: "deadline, one URL", urls: 1, want: context.DeadlineExceeded},
		{name: "deadline, two URLs", urls: 2, want: context.DeadlineExceeded},
		{name: "cancelled", urls: 1, cancel: true, want: context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, accepted := blackhole(t)
			url := "nats://" + addr
			for range c.urls - 1 {
				url += ",nats://" + addr
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if c.cancel {
				go func() {
					select {
					case <-accepted:
						cancel()
					case <-ctx.Done():
					}
				}()
			} else {
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			log, _ := testLog()
			began := time.Now()
			conn, err := dial(ctx, connConfig{URL: url, Name: "t", ConnectTimeout: connectTimeout,
				ReconnectWait: time.Second, PingInterval: time.Minute}, log)
			took := time.Since(began)
			if err == nil {
				conn.close()
				t.Fatal("connected to a server that never answers")
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v in it", err, c.want)
			}
			// far under one connect timeout, which the old dial waited per URL
			if took > connectTimeout/2 {
				t.Errorf("dial took %s", took)
			}
		})
	}
}
