package nats

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/filelock"
)

func embeddedRefs(dir string) (int, string) {
	embeddedServers.Lock()
	defer embeddedServers.Unlock()
	for k, e := range embeddedServers.m {
		if strings.HasPrefix(k, dir) {
			return e.refs, e.url()
		}
	}
	return 0, ""
}

func TestEmbeddedServerShared(t *testing.T) {
	dir := t.TempDir()
	log, _ := testLog()
	ctx := ctxT(t, 10*time.Second)
	src, err := NewSource(ctx, SourceConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir}, Subject: "demo.in", JetStream: &JetStreamSourceConfig{
		Stream: "DEMO", Durable: "bridge", CreateStream: true, FetchWait: "300ms"}}, log)
	if err != nil {
		t.Fatal(err)
	}
	snk, err := NewSink(ctx, SinkConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir}, Subject: "demo.in", JetStream: &JetStreamSinkConfig{}}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	refs, url := embeddedRefs(dir)
	if refs != 2 || !strings.HasPrefix(url, "nats://127.0.0.1:") {
		t.Fatalf("refs %d url %q: want one shared server on 127.0.0.1", refs, url)
	}
	sendOK(t, snk, msg("hello"))
	ds := receiveN(t, src, 1, 5*time.Second)
	ackAll(t, ds)
	if string(ds[0].Message().Body) != "hello" {
		t.Errorf("body %q", ds[0].Message().Body)
	}

	// Closing one user keeps the server for the other.
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refs, _ := embeddedRefs(dir); refs != 1 {
		t.Fatalf("refs after one close = %d", refs)
	}
	sendOK(t, snk, msg("still up"))
	if err := snk.(driver.ReadyChecker).Ready(context.Background()); err != nil {
		t.Error(err)
	}
	// The last close shuts it down.
	if err := snk.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refs, _ := embeddedRefs(dir); refs != 0 {
		t.Fatalf("server still registered after the last close")
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), time.Second); err == nil {
		c.Close()
		t.Error("the embedded server still listens after the last close")
	}

	// A new start on the same store_dir finds the stored messages again.
	src2, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir}, Subject: "demo.in", JetStream: &JetStreamSourceConfig{
		Stream: "DEMO", Durable: "bridge", FetchWait: "300ms"}})
	ds = receiveN(t, src2, 1, 5*time.Second)
	if string(ds[0].Message().Body) != "still up" {
		t.Errorf("after restart: %q", ds[0].Message().Body)
	}
}

func TestEmbeddedFixedPortAndConflicts(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir, Port: port, User: "u", Password: "p"}, Subject: "x"})
	_ = src
	// Another user with other credentials or port is refused.
	for _, cfg := range []SinkConfig{
		{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir, User: "u", Password: "other"}, Subject: "x"},
		{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir, User: "u", Password: "p", Port: port + 1}, Subject: "x"},
	} {
		if _, err := NewSink(ctxT(t, 5*time.Second), cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("conflicting embedded settings: %v", err)
		}
	}
	// Same settings (port unset means "whatever it runs on") share it.
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir, User: "u", Password: "p"}, Subject: "x"})
	_ = snk
	if refs, url := embeddedRefs(dir); refs != 2 || !strings.HasSuffix(url, ":"+strconv.Itoa(port)) {
		t.Errorf("refs %d url %s", refs, url)
	}
}

