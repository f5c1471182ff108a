package e2e

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
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/migrate"
	"github.com/qbridge/qbridge/internal/testlog"
)

// podmanRuntime is Debian's runc: crun, podman's default, does not run on
// these machines' kernels.
const podmanRuntime = "/usr/sbin/runc"

// podmanConf makes podman work without systemd and without permission to
// raise ulimits (containers in containers, CI runners).
const podmanConf = `[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
`

// podman returns a command running podman with the test's configuration, or
// skips the test where podman cannot run (and fails it where it is missing
// though QBRIDGE_E2E_REQUIRED says the machine was set up by e2e/test.sh).
func podmanCmd(t *testing.T) func(args ...string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			t.Fatal("podman is not installed; e2e/test.sh installs it (apt-get install podman runc)")
		}
		t.Skip("podman is not installed (apt-get install podman runc, or run e2e/test.sh): the image is not built or tested")
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(podmanConf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) *exec.Cmd {
		c := exec.Command("podman", append([]string{"--runtime", podmanRuntime}, args...)...)
		c.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		return c
	}
	if out, err := cmd("info").CombinedOutput(); err != nil {
		t.Skipf("podman cannot run here, so the image is not tested: podman info: %v\n%s", err, out)
	}
	return cmd
}

// freeTCPPort returns a port that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestContainerImage builds the image with deploy/build-image.sh and runs
// the quick start in it: version and label, a message sent from outside and
// tailed back, the health endpoints and the exec probe, and SIGTERM: exit 0
// within the shutdown timeout.
func TestContainerImage(t *testing.T) {
	podman := podmanCmd(t)
	ref, version := buildImage(t, podman)

	out, err := podman("run", "--rm", "--network", "host", ref, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "qbridge "+version+" ") {
		t.Fatalf("qbridge version in the image: %v\n%s", err, out)
	}
	out, err = podman("image", "inspect", "--format", `{{index .Labels "org.opencontainers.image.version"}} {{.Config.User}} {{.Size}}`, ref).Output()
	if err != nil {
		t.Fatal(err)
	}
	var label, user string
	var size int64
	if _, err := fmt.Sscan(string(out), &label, &user, &size); err != nil || label != version || user != "65532:65532" {
		t.Errorf("image label/user = %q, want %s and 65532:65532 (%v)", out, version, err)
	}
	t.Logf("image size: %.1f MB", float64(size)/1e6)

	qs := startQuickstart(t, podman, ref, fmt.Sprintf("qbridge-e2e-%d", os.Getpid()), nil, func(line string) bool {
		// The sink and the dead-letter sink connect first, then the
		// source, which creates stream DEMO_IN.
		return strings.Contains(line, `"msg":"connected"`) && strings.Contains(line, `"role":"source"`)
	})
	if err := qs.wait(2 * time.Minute); err != nil {
		t.Fatalf("the container did not connect its adapters: %v\n%s", err, qs.logs.String())
	}

	url := fmt.Sprintf("nats://127.0.0.1:%d", qs.natsPort)
	if code, out, errOut := runQbridge(t, "send", "-url", url, "-subject", "demo.in", "-jetstream", "-attr", "tenant=acme", "-attr", "qty:Number.int=3", "hello"); code != 0 {
		t.Fatalf("send: %d\n%s%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tail := exec.CommandContext(ctx, qbridgeBin, "tail", "-url", url, "-subject", "demo.out", "-jetstream", "-from", "all", "-n", "1", "-json")
	got, err := tail.Output()
	if err != nil || !strings.Contains(string(got), "hello") || !strings.Contains(string(got), "quantity") {
		t.Fatalf("tail: %v\n%s\ncontainer log:\n%s", err, got, qs.logs.String())
	}
	// What cannot be decoded goes to demo.dlq with the reason (the quick
	// start's dead_letter sink), as the comment in the file shows.
	if code, out, errOut := runQbridge(t, "send", "-url", url, "-subject", "demo.in", "-jetstream", "-header", "qbridge.envelope=oops", "bad"); code != 0 {
		t.Fatalf("send: %d\n%s%s", code, out, errOut)
	}
	tail = exec.CommandContext(ctx, qbridgeBin, "tail", "-url", url, "-subject", "demo.dlq", "-jetstream", "-from", "all", "-n", "1")
	got, err = tail.Output()
	if err != nil || !strings.Contains(string(got), "bad") || !strings.Contains(string(got), `DeadLetterReason (String) = "corrupt"`) ||
		!strings.Contains(string(got), "not an envelope's JSON") || !strings.Contains(string(got), `qbridge-refused-envelope (String) = "oops"`) {
		t.Fatalf("tail demo.dlq: %v\n%s\ncontainer log:\n%s", err, got, qs.logs.String())
	}

	for _, probe := range []struct {
		args []string
		want string
	}{
		{[]string{"health"}, "ok"},
		{[]string{"health", "-ready"}, "pipeline demo: ready"},
		{[]string{"health", "-started"}, fmt.Sprintf("listening on nats://127.0.0.1:%d", qs.natsPort)},
	} {
		args := append([]string{"exec", qs.name, "/qbridge"}, probe.args...)
		args = append(args, "-addr", fmt.Sprintf("127.0.0.1:%d", qs.httpPort))
		out, err := podman(args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), probe.want) {
			t.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if code, body := containerGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", qs.httpPort)); code != 200 || !strings.Contains(body, "pipeline demo: ready") {
		t.Errorf("/readyz from outside = %d %q", code, body)
	}

	t.Logf("stopped %s after SIGTERM", qs.stop(t).Round(time.Millisecond))
}

// TestContainerMemoryLimit runs the image's quick start under podman run
// --memory=256m: the daemon makes 90 % of the cgroup's memory limit its
// GOMEMLIMIT (automemlimit) and logs it at start-up as memory_limit_bytes,
// unless GOMEMLIMIT or AUTOMEMLIMIT=off is set.
func TestContainerMemoryLimit(t *testing.T) {
	podman := podmanCmd(t)
	ref, _ := buildImage(t, podman)
	const cgroupLimit = "268435456" // --memory=256m
	for i, tc := range []struct {
		name string
		env  string // -e, if any
		want int64
	}{
		// automemlimit's ApplyRatio: uint64(float64(limit) * 0.9), so
		// 241591910.4 truncated.
		{"cgroup", "", 241591910},
		{"GOMEMLIMIT", "GOMEMLIMIT=100MiB", 100 << 20}, // the environment wins
		{"AUTOMEMLIMIT=off", "AUTOMEMLIMIT=off", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := []string{"--memory=256m"}
			if tc.env != "" {
				flags = append(flags, "-e", tc.env)
			}
			var running, started bool
			qs := startQuickstart(t, podman, ref, fmt.Sprintf("qbridge-e2e-%d-mem%d", os.Getpid(), i), flags, func(line string) bool {
				running = running || strings.Contains(line, `"msg":"qbridge running"`)
				started = started || strings.Contains(line, `"msg":"pipeline started"`)
				return running && started
			})
			if err := qs.wait(2 * time.Minute); err != nil {
				if logs := qs.logs.String(); !strings.Contains(logs, `"msg":`) && regexp.MustCompile(`(?i)cgroup|memory`).MatchString(logs) {
					t.Skipf("podman cannot start a container with --memory=256m here (qbridge logged nothing): %v\n%s", err, logs)
				}
				t.Fatalf("the container did not start its pipeline: %v\n%s", err, qs.logs.String())
			}
			if tc.env == "" {
				// Whether podman applied the limit is the machine's
				// affair (rootless podman ignores it on cgroup v1);
				// what qbridge makes of it is the product's.
				limit, file, err := containerMemoryLimit(podman, qs.name)
				switch {
				case err != nil:
					t.Logf("the container's cgroup memory limit cannot be read from here (%v); taking podman's word for --memory=256m", err)
				case limit != cgroupLimit:
					t.Skipf("podman run --memory=256m set no memory limit on this machine: %s is %s, not %s (podman's own output: %q)",
						file, limit, cgroupLimit, podmanOutput(qs.logs.String()))
				default:
					t.Logf("cgroup limit: %s = %s", file, limit)
				}
			}
			got := loggedMemoryLimit(t, qs.logs.String())
			t.Logf("qbridge running ... memory_limit_bytes=%d", got)
			if got != tc.want {
				t.Errorf("memory_limit_bytes = %d with podman run %s, want %d\n%s", got, strings.Join(flags, " "), tc.want, qs.logs.String())
			}
			qs.stop(t)
			if strings.Contains(qs.logs.String(), "memory limit could not be read") {
				t.Errorf("the daemon could not read the container's memory limit:\n%s", qs.logs.String())
			}
		})
	}
}

// testImage is the image of deploy/build-image.sh, built by the first
// test that needs it and used by the others (a build is some 7 s: a relink
// for the version and a podman build); TestMain removes it at the end.
var testImage struct {
	mu           sync.Mutex
	ref, version string
}

// buildImage returns the reference of the package's image,
// localhost/qbridge-e2e:version, and its version, building it with
// deploy/build-image.sh the first time.
func buildImage(t *testing.T, podman func(...string) *exec.Cmd) (ref, version string) {
	t.Helper()
	testImage.mu.Lock()
	defer testImage.mu.Unlock()
	if testImage.ref != "" {
		return testImage.ref, testImage.version
	}
	image := "localhost/qbridge-e2e"
	version = fmt.Sprintf("v0.0.0-e2e.%d", os.Getpid())
	build := exec.Command("bash", "../deploy/build-image.sh")
	build.Env = append(podman().Env, "IMAGE="+image, "VERSION="+version, "ENGINE=podman --runtime "+podmanRuntime)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-image.sh: %v\n%s", err, out)
	}
	ref = image + ":" + version
	// build-image.sh tags :latest too, which would keep the image once its
	// version tag is removed; the tests use the version tag only. (Without
	// a name, podman untag removes them all.)
	_ = podman("untag", ref, image+":latest").Run()
	testImage.ref, testImage.version = ref, version
	return ref, version
}

