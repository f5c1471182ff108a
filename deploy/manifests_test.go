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
	"net"
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
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/qbridge/qbridge/bridge/monitor"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/migrate"
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
// must answer 200 when the process is ready and started.
func checkProbePath(t *testing.T, where, path string) {
	t.Helper()
	h := monitor.Handler(prometheus.NewRegistry(), func(context.Context) monitor.Readiness { return monitor.Readiness{} },
		func() monitor.Startup { return monitor.Startup{} })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Errorf("%s: the monitoring endpoint answers %s with %d", where, path, rec.Code)
	}
}

// manifests holds the objects of one file, each decoded strictly into its
// type from k8s.io/api: a misspelled or misplaced field fails the test, as
// kubectl's server-side validation would fail the apply.
type manifests struct {
	configMaps  []*corev1.ConfigMap
	pvcs        []*corev1.PersistentVolumeClaim
	deployments []*appsv1.Deployment
	jobs        []*batchv1.Job
	scaled      []*scaledObject
}

// scaledObject is what the test reads of KEDA's ScaledObject, a custom
// resource outside k8s.io/api (decoded leniently).
type scaledObject struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		ScaleTargetRef struct{ Name string } `json:"scaleTargetRef"`
		Triggers       []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

func readManifests(t *testing.T, path string) manifests {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out manifests
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		doc, err := yaml.Marshal(&node)
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		var tm metav1.TypeMeta
		if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			o := &corev1.ConfigMap{}
			out.configMaps, obj = append(out.configMaps, o), o
		case "v1 PersistentVolumeClaim":
			o := &corev1.PersistentVolumeClaim{}
			out.pvcs, obj = append(out.pvcs, o), o
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "apps/v1 Deployment":
			o := &appsv1.Deployment{}
			out.deployments, obj = append(out.deployments, o), o
		case "batch/v1 Job":
			o := &batchv1.Job{}
			out.jobs, obj = append(out.jobs, o), o
		case "keda.sh/v1alpha1 ScaledObject":
			o := &scaledObject{}
			out.scaled = append(out.scaled, o)
			if err := sigsyaml.Unmarshal(doc, o); err != nil {
				t.Fatalf("%s: document %d (%s): %v", path, i, tm.Kind, err)
			}
			continue
		case "keda.sh/v1alpha1 TriggerAuthentication":
			continue
		default:
			t.Fatalf("%s: document %d is a %s %q this test does not check; add it", path, i, tm.APIVersion, tm.Kind)
		}
		if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s: document %d (%s): %v", path, i, tm.Kind, err)
		}
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
			for _, m := range ms.configMaps {
				for key, src := range m.Data {
					if strings.HasSuffix(key, ".hcl") {
						configs[m.Name] = checkConfig(t, f+": ConfigMap "+m.Name+" "+key, []byte(src))
					}
				}
			}
			claims := map[string]bool{}
			for _, c := range ms.pvcs {
				claims[c.Name] = true
			}
			qbridges := 0
			deployments := map[string]bool{}
			for _, d := range ms.deployments {
				deployments[d.Name] = true
				for _, c := range checkPod(t, f+": Deployment "+d.Name, &d.Spec.Template.Spec, configs) {
					qbridges++
					checkDaemon(t, c)
					checkScrape(t, c, d.Spec.Template.Annotations)
				}
			}
			for _, j := range ms.jobs {
				where := f + ": Job " + j.Name
				for _, c := range checkPod(t, where, &j.Spec.Template.Spec, configs) {
					qbridges++
					checkMigrateJob(t, j, c, claims)
				}
			}
			for _, s := range ms.scaled {
				if !deployments[s.Spec.ScaleTargetRef.Name] {
					t.Errorf("%s: ScaledObject %s scales %q, not a Deployment of the file", f, s.Metadata.Name, s.Spec.ScaleTargetRef.Name)
				}
				for _, tr := range s.Spec.Triggers {
					if tr.Type == "aws-sqs-queue" && !strings.HasPrefix(tr.Metadata["queueURL"], "https://sqs.") {
						t.Errorf("%s: ScaledObject trigger without an SQS queueURL: %v", f, tr.Metadata)
					}
				}
			}
			if qbridges == 0 {
				t.Errorf("%s: no qbridge container", f)
			}
		})
	}
}