func TestEmbeddedAuth(t *testing.T) {
	tests := []struct {
		name      string
		src       SourceConfig
		good, bad []nats.Option
	}{
		{"user/password", SourceConfig{ConnConfig: ConnConfig{User: "alice", Password: "s3cret"}},
			[]nats.Option{nats.UserInfo("alice", "s3cret")}, []nats.Option{nats.UserInfo("alice", "wrong")}},
		{"token", SourceConfig{ConnConfig: ConnConfig{Token: "t0ken"}},
			[]nats.Option{nats.Token("t0ken")}, []nats.Option{nats.Token("nope")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tt.src
			cfg.Embedded, cfg.StoreDir, cfg.Subject = true, dir, "auth.>"
			src, _ := mustSource(t, cfg)
			_, url := embeddedRefs(dir)
			// Anonymous and wrong credentials are refused by the server.
			if nc, err := nats.Connect(url); err == nil {
				nc.Close()
				t.Error("anonymous connection accepted")
			}
			if nc, err := nats.Connect(url, tt.bad...); err == nil {
				nc.Close()
				t.Error("wrong credentials accepted")
			}
			// Through a URL-configured sink with the right credentials.
			sinkCfg := SinkConfig{ConnConfig: ConnConfig{URL: url, User: cfg.User, Password: cfg.Password, Token: cfg.Token}, Subject: "auth.x"}
			snk, _ := mustSink(t, sinkCfg)
			sendOK(t, snk, msg("secret"))
			if got := receiveN(t, src, 1, 5*time.Second); string(got[0].Message().Body) != "secret" {
				t.Errorf("body %q", got[0].Message().Body)
			}
			// A sink with wrong credentials fails to start.
			bad := sinkCfg
			if bad.Token != "" {
				bad.Token = "nope"
			} else {
				bad.Password = "wrong"
			}
			if _, err := NewSink(ctxT(t, 5*time.Second), bad, nil, nil); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Errorf("wrong credentials: %v", err)
			}
			nc := connect(t, url, tt.good...)
			if _, err := jetstream.New(nc); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestEmbeddedStoreInUse: a store_dir whose lock another process holds (a
// second `qbridge run` or migrate of one configuration; here another open
// file, which flock treats alike) is refused at once, permanently, naming
// the holder, before any server touches the store; a port another server
// listens on is refused at once too, and releases the store. Before, the
// second server opened the store beside the first and then waited 10 s
// for a port it could not get, and a migration retried that for minutes.
func TestEmbeddedStoreInUse(t *testing.T) {
	if !filelock.Supported {
		t.Skip("no file locks on this system")
	}
	dir := t.TempDir()
	held, err := filelock.TryLock(filepath.Join(dir, storeLock))
	if err != nil {
		t.Fatal(err)
	}
	cfg := SourceConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: dir}, Subject: "x"}
	_, err = NewSource(ctxT(t, 5*time.Second), cfg, nil)
	if err == nil || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "in use by another process (pid ") {
		t.Fatalf("store held elsewhere: %v, want a permanent error naming the holder", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); !os.IsNotExist(err) {
		t.Fatalf("the store was opened while another process held it: %v", err)
	}
	held()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cfg.Port = port
	start := time.Now()
	_, err = NewSource(ctxT(t, 5*time.Second), cfg, nil)
	if err == nil || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatalf("port in use: %v, want a permanent error naming it", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the port conflict took %v to report", d)
	}

	// Neither refusal kept the store: a server starts on it, holds it
	// while it runs, and lets it go when it stops.
	cfg.Port = 0
	src, err := NewSource(ctxT(t, 10*time.Second), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filelock.TryLock(filepath.Join(dir, storeLock)); err == nil {
		t.Fatal("the store's lock was free while its server ran")
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := filelock.TryLock(filepath.Join(dir, storeLock))
	if err != nil {
		t.Fatalf("the store's lock after the server stopped: %v", err)
	}
	again()
}

// TestEmbeddedReacquiredWhileStopping: a user of a store_dir that arrives
// while this process's server for it is stopping waits, and gets a new
// server, instead of finding the store locked by its own process (a review
// saw `migrate -parallel 2` over one store fail 3 runs in 6 that way).
func TestEmbeddedReacquiredWhileStopping(t *testing.T) {
	dir := t.TempDir()
	log, _ := testLog()
	cc := connConfig{Embedded: true, StoreDir: dir}
	e, err := acquireEmbedded(cc, log)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		e   *embeddedServer
		err error
	}
	second := make(chan result, 1)
	beforeStoreUnlock = func() {
		go func() {
			e, err := acquireEmbedded(cc, log)
			second <- result{e, err}
		}()
		// Old code failed here at once; the fix waits for the release.
		// Either way the result is checked below.
		select {
		case r := <-second:
			second <- r
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer func() { beforeStoreUnlock = nil }()
	e.release()
	beforeStoreUnlock = nil
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatalf("acquired while the server stopped: %v", r.err)
		}
		if r.e == e {
			t.Fatal("got the stopped server back")
		}
		r.e.release()
	case <-time.After(30 * time.Second):
		t.Fatal("the second user never got a server")
	}
}
