// Package sbtestserver starts the project's Service Bus test server
// (e2e/sbserver, Node and rhea) for Go tests: the adapter tests, the SDK
// conformance suite and the end-to-end tests share this one starter. It is
// imported only by tests.
package sbtestserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// InstallCmd installs the server's npm packages.
const InstallCmd = "bash e2e/sbserver/install.sh"

// Server is one running test server, listening on 127.0.0.1.
type Server struct {
	Port     int    // AMQP
	HTTPPort int    // REST, when started with "--http-port"
	HTTP     string // REST endpoint, http://127.0.0.1:HTTPPort
	cmd      *exec.Cmd
	done     chan struct{}
	lifeline io.WriteCloser // the server's stdin, never written: it exits when this closes
}

// Node is the node binary: $QBRIDGE_NODE, else "node" on PATH.
func Node() string {
	if n := os.Getenv("QBRIDGE_NODE"); n != "" {
		return n
	}
	return "node"
}

// Missing says what is missing to run the server (node, or the npm
// packages under root that probes name, e.g.
// "e2e/sbserver/node_modules/rhea/package.json"), or "" when nothing is.
func Missing(root string, probes ...string) string {
	if _, err := exec.LookPath(Node()); err != nil {
		return fmt.Sprintf("node (%s) is not on PATH: the Service Bus test server needs Node >= 20", Node())
	}
	for _, p := range append([]string{"e2e/sbserver/node_modules/rhea/package.json"}, probes...) {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return fmt.Sprintf("the Service Bus test server's npm packages are not installed (%s missing): run `%s` from the repository root", p, InstallCmd)
		}
	}
	return ""
}

// Start writes config (the server's JSON configuration, see docs/sbserver.md)
// to a temporary file and starts root/e2e/sbserver/server.mjs on free ports
// with the extra args (e.g. "--http-port", "0"), sending its log to stderr.
// It returns once the server printed its READY line.
func Start(root string, config any, stderr io.Writer, args ...string) (*Server, error) {
	cfg, err := os.CreateTemp("", "sbserver-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(cfg.Name()) // the server reads it at start
	if err := json.NewEncoder(cfg).Encode(config); err != nil {
		cfg.Close()
		return nil, fmt.Errorf("server configuration: %w", err)
	}
	cfg.Close()
	argv := append([]string{filepath.Join(root, "e2e/sbserver/server.mjs"), "--config", cfg.Name(), "--port", "0", "--verbose", "--exit-with-stdin"}, args...)
	s := &Server{cmd: exec.Command(Node(), argv...), done: make(chan struct{})}
	s.cmd.Stderr = stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Only this process holds the pipe's write end, and the kernel closes
	// it however the process ends: a test binary killed at its -timeout
	// leaves no server behind.
	if s.lifeline, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan error, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() { // read to the end, so the server never blocks on stdout
			rest, ok := strings.CutPrefix(sc.Text(), "READY ")
			if !ok || seen {
				continue
			}
			seen = true
			var info struct {
				Port     int    `json:"port"`
				HTTPPort int    `json:"httpPort"`
				HTTP     string `json:"http"`
			}
			if err := json.Unmarshal([]byte(rest), &info); err != nil {
				ready <- fmt.Errorf("READY line: %w", err)
				return
			}
			s.Port, s.HTTPPort, s.HTTP = info.Port, info.HTTPPort, info.HTTP
			ready <- nil
		}
		if !seen {
			ready <- errors.New("the server exited before its READY line")
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.Stop()
			return nil, err
		}
	case <-time.After(20 * time.Second):
		s.Stop()
		return nil, errors.New("no READY line within 20 s")
	}
	return s, nil
}

// ConnectionString is what the SDKs use for the emulator: plain AMQP on the
// server's port, authenticated with the given shared access key.
func (s *Server) ConnectionString(keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://localhost:%d;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		s.Port, keyName, key)
}

// Stop kills the server (our own child, by PID) and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done         // every read of stdout is over before Wait closes it
	_ = s.cmd.Wait() // closes the lifeline too
}