// qbridgeContainer is a qbridge container of a pod with the configuration
// its command line reads.
type qbridgeContainer struct {
	where string
	c     *corev1.Container
	pod   *corev1.PodSpec
	cfg   *config.Config
}

// checkPod checks what every qbridge container of a pod needs, whatever it
// runs, and returns those whose configuration it found.
func checkPod(t *testing.T, where string, pod *corev1.PodSpec, configs map[string]*config.Config) []qbridgeContainer {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: runAsNonRoot is not set", where)
	} else if u := psc.RunAsUser; u != nil && *u != imageUID {
		t.Errorf("%s: runAsUser %d, the image's user is %d", where, *u, imageUID)
	}
	var out []qbridgeContainer
	// qbridge as a native sidecar: an init container that keeps running
	// (restartPolicy Always), which the kubelet stops after the app's
	// containers.
	var cs []*corev1.Container
	sidecar := map[*corev1.Container]bool{}
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs = append(cs, c)
			sidecar[c] = true
		}
	}
	for i := range pod.Containers {
		cs = append(cs, &pod.Containers[i])
	}
	for _, c := range cs {
		if !strings.HasPrefix(c.Image, "qbridge:") {
			continue
		}
		w := where + " container " + c.Name
		// A :latest tag pulls Always: from a registry that has no such
		// image unless it is pushed there (docs/deploy.md).
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s: imagePullPolicy %q, want IfNotPresent", w, c.ImagePullPolicy)
		}
		if len(c.Command) > 0 && c.Command[0] != imageEntrypoint {
			t.Errorf("%s: command %v does not run %s", w, c.Command, imageEntrypoint)
		}
		checkCommandLine(t, w+" args", c.Args)
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not set", w)
		}
		// The configuration path (the last argument) is a mount of a
		// ConfigMap this file defines.
		if len(c.Args) == 0 {
			t.Errorf("%s: no arguments", w)
			continue
		}
		cfgPath := c.Args[len(c.Args)-1]
		var cfg *config.Config
		if v := volumeAt(c, pod, cfgPath); v != nil && v.ConfigMap != nil {
			cfg = configs[v.ConfigMap.Name]
		}
		if cfg == nil {
			t.Errorf("%s: %s reads %s, which is no mounted ConfigMap of the file with a *.hcl key", w, c.Args[0], cfgPath)
			continue
		}
		grace := int64(30) // Kubernetes' default
		if g := pod.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		for _, p := range cfg.Pipelines {
			// Every embedded NATS store is on a writable volume, and the
			// other containers that talk to it (NATS_URL) find its port:
			// without one it listens on a random port.
			for _, a := range []config.Adapter{p.Spec.Source, p.Spec.Sink} {
				if a.Kind == "nats" && a.Config != nil {
					dir := fmt.Sprint(fieldValue(a.Config, "StoreDir"))
					if embedded, _ := fieldValue(a.Config, "Embedded").(bool); embedded {
						if v := volumeAt(c, pod, dir); v == nil || v.EmptyDir == nil {
							t.Errorf("%s: pipeline %s keeps its NATS store in %s, not on an emptyDir volume (the root filesystem is read-only)", w, p.Name, dir)
						}
						port, _ := fieldValue(a.Config, "Port").(int)
						for _, app := range pod.Containers {
							for _, e := range app.Env {
								if e.Name != "NATS_URL" {
									continue
								}
								if !strings.HasSuffix(e.Value, fmt.Sprintf(":%d", port)) {
									t.Errorf("%s: container %s's NATS_URL %s is not pipeline %s's embedded server (port %d; 0 is a random one)", w, app.Name, e.Value, p.Name, port)
								}
								// An ordinary container gets SIGTERM with the
								// app and takes the server away while the
								// app still drains into it.
								if !sidecar[c] {
									t.Errorf("%s: container %s uses pipeline %s's embedded server, and qbridge is not a native sidecar (an init container with restartPolicy: Always), so it stops with the app, not after it", w, app.Name, p.Name)
								}
							}
						}
					}
				}
			}
			// The drain, then the closes of source and sinks: the same
			// bound as an interrupted migration's (checkJob).
			if need := p.Spec.Engine.ShutdownTimeout + 17*time.Second; time.Duration(grace)*time.Second < need {
				t.Errorf("%s: terminationGracePeriodSeconds %d is below pipeline %s's shutdown_timeout %s + 17 s (the closes after the drain)", w, grace, p.Name, p.Spec.Engine.ShutdownTimeout)
			}
		}
		out = append(out, qbridgeContainer{where: w, c: c, pod: pod, cfg: cfg})
	}
	return out
}

