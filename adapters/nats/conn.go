package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge/driver"
)

// conn is one client connection (and, when embedded, a reference to the
// in-process server it talks to).
type conn struct {
	nc  *nats.Conn
	srv *embeddedServer
	log *slog.Logger

	mu      sync.Mutex
	lastErr error // the last disconnect or async error, for Ready
	// down and closed follow the connection's handlers, for Ready:
	// nc.Status() takes the connection's lock, which nats.go holds while
	// it dials during a reconnect (seconds against a frozen server), and
	// /readyz and /metrics must not wait for that.
	down, closed bool

	// reconnects counts reconnections; the JetStream source checks its
	// consumer again after one (see jsSource.recover).
	reconnects atomic.Uint64
}

// dial connects to cc.URL or, when embedded, starts or joins the
// in-process server first.
func dial(ctx context.Context, cc connConfig, log *slog.Logger) (*conn, error) {
	return dialAt(ctx, cc, log, slog.LevelInfo)
}

// dialAt is dial with the level of its "nats connected" line: a migration
// counts through a connection of its own once a second while the source
// is quiet, and each said so at info.
func dialAt(ctx context.Context, cc connConfig, log *slog.Logger, connected slog.Level) (*conn, error) {
	c := &conn{log: log}
	url := cc.URL
	if cc.Embedded {
		srv, err := acquireEmbedded(cc, log)
		if err != nil {
			return nil, err
		}
		c.srv = srv
		url = srv.url()
	}
	opts, err := c.options(cc)
	if err != nil {
		c.releaseServer()
		return nil, err
	}
	// nats.Connect has no context: refuse a context that is already over,
	// and dial through a connectDialer, which holds each connection
	// attempt to ctx (nats.go gives each URL the whole connect timeout).
	if err := ctx.Err(); err != nil {
		c.releaseServer()
		return nil, err
	}
	dialer := &connectDialer{Dialer: net.Dialer{Timeout: cc.ConnectTimeout}, ctx: ctx}
	nc, err := nats.Connect(url, append(opts, nats.SetCustomDialer(dialer))...)
	dialer.connected()
	if dl, ok := ctx.Deadline(); err != nil && ok && !time.Now().Before(dl) {
		// The sockets' deadline is ctx's: under load it fires before
		// ctx's own timer has marked ctx done.
		<-ctx.Done()
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	if err != nil {
		c.releaseServer()
		err = fmt.Errorf("nats: connect %s: %w", redactURL(url), err)
		if credentialsRefused(err) {
			// No retry changes the answer: a migration fails at once
			// (driver.Permanent); the engine retries anyway.
			err = driver.Permanent(fmt.Errorf("%w (the server refused the credentials: check user, password, token, nkey or creds)", err))
		}
		return nil, err
	}
	c.nc = nc
	log.Log(ctx, connected, "nats connected", "url", redactURL(nc.ConnectedUrl()), "server", nc.ConnectedServerName())
	return c, nil
}

func (c *conn) options(cc connConfig) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(cc.Name),
		nats.Timeout(cc.ConnectTimeout),
		nats.MaxReconnects(-1), // a daemon never gives up; Ready reports the outage
		nats.ReconnectWait(cc.ReconnectWait),
		nats.PingInterval(cc.PingInterval), // two unanswered pings: a stale connection, reconnected
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // our own Close
			}
			c.setDown(true)
			c.setErr(err)
			c.log.Warn("nats disconnected; reconnecting", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.reconnects.Add(1)
			c.setDown(false)
			c.setErr(nil)
			c.log.Info("nats reconnected", "url", redactURL(nc.ConnectedUrl()))
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			c.mu.Lock()
			c.closed = true
			c.mu.Unlock()
			if err := nc.LastError(); err != nil {
				c.log.Warn("nats connection closed", "error", err)
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) && sub != nil {
				dropped, _ := sub.Dropped()
				c.log.Warn("nats slow consumer: the source buffer is full and the client drops messages (core NATS is at-most-once); raise buffer_size or speed up the sink",
					"subject", sub.Subject, "dropped_total", dropped)
				return
			}
			c.log.Warn("nats async error", "error", err)
		}),
	}
	if cc.NoReconnectBuffer {
		// A sink's publishes must fail while the connection is down rather
		// than wait in the reconnect buffer: what was written just before
		// the drop is lost with the socket, what was buffered after it is
		// sent on reconnect, so a group's later messages would be stored
		// before the earlier ones that the engine resends. The engine holds
		// every unconfirmed message and retries it: the buffer adds nothing
		// but that reorder.
		opts = append(opts, nats.ReconnectBufSize(-1))
	}

	switch {
	case cc.User != "":
		opts = append(opts, nats.UserInfo(cc.User, cc.Password))
	case cc.Token != "":
		opts = append(opts, nats.Token(cc.Token))
	case cc.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cc.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey_seed_file: %w", err)
		}
		opts = append(opts, o)
	case cc.CredsFile != "":
		if _, err := os.Stat(cc.CredsFile); err != nil {
			return nil, fmt.Errorf("creds_file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(cc.CredsFile))
	}
	if cc.TLS != nil {
		tc, err := cc.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

func (c *conn) setErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

// setDown records a disconnect (true) or a reconnect (false).
func (c *conn) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

// ready reports whether the connection is up, from what its handlers said
// (see conn.down): it never waits for the connection.
func (c *conn) ready() error {
	c.mu.Lock()
	down, closed, err := c.down, c.closed, c.lastErr
	c.mu.Unlock()
	switch {
	case closed:
		return errors.New("nats: connection CLOSED")
	case !down:
		return nil
	case err != nil:
		return fmt.Errorf("nats: connection RECONNECTING: %w", err)
	}
	return errors.New("nats: connection RECONNECTING")
}

// close closes the connection, then releases the embedded server.
func (c *conn) close() {
	if c.nc != nil {
		c.nc.Close()
	}
	c.releaseServer()
}

func (c *conn) releaseServer() {
	if c.srv != nil {
		c.srv.release()
		c.srv = nil
	}
}

// credentialsRefused reports the server's refusal of the connection's
// credentials, as nats.go names it.
func credentialsRefused(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// connectDialer dials for nats.go. Until connected is called (the first
// connect, which nats.Connect makes without a context) it dials with ctx
// and holds the connection's deadlines to ctx: nats.go sets the connect
// timeout as the deadline of each attempt (TLS, INFO, CONNECT, PONG), so
// a caller's shorter deadline, or its cancel, ended nothing. Reconnects
// dial as nats.go would.
type connectDialer struct {
	net.Dialer

	mu  sync.Mutex
	ctx context.Context // nil once connected
}

// connected ends the first connect: later dials (reconnects) are not held
// to its context.
func (d *connectDialer) connected() {
	d.mu.Lock()
	d.ctx = nil
	d.mu.Unlock()
}

func (d *connectDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	ctx := d.ctx
	d.mu.Unlock()
	if ctx == nil {
		return d.Dialer.Dial(network, address)
	}
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c := &connectConn{Conn: nc, ctx: ctx}
	c.stop = context.AfterFunc(ctx, c.expire)
	return c, nil
}

// connectConn is a connection of the first connect: until nats.go clears
// its deadline (the handshake is over) no deadline it sets is later than
// ctx's, and ctx's end ends a read or write under way.
type connectConn struct {
	net.Conn
	ctx  context.Context
	stop func() bool

	mu   sync.Mutex
	done bool // the handshake is over: deadlines pass through
}

// expired is a deadline in the past.
var expired = time.Unix(1, 0)

func (c *connectConn) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		_ = c.Conn.SetDeadline(expired)
	}
}

func (c *connectConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.Conn.SetDeadline(t)
	}
	if t.IsZero() {
		c.done = true
		c.stop()
		return c.Conn.SetDeadline(t)
	}
	if c.ctx.Err() != nil {
		t = expired
	} else if dl, ok := c.ctx.Deadline(); ok && dl.Before(t) {
		t = dl
	}
	return c.Conn.SetDeadline(t)
}

// Dial connects as a source or sink does (the URL checked, the
// credentials, TLS, the URL redacted in errors, refused credentials
// permanent), for the commands that publish or read on their own
// (qbridge send, tail). close closes the connection.
func Dial(ctx context.Context, cfg ConnConfig, log *slog.Logger) (nc *nats.Conn, close func(), err error) {
	cc, err := cfg.resolve()
	if err != nil {
		return nil, nil, err
	}
	c, err := dialAt(ctx, cc, log, slog.LevelDebug)
	if err != nil {
		return nil, nil, err
	}
	return c.nc, c.close, nil
}
