package chaos

import (
	"bufio"
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

// requireEnv returns a broker setting written by e2e/brokers/up.sh. Without
// it the test is skipped, unless QBRIDGE_E2E_REQUIRED is set (as
// e2e/test.sh does): then a missing broker is a failure.
func requireEnv(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is not set: start the test brokers with e2e/brokers/up.sh and load its env file, or run bash e2e/test.sh", name)
	if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// natsServer is an embedded nats-server with JetStream that the test can
// stop and start again on the same port and store directory: clients
// reconnect and stored messages stay.
type natsServer struct {
	t    testing.TB
	port int
	dir  string
	mu   sync.Mutex
	s    *server.Server
}

func startNATS(t testing.TB) *natsServer {
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
		time.Sleep(100 * time.Millisecond) // the port is still held: retry
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

// natsConnect returns a client that reconnects quickly and forever.
func natsConnect(t testing.TB, url string) jetstream.JetStream {
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
	return js
}

// sink is the JetStream sink every run writes to: stream OUT on out.>,
// on its own server, deduplicating on Nats-Msg-Id for an hour (longer than
// any run, so each redelivered copy is dropped).
type sink struct {
	srv *natsServer
	js  jetstream.JetStream
}

func startSink(t testing.TB) *sink {
	t.Helper()
	s := &sink{srv: startNATS(t)}
	s.js = natsConnect(t, s.srv.URL())
	if _, err := s.js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{
		Name: "OUT", Subjects: []string{"out.>"}, Storage: jetstream.FileStorage, Duplicates: time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// block is the sink block of a pipeline.
func (s *sink) block() string {
	return fmt.Sprintf(`  sink "nats" {
    url            = %q
    subject        = "out.{group}"
    reconnect_wait = "200ms"
    jetstream {
      stream      = "OUT"
      ack_timeout = "2s"
    }
  }
`, s.srv.URL())
}

// stored is how many messages the sink stream holds, or -1 while it cannot
// tell (its server is down).
func (s *sink) stored() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, "OUT")
	if err != nil {
		return -1
	}
	info, err := st.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// bodies reads every stored message, in stream order.
func (s *sink) bodies(t testing.TB) []string {
	t.Helper()
	n := s.stored()
	if n <= 0 {
		return nil
	}
	ctx := ctxFor(t, 60*time.Second)
	c, err := s.js.OrderedConsumer(ctx, "OUT", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, n)
	for len(out) < n {
		mb, err := c.Fetch(min(n-len(out), 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range mb.Messages() {
			out = append(out, string(m.Data()))
			got++
		}
		if got == 0 {
			t.Fatalf("reading the sink stream: %d of %d (%v)", len(out), n, mb.Error())
		}
	}
	return out
}

// syncBuffer keeps what a process wrote.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// replica is one qbridge process ("qbridge run") of a run; it is started
// again after each kill, as the same replica.
type replica struct {
	t      testing.TB
	id     int
	config string
	env    []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	addr    string
	done    chan struct{}
	exitErr error
	starts  int
	logs    *syncBuffer // every incarnation's log, one after the other
}

// start runs the replica and waits until /readyz answers 200.
func (r *replica) start() {
	r.t.Helper()
	r.mu.Lock()
	r.starts++
	fmt.Fprintf(r.logs, "--- replica %d, start %d\n", r.id, r.starts)
	cmd := exec.Command(qbridge(r.t), "run", "-config", r.config)
	cmd.Env = append(os.Environ(), r.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		r.mu.Unlock()
		r.t.Fatal(err)
	}
	cmd.Stdout = r.logs
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.addr = cmd, done, ""
	r.mu.Unlock()
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = r.logs.Write(append(line, '\n'))
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
		err := cmd.Wait()
		r.mu.Lock()
		r.exitErr = err
		r.mu.Unlock()
		close(done)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-done:
		r.t.Fatalf("replica %d exited at start (%v):\n%s", r.id, r.exitErr, tail(r.logs.String(), 40))
	case <-time.After(30 * time.Second):
		r.t.Fatalf("replica %d did not start listening:\n%s", r.id, tail(r.logs.String(), 40))
	}
	r.mu.Lock()
	r.addr = addr
	r.mu.Unlock()
	r.waitReady(done, addr, 60*time.Second)
}

func (r *replica) waitReady(done chan struct{}, addr string, timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := get(addr, "/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("replica %d not ready after %s: %d %s\n%s", r.id, timeout, code, body, tail(r.logs.String(), 40))
		}
		select {
		case <-done:
			r.t.Fatalf("replica %d exited (%v):\n%s", r.id, r.exitErr, tail(r.logs.String(), 40))
		case <-time.After(50 * time.Millisecond): // a poll of /readyz
		}
	}
}

// running reports whether the current incarnation runs.
func (r *replica) running() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// kill ends the replica with SIGKILL, by PID, and waits for it.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits; after timeout it kills.
func (r *replica) stop(timeout time.Duration) error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		if ee, ok := r.exitErr.(*exec.ExitError); ok && ee.ExitCode() == -1 {
			return nil // killed before: not this stop's doing
		}
		return r.exitErr
	case <-time.After(timeout):
		r.kill()
		return fmt.Errorf("replica %d did not stop within %s", r.id, timeout)
	}
}

// metric sums a Prometheus metric's samples on the replica's /metrics.
func (r *replica) metric(name string) float64 {
	r.mu.Lock()
	addr := r.addr
	r.mu.Unlock()
	_, body := get(addr, "/metrics")
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &f); err == nil {
			sum += f
		}
	}
	return sum
}

// get fetches a monitoring path; code 0 means the request failed.
func get(addr, path string) (int, string) {
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

// writeConfig writes a configuration of pipelines with JSON logs and a
// free monitoring port (each replica picks its own).
func writeConfig(t testing.TB, pipelines string) string {
	t.Helper()
	return writeConfigLevel(t, "debug", pipelines)
}

// writeConfigLevel is writeConfig with another log level.
func writeConfigLevel(t testing.TB, level, pipelines string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qbridge.hcl")
	cfg := "log {\n  level  = \"" + level + "\"\n  format = \"json\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n" + pipelines
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// engineBlocks are the pipeline settings every run shares: one message
// per group in flight (order), quick retries, locks extended well within
// the sources' short lock times.
const engineBlocks = `  ordering {
    max_in_flight = 400
    per_group     = 1
  }
  retry {
    initial = "50ms"
    max     = "500ms"
  }
  lock {
    extend_every = "1s"
    extend_by    = "6s"
  }
  shutdown_timeout = "5s"
`