// checkScrape checks that a pod that asks Prometheus to scrape it
// (prometheus.io/scrape) has qbridge listen beyond the loopback, on the
// port it names: the sidecar asked for scrapes of a loopback-only port.
func checkScrape(t *testing.T, q qbridgeContainer, annotations map[string]string) {
	t.Helper()
	if annotations["prometheus.io/scrape"] != "true" {
		return
	}
	listen := q.cfg.HTTP.Listen
	if listen == "" {
		listen = monitor.DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Errorf("%s: http.listen %q: %v", q.where, listen, err)
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("%s: the pod asks Prometheus to scrape it, and the configuration listens on %s, which only the pod reaches: set http { listen = \"0.0.0.0:%s\" }", q.where, listen, port)
	}
	if p := annotations["prometheus.io/port"]; p != "" && p != port {
		t.Errorf("%s: prometheus.io/port %s, the configuration listens on %s", q.where, p, listen)
	}
}

// checkDaemon checks a container of a Deployment: it runs the daemon, and
// its ports and probes reach the monitoring endpoint its configuration
// listens on.
func checkDaemon(t *testing.T, q qbridgeContainer) {
	t.Helper()
	w, c, cfg := q.where, q.c, q.cfg
	if c.Args[0] != "run" {
		t.Errorf("%s: args %v do not run the daemon", w, c.Args)
		return
	}
	defaultPort := monitor.DefaultListen[strings.LastIndexByte(monitor.DefaultListen, ':')+1:]
	port := defaultPort
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
	probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
	// The kubelet starts a native sidecar's app containers once the
	// sidecar has started: its startupProbe passed, or, without one, as
	// soon as the process runs, before its embedded servers listen, and
	// the app's first connect fails. readinessProbe gates nothing there,
	// and a tcpSocket probe dials the pod's IP, not the loopback the
	// servers listen on.
	sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	if servers := cfg.Servers(); sidecar && len(servers) > 0 {
		pw, pr := w+" startupProbe", c.StartupProbe
		switch {
		case pr == nil:
			t.Errorf("%s: missing: the app containers start before the embedded server on %s listens; use %s health -started", pw, servers[0].Key, imageEntrypoint)
		case pr.Exec == nil && pr.HTTPGet == nil:
			t.Errorf("%s: not qbridge health -started (the servers listen on the loopback only)", pw)
		default:
			// Each second or two, so the app waits little; for a minute
			// at least, as a JetStream store can take a while to recover.
			period, failures := int32(10), int32(3) // Kubernetes' defaults
			if pr.PeriodSeconds != 0 {
				period = pr.PeriodSeconds
			}
			if pr.FailureThreshold != 0 {
				failures = pr.FailureThreshold
			}
			if period > 2 {
				t.Errorf("%s: periodSeconds %d: the app waits up to that long past the start; want 1 or 2", pw, period)
			}
			if period*failures < 60 {
				t.Errorf("%s: periodSeconds × failureThreshold is %d s, under a minute: a slow start of the store gets the sidecar restarted", pw, period*failures)
			}
		}
	}
	if c.StartupProbe != nil {
		probes["startup"] = c.StartupProbe
	}
	flagOf := map[string]string{"readiness": "-ready", "startup": "-started"}
	for kind, pr := range probes {
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
			for k, flag := range flagOf {
				if slices.Contains(cmd, flag) != (kind == k) {
					t.Errorf("%s: %v asks the wrong endpoint", pw, cmd)
				}
			}
			if port != defaultPort && !slices.Contains(cmd, "-addr") {
				t.Errorf("%s: the configuration listens on %s; the probe needs -addr", pw, cfg.HTTP.Listen)
			}
		case pr.HTTPGet != nil:
			checkProbePath(t, pw, pr.HTTPGet.Path)
			if want := map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": "/startupz"}[kind]; pr.HTTPGet.Path != want {
				t.Errorf("%s: path %s, want %s", pw, pr.HTTPGet.Path, want)
			}
			p := pr.HTTPGet.Port.String()
			if np, ok := named[p]; ok {
				p = np
			}
			if p != port {
				t.Errorf("%s: port %v, the configuration listens on %s", pw, pr.HTTPGet.Port.String(), port)
			}
			if strings.HasPrefix(cfg.HTTP.Listen, "127.") || cfg.HTTP.Listen == "" {
				t.Errorf("%s: kubelet cannot reach an HTTP probe on the loopback (%q); use qbridge health", pw, cfg.HTTP.Listen)
			}
		default:
			t.Errorf("%s: neither exec nor httpGet", pw)
		}
	}
}

