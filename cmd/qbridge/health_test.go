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
	srv := httptest.NewServer(monitor.Handler(prometheus.NewRegistry(), func(context.Context) monitor.Readiness {
		mu.Lock()
		defer mu.Unlock()
		return state
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

	tests := []struct {
		name   string
		state  monitor.Readiness
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"alive", monitor.Readiness{}, []string{"-addr", addr}, 0, "ok\n", ""},
		{"alive while not ready", monitor.Readiness{Err: errors.New("starting")}, []string{"-addr", addr}, 0, "ok\n", ""},
		{"ready", monitor.Readiness{Pipelines: []monitor.PipelineReadiness{{Name: "a"}}}, []string{"-ready", "-addr", addr}, 0, "pipeline a: ready\n", ""},
		{"not ready names the cause", monitor.Readiness{Pipelines: []monitor.PipelineReadiness{{Name: "a", Err: down}}}, []string{"-ready", "-addr", addr}, 1,
			"pipeline a: not ready: " + down.Error(), "503 Service Unavailable"},
		{"nothing listening", monitor.Readiness{}, []string{"-addr", closed}, 1, "", "connection refused"},
		{"stray argument", monitor.Readiness{}, []string{"-addr", addr, "x"}, 2, "", `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			state = tt.state
			mu.Unlock()
			code, out, errOut := runCmd(t, append([]string{"health"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("qbridge health %v = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q", tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}
