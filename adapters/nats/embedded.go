package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/filelock"
)

// embeddedServers is the process-wide registry of in-process nats-servers,
// keyed by absolute store directory: a source and a sink of one process with
// the same store_dir share one server, shut down when the last user releases
// it. Two servers must never share a JetStream store directory: not in one
// process (this registry), nor in two (storeLock).
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
	unlock                func() // releases storeLock
	// stopped is made when the last user let the server go, and closed
	// once it has stopped and the store's lock is free: the entry stays in
	// the registry until then, so that a new user in this process waits
	// for the store instead of finding it locked by itself.
	stopped chan struct{}
}

// beforeStoreUnlock, if set, runs in release between the server's stop and
// the store's unlock (tests).
var beforeStoreUnlock func()

// storeLock is the file in store_dir that one process at a time holds while
// its server runs on that store. Without it a second `qbridge run` or
// `qbridge migrate` of the same configuration opened the store while the
// first one's server was writing it (nats-server then "rebuilds" stream
// state it finds outdated), before failing on the port after 10 s, and a
// migration retried that for minutes.
const storeLock = "qbridge.lock"

// acquireEmbedded returns the running server for cc.StoreDir, starting it
// on first use.
func acquireEmbedded(cc connConfig, log *slog.Logger) (*embeddedServer, error) {
	embeddedServers.Lock()
	defer embeddedServers.Unlock()
	for e := embeddedServers.m[cc.StoreDir]; e != nil; e = embeddedServers.m[cc.StoreDir] {
		if e.stopped != nil {
			// Stopping (its last user let it go): start anew once the
			// store is free. Migrate's phases and parallel lanes open
			// and close one store_dir in quick turns.
			embeddedServers.Unlock()
			<-e.stopped
			embeddedServers.Lock()
			continue
		}
		if (cc.Port != 0 && cc.Port != e.port) || cc.User != e.user || cc.Password != e.password || cc.Token != e.token {
			return nil, fmt.Errorf("embedded: the server for store_dir %q is already running with another port or credentials; give source and sink the same embedded settings", cc.StoreDir)
		}
		e.refs++
		return e, nil
	}
	if err := os.MkdirAll(cc.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: store_dir: %w", err)
	}
	unlock, err := filelock.TryLock(filepath.Join(cc.StoreDir, storeLock))
	if held := (*filelock.HeldError)(nil); errors.As(err, &held) {
		// Permanent: a migration fails at once; the daemon retries and
		// starts once the other process has stopped.
		return nil, driver.Permanent(fmt.Errorf("embedded: store_dir %q is in use by another process (%s), such as a qbridge run or migrate of this configuration: two nats-servers must never share a JetStream store; stop that one first",
			cc.StoreDir, held.Holder))
	}
	if err != nil {
		return nil, fmt.Errorf("embedded: store_dir: %w", err)
	}
	port := cc.Port
	if port == 0 {
		port = server.RANDOM_PORT
	} else if err := portFree(port); err != nil {
		unlock()
		return nil, driver.Permanent(fmt.Errorf("embedded: %w: another server listens there; stop it, or give this one another port", err))
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
		unlock()
		return nil, fmt.Errorf("embedded: %w", err)
	}
	srv.SetLoggerV2(serverLogger{log.With("component", "nats-server")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock()
		return nil, errors.New("embedded: nats-server not ready after 10s (is the port in use?)")
	}
	e := &embeddedServer{
		key: cc.StoreDir, srv: srv, refs: 1, port: cc.Port,
		user: cc.User, password: cc.Password, token: cc.Token, log: log, unlock: unlock,
	}
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		e.port = a.Port
	}
	embeddedServers.m[cc.StoreDir] = e
	log.Info("embedded nats-server started", "url", srv.ClientURL(), "store_dir", cc.StoreDir)
	return e, nil
}

// portFree reports an error when port on 127.0.0.1 cannot be listened on.
// nats-server only logs its listen failure and is then never ready.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("127.0.0.1:%d: %w", port, err)
	}
	return l.Close()
}

// url is the client URL of the running server.
func (e *embeddedServer) url() string { return e.srv.ClientURL() }

// release drops one reference and shuts the server down with the last one.
func (e *embeddedServer) release() {
	embeddedServers.Lock()
	e.refs--
	last := e.refs == 0
	if last {
		e.stopped = make(chan struct{})
	}
	embeddedServers.Unlock()
	if !last {
		return
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if beforeStoreUnlock != nil {
		beforeStoreUnlock()
	}
	e.unlock()
	embeddedServers.Lock()
	delete(embeddedServers.m, e.key)
	close(e.stopped)
	embeddedServers.Unlock()
	e.log.Info("embedded nats-server stopped", "store_dir", e.key)
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
