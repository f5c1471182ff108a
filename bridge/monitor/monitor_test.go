package monitor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "qbridge_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	var state Readiness
	var startup Startup
	h := Handler(reg, func(context.Context) Readiness { return state }, func() Startup { return startup })
	down := errors.New(`not running (opening adapters or restarting its source): last error: dial tcp 127.0.0.1:5672: connection refused`)

	tests := []struct {
		name, path string
		state      Readiness
		code       int
		body       string
	}{
		{"healthz", "/healthz", Readiness{}, 200, "ok"},
		{"healthz ignores readiness", "/healthz", Readiness{Err: errors.New("x")}, 200, "ok"},
		{"livez, as Kubernetes names it", "/livez", Readiness{Err: errors.New("x")}, 200, "ok"},
		{"ready", "/readyz", Readiness{Pipelines: []PipelineReadiness{{Name: "a"}}}, 200, "ok\npipeline a: ready\n"},
		{"starting", "/readyz", Readiness{Err: errors.New("starting")}, 503, "not ready\nstarting\n"},
		{"not ready with the cause", "/readyz", Readiness{Pipelines: []PipelineReadiness{{Name: "a", Err: down}, {Name: "b"}}}, 503,
			"not ready\npipeline a: not ready: " + down.Error() + "\npipeline b: ready\n"},
		{"ignored outage keeps the process ready", "/readyz", Readiness{Pipelines: []PipelineReadiness{{Name: "a", Err: down, Ignored: true}, {Name: "b"}}}, 200,
			"ok\npipeline a: not ready: " + down.Error() + " (readiness ignored)\npipeline b: ready\n"},
		{"required outage among ignored ones", "/readyz", Readiness{Pipelines: []PipelineReadiness{{Name: "a", Err: down, Ignored: true}, {Name: "b", Err: down}}}, 503, "not ready\n"},
		{"warnings are shown and keep the pipeline ready", "/readyz", Readiness{Pipelines: []PipelineReadiness{{Name: "a", Warnings: []string{"the source dropped 3 messages"}}}}, 200,
			"ok\npipeline a: ready\npipeline a: warning: the source dropped 3 messages\n"},
		{"metrics", "/metrics", Readiness{}, 200, "qbridge_test_total 3"},
		{"unknown", "/nope", Readiness{}, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state = tt.state
			startup = Startup{Err: errors.New("starting")}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}

// /startupz answers for the startupProbe: 503 with the cause until the
// process has started, whatever /readyz says; 200 after, with what runs.
func TestHandlerStartupz(t *testing.T) {
	var st Startup
	h := Handler(prometheus.NewRegistry(), func(context.Context) Readiness { return Readiness{Err: errors.New("x")} }, func() Startup { return st })
	tests := []struct {
		name  string
		state Startup
		code  int
		body  string
	}{
		{"not started", Startup{Err: errors.New("embedded nats-server (store_dir /s): not listening yet: in use"), Lines: []string{"a"}}, 503,
			"not started\nembedded nats-server (store_dir /s): not listening yet: in use\na\n"},
		{"started, whatever /readyz says", Startup{Lines: []string{"embedded nats-server (store_dir /s): listening on nats://127.0.0.1:4222"}}, 200,
			"ok\nembedded nats-server (store_dir /s): listening on nats://127.0.0.1:4222\n"},
		{"started with no servers", Startup{}, 200, "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st = tt.state
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/startupz", nil))
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("GET /startupz = %d %q, want %d %q", rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}

func TestServer(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Handler(prometheus.NewRegistry(), func(context.Context) Readiness { return Readiness{} }, func() Startup { return Startup{} }), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := http.Get("http://" + s.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "ok" {
		t.Errorf("healthz = %d %q", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestListenTaken(t *testing.T) {
	s, err := Listen("127.0.0.1:0", http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	if _, err := Listen(s.Addr().String(), http.NotFoundHandler(), nil); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("second Listen: %v", err)
	}
}