// removeTestImage removes the image buildImage built, if any, with a
// configuration of its own (a test's went with its TempDir).
func removeTestImage() {
	testImage.mu.Lock()
	defer testImage.mu.Unlock()
	if testImage.ref == "" {
		return
	}
	err := func() error {
		dir, err := os.MkdirTemp("", "qbridge-e2e-podman")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		conf := filepath.Join(dir, "containers.conf")
		if err := os.WriteFile(conf, []byte(podmanConf), 0o600); err != nil {
			return err
		}
		rmi := exec.Command("podman", "--runtime", podmanRuntime, "rmi", "-f", testImage.ref)
		rmi.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		if out, err := rmi.CombinedOutput(); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "removing the test image %s: %v\n", testImage.ref, err)
	}
	testImage.ref = ""
}

// quickstart is configs/quickstart.hcl running in the image, its JSON log
// read as it comes.
type quickstart struct {
	name               string
	natsPort, httpPort int
	run                *exec.Cmd
	logs               *testlog.Buffer
	ready              chan struct{} // closed at the first log line that ready accepts
	exited             chan error    // podman run's exit, once the log is read
}

// startQuickstart runs the quick start in the image ref as the container
// name, with podman run's flags before the image: on ports of its own (host
// network, shared machine; both listen on 127.0.0.1), the root filesystem
// read-only and the state on a volume as Kubernetes' emptyDir with fsGroup,
// writable by the image's user. ready is called with each log line until
// it returns true.
func startQuickstart(t *testing.T, podman func(...string) *exec.Cmd, ref, name string, flags []string, ready func(line string) bool) *quickstart {
	t.Helper()
	qs := &quickstart{name: name, natsPort: freeTCPPort(t), httpPort: freeTCPPort(t), logs: &testlog.Buffer{},
		ready: make(chan struct{}), exited: make(chan error, 1)}
	src, err := os.ReadFile("../configs/quickstart.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(src), "port      = 4222", fmt.Sprintf("port      = %d", qs.natsPort))
	if cfg == string(src) {
		t.Fatal("configs/quickstart.hcl no longer sets port = 4222; adapt the test")
	}
	cfg = fmt.Sprintf("http { listen = \"127.0.0.1:%d\" }\n", qs.httpPort) + cfg
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quickstart.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--rm", "--name", name, "--network", "host", "--read-only",
		"-v", state + ":/var/lib/qbridge", "-v", dir + ":/etc/qbridge:ro"}, flags...)
	qs.run = podman(append(args, ref, "run", "-log-format", "json", "/etc/qbridge/quickstart.hcl")...)
	stderr, err := qs.run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = podman("rm", "-f", name).Run() })
	var readLogs sync.WaitGroup
	readLogs.Go(func() {
		done := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			qs.logs.Write([]byte(sc.Text() + "\n"))
			if !done && ready(sc.Text()) {
				done = true
				close(qs.ready)
			}
		}
	})
	go func() { readLogs.Wait(); qs.exited <- qs.run.Wait() }()
	return qs
}

