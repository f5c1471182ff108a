package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/qbridge/qbridge/bridge/monitor"
)

func init() {
	register("health", command{
		Summary: "ask a running daemon's /healthz, /startupz or /readyz (for exec probes)",
		Run:     runHealth,
	})
}

// maxHealthBody bounds what is echoed of the endpoint's answer.
const maxHealthBody = 64 << 10

// runHealth asks the local monitoring endpoint, so that Kubernetes exec
// probes work while http.listen stays on loopback: exit 0 when it answers
// 200, 1 otherwise, with the answer's body (the causes) on stdout.
func runHealth(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	addr := fs.String("addr", monitor.DefaultListen, "the daemon's http.listen address")
	ready := fs.Bool("ready", false, "ask /readyz (are the pipelines connected) instead of /healthz (is the process alive)")
	started := fs.Bool("started", false, "ask /startupz (has it started: its embedded servers accept connections) instead of /healthz")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprint(std.Err, `usage: qbridge health [-addr HOST:PORT] [-ready | -started] [-timeout D]

Asks a running "qbridge run" for /healthz (or /readyz with -ready, or
/startupz with -started) and exits 0 if it answers 200 OK, 1 otherwise;
the answer (for /readyz, each pipeline's state and the cause of not-ready;
for /startupz, each embedded server and what it waits for) goes to stdout.
Meant for exec probes, which run inside the container and so reach the
loopback default of http.listen. -started is for a startupProbe: it
passes once the pipelines are set up and every embedded server the
configuration starts accepts connections, whether or not the brokers on
the pipelines' other side answer.

Example:
  qbridge health -ready -addr 127.0.0.1:9464
  qbridge health -started

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(std.Err, "qbridge health: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	path := "/healthz"
	switch {
	case *ready && *started:
		fmt.Fprintln(std.Err, "qbridge health: -ready or -started, not both")
		return 2
	case *ready:
		path = "/readyz"
	case *started:
		path = "/startupz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	url := "http://" + *addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(std.Err, "qbridge health: -addr %q: %v\n", *addr, err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(std.Err, "qbridge health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	if err != nil {
		fmt.Fprintf(std.Err, "qbridge health: reading %s: %v\n", url, err)
		return 1
	}
	fmt.Fprint(std.Out, string(body))
	if !strings.HasSuffix(string(body), "\n") && len(body) > 0 {
		fmt.Fprintln(std.Out)
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(std.Err, "qbridge health: %s answered %s\n", url, resp.Status)
		return 1
	}
	return 0
}
