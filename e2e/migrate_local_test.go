package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestMigrateLocalExample runs docs/migrate.md's "A first try on this
// machine" as written, with the shipped configurations (their port moved
// to a free one, the daemon's log in JSON for the harness): the quick start
// fills DEMO_OUT through `qbridge send`, stops, and configs/migrate-local.hcl
// moves DEMO_OUT to ARCHIVE: a dry run, a move interrupted midway (exit
// 130), and the rerun that resumes and verifies. ARCHIVE then holds every
// message once, each tenant's in order.
func TestMigrateLocalExample(t *testing.T) {
	const n = 100
	t.Setenv("HOME", t.TempDir()) // both configurations keep their store under $HOME
	port := freeTCPPort(t)
	dir := t.TempDir()
	local := func(name, prefix string) string {
		src, err := os.ReadFile(filepath.Join("..", "configs", name))
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.ReplaceAll(string(src), "port      = 4222", "port      = "+strconv.Itoa(port))
		if cfg == string(src) {
			t.Fatalf("configs/%s no longer sets port = 4222; adapt the test", name)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(prefix+cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	quickstart := local("quickstart.hcl", "log {\n  format = \"json\"\n}\nhttp {\n  listen = \"127.0.0.1:0\"\n}\n")
	archive := local("migrate-local.hcl", "")
	// The consumer's ack_wait (15 s) raised past the rerun's -timeout: a
	// rerun that waited for the messages the interrupted run held, rather
	// than got them handed back at once, fails.
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	slow := strings.Replace(string(raw), `ack_wait = "15s"`, `ack_wait = "10m"`, 1)
	if slow == string(raw) {
		t.Fatal(`configs/migrate-local.hcl no longer sets ack_wait = "15s"; adapt the test`)
	}
	if err := os.WriteFile(archive, []byte(slow), 0o600); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	// Fill DEMO_OUT through the quick start, then stop it. The five
	// tenants are sent at once, each one's orders in order (the order that
	// is checked at the end): a process per message one after the other
	// took 8 s.
	d := startDaemonConfig(t, quickstart)
	var sends sync.WaitGroup
	for first := 1; first <= 5; first++ {
		sends.Go(func() {
			for i := first; i <= n; i += 5 { // tenant t(i % 5)
				if out, err := exec.Command(qbridgeBin, "send", "-url", url, "-subject", "demo.in", "-jetstream",
					"-attr", fmt.Sprintf("tenant=t%d", i%5), fmt.Sprintf("order %d", i)).CombinedOutput(); err != nil {
					t.Errorf("send %d: %v\n%s", i, err, out)
					return
				}
			}
		})
	}
	sends.Wait()
	if t.Failed() {
		t.FailNow()
	}
	eventually(t, 30*time.Second, fmt.Sprintf("DEMO_OUT holds %d messages", n), func() bool {
		return streamMsgs(t, url, "DEMO_OUT") == n
	})
	if err := d.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop the quick start: %v", err)
	}

	// Every qbridge run here is bounded, and killed if the test ends first.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	migrate := func(args ...string) (string, int) {
		out, err := exec.CommandContext(ctx, qbridgeBin, append([]string{"migrate"}, args...)...).CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}
	if out, code := migrate("-dry-run", archive); code != 0 || !strings.Contains(out, fmt.Sprintf("read %d; would write %d", n, n)) {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}

	// The move, slowed down (10 s for all of it), interrupted once ARCHIVE
	// has some of it.
	var out bytes.Buffer
	mv := exec.CommandContext(ctx, qbridgeBin, "migrate", "-yes", "-rate", "10", archive)
	mv.Stdout, mv.Stderr = &out, &out
	if err := mv.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = mv.Wait(); close(exited) }()
	t.Cleanup(func() { // a failure below must not leave it holding the store and the port
		_ = mv.Process.Kill()
		<-exited
	})
	eventually(t, 30*time.Second, "the move wrote some of ARCHIVE", func() bool {
		select {
		case <-exited:
			t.Fatalf("the move ended before it was interrupted (%v):\n%s", waitErr, out.String())
		default:
		}
		return streamMsgs(t, url, "ARCHIVE") >= 5
	})
	if err := mv.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the interrupted move did not exit:\n%s", out.String())
	}
	if code := mv.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("interrupted move: exit %d, want 130\n%s", code, out.String())
	}

	// The rerun moves the rest, the messages the interrupted run handed
	// back among them, and verifies.
	if out, code := migrate("-yes", "-timeout", "2m", archive); code != 0 || !strings.Contains(out, "verified: the sink grew by") {
		t.Fatalf("the rerun: exit %d\n%s", code, out)
	}

	// What ARCHIVE holds, read on the quick start's server again.
	d = startDaemonConfig(t, quickstart)
	defer func() {
		if err := d.Stop(30 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	seen := map[int]bool{}
	last := map[int]int{}
	for _, body := range streamBodies(t, url, "ARCHIVE") {
		i, err := strconv.Atoi(strings.TrimPrefix(body, "order "))
		if err != nil {
			t.Fatalf("ARCHIVE holds %q", body)
		}
		if seen[i] {
			t.Errorf("order %d is in ARCHIVE twice", i)
		}
		seen[i] = true
		if tenant := i % 5; i < last[tenant] {
			t.Errorf("tenant t%d: order %d after order %d", tenant, i, last[tenant])
		} else {
			last[tenant] = i
		}
	}
	if len(seen) != n {
		t.Errorf("ARCHIVE holds %d distinct messages, want %d", len(seen), n)
	}
}

// streamMsgs is how many messages stream holds on the server at url, or -1
// while it cannot be asked (the server is not up yet).
func streamMsgs(t *testing.T, url, stream string) int {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// streamBodies reads every message of stream in stream order.
func streamBodies(t *testing.T, url, stream string) []string {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := streamMsgs(t, url, stream)
	var bodies []string
	for len(bodies) < want {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d of %d messages of %s: %v", len(bodies), want, stream, err)
		}
		bodies = append(bodies, string(m.Data()))
	}
	return bodies
}