// checkMigrateJob checks a container of a Job: it runs qbridge migrate
// without a terminal to confirm on, what it keeps outlives the pod, and the
// Job's failure policy reads migrate's exit codes as docs/migrate.md
// defines them.
func checkMigrateJob(t *testing.T, j *batchv1.Job, q qbridgeContainer, claims map[string]bool) {
	t.Helper()
	w, c := q.where, q.c
	if c.Args[0] != "migrate" {
		t.Errorf("%s: args %v do not run qbridge migrate", w, c.Args)
		return
	}
	dryRun := slices.Contains(c.Args, "-dry-run")
	if !dryRun && !slices.Contains(c.Args, "-yes") {
		t.Errorf("%s: a pod has no terminal to confirm on: without -yes migrate exits %d and does nothing", w, migrate.ExitUsage)
	}
	// After SIGTERM migrate finishes within shutdown_timeout, closes a
	// sink that no longer answers within 15 s and counts for 2 s
	// (docs/migrate.md, Ctrl-C): the kubelet must not kill it before its
	// summary.
	grace := int64(30)
	if g := q.pod.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	for _, p := range q.cfg.Pipelines {
		if need := p.Spec.Engine.ShutdownTimeout + 17*time.Second; time.Duration(grace)*time.Second < need {
			t.Errorf("%s: terminationGracePeriodSeconds %d is below pipeline %s's shutdown_timeout %s + 17 s (sink close and counts after an interrupt)", w, grace, p.Name, p.Spec.Engine.ShutdownTimeout)
		}
	}
	if q.pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q: a podFailurePolicy needs Never", w, q.pod.RestartPolicy)
	}
	// -state and -report must outlive the pod: on a claim of this file.
	for _, flag := range []string{"-state", "-report"} {
		i := slices.Index(c.Args, flag)
		if i < 0 {
			continue
		}
		if i+1 >= len(c.Args)-1 {
			t.Errorf("%s: %s has no value", w, flag)
			continue
		}
		path := c.Args[i+1]
		v := volumeAt(c, q.pod, filepath.Dir(path))
		switch {
		case v == nil:
			t.Errorf("%s: %s %s is on the read-only root filesystem", w, flag, path)
		case v.PersistentVolumeClaim == nil || !claims[v.PersistentVolumeClaim.ClaimName]:
			t.Errorf("%s: %s %s is not on a PersistentVolumeClaim of the file: it would end with the pod", w, flag, path)
		}
	}
	if slices.Contains(c.Args, "-copy") && !slices.Contains(c.Args, "-state") {
		t.Errorf("%s: a copy without -state starts from the beginning in every pod the Job makes", w)
	}
	pfp := j.Spec.PodFailurePolicy
	if pfp == nil {
		t.Errorf("%s: no podFailurePolicy: an exit that needs a person (%d, %d, %d, %d) would be retried", w, migrate.ExitUsage, migrate.ExitDeadLettered, migrate.ExitNotDrained, migrate.ExitNotVerified)
		return
	}
	known := []int32{migrate.ExitFailed, migrate.ExitUsage, migrate.ExitDeadLettered, migrate.ExitNotDrained, migrate.ExitNotVerified, migrate.ExitInterrupted}
	failJob := map[int32]bool{}
	ignoresDisruption := false
	for _, r := range pfp.Rules {
		for _, pc := range r.OnPodConditions {
			if pc.Type == corev1.DisruptionTarget && r.Action == batchv1.PodFailurePolicyActionIgnore {
				ignoresDisruption = true
			}
		}
		oe := r.OnExitCodes
		if oe == nil {
			continue
		}
		if oe.ContainerName == nil || *oe.ContainerName != c.Name {
			t.Errorf("%s: a podFailurePolicy rule on exit codes does not name the container %q", w, c.Name)
		}
		for _, code := range oe.Values {
			if !slices.Contains(known, code) {
				t.Errorf("%s: podFailurePolicy names exit code %d, which qbridge migrate does not use (it uses %v)", w, code, known)
			}
			if r.Action == batchv1.PodFailurePolicyActionFailJob && oe.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
				failJob[code] = true
			}
		}
	}
	for _, code := range []int32{migrate.ExitUsage, migrate.ExitDeadLettered, migrate.ExitNotDrained, migrate.ExitNotVerified} {
		if !failJob[code] {
			t.Errorf("%s: exit %d does not fail the Job: another pod would run again and its summary would no longer say why", w, code)
		}
	}
	if failJob[migrate.ExitFailed] || failJob[migrate.ExitInterrupted] {
		t.Errorf("%s: exits %d (a broker unreachable) and %d (a signal) are worth another pod, not the end of the Job", w, migrate.ExitFailed, migrate.ExitInterrupted)
	}
	if !ignoresDisruption {
		t.Errorf("%s: an eviction (pod condition DisruptionTarget) should not count against backoffLimit: the next pod continues the migration", w)
	}
}

// volumeAt returns the volume of pod mounted in c at dir or above it.
func volumeAt(c *corev1.Container, pod *corev1.PodSpec, dir string) *corev1.Volume {
	for _, vm := range c.VolumeMounts {
		if dir != vm.MountPath && !strings.HasPrefix(dir, vm.MountPath+"/") {
			continue
		}
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == vm.Name {
				return &pod.Volumes[i]
			}
		}
	}
	return nil
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
	if def := defaultShutdownTimeout(t); err != nil || d < def+17*time.Second {
		t.Errorf("TimeoutStopSec=%q: want the default shutdown_timeout %s + 17 s (the closes after the drain) at least", keys["TimeoutStopSec"], def)
	}
	// A configuration that fails at start is not restarted for ever.
	if keys["StartLimitIntervalSec"] == "" || keys["StartLimitBurst"] == "" {
		t.Error("no StartLimitIntervalSec / StartLimitBurst: Restart=on-failure every RestartSec never reaches systemd's default start limit")
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
