package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	version := fmt.Sprintf("v0.0.0-e2e.%d", os.Getpid())
	image := "localhost/qbridge-e2e"
	build := exec.Command("bash", "../deploy/build-image.sh")
	build.Env = append(podman().Env, "IMAGE="+image, "VERSION="+version, "ENGINE=podman --runtime "+podmanRuntime)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = podman("rmi", "-f", image+":"+version).Run() })

	out, err := podman("run", "--rm", "--network", "host", image+":"+version, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "qbridge "+version+" ") {
		t.Fatalf("qbridge version in the image: %v\n%s", err, out)
	}
	out, err = podman("image", "inspect", "--format", `{{index .Labels "org.opencontainers.image.version"}} {{.Config.User}} {{.Size}}`, image+":"+version).Output()
	if err != nil {
		t.Fatal(err)
	}
	var label, user string
	var size int64
	if _, err := fmt.Sscan(string(out), &label, &user, &size); err != nil || label != version || user != "65532:65532" {
		t.Errorf("image label/user = %q, want %s and 65532:65532 (%v)", out, version, err)
	}
	t.Logf("image size: %.1f MB", float64(size)/1e6)

	// The quick start, on ports of its own (host network, shared machine).
	natsPort, httpPort := freeTCPPort(t), freeTCPPort(t)
	src, err := os.ReadFile("../configs/quickstart.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(src), "port      = 4222", fmt.Sprintf("port      = %d", natsPort))
	if cfg == string(src) {
		t.Fatal("configs/quickstart.hcl no longer sets port = 4222; adapt the test")
	}
	cfg = fmt.Sprintf("http { listen = \"127.0.0.1:%d\" }\n", httpPort) + cfg
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quickstart.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The state volume as Kubernetes' emptyDir with fsGroup: writable by
	// the image's user, the root filesystem read-only.
	state := t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("qbridge-e2e-%d", os.Getpid())
	run := podman("run", "--rm", "--name", name, "--network", "host", "--read-only",
		"-v", state+":/var/lib/qbridge", "-v", dir+":/etc/qbridge:ro", image+":"+version, "run", "-log-format", "json", "/etc/qbridge/quickstart.hcl")
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = podman("rm", "-f", name).Run() })
	var logs syncBuffer
	connected := make(chan struct{})
	exited := make(chan error, 1)
	var readLogs sync.WaitGroup
	readLogs.Go(func() {
		n := 0
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), `"msg":"connected"`) {
				if n++; n == 2 { // the sink, then the source
					close(connected)
				}
			}
		}
	})
	go func() { readLogs.Wait(); exited <- run.Wait() }()
	select {
	case <-connected:
	case err := <-exited:
		t.Fatalf("the container exited before connecting: %v\n%s", err, logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the container did not connect its adapters\n%s", logs.String())
	}

	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	if code, out, errOut := runQbridge(t, "send", "-url", url, "-subject", "demo.in", "-jetstream", "-attr", "tenant=acme", "-attr", "qty:Number.int=3", "hello"); code != 0 {
		t.Fatalf("send: %d\n%s%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tail := exec.CommandContext(ctx, qbridgeBin, "tail", "-url", url, "-subject", "demo.out", "-jetstream", "-from", "all", "-n", "1", "-json")
	got, err := tail.Output()
	if err != nil || !strings.Contains(string(got), "hello") || !strings.Contains(string(got), "quantity") {
		t.Fatalf("tail: %v\n%s\ncontainer log:\n%s", err, got, logs.String())
	}

	for _, probe := range []struct {
		args []string
		want string
	}{
		{[]string{"health"}, "ok"},
		{[]string{"health", "-ready"}, "pipeline demo: ready"},
	} {
		args := append([]string{"exec", name, "/qbridge"}, probe.args...)
		args = append(args, "-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
		out, err := podman(args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), probe.want) {
			t.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if code, body := containerGet(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort)); code != 200 || !strings.Contains(body, "pipeline demo: ready") {
		t.Errorf("/readyz from outside = %d %q", code, body)
	}

	// SIGTERM through podman's signal proxy: a drain, then exit 0 well
	// within the pipeline's shutdown_timeout (30s default).
	start := time.Now()
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit within 40s of SIGTERM\n%s", logs.String())
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !regexp.MustCompile(`"msg":"qbridge stopped"`).MatchString(logs.String()) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
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