// wait waits for the log line that ready accepted, and says why there was
// none: the container's exit or the timeout.
func (qs *quickstart) wait(timeout time.Duration) error {
	select {
	case <-qs.ready:
		return nil
	case err := <-qs.exited:
		return fmt.Errorf("the container exited first: %v", err)
	case <-time.After(timeout):
		return fmt.Errorf("not within %s", timeout)
	}
}

// stop sends SIGTERM through podman's signal proxy and fails the test
// unless the container drains and exits 0 well within the pipeline's
// shutdown_timeout (30s default), with a clean stop in its log; it returns
// how long that took.
func (qs *quickstart) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := qs.run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-qs.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, qs.logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit within 40s of SIGTERM\n%s", qs.logs.String())
	}
	if !strings.Contains(qs.logs.String(), `"msg":"qbridge stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", qs.logs.String())
	}
	return time.Since(start)
}

// loggedMemoryLimit is memory_limit_bytes of the daemon's start-up line,
// "qbridge running".
func loggedMemoryLimit(t *testing.T, logs string) int64 {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg   string `json:"msg"`
			Limit *int64 `json:"memory_limit_bytes"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "qbridge running" {
			continue
		}
		if rec.Limit == nil {
			t.Fatalf("no memory_limit_bytes in the start-up line: %s", line)
		}
		return *rec.Limit
	}
	t.Fatalf("no \"qbridge running\" line in the log:\n%s", logs)
	return 0
}

