package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

// The "memtest" adapter kind exists only in these tests: sources that hand
// out a few messages and then wait, sinks that accept everything (or block).
type memSourceConfig struct {
	Name     string `hcl:"name"`
	Messages int    `hcl:"messages,optional"`
	Fail     string `hcl:"fail,optional"` // NewSource fails with this error
}

func (c memSourceConfig) Validate() error {
	if c.Name == "" {
		return errors.New("name: required")
	}
	return nil
}

type memSinkConfig struct {
	Block  bool   `hcl:"block,optional"`
	Name   string `hcl:"name,optional"` // for memStats.blocked
	Fail   string `hcl:"fail,optional"` // NewSink fails with this error
	Policy mapping.Policy
}

func (c memSinkConfig) Validate() error { return nil }

// memStats counts opens and closes of sources, and sends blocked in sinks,
// by name.
var memStats = struct {
	sync.Mutex
	opens, closes, blocked map[string]int
	acked                  int
}{opens: map[string]int{}, closes: map[string]int{}, blocked: map[string]int{}}

func memCount(m map[string]int, name string) int {
	memStats.Lock()
	defer memStats.Unlock()
	return m[name]
}

type memSource struct {
	cfg  memSourceConfig
	mu   sync.Mutex
	left int
}

func (s *memSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	s.mu.Lock()
	if s.left > 0 {
		s.left--
		s.mu.Unlock()
		return []driver.Delivery{memDelivery{&mapping.Message{ID: "m"}}}, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *memSource) Close(context.Context) error {
	memStats.Lock()
	memStats.closes[s.cfg.Name]++
	memStats.Unlock()
	return nil
}

type memDelivery struct{ m *mapping.Message }

func (d memDelivery) Message() *mapping.Message { return d.m }
func (d memDelivery) Ack(context.Context) error {
	memStats.Lock()
	memStats.acked++
	memStats.Unlock()
	return nil
}
func (d memDelivery) Nack(context.Context, time.Duration) error   { return nil }
func (d memDelivery) Extend(context.Context, time.Duration) error { return nil }

type memSink struct{ cfg memSinkConfig }

func (s memSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := make([]error, len(msgs))
	if s.cfg.Block {
		memStats.Lock()
		memStats.blocked[s.cfg.Name]++
		memStats.Unlock()
		<-ctx.Done()
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
	return errs
}
func (s memSink) Close(context.Context) error { return nil }

// memtest2 is the same adapter under a second kind, for reloads that
// change a pipeline's adapter kind.
func init() {
	for _, kind := range []string{"memtest", "memtest2"} {
		registerMemKind(kind)
	}
}

func registerMemKind(kind string) {
	config.Register(config.AdapterKind[memSourceConfig, memSinkConfig]{
		Name: kind,
		NewSource: func(_ context.Context, c memSourceConfig, _ *slog.Logger) (driver.Source, error) {
			memStats.Lock()
			memStats.opens[c.Name]++
			memStats.Unlock()
			if c.Fail != "" {
				return nil, errors.New(c.Fail)
			}
			return &memSource{cfg: c, left: c.Messages}, nil
		},
		NewSink: func(_ context.Context, c memSinkConfig, _ func(field, reason string), _ *slog.Logger) (driver.Sink, error) {
			if c.Fail != "" {
				return nil, errors.New(c.Fail)
			}
			return memSink{c}, nil
		},
		SinkMapping: func(c *memSinkConfig, o mapping.Options) { c.Policy = o.Policy },
	})
}

// runningDaemon is a daemon started by a test.
type runningDaemon struct {
	sig  chan os.Signal
	addr chan net.Addr
	code chan int
	log  *testlog.Buffer
}

// baseURL waits for the daemon's monitoring endpoint and returns its
// http:// address, or fails the test with the log if the daemon exited.
func (r *runningDaemon) baseURL(t *testing.T) string {
	t.Helper()
	select {
	case a := <-r.addr:
		return "http://" + a.String()
	case c := <-r.code:
		t.Fatalf("daemon exited %d; log:\n%s", c, r.log)
		return ""
	}
}

func startDaemon(t *testing.T, path string) *runningDaemon {
	t.Helper()
	return startDaemonWith(t, path, logFlags{})
}

func startDaemonWith(t *testing.T, path string, lf logFlags) *runningDaemon {
	t.Helper()
	r := &runningDaemon{sig: make(chan os.Signal, 4), addr: make(chan net.Addr, 1), code: make(chan int, 1), log: &testlog.Buffer{}}
	// As the process has them: SIGHUP to the daemon, stop signals to a
	// signalWatcher (which ends nothing itself: the daemon takes the second).
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &signalWatcher{cancel: cancel, exit: func(code int) { t.Errorf("the watcher exited %d", code) }}
	ctx = withSignalWatcher(ctx, w)
	hup, stops := make(chan os.Signal, 4), make(chan os.Signal, 4)
	d := &daemon{
		path:        path,
		std:         stdio{In: strings.NewReader(""), Out: io.Discard, Err: r.log},
		signals:     hup,
		second:      takeSecondSignal(ctx),
		listening:   func(a net.Addr) { r.addr <- a },
		logOverride: lf,
	}
	go w.watch(stops)
	go func() {
		defer close(stops) // ends the watcher
		for s := range r.sig {
			if s == syscall.SIGHUP {
				hup <- s
			} else {
				stops <- s
			}
		}
	}()
	t.Cleanup(func() { close(r.sig); cancel(nil) })
	go func() { r.code <- d.run(ctx) }()
	return r
}

func (r *runningDaemon) wait(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon did not exit; log:\n%s", r.log)
		return -1
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond; the deadline is for a loaded CI machine, not
// what it normally takes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var runSeq atomic.Int64

// uniq makes source names unique per test run (-count=N shares memStats).
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, runSeq.Add(1)) }

func memPipeline(name, source string) string {
	return fmt.Sprintf("pipeline %q {\n  source \"memtest\" { name = %q }\n  sink \"memtest\" {}\n  shutdown_timeout = \"2s\"\n}\n", name, source)
}

func TestDaemonRunReloadStop(t *testing.T) {
	dir := t.TempDir()
	ra, rb1, rb2, rc := uniq("ra"), uniq("rb1"), uniq("rb2"), uniq("rc")
	header := "http { listen = \"127.0.0.1:0\" }\nlog { format = \"json\" }\n"
	path := writeFile(t, dir, "q.hcl", header+memPipeline("a", ra)+memPipeline("b", rb1))
	d := startDaemon(t, path)
	base := d.baseURL(t)
	eventually(t, "ready", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("healthz = %d %q", code, body)
	}
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, `qbridge_pipeline_running{pipeline="a"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics lack the pipeline or Go metrics:\n%s", body)
	}

	// a unchanged, b changed, c new.
	writeFile(t, dir, "q.hcl", header+memPipeline("a", ra)+memPipeline("b", rb2)+memPipeline("c", rc))
	d.sig <- syscall.SIGHUP
	eventually(t, "b restarted and c started", func() bool {
		return memCount(memStats.closes, rb1) == 1 && memCount(memStats.opens, rb2) == 1 && memCount(memStats.opens, rc) == 1
	})
	if n := memCount(memStats.opens, ra); n != 1 {
		t.Errorf("unchanged pipeline a opened %d times", n)
	}
	eventually(t, "ready after reload", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "qbridge_config_last_reload_successful 1") {
		t.Errorf("after a good reload, the metrics lack qbridge_config_last_reload_successful 1")
	}

	// An invalid configuration keeps the running one.
	writeFile(t, dir, "q.hcl", header+memPipeline("a", ra)+"pipeline \"d\" { shutdown_timeout = \"soon\" }\n")
	d.sig <- syscall.SIGHUP
	eventually(t, "reload failure logged", func() bool {
		return strings.Contains(d.log.String(), "configuration reload failed; the running configuration stays")
	})
	if !strings.Contains(d.log.String(), `q.hcl:8:35: Invalid duration`) {
		t.Errorf("the reload's diagnostics are not logged with positions:\n%s", d.log)
	}
	if memCount(memStats.closes, rb2) != 0 || memCount(memStats.closes, rc) != 0 {
		t.Error("an invalid reload stopped pipelines")
	}
	// Alerting sees it too: it was only an ERROR line.
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "qbridge_config_last_reload_successful 0") || !strings.Contains(body, "qbridge_config_last_reload_success_timestamp_seconds ") {
		t.Errorf("after a failed reload, the metrics lack qbridge_config_last_reload_successful 0 or the timestamp")
	}

	d.sig <- syscall.SIGTERM
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, d.log)
	}
	for _, n := range []string{ra, rb2, rc} {
		if memCount(memStats.closes, n) != 1 {
			t.Errorf("source %s not closed", n)
		}
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("monitoring endpoints still up after exit")
	}
}

func TestDaemonSecondSignalCutsTheDrain(t *testing.T) {
	dir := t.TempDir()
	stuck := uniq("stuck")
	src := "http { listen = \"127.0.0.1:0\" }\n" +
		"pipeline \"stuck\" {\n  source \"memtest\" {\n    name = \"" + stuck + "\"\n    messages = 1\n  }\n  sink \"memtest\" {\n    block = true\n    name = \"" + stuck + "\"\n  }\n  shutdown_timeout = \"2m\"\n}\n"
	d := startDaemon(t, writeFile(t, dir, "q.hcl", src))
	<-d.addr
	eventually(t, "the message blocked in the sink", func() bool { return memCount(memStats.blocked, stuck) == 1 })
	d.sig <- syscall.SIGTERM
	eventually(t, "the drain began", func() bool { return strings.Contains(d.log.String(), "draining pipelines") })
	began := time.Now()
	d.sig <- os.Interrupt
	if code := d.wait(t); code != 1 {
		t.Errorf("exit %d after a second signal, want 1", code)
	}
	if time.Since(began) > 30*time.Second { // far under the 2m drain it cuts
		t.Errorf("the second signal took %v to act", time.Since(began))
	}
}

func TestRunFailsToStart(t *testing.T) {
	dir := t.TempDir()
	taken := uniq("taken")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tests := []struct {
		name   string
		args   func() []string
		code   int
		stderr string
	}{
		{"no config", func() []string { return nil }, 2, "which configuration?"},
		{"extra args", func() []string { return []string{"-config", "x", "y"} }, 2, `not also "y"`},
		{"two positional paths", func() []string { return []string{"x", "y"} }, 2, `not also "y"`},
		{"bad log format flag", func() []string { return []string{"-log-format", "xml", "x"} }, 2, `-log-format (or QBRIDGE_LOG_FORMAT) "xml"`},
		{"bad log level flag", func() []string { return []string{"-log-level", "loud", "x"} }, 2, `-log-level (or QBRIDGE_LOG_LEVEL) "loud"`},
		{"invalid config as argument", func() []string {
			return []string{writeFile(t, dir, "bad2.hcl", "pipeline \"p\" {}\n")}
		}, 1, "Error: Missing source block"},
		{"invalid config", func() []string {
			return []string{"-config", writeFile(t, dir, "bad.hcl", "pipeline \"p\" {}\n")}
		}, 1, "Error: Missing source block"},
		{"port taken", func() []string {
			return []string{"-config", writeFile(t, dir, "taken.hcl", fmt.Sprintf("http { listen = %q }\n", ln.Addr().String())+memPipeline("p", taken))}
		}, 1, "cannot start the monitoring endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, append([]string{"run"}, tt.args()...)...)
			if code != tt.code || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d containing %q", code, errOut, tt.code, tt.stderr)
			}
		})
	}
	if memCount(memStats.opens, taken) != 0 {
		t.Error("pipelines started although the daemon could not")
	}
}

// A pipeline whose source cannot connect: /readyz names it with the last
// connection error; readiness = "ignored" keeps the process ready, and a
// reload to "required" makes it unready without restarting anything.
func TestDaemonReadinessPerPipeline(t *testing.T) {
	dir := t.TempDir()
	up, down := uniq("up"), uniq("down")
	header := "http { listen = \"127.0.0.1:0\" }\n"
	downPipeline := func(readiness string) string {
		return fmt.Sprintf("pipeline \"down\" {\n  readiness = %q\n  source \"memtest\" {\n    name = %q\n    fail = \"dial tcp 127.0.0.1:5672: connection refused\"\n  }\n  sink \"memtest\" {}\n  shutdown_timeout = \"2s\"\n}\n", readiness, down)
	}
	path := writeFile(t, dir, "r.hcl", header+memPipeline("up", up)+downPipeline("ignored"))
	lf := logFlags{format: "json", level: "debug"}
	if err := lf.resolve(); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, path, lf)
	base := d.baseURL(t)
	want := "pipeline down: not ready: not running (opening adapters or restarting its source): last error: open memtest source: dial tcp 127.0.0.1:5672: connection refused (readiness ignored)\n"
	eventually(t, "the down pipeline's cause in /readyz", func() bool {
		code, body := get(t, base+"/readyz")
		return code == 200 && strings.Contains(body, "pipeline up: ready\n") && strings.Contains(body, want)
	})
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, `qbridge_build_info{go_version="`+runtime.Version()+`",version="`+buildVersion()+`"} 1`) ||
		!strings.Contains(body, `qbridge_oldest_unsettled_age_seconds{pipeline="up"} 0`) ||
		!strings.Contains(body, `qbridge_pipeline_ready{pipeline="up"} 1`) || !strings.Contains(body, `qbridge_pipeline_ready{pipeline="down"} 0`) {
		t.Errorf("metrics lack qbridge_build_info, the oldest unsettled age or each pipeline's readiness:\n%s", body)
	}
	if !strings.Contains(d.log.String(), `"msg":"connected"`) || !strings.Contains(d.log.String(), `"role":"source"`) {
		t.Errorf("no JSON \"connected\" line (the -log-format flag over the file's text default):\n%s", d.log)
	}

	writeFile(t, dir, "r.hcl", header+memPipeline("up", up)+downPipeline("required"))
	d.sig <- syscall.SIGHUP
	eventually(t, "/readyz 503 once the pipeline is required", func() bool {
		code, body := get(t, base+"/readyz")
		return code == 503 && strings.HasPrefix(body, "not ready\n") && strings.Contains(body, "connection refused\n")
	})
	if n := memCount(memStats.opens, up); n != 1 {
		t.Errorf("changing readiness restarted a pipeline: %d opens", n)
	}
	d.sig <- syscall.SIGTERM
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, d.log)
	}
}

// JSON logs write durations as text logs do, with their unit: slog's JSON
// handler wrote bare nanoseconds ("retry_in":1077075711).
func TestJSONLogDurationsHaveUnits(t *testing.T) {
	var buf bytes.Buffer
	newLogger(&buf, "json", slog.LevelInfo).Info("x", "retry_in", 1077*time.Millisecond)
	if !strings.Contains(buf.String(), `"retry_in":"1.077s"`) {
		t.Fatalf("got %s", buf.String())
	}
}

// With JSON logs (the systemd unit's -log-format json, the manifests' log
// block) every line the daemon writes is a JSON object: the configuration's
// diagnostics at start were the HCL text with its source snippets, several
// lines of it among the JSON, where a reload logs them as lines.
func TestDaemonJSONLogsDiagnosticsAtStart(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, config string
		lf           logFlags
		code         int
		want         string // a message of a line
	}{
		{"warning, -log-format json", "http { listen = \"127.0.0.1:0\" }\n", logFlags{format: "json"}, 0, "configuration problem"},
		{"warning, log block", "log { format = \"json\" }\nhttp { listen = \"127.0.0.1:0\" }\n", logFlags{}, 0, "configuration problem"},
		{"error", "pipeline \"p\" {}\n", logFlags{format: "json"}, 1, "the configuration has errors; nothing was started"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := startDaemonWith(t, writeFile(t, dir, uniq("c")+".hcl", tt.config), tt.lf)
			if tt.code == 0 {
				select {
				case <-r.addr:
				case c := <-r.code:
					t.Fatalf("exit %d; log:\n%s", c, r.log)
				}
				r.sig <- syscall.SIGTERM
			}
			if code := r.wait(t); code != tt.code {
				t.Fatalf("exit %d, want %d; log:\n%s", code, tt.code, r.log)
			}
			found := false
			for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
				var entry struct{ Msg, Diagnostic string }
				if err := json.Unmarshal([]byte(line), &entry); err != nil {
					t.Fatalf("not a JSON line: %q; log:\n%s", line, r.log)
				}
				if entry.Msg == tt.want {
					found = true
				}
			}
			if !found {
				t.Errorf("no %q line; log:\n%s", tt.want, r.log)
			}
		})
	}
}

// TestDaemonReloadRetiresSeries: after a reload, /metrics has no series of
// a pipeline it removed nor of the sink kind a changed pipeline left (an
// alert on qbridge_pipeline_ready == 0 or a dashboard by adapter saw
// ghosts), and an unchanged pipeline's counters keep their values.
func TestDaemonReloadRetiresSeries(t *testing.T) {
	dir := t.TempDir()
	kept, changed, removed := uniq("kept"), uniq("changed"), uniq("removed")
	pipeline := func(name, source string, messages int, sink string) string {
		return fmt.Sprintf("pipeline %q {\n  source \"memtest\" {\n    name = %q\n    messages = %d\n  }\n  sink %q {}\n  shutdown_timeout = \"2s\"\n}\n", name, source, messages, sink)
	}
	header := "http { listen = \"127.0.0.1:0\" }\nlog { format = \"json\" }\n"
	keptPipeline := pipeline("kept", kept, 1, "memtest")
	path := writeFile(t, dir, "m.hcl", header+keptPipeline+pipeline("changed", changed, 1, "memtest")+pipeline("removed", removed, 1, "memtest"))
	d := startDaemon(t, path)
	base := d.baseURL(t)
	sent := func(pipeline, adapter string) string {
		return `qbridge_messages_sent_total{adapter="` + adapter + `",pipeline="` + pipeline + `"} `
	}
	eventually(t, "each pipeline sent its message", func() bool {
		_, body := get(t, base+"/metrics")
		return strings.Contains(body, sent("kept", "memtest")+"1\n") && strings.Contains(body, sent("changed", "memtest")+"1\n") &&
			strings.Contains(body, sent("removed", "memtest")+"1\n") && strings.Contains(body, `qbridge_pipeline_ready{pipeline="removed"} 1`)
	})

	// The sink of "changed" is now another kind (its source sends no more).
	writeFile(t, dir, "m.hcl", header+keptPipeline+pipeline("changed", changed, 0, "memtest2"))
	d.sig <- syscall.SIGHUP
	eventually(t, "the reload applied", func() bool { return strings.Contains(d.log.String(), `"msg":"configuration reloaded"`) })
	_, body := get(t, base+"/metrics")
	for line := range strings.Lines(body) {
		if strings.Contains(line, `pipeline="removed"`) {
			t.Errorf("the removed pipeline's series is still on /metrics: %s", line)
		}
		if strings.Contains(line, `adapter="memtest",pipeline="changed"`) &&
			!strings.Contains(line, "_received_total") && !strings.Contains(line, "_acked_total") &&
			!strings.Contains(line, "_nacked_total") && !strings.Contains(line, "_source_restarts_total") {
			t.Errorf("the changed pipeline's old sink kind is still on /metrics: %s", line)
		}
	}
	for _, want := range []string{
		sent("kept", "memtest") + "1\n",
		`qbridge_messages_received_total{adapter="memtest",pipeline="kept"} 1` + "\n",
		sent("changed", "memtest2") + "0\n",
		// Its source kept its kind: the count goes on.
		`qbridge_messages_received_total{adapter="memtest",pipeline="changed"} 1` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("after the reload, /metrics lacks %q:\n%s", want, body)
		}
	}

	d.sig <- syscall.SIGTERM
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, d.log)
	}
}
