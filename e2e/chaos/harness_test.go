package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sink is the JetStream sink every run writes to: stream OUT on out.>,
// on its own server, deduplicating on Nats-Msg-Id for an hour (longer than
// any run, so each redelivered copy is dropped).
type sink struct {
	srv *e2etest.NATS
	js  jetstream.JetStream
}

func startSink(t testing.TB) *sink {
	t.Helper()
	s := &sink{srv: e2etest.StartNATS(t)}
	_, s.js = e2etest.ConnectNATS(t, s.srv.URL())
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
	logs    *testlog.Buffer // every incarnation's log, one after the other
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
		e2etest.ScanLogs(stderr, r.logs, addrc)
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
		r.t.Fatalf("replica %d exited at start (%v):\n%s", r.id, r.exitErr, e2etest.Tail(r.logs.String(), 40))
	case <-time.After(30 * time.Second):
		r.t.Fatalf("replica %d did not start listening:\n%s", r.id, e2etest.Tail(r.logs.String(), 40))
	}
	r.mu.Lock()
	r.addr = addr
	r.mu.Unlock()
	r.waitReady(done, addr, 60*time.Second)
}

func (r *replica) waitReady(done chan struct{}, addr string, timeout time.Duration) {
	r.t.Helper()
	switch err := e2etest.WaitReady(addr, done, timeout); {
	case errors.Is(err, e2etest.ErrExited):
		r.t.Fatalf("replica %d exited (%v):\n%s", r.id, r.exitErr, e2etest.Tail(r.logs.String(), 40))
	case err != nil:
		r.t.Fatalf("replica %d %v\n%s", r.id, err, e2etest.Tail(r.logs.String(), 40))
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
	return e2etest.Metric(addr, name)
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