// podmanOutput is what podman itself said among the container's log: the
// lines that are not the daemon's JSON.
func podmanOutput(logs string) string {
	var own []string
	for line := range strings.Lines(logs) {
		if !strings.HasPrefix(line, "{") {
			own = append(own, strings.TrimSpace(line))
		}
	}
	return strings.Join(own, "; ")
}

// containerMemoryLimit reads the memory limit of the running container's
// cgroup as the host sees it (cgroup v1's memory.limit_in_bytes or v2's
// memory.max), and the file it read.
func containerMemoryLimit(podman func(...string) *exec.Cmd, name string) (limit, file string, err error) {
	out, err := podman("inspect", "--format", "{{.State.Pid}}", name).Output()
	if err != nil {
		return "", "", fmt.Errorf("podman inspect: %w", err)
	}
	cgroups, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(out)), "cgroup"))
	if err != nil {
		return "", "", err
	}
	// Lines of hierarchy-ID:controllers:path; cgroup v2's is 0::path.
	for line := range strings.Lines(string(cgroups)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			file = filepath.Join("/sys/fs/cgroup", f[1], f[2], "memory.limit_in_bytes")
		case f[0] == "0" && f[1] == "" && file == "":
			file = filepath.Join("/sys/fs/cgroup", f[2], "memory.max")
		}
	}
	if file == "" {
		return "", "", fmt.Errorf("no memory cgroup in /proc/PID/cgroup:\n%s", cgroups)
	}
	b, err := os.ReadFile(file)
	return strings.TrimSpace(string(b)), file, err
}

func containerGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestContainerMigrateJob runs qbridge migrate in the image the way
// deploy/kubernetes/migrate-job.yaml does: no terminal (so -yes), a
// read-only root filesystem, progress as log lines. SIGTERM in the middle,
// as an eviction sends it to PID 1, ends the move with exit 130 and the
// summary; the same command in a new container, the Job's next pod, ends
// it: exit 0, every message at the sink once, in order within its group.
func TestContainerMigrateJob(t *testing.T) {
	podman := podmanCmd(t)
	ref, _ := buildImage(t, podman)
	ns := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, ns.URL())
	natsCreateStream(t, js, "JOB_IN", "in.>")
	natsCreateStream(t, js, "JOB_OUT", "out.>")
	const groups, per = 10, 300 // 7.5 s at -rate 400: SIGTERM comes before the end
	natsPublishGrouped(t, js, func(g int) string { return fmt.Sprintf("in.%d", g) }, groups, per, 0)
	out := natsCollect(t, js, "JOB_OUT")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "migrate.hcl"), []byte(migJSPipeline(ns.URL(), "JOB_IN", "mig", "out.x")), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := func(n int) *migration {
		name := fmt.Sprintf("qbridge-e2e-%d-job%d", os.Getpid(), n)
		m := &migration{done: make(chan struct{})}
		m.cmd = podman("run", "--rm", "--name", name, "--network", "host", "--read-only", "-v", dir+":/etc/qbridge:ro",
			ref, "migrate", "-yes", "-rate", "400", "-idle", "1s", "-progress-every", "1s", "/etc/qbridge")
		m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.errb
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := m.cmd.Wait()
			if ee, ok := err.(*exec.ExitError); ok {
				m.code = ee.ExitCode()
			}
			close(m.done)
		}()
		t.Cleanup(func() {
			_ = podman("rm", "-f", name).Run()
			<-m.done
			if t.Failed() {
				t.Logf("container %s stdout:\n%s\nstderr:\n%s", name, m.out.String(), e2etest.Tail(m.errb.String(), 40))
			}
		})
		return m
	}

	first := pod(1)
	eventually(t, 2*time.Minute, "a progress line, and a tenth migrated", func() bool {
		return strings.Contains(first.errb.String(), "migration progress") && out.Unique() >= groups*per/10
	})
	// podman run passes the signal on to the container's PID 1.
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t, 60*time.Second); code != migrate.ExitInterrupted {
		t.Fatalf("first container: exit %d after SIGTERM, want %d (the Job's podFailurePolicy ignores it after an eviction)\n%s%s",
			code, migrate.ExitInterrupted, first.out.String(), e2etest.Tail(first.errb.String(), 20))
	}
	if !strings.Contains(first.out.String(), "interrupted") {
		t.Errorf("no summary after SIGTERM:\n%s", first.out.String())
	}
	before := out.Unique()
	if before >= groups*per {
		t.Fatalf("SIGTERM came too late to test the next pod (%d of %d moved)", before, groups*per)
	}

	second := pod(2)
	if code := second.wait(t, 3*time.Minute); code != migrate.ExitComplete || !strings.Contains(second.out.String(), "complete") {
		t.Fatalf("second container: exit %d\n%s%s", code, second.out.String(), e2etest.Tail(second.errb.String(), 20))
	}
	out.WaitUnique(groups*per, 30*time.Second, nil)
	if n := migStreamMsgs(t, js, "JOB_OUT"); n != groups*per {
		t.Errorf("sink stream holds %d messages, want %d", n, groups*per)
	}
	if _, disorder := natsCheckOrderAfterRestart(t, out.Records(), groups, per); disorder != 0 {
		t.Errorf("%d out of order within their group", disorder)
	}
	if p, ap := migConsumerPending(t, js, "JOB_IN", "mig"); p != 0 || ap != 0 {
		t.Errorf("source consumer: %d pending, %d ack pending", p, ap)
	}
}
