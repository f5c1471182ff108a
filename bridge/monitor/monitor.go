// Package monitor serves qbridge's operational HTTP endpoints: /healthz
// (the process is alive), /startupz (it has started: its embedded servers
// accept connections), /readyz (every pipeline that counts for readiness
// runs and its adapters are connected; the body lists each pipeline's state
// and why it is not ready) and /metrics (Prometheus).
package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultListen is loopback-only: metrics and readiness are not for the
// world unless the operator says so.
const DefaultListen = "127.0.0.1:9464"

// readyTimeout bounds the adapters' readiness checks of one request.
const readyTimeout = 5 * time.Second

// Readiness is what /readyz reports.
type Readiness struct {
	// Err is a reason for the whole process (still starting), or nil.
	Err       error
	Pipelines []PipelineReadiness
}

// PipelineReadiness is one pipeline's state.
type PipelineReadiness struct {
	Name string
	// Ignored: the pipeline's outage does not make the process unready
	// (readiness = "ignored", for sidecars).
	Ignored bool
	Err     error // why it is not ready, nil when it is
	// Warnings are shown but do not make the pipeline unready.
	Warnings []string
}

// Ready reports whether the process is ready.
func (r Readiness) Ready() bool {
	if r.Err != nil {
		return false
	}
	for _, p := range r.Pipelines {
		if p.Err != nil && !p.Ignored {
			return false
		}
	}
	return true
}

// write renders the body: "ok" or "not ready", then one line per pipeline.
func (r Readiness) write(w io.Writer) {
	if r.Ready() {
		fmt.Fprintln(w, "ok")
	} else {
		fmt.Fprintln(w, "not ready")
	}
	if r.Err != nil {
		fmt.Fprintln(w, r.Err)
	}
	for _, p := range r.Pipelines {
		state := "ready"
		if p.Err != nil {
			state = "not ready: " + p.Err.Error()
		}
		if p.Ignored {
			state += " (readiness ignored)"
		}
		fmt.Fprintf(w, "pipeline %s: %s\n", p.Name, state)
		for _, warning := range p.Warnings {
			fmt.Fprintf(w, "pipeline %s: warning: %s\n", p.Name, warning)
		}
	}
}

// Startup is what /startupz reports: whether the process has started,
// which is what a Kubernetes startupProbe waits for (a native sidecar's
// app container starts only after it passes).
type Startup struct {
	// Err says why it has not started yet, nil once it has.
	Err error
	// Lines describe what has started (an embedded server and where it
	// listens), for the body.
	Lines []string
}

// write renders the body: "ok" or "not started" and the cause, then the
// lines.
func (s Startup) write(w io.Writer) {
	if s.Err == nil {
		fmt.Fprintln(w, "ok")
	} else {
		fmt.Fprintln(w, "not started")
		fmt.Fprintln(w, s.Err)
	}
	for _, l := range s.Lines {
		fmt.Fprintln(w, l)
	}
}

// Handler returns the endpoints. ready reports the process's readiness,
// started whether it has started.
func Handler(g prometheus.Gatherer, ready func(context.Context) Readiness, started func() Startup) http.Handler {
	mux := http.NewServeMux()
	alive := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	}
	mux.HandleFunc("GET /healthz", alive)
	// /livez is the name Kubernetes' own components give it.
	mux.HandleFunc("GET /livez", alive)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		st := ready(ctx)
		if !st.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		st.write(w)
	})
	mux.HandleFunc("GET /startupz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		st := started()
		if st.Err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		st.write(w)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

// Server is the HTTP server of the endpoints.
type Server struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// Listen binds addr now, so a taken port fails at startup rather than later.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("monitor: listen on %s: %w", addr, err)
	}
	return &Server{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:  ln,
		log: log,
	}, nil
}

// Addr returns the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then shuts down, giving open requests a few
// seconds.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info("monitoring endpoints listening", "addr", s.ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("monitor: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("monitor: shutdown: %w", err)
	}
	return nil
}
