// Package e2e runs qbridge end to end: the real binary, started as a daemon
// with an HCL configuration, against real brokers (an embedded nats-server,
// fauxqs, RabbitMQ, the Service Bus test server) that e2e/test.sh starts.
package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// qbridgeBin is the daemon binary, built once by TestMain.
var qbridgeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qbridge-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// QBRIDGE_E2E_BUILD_TAGS=pprof builds a daemon that writes a CPU profile
	// to $QBRIDGE_CPUPROFILE (cmd/qbridge/cpuprofile.go).
	if qbridgeBin, err = e2etest.Build(dir, os.Getenv("QBRIDGE_E2E_BUILD_TAGS")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// migrate's dry runs keep a record of their samples in
	// $XDG_STATE_HOME; the daemons these tests start inherit this one.
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	removeTestImage()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startNATS starts a real nats-server with JetStream inside the test binary,
// on 127.0.0.1 and a free port.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(e2etest.NATSOptions(-1, t.TempDir()))
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

// daemon is one running "qbridge run".
type daemon struct {
	t       testing.TB
	cmd     *exec.Cmd
	config  string
	logs    *testlog.Buffer
	addr    string // monitoring address
	done    chan struct{}
	exitErr error
}

// startDaemon writes pipelines (HCL pipeline blocks) into a configuration
// with debug logs, starts qbridge on it and waits until /readyz says every
// pipeline runs.
func startDaemon(t testing.TB, pipelines string) *daemon {
	t.Helper()
	return startDaemonConfig(t, e2etest.WriteConfig(t, "debug", pipelines))
}

// startDaemonConfig starts qbridge on an existing configuration file whose
// log format is JSON and whose monitoring listener is 127.0.0.1:0.
func startDaemonConfig(t testing.TB, path string) *daemon {
	t.Helper()
	d := &daemon{t: t, config: path, logs: &testlog.Buffer{}, done: make(chan struct{})}
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
		e2etest.ScanLogs(stderr, d.logs, addrc)
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
	switch err := e2etest.WaitReady(d.addr, d.done, timeout); {
	case errors.Is(err, e2etest.ErrExited):
		d.t.Fatalf("qbridge exited (%v):\n%s", d.exitErr, d.logs.String())
	case err != nil:
		d.t.Fatalf("qbridge %v\n%s", err, d.logs.String())
	}
}

// metric returns the sum of the samples of a Prometheus metric whose label
// set contains every given "name=value" pair.
func (d *daemon) metric(name string, labels ...string) float64 {
	return e2etest.Metric(d.addr, name, labels...)
}

// metricReaches is metric once it shows want, or after 15 s whatever it
// shows then. The daemon counts a message after the broker confirmed it, so
// a test that has just seen the message at the broker can read the counter
// a moment before it moves (one run in two parallel suites did).
func (d *daemon) metricReaches(want float64, name string, labels ...string) float64 {
	deadline := time.Now().Add(15 * time.Second)
	for {
		v := d.metric(name, labels...)
		if v == want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
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
