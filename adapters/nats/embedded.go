package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedServers is the process-wide registry of in-process nats-servers,
// keyed by absolute store directory: a source and a sink of one process with
// the same store_dir share one server, shut down when the last user releases
// it. Two servers must never share a JetStream store directory.
var embeddedServers = struct {
	sync.Mutex
	m map[string]*embeddedServer
}{m: map[string]*embeddedServer{}}

type embeddedServer struct {
	key  string
	srv  *server.Server
	refs int
	// what it was started with, to refuse a conflicting second user
	port                  int
	user, password, token string
	log                   *slog.Logger
}

// acquireEmbedded returns the running server for cc.StoreDir, starting it
// on first use.
func acquireEmbedded(cc connConfig, log *slog.Logger) (*embeddedServer, error) {
	embeddedServers.Lock()
	defer embeddedServers.Unlock()
	if e := embeddedServers.m[cc.StoreDir]; e != nil {
		if (cc.Port != 0 && cc.Port != e.port) || cc.User != e.user || cc.Password != e.password || cc.Token != e.token {
			return nil, fmt.Errorf("embedded: the server for store_dir %q is already running with another port or credentials; give source and sink the same embedded settings", cc.StoreDir)
		}
		e.refs++
		return e, nil
	}
	if err := os.MkdirAll(cc.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: store_dir: %w", err)
	}
	port := cc.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "qbridge-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   cc.StoreDir,
		NoSigs:     true,
		// no HTTP monitoring, cluster, gateway or leaf listeners: loopback client port only
	}
	switch {
	case cc.User != "":
		opts.Username, opts.Password = cc.User, cc.Password
	case cc.Token != "":
		opts.Authorization = cc.Token
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	srv.SetLoggerV2(serverLogger{log.With("component", "nats-server")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded: nats-server not ready after 10s (is the port in use?)")
	}
	e := &embeddedServer{
		key: cc.StoreDir, srv: srv, refs: 1, port: cc.Port,
		user: cc.User, password: cc.Password, token: cc.Token, log: log,
	}
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		e.port = a.Port
	}
	embeddedServers.m[cc.StoreDir] = e
	log.Info("embedded nats-server started", "url", srv.ClientURL(), "store_dir", cc.StoreDir)
	return e, nil
}

// url is the client URL of the running server.
func (e *embeddedServer) url() string { return e.srv.ClientURL() }

// release drops one reference and shuts the server down with the last one.
func (e *embeddedServer) release() {
	embeddedServers.Lock()
	e.refs--
	last := e.refs == 0
	if last {
		delete(embeddedServers.m, e.key)
	}
	embeddedServers.Unlock()
	if last {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.log.Info("embedded nats-server stopped", "store_dir", e.key)
	}
}

// serverLogger sends nats-server's log to slog; its notices (a dozen banner
// lines at start) go to debug.
type serverLogger struct{ log *slog.Logger }

func (l serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l serverLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Tracef(format string, v ...any)  {}
