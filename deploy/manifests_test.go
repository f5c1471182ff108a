// Package deploy_test checks that the deployment examples match this build:
// every qbridge command line, flag, probe, port and path in them exists, and
// every configuration they carry validates. Manifests cannot rot unnoticed.
package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/qbridge/qbridge/bridge/monitor"
	"github.com/qbridge/qbridge/internal/config"
)

// The image's facts the manifests rely on, as the Containerfile states them.
const (
	imageEntrypoint = "/qbridge"
	imageUID        = 65532
	imageStateDir   = "/var/lib/qbridge"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// qbridgeBin builds the command once for the whole test binary.
func qbridgeBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "qbridge-deploy-test")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "qbridge")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/qbridge").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var flagLine = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)

// checkCommandLine runs "qbridge CMD -h" and checks that CMD exists and that
// every flag of args is one of its flags.
func checkCommandLine(t *testing.T, where string, args []string) {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no qbridge command", where)
		return
	}
	cmd := exec.Command(qbridgeBin(t), args[0], "-h")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: qbridge %s -h: %v\n%s", where, args[0], err, out.String())
		return
	}
	if strings.Contains(out.String(), "unknown command") {
		t.Errorf("%s: qbridge has no command %q", where, args[0])
		return
	}
	var flags []string
	for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, m[1])
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(flags, name) {
			t.Errorf("%s: qbridge %s has no flag -%s (it has %v)", where, args[0], name, flags)
		}
	}
}

// checkConfig validates an HCL configuration as "qbridge validate" does
// without secrets, and returns it.
func checkConfig(t *testing.T, where string, src []byte) *config.Config {
	t.Helper()
	l := config.NewLoader()
	l.AllowUnsetEnv()
	cfg, diags := l.LoadBytes(where+".hcl", src)
	if diags.HasErrors() {
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, l.Files(), diags)
		t.Fatalf("%s: the configuration does not validate:\n%s", where, b.String())
	}
	return cfg
}

// checkProbePath asks the monitoring handler of this build for path: it
// must answer 200 when the process is ready.
func checkProbePath(t *testing.T, where, path string) {
	t.Helper()
	h := monitor.Handler(prometheus.NewRegistry(), func(context.Context) monitor.Readiness { return monitor.Readiness{} })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Errorf("%s: the monitoring endpoint answers %s with %d", where, path, rec.Code)
	}
}

