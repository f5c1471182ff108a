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
	var notReady error
	h := Handler(reg, func(context.Context) error { return notReady })

	tests := []struct {
		name, path string
		notReady   error
		code       int
		body       string
	}{
		{"healthz", "/healthz", nil, 200, "ok"},
		{"healthz ignores readiness", "/healthz", errors.New("x"), 200, "ok"},
		{"ready", "/readyz", nil, 200, "ok"},
		{"not ready", "/readyz", errors.New(`pipeline "a" is not running`), 503, `pipeline "a" is not running`},
		{"metrics", "/metrics", nil, 200, "qbridge_test_total 3"},
		{"unknown", "/nope", nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notReady = tt.notReady
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}

func TestServer(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Handler(prometheus.NewRegistry(), func(context.Context) error { return nil }), slog.New(slog.DiscardHandler))
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
