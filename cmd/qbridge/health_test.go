package main

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qbridge/qbridge/bridge/monitor"
)

func TestHealth(t *testing.T) {
	var mu sync.Mutex
	var state monitor.Readiness
	var startup monitor.Startup
	srv := httptest.NewServer(monitor.Handler(prometheus.NewRegistry(), func(context.Context) monitor.Readiness {
		mu.Lock()
		defer mu.Unlock()
		return state
	}, func() monitor.Startup {
		mu.Lock()
		defer mu.Unlock()
		return startup
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	// A port nothing listens on: bound, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	down := errors.New(`not running (opening adapters or restarting its source): last error: connection refused`)

	notListening := errors.New("embedded server on store_dir /s (port 4222, no credentials): not listening yet: starting")
	tests := []struct {
		name    string
		state   monitor.Readiness
		startup monitor.Startup
		args    []string
		code    int
		stdout  string
		stderr  string
	}{
		{"alive", monitor.Readiness{}, monitor.Startup{}, []string{"-addr", addr}, 0, "ok\n", ""},
		{"alive while not ready", monitor.Readiness{Err: errors.New("starting")}, monitor.Startup{}, []string{"-addr", addr}, 0, "ok\n", ""},
		{"ready", monitor.Readiness{Pipelines: []monitor.PipelineReadiness{{Name: "a"}}}, monitor.Startup{}, []string{"-ready", "-addr", addr}, 0, "pipeline a: ready\n", ""},
		{"not ready names the cause", monitor.Readiness{Pipelines: []monitor.PipelineReadiness{{Name: "a", Err: down}}}, monitor.Startup{}, []string{"-ready", "-addr", addr}, 1,
			"pipeline a: not ready: " + down.Error(), "503 Service Unavailable"},
		{"started names the embedded servers", monitor.Readiness{Err: errors.New("x")}, monitor.Startup{Lines: []string{"embedded server on store_dir /s: listening on nats://127.0.0.1:4222"}},
			[]string{"-started", "-addr", addr}, 0, "ok\nembedded server on store_dir /s: listening on nats://127.0.0.1:4222\n", ""},
		{"not started names what it waits for", monitor.Readiness{}, monitor.Startup{Err: notListening}, []string{"-started", "-addr", addr}, 1,
			"not started\n" + notListening.Error(), "503 Service Unavailable"},
		{"-ready and -started", monitor.Readiness{}, monitor.Startup{}, []string{"-ready", "-started", "-addr", addr}, 2, "", "not both"},
		{"nothing listening", monitor.Readiness{}, monitor.Startup{}, []string{"-addr", closed}, 1, "", "connection refused"},
		{"stray argument", monitor.Readiness{}, monitor.Startup{}, []string{"-addr", addr, "x"}, 2, "", `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			state, startup = tt.state, tt.startup
			mu.Unlock()
			code, out, errOut := runCmd(t, append([]string{"health"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("qbridge health %v = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}
