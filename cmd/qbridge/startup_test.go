package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/filelock"
)

// /startupz (qbridge health -started, a sidecar's startupProbe) passes once
// the embedded NATS server listens, although the pipeline's other side is
// unreachable: a pipeline opens its sink first, and before the daemon held
// its servers an embedded source behind a failing sink never started its
// server. Until the server listens, /startupz says why.
func TestDaemonStartupWaitsForEmbeddedServerNotBrokers(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "nats")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another holder of the store keeps the server from starting, as a
	// previous process that has not exited yet would.
	unlock, err := filelock.TryLock(filepath.Join(store, "qbridge.lock"))
	if err != nil {
		t.Fatal(err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			unlock()
		}
	}()
	src := fmt.Sprintf(`http { listen = "127.0.0.1:0" }
pipeline "app-to-cloud" {
  readiness        = "ignored"
  shutdown_timeout = "2s"
  source "nats" {
    embedded  = true
    store_dir = %q
    subject   = "orders.out"
  }
  sink "memtest" { fail = "dial tcp 127.0.0.1:443: connection refused" }
}
`, store)
	path := writeFile(t, dir, "s.hcl", src)
	d := startDaemon(t, path)
	base := d.baseURL(t)
	addr := strings.TrimPrefix(base, "http://")

	// The server cannot start: not started, with the cause.
	var body string
	eventually(t, "/startupz to name the held store", func() bool {
		var code int
		code, body = get(t, base+"/startupz")
		return code == 503 && strings.Contains(body, "not listening yet: last error:") && strings.Contains(body, "in use by another process")
	})
	if !strings.HasPrefix(body, "not started\nembedded server on store_dir "+store+" (no port (a random one), no credentials): not listening yet") {
		t.Errorf("/startupz body:\n%s", body)
	}
	if code, out, _ := runCmd(t, "health", "-started", "-addr", addr); code != 1 || !strings.HasPrefix(out, "not started\n") {
		t.Errorf("qbridge health -started = %d, stdout %q; want 1, not started", code, out)
	}
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d: the pipeline's readiness is ignored", code)
	}

	unlock()
	unlocked = true
	eventually(t, "/startupz 200 once the embedded server listens", func() bool {
		var code int
		code, body = get(t, base+"/startupz")
		return code == 200
	})
	m := regexp.MustCompile(`^ok\nembedded server on store_dir .*: listening on nats://(127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/startupz body:\n%s", body)
	}
	if code, out, _ := runCmd(t, "health", "-started", "-addr", addr); code != 0 || !strings.HasPrefix(out, "ok\n") {
		t.Errorf("qbridge health -started = %d, stdout %q; want 0, ok", code, out)
	}
	// It accepts connections (a NATS server greets with INFO), while the
	// pipeline still cannot open its sink.
	c, err := net.DialTimeout("tcp", m[1], 10*time.Second)
	if err != nil {
		t.Fatalf("dial the embedded server: %v", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	greeting, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || !strings.HasPrefix(greeting, "INFO ") {
		t.Errorf("the embedded server's greeting: %q, %v", greeting, err)
	}
	if _, rb := get(t, base+"/readyz"); !strings.Contains(rb, "pipeline app-to-cloud: not ready:") || !strings.Contains(rb, "connection refused") {
		t.Errorf("/readyz does not show the sink still failing:\n%s", rb)
	}

	// A reload that moves the server to another port stops the held one
	// and holds the new one, though its pipeline still never opened it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	writeFile(t, dir, "s.hcl", strings.Replace(src, "embedded  = true\n", fmt.Sprintf("embedded  = true\n    port      = %d\n", port), 1))
	d.sig <- syscall.SIGHUP
	moved := fmt.Sprintf("(port %d, no credentials): listening on nats://127.0.0.1:%d\n", port, port)
	eventually(t, "/startupz to list the server on its new port", func() bool {
		var code int
		code, body = get(t, base+"/startupz")
		return code == 200 && strings.HasSuffix(body, moved)
	})
	if c, err := net.DialTimeout("tcp", m[1], 10*time.Second); err == nil {
		c.Close()
		t.Errorf("the server still listens on its old address %s after the reload moved it", m[1])
	}

	d.sig <- syscall.SIGTERM
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, d.log)
	}
	// The hold is released at the end: the store is free for the next
	// process.
	again, err := filelock.TryLock(filepath.Join(store, "qbridge.lock"))
	if err != nil {
		t.Fatalf("the store is still locked after the daemon stopped: %v", err)
	}
	again()
}

// A sidecar's spool takes the app's writes from the start, while the
// pipeline's sink cannot open (its cloud queue unreachable at pod start):
// the JetStream source's create_stream stream is made once the embedded
// server listens, not when the source opens after the sink. Before, the
// app's publishes were refused ("no stream captures subject") until the
// sink answered. The server is listed first by another pipeline's sink
// here, so the source's hold is the second on it.
func TestSpoolStreamExistsBeforeTheSinkOpens(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "nats")
	src := fmt.Sprintf(`http { listen = "127.0.0.1:0" }
pipeline "cloud-to-app" {
  readiness        = "ignored"
  shutdown_timeout = "2s"
  source "memtest" {
    name = "cloud"
    fail = "dial tcp 127.0.0.1:443: connection refused"
  }
  sink "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "orders.in"
  }
}
pipeline "app-to-cloud" {
  readiness        = "ignored"
  shutdown_timeout = "2s"
  source "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "orders.out"
    jetstream {
      stream        = "ORDERS_OUT"
      durable       = "bridge"
      create_stream = true
    }
  }
  sink "memtest" { fail = "dial tcp 127.0.0.1:443: connection refused" }
}
`, store)
	d := startDaemon(t, writeFile(t, dir, "s.hcl", src))
	base := d.baseURL(t)
	var body string
	eventually(t, "/startupz 200 once the embedded server listens", func() bool {
		var code int
		code, body = get(t, base+"/startupz")
		return code == 200
	})
	m := regexp.MustCompile(`listening on (nats://127\.0\.0\.1:\d+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/startupz body:\n%s", body)
	}
	nc, err := nats.Connect(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "orders.out", []byte("order 1")); err != nil {
		t.Fatalf("the app's publish into the spool, while the sink cannot open: %v\nlog:\n%s", err, d.log)
	}
	if _, rb := get(t, base+"/readyz"); !strings.Contains(rb, "connection refused") {
		t.Errorf("/readyz does not show the sink still failing:\n%s", rb)
	}
	d.sig <- syscall.SIGTERM
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, d.log)
	}
}
