// Package e2e runs qbridge end to end: the real binary, started as a daemon
// with an HCL configuration, against real brokers (an embedded nats-server,
// fauxqs, RabbitMQ, the Service Bus test server) that e2e/test.sh starts.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// qbridgeBin is the daemon binary, built once by TestMain.
var qbridgeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qbridge-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	qbridgeBin = filepath.Join(dir, "qbridge")
	// QBRIDGE_E2E_BUILD_TAGS=pprof builds a daemon that writes a CPU profile
	// to $QBRIDGE_CPUPROFILE (cmd/qbridge/cpuprofile.go).
	build := exec.Command("go", "build", "-tags", os.Getenv("QBRIDGE_E2E_BUILD_TAGS"), "-o", qbridgeBin, "../cmd/qbridge")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building qbridge:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireEnv returns a broker setting from the environment that e2e/test.sh
// writes. Without it the test is skipped, unless QBRIDGE_E2E_REQUIRED is set
// (as e2e/test.sh does), where a missing broker is a failure.
func requireEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is not set: start the test brokers with e2e/brokers/up.sh and load its env file, or run bash e2e/test.sh", name)
	if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startNATS starts a real nats-server with JetStream inside the test binary,
// on 127.0.0.1 and a free port.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, MaxPayload: 8 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// natsServer is a restartable embedded nats-server with JetStream: the same
// port and store directory survive Stop/Start, so clients reconnect and
// stored messages stay.
type natsServer struct {
	t    testing.TB
	port int
	dir  string
	mu   sync.Mutex
	s    *server.Server
}

// natsStartServer starts a restartable server on a free 127.0.0.1 port.
func natsStartServer(t testing.TB) *natsServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ns := &natsServer{t: t, port: port, dir: t.TempDir()}
	ns.Start()
	t.Cleanup(ns.Stop)
	return ns
}

func (ns *natsServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", ns.port) }

// Start starts the server (again).
func (ns *natsServer) Start() {
	ns.t.Helper()
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.s != nil {
		return
	}
	var last error
	for range 50 { // the port may take a moment to be free again
		s, err := server.NewServer(&server.Options{
			Host: "127.0.0.1", Port: ns.port, JetStream: true, StoreDir: ns.dir,
			NoSigs: true, NoLog: true, MaxPayload: 8 << 20,
		})
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
		time.Sleep(100 * time.Millisecond) // a pause between attempts, not a wait
	}
	ns.t.Fatal(last)
}

// Stop shuts the server down (clients see a lost connection).
func (ns *natsServer) Stop() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.s != nil {
		ns.s.Shutdown()
		ns.s.WaitForShutdown()
		ns.s = nil
	}
}

// natsConnect returns a client connection and its JetStream context.
func natsConnect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
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

// daemon is one running "qbridge run".
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	config  string
	logs    *syncBuffer
	addr    string // monitoring address
	done    chan struct{}
	exitErr error
}

// startDaemon writes pipelines (HCL pipeline blocks) into a configuration
// with JSON logs and a free monitoring port, starts qbridge on it and waits
// until /readyz says every pipeline runs.
func startDaemon(t testing.TB, pipelines string) *daemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qbridge.hcl")
	cfg := "log {\n  level  = \"debug\"\n  format = \"json\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n" + pipelines
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemonConfig(t, path)
}

// startDaemonConfig starts qbridge on an existing configuration file whose
// log format is JSON and whose monitoring listener is 127.0.0.1:0.
func startDaemonConfig(t testing.TB, path string) *daemon {
	t.Helper()
	d := &daemon{t: t, config: path, logs: &syncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(qbridgeBin, "run", "-config", path)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout = d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			d.logs.Write(append(line, '\n'))
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "monitoring endpoints listening" {
				select {
				case addrc <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		d.exitErr = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("qbridge logs:\n%s", d.logs.String())
		}
	})
	select {
	case d.addr = <-addrc:
	case <-d.done:
		t.Fatalf("qbridge exited at start (%v):\n%s", d.exitErr, d.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("qbridge did not start listening:\n%s", d.logs.String())
	}
	d.waitReady(30 * time.Second)
	return d
}

// waitReady polls /readyz until it answers 200.
func (d *daemon) waitReady(timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := d.get("/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("qbridge not ready after %s: %d %s\n%s", timeout, code, body, d.logs.String())
		}
		select {
		case <-d.done:
			d.t.Fatalf("qbridge exited (%v):\n%s", d.exitErr, d.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// get fetches a monitoring path; code 0 means the request failed.
func (d *daemon) get(path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the sum of the samples of a Prometheus metric whose label
// set contains every given "name=value" pair.
func (d *daemon) metric(name string, labels ...string) float64 {
	d.t.Helper()
	_, body := d.get("/metrics")
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

// Kill ends the daemon with SIGKILL (no chance to drain) and waits for it.
func (d *daemon) Kill() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// Stop sends SIGTERM and returns the exit error (nil for exit 0).
func (d *daemon) Stop(timeout time.Duration) error {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return d.exitErr
	case <-time.After(timeout):
		d.Kill()
		return fmt.Errorf("qbridge did not stop within %s", timeout)
	}
}

// Signal sends a signal (SIGHUP to reload).
func (d *daemon) Signal(sig os.Signal) { _ = d.cmd.Process.Signal(sig) }

// Logs returns what the daemon wrote so far.
func (d *daemon) Logs() string { return d.logs.String() }

// runQbridge runs a qbridge subcommand to completion.
func runQbridge(t testing.TB, args ...string) (exit int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(qbridgeBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
