// Package e2etest is test support for the suites that run the qbridge
// binary end to end (e2e and e2e/chaos): an embedded nats-server that can be
// restarted, the build of the binary, and watching a running daemon through
// its logs and monitoring endpoints.
//
// It lives outside those suites because test packages cannot import each
// other's _test.go files. Only tests import it, so the nats-server it embeds
// stays out of the production import graph.
package e2etest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSOptions are the settings of every embedded nats-server: 127.0.0.1
// only, JetStream stored in dir, and 8 MiB payloads so that the largest
// messages the tests bridge fit. Port -1 lets the server pick a free one.
func NATSOptions(port int, dir string) *server.Options {
	return &server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoSigs: true, NoLog: true, MaxPayload: 8 << 20,
	}
}

// NATS is an embedded nats-server with JetStream that a test can stop and
// start again on the same port and store directory: clients reconnect and
// stored messages stay.
type NATS struct {
	t    testing.TB
	port int
	dir  string
	mu   sync.Mutex
	s    *server.Server
}

// StartNATS starts a NATS on a free 127.0.0.1 port; it stops when the test
// ends.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ns := &NATS{t: t, port: port, dir: t.TempDir()}
	ns.Start()
	t.Cleanup(ns.Stop)
	return ns
}

// URL is the client URL; it stays the same across restarts.
func (ns *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", ns.port) }

// Start starts the server (again).
func (ns *NATS) Start() {
	ns.t.Helper()
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.s != nil {
		return
	}
	var last error
	for range 50 { // the port may take a moment to be free again
		s, err := server.NewServer(NATSOptions(ns.port, ns.dir))
		if err != nil {
			ns.t.Fatal(err)
		}
		s.Start()
		if s.ReadyForConnections(5 * time.Second) {
			ns.s = s
			return
		}
		s.Shutdown()
		last = fmt.Errorf("nats-server on port %d not ready", ns.port)
		time.Sleep(100 * time.Millisecond) // the port is still held: retry
	}
	ns.t.Fatal(last)
}

// Stop shuts the server down (clients see a lost connection).
func (ns *NATS) Stop() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.s != nil {
		ns.s.Shutdown()
		ns.s.WaitForShutdown()
		ns.s = nil
	}
}

// ConnectNATS returns a client that reconnects quickly and forever (so it
// rides out a NATS restart), and its JetStream context. It closes when the
// test ends.
func ConnectNATS(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Build builds the qbridge command into dir with the given build tags
// (none when empty) and returns the binary's path. The error carries the
// compiler's output.
func Build(dir, tags string) (string, error) {
	path := filepath.Join(dir, "qbridge")
	// The import path works from any directory of the module.
	out, err := exec.Command("go", "build", "-tags", tags, "-o", path, "github.com/qbridge/qbridge/cmd/qbridge").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building qbridge: %w\n%s", err, out)
	}
	return path, nil
}

// WriteConfig writes a qbridge configuration of pipelines (HCL pipeline
// blocks) and returns its path. Logs are JSON at level and monitoring
// listens on a free 127.0.0.1 port: what ScanLogs and WaitReady read.
func WriteConfig(t testing.TB, level, pipelines string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qbridge.hcl")
	cfg := "log {\n  level  = \"" + level + "\"\n  format = \"json\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n" + pipelines
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Tail is the last n lines of s, for a failure message that a whole log
// would drown.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ScanLogs copies the JSON log lines a qbridge daemon writes to stderr into
// logs until stderr ends, and sends the monitoring address on addr once the
// daemon logs it (it listens on port 0). addr wants a buffer of one: a send
// that would block is dropped.
func ScanLogs(stderr io.Reader, logs io.Writer, addr chan<- string) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = logs.Write(append(line, '\n'))
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "monitoring endpoints listening" {
			select {
			case addr <- rec.Addr:
			default:
			}
		}
	}
	// A line too long stops the scanner: drain, or the daemon blocks on a
	// full pipe.
	_, _ = io.Copy(io.Discard, stderr)
}

// ErrExited is WaitReady's answer when the daemon ended first.
var ErrExited = errors.New("exited")

// WaitReady polls the daemon's /readyz at addr until it answers 200. It
// gives up with ErrExited when done is closed, and with an error carrying
// the last answer after timeout.
func WaitReady(addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, body := Get(addr, "/readyz")
		if code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %d %s", timeout, code, body)
		}
		select {
		case <-done:
			return ErrExited
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Get fetches a monitoring path from addr; code 0 means the request failed
// (the body then says why).
func Get(addr, path string) (int, string) {
	if addr == "" {
		return 0, "no address"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric is the sum of the samples of a Prometheus metric on addr's
// /metrics whose label set contains every given "name=value" pair (0 when
// the daemon does not answer).
func Metric(addr, name string, labels ...string) float64 {
	_, body := Get(addr, "/metrics")
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !strings.Contains(line, k+`="`+v+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &f); err == nil {
			sum += f
		}
	}
	return sum
}
