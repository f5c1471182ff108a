package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/bridge/driver"
)

// dialed is an open connection and what we learnt about the broker.
type dialed struct {
	conn     *amqp.Conn
	endpoint string // redacted URL
	product  string // "RabbitMQ 3.10.8", from the open frame's properties
	rabbit3  bool   // RabbitMQ before 4.0 (its AMQP 1.0 plugin): see brokerQuirks
}

// dialAny tries every endpoint once, starting at *next, and leaves *next at
// the endpoint that worked (so a reconnect tries it first).
func dialAny(ctx context.Context, cs *connSettings, next *int, wrap func(net.Conn) net.Conn) (*dialed, error) {
	var errs []error
	n := len(cs.endpoints)
	for k := 0; k < n; k++ {
		i := (*next + k) % n
		d, err := dial(ctx, cs, cs.endpoints[i], wrap)
		if err == nil {
			*next = i
			return d, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", cs.endpoints[i].redacted, err))
		if ctx.Err() != nil {
			break
		}
	}
	*next = (*next + 1) % n
	return nil, errors.Join(errs...)
}

func dial(ctx context.Context, cs *connSettings, ep endpoint, wrap func(net.Conn) net.Conn) (*dialed, error) {
	ctx, cancel := context.WithTimeout(ctx, cs.connectTimeout)
	defer cancel()
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, "tcp", ep.addr())
	if err != nil {
		return nil, err
	}
	if ep.tls {
		tc := cs.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName = ep.host
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		nc = tlsConn
	}
	if wrap != nil {
		nc = wrap(nc)
	}
	opts := &amqp.ConnOptions{
		ContainerID:  cs.containerID,
		HostName:     cs.hostname,
		IdleTimeout:  cs.idleTimeout,
		MaxFrameSize: cs.maxFrameSize,
		Properties:   map[string]any{"product": "qbridge"},
		SASLType:     saslType(cs.sasl, ep),
	}
	if opts.HostName == "" {
		opts.HostName = ep.host
	}
	conn, err := amqp.NewConn(ctx, nc, opts) // owns nc from here on
	if err != nil {
		return nil, credentialsRefused(err)
	}
	d := &dialed{conn: conn, endpoint: ep.redacted}
	d.product, d.rabbit3 = brokerProduct(conn.Properties())
	return d, nil
}

func saslType(s saslSettings, ep endpoint) amqp.SASLType {
	user, pass := s.user, s.pass
	if user == "" && ep.hasUser {
		user, pass = ep.user, ep.pass
	}
	mech := s.mech
	if mech == "" {
		mech = "ANONYMOUS"
		if user != "" {
			mech = "PLAIN"
		}
	}
	switch mech {
	case "PLAIN":
		return amqp.SASLTypePlain(user, pass)
	case "EXTERNAL":
		return amqp.SASLTypeExternal(s.identity)
	case "NONE":
		return nil
	}
	return amqp.SASLTypeAnonymous()
}

// brokerProduct names the broker from its open properties and tells
// RabbitMQ 3.x (the rabbitmq_amqp1_0 plugin) apart: it stalls a receiver
// with credit > 1 on a backlog, ends the session on a Modify disposition and
// never answers a closing detach. RabbitMQ 4 speaks AMQP 1.0 natively.
func brokerProduct(props map[string]any) (string, bool) {
	product, _ := props["product"].(string)
	version, _ := props["version"].(string)
	name := strings.TrimSpace(product + " " + version)
	if !strings.EqualFold(product, "RabbitMQ") {
		return name, false
	}
	major, _, _ := strings.Cut(version, ".")
	m, err := strconv.Atoi(major)
	return name, err == nil && m < 4
}

// closeConn closes conn, waiting at most timeout (close_timeout) and until
// ctx ends: Close writes the close frame and may wait for a dead peer's
// write timeout. Every close of a connection goes through it, so none, in
// the background or not, waits unbounded.
func closeConn(ctx context.Context, conn *amqp.Conn, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		_ = conn.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

var errClosed = errors.New("amqp: closed")

// remoteErr returns the error the peer sent when it closed the link, session
// or connection; nil for local failures (network, our own close).
func remoteErr(err error) *amqp.Error {
	var le *amqp.LinkError
	var se *amqp.SessionError
	var ce *amqp.ConnError
	switch {
	case errors.As(err, &le):
		return le.RemoteErr
	case errors.As(err, &se):
		return se.RemoteErr
	case errors.As(err, &ce):
		return ce.RemoteErr
	}
	return nil
}

// refusedError is a dial the broker refused for its credentials. Only an
// open makes it permanent (atOpen): a reconnect while sending must not turn
// it into a message's permanent failure, which would dead-letter the
// message.
type refusedError struct{ err error }

func (e refusedError) Error() string {
	return "the broker refused the credentials (check the user and password in url or sasl): " + e.err.Error()
}
func (e refusedError) Unwrap() error { return e.err }

// credentialsRefused marks the broker's refusal of the credentials.
// go-amqp gives the SASL outcome only as text ("SASL PLAIN auth failed
// with code 0x1: ..."), so the code is read from it: 1 is "auth",
// authentication failed (AMQP 1.0 §5.3.3.6). A broker that closes the
// connection with amqp:unauthorized-access says so as an error.
func credentialsRefused(err error) error {
	var ae *amqp.Error
	refused := errors.As(err, &ae) && ae.Condition == amqp.ErrCondUnauthorizedAccess
	if !refused && !strings.Contains(err.Error(), "auth failed with code 0x1") {
		return err
	}
	return refusedError{err}
}

// atOpen is the error of a source's or sink's open: credentials that every
// endpoint refused are permanent there (driver.Permanent), so a migration
// fails at once instead of retrying for -connect-timeout; the engine
// retries anyway. One endpoint that refused while another was unreachable
// is not: the other may take them.
func atOpen(err error) error {
	if allRefused(err) {
		return driver.Permanent(err)
	}
	return err
}

// allRefused reports whether err, through its wrappings and joins, is a
// refusal of the credentials everywhere.
func allRefused(err error) bool {
	switch x := err.(type) {
	case refusedError:
		return true
	case interface{ Unwrap() []error }:
		es := x.Unwrap()
		for _, e := range es {
			if !allRefused(e) {
				return false
			}
		}
		return len(es) > 0
	case interface{ Unwrap() error }:
		return allRefused(x.Unwrap())
	}
	return false
}