// manifest is what the test reads of Kubernetes objects.
type manifest struct {
	Kind     string                `yaml:"kind"`
	Metadata struct{ Name string } `yaml:"metadata"`
	Data     map[string]string     `yaml:"data"`
	Spec     struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		ScaleTargetRef struct{ Name string } `yaml:"scaleTargetRef"`
		Triggers       []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		EmptyDir any `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem *bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

func readManifests(t *testing.T, path string) []manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ms := readManifests(t, f)
			configs := map[string]*config.Config{} // ConfigMap name → its configuration
			deployments := map[string]bool{}
			for _, m := range ms {
				if m.Kind != "ConfigMap" {
					continue
				}
				for key, src := range m.Data {
					if strings.HasSuffix(key, ".hcl") {
						configs[m.Metadata.Name] = checkConfig(t, f+": ConfigMap "+m.Metadata.Name+" "+key, []byte(src))
					}
				}
			}
			qbridges := 0
			for _, m := range ms {
				switch m.Kind {
				case "Deployment":
					deployments[m.Metadata.Name] = true
					qbridges += checkPod(t, f+": Deployment "+m.Metadata.Name, m.Spec.Template.Spec, configs)
				case "ScaledObject":
					if !deployments[m.Spec.ScaleTargetRef.Name] {
						t.Errorf("%s: ScaledObject %s scales %q, not a Deployment of the file", f, m.Metadata.Name, m.Spec.ScaleTargetRef.Name)
					}
					for _, tr := range m.Spec.Triggers {
						if tr.Type == "aws-sqs-queue" && !strings.HasPrefix(tr.Metadata["queueURL"], "https://sqs.") {
							t.Errorf("%s: ScaledObject trigger without an SQS queueURL: %v", f, tr.Metadata)
						}
					}
				}
			}
			if qbridges == 0 {
				t.Errorf("%s: no qbridge container", f)
			}
		})
	}
}

// checkPod checks the qbridge containers of a pod and returns how many
// there are.
func checkPod(t *testing.T, where string, pod podSpec, configs map[string]*config.Config) int {
	t.Helper()
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: runAsNonRoot is not set", where)
	}
	if u := pod.SecurityContext.RunAsUser; u != nil && *u != imageUID {
		t.Errorf("%s: runAsUser %d, the image's user is %d", where, *u, imageUID)
	}
	n := 0
	for _, c := range pod.Containers {
		if !strings.HasPrefix(c.Image, "qbridge:") {
			continue
		}
		n++
		w := where + " container " + c.Name
		if len(c.Command) > 0 && c.Command[0] != imageEntrypoint {
			t.Errorf("%s: command %v does not run %s", w, c.Command, imageEntrypoint)
		}
		checkCommandLine(t, w+" args", c.Args)
		if len(c.Args) == 0 || c.Args[0] != "run" {
			t.Errorf("%s: args %v do not run the daemon", w, c.Args)
			continue
		}
		if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not set", w)
		}
		// The configuration path of run is a mount of a ConfigMap this
		// file defines.
		cfgPath := c.Args[len(c.Args)-1]
		var cfg *config.Config
		for _, vm := range c.VolumeMounts {
			if vm.MountPath != cfgPath {
				continue
			}
			for _, v := range pod.Volumes {
				if v.Name == vm.Name && v.ConfigMap != nil {
					cfg = configs[v.ConfigMap.Name]
				}
			}
		}
		if cfg == nil {
			t.Errorf("%s: run reads %s, which is no mounted ConfigMap of the file with a *.hcl key", w, cfgPath)
			continue
		}
		// Every embedded NATS store is on a writable volume.
		for _, p := range cfg.Pipelines {
			for _, a := range []config.Adapter{p.Spec.Source, p.Spec.Sink} {
				if a.Kind == "nats" && a.Config != nil {
					dir := fmt.Sprint(fieldValue(a.Config, "StoreDir"))
					if embedded, _ := fieldValue(a.Config, "Embedded").(bool); embedded && !mountedUnder(c, pod, dir) {
						t.Errorf("%s: pipeline %s keeps its NATS store in %s, not on an emptyDir volume (the root filesystem is read-only)", w, p.Name, dir)
					}
				}
			}
			grace := 30 // Kubernetes' default
			if g := pod.TerminationGracePeriodSeconds; g != nil {
				grace = *g
			}
			if float64(grace) <= p.Spec.Engine.ShutdownTimeout.Seconds() {
				t.Errorf("%s: terminationGracePeriodSeconds %d is not above pipeline %s's shutdown_timeout %s", w, grace, p.Name, p.Spec.Engine.ShutdownTimeout)
			}
		}
		port := monitor.DefaultListen[strings.LastIndexByte(monitor.DefaultListen, ':')+1:]
		if cfg.HTTP.Listen != "" {
			port = cfg.HTTP.Listen[strings.LastIndexByte(cfg.HTTP.Listen, ':')+1:]
		}
		named := map[string]string{}
		for _, p := range c.Ports {
			named[p.Name] = fmt.Sprint(p.ContainerPort)
			if fmt.Sprint(p.ContainerPort) != port {
				t.Errorf("%s: port %s is %d, the configuration listens on %s", w, p.Name, p.ContainerPort, port)
			}
		}
		for kind, pr := range map[string]*probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			pw := w + " " + kind + "Probe"
			switch {
			case pr == nil:
				t.Errorf("%s: missing", pw)
			case pr.Exec != nil:
				cmd := pr.Exec.Command
				if len(cmd) < 2 || cmd[0] != imageEntrypoint || cmd[1] != "health" {
					t.Errorf("%s: %v is not %s health", pw, cmd, imageEntrypoint)
					continue
				}
				checkCommandLine(t, pw, cmd[1:])
				if ready := slices.Contains(cmd, "-ready"); ready != (kind == "readiness") {
					t.Errorf("%s: %v asks the wrong endpoint", pw, cmd)
				}
				if cfg.HTTP.Listen != "" && cfg.HTTP.Listen != monitor.DefaultListen && !slices.Contains(cmd, "-addr") {
					t.Errorf("%s: the configuration listens on %s; the probe needs -addr", pw, cfg.HTTP.Listen)
				}
			case pr.HTTPGet != nil:
				checkProbePath(t, pw, pr.HTTPGet.Path)
				if want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[kind]; pr.HTTPGet.Path != want {
					t.Errorf("%s: path %s, want %s", pw, pr.HTTPGet.Path, want)
				}
				p := fmt.Sprint(pr.HTTPGet.Port)
				if np, ok := named[p]; ok {
					p = np
				}
				if p != port {
					t.Errorf("%s: port %v, the configuration listens on %s", pw, pr.HTTPGet.Port, port)
				}
				if strings.HasPrefix(cfg.HTTP.Listen, "127.") || cfg.HTTP.Listen == "" {
					t.Errorf("%s: kubelet cannot reach an HTTP probe on the loopback (%q); use qbridge health", pw, cfg.HTTP.Listen)
				}
			default:
				t.Errorf("%s: neither exec nor httpGet", pw)
			}
		}
	}
	return n
}

// mountedUnder reports whether dir is on an emptyDir volume of container c.
func mountedUnder(c container, pod podSpec, dir string) bool {
	for _, vm := range c.VolumeMounts {
		if dir != vm.MountPath && !strings.HasPrefix(dir, vm.MountPath+"/") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// fieldValue reads an exported field of an adapter's configuration struct
// (or of a struct it embeds).
func fieldValue(cfg any, name string) any {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return nil
	}
	return f.Interface()
}

// The systemd unit's command lines exist, and it waits longer than a
// pipeline's default shutdown_timeout before SIGKILL.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/qbridge.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	for _, k := range []string{"ExecStart", "ExecStartPre"} {
		f := strings.Fields(keys[k])
		if len(f) < 2 || filepath.Base(f[0]) != "qbridge" {
			t.Errorf("%s=%q does not run qbridge", k, keys[k])
			continue
		}
		checkCommandLine(t, "qbridge.service "+k, f[1:])
	}
	if !strings.HasPrefix(keys["ExecStart"], "/usr/local/bin/qbridge run ") {
		t.Errorf("ExecStart=%q does not run the daemon", keys["ExecStart"])
	}
	d, err := time.ParseDuration(keys["TimeoutStopSec"] + "s")
	if def := defaultShutdownTimeout(t); err != nil || d <= def {
		t.Errorf("TimeoutStopSec=%q: want more than the default shutdown_timeout %s", keys["TimeoutStopSec"], def)
	}
	if keys["Environment"] != "HOME=/var/lib/qbridge" || keys["StateDirectory"] != "qbridge" {
		t.Errorf("the state directory and HOME disagree: StateDirectory=%q Environment=%q", keys["StateDirectory"], keys["Environment"])
	}
}

func defaultShutdownTimeout(t *testing.T) time.Duration {
	t.Helper()
	cfg := checkConfig(t, "default", []byte("pipeline \"p\" {\n  source \"nats\" {\n    url = \"nats://127.0.0.1:4222\"\n    subject = \"a\"\n  }\n  sink \"nats\" {\n    url = \"nats://127.0.0.1:4222\"\n    subject = \"b\"\n  }\n}\n"))
	return cfg.Pipelines[0].Spec.Engine.ShutdownTimeout
}

// The Containerfile runs the binary as the user the manifests expect.
func TestContainerfile(t *testing.T) {
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, want := range []string{
		"FROM scratch\n",
		fmt.Sprintf("USER %d:%d\n", imageUID, imageUID),
		fmt.Sprintf("ENTRYPOINT [%q]\n", imageEntrypoint),
		"ENV HOME=" + imageStateDir + "\n",
		fmt.Sprintf("COPY --chown=%d:%d state/ %s/\n", imageUID, imageUID, imageStateDir),
		"org.opencontainers.image.version=\"${VERSION}\"",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("Containerfile lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^FROM (.*)$`).FindAllStringSubmatch(src, -1); len(m) != 1 || m[0][1] != "scratch" {
		t.Errorf("the Containerfile must build FROM scratch only (no registry): %v", m)
	}
}
