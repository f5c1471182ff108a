// Package sbconformance holds the official Azure Service Bus SDKs
// (azservicebus for Go, @azure/service-bus for JavaScript) against qbridge's
// Service Bus test server (e2e/sbserver), asserting the documented behaviour
// of shared/spec/servicebus-wire.md.
package sbconformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// installCmd is what makes the server's (and the JS SDK's) pinned npm
// packages present.
const installCmd = "bash e2e/sbserver/install.sh"

const (
	keyName = "RootManageSharedAccessKey"
	keyVal  = "qbridge-conformance-key-0123456789abcdef="
)

var (
	serverPort int
	httpPort   int
	skipReason string
	serverLog  *os.File
	repoRoot   string
)

func nodeBin() string {
	if n := os.Getenv("QBRIDGE_NODE"); n != "" {
		return n
	}
	return "node"
}

// connStr is the connection string the SDKs use for the emulator: plain
// AMQP (no TLS) on the given port.
func connStr(key string) string {
	return fmt.Sprintf("Endpoint=sb://localhost:%d;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		serverPort, keyName, key)
}

func requireServer(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if _, err := exec.LookPath(nodeBin()); err != nil {
		msg := fmt.Sprintf("node (%s) is not on PATH: the Service Bus test server needs Node >= 20", nodeBin())
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			fmt.Fprintln(os.Stderr, "sbconformance: "+msg)
			return 1
		}
		skipReason = msg
		return m.Run()
	}
	for _, probe := range []string{"e2e/sbserver/node_modules/rhea/package.json", "e2e/sbconformance/js/node_modules/@azure/service-bus/package.json"} {
		if _, err := os.Stat(filepath.Join(repoRoot, probe)); err != nil {
			msg := fmt.Sprintf("Service Bus test server packages are not installed (%s missing): run `%s` from the repository root", probe, installCmd)
			if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
				fmt.Fprintln(os.Stderr, "sbconformance: "+msg)
				return 1
			}
			skipReason = msg
			return m.Run()
		}
	}
	cfgPath, err := writeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbconformance:", err)
		return 1
	}
	defer os.Remove(cfgPath)
	stop, err := startServer(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbconformance: starting the server:", err)
		return 1
	}
	code := m.Run()
	stop()
	if code != 0 && serverLog != nil {
		if b, err := os.ReadFile(serverLog.Name()); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 200 {
				lines = lines[len(lines)-200:]
			}
			fmt.Fprintf(os.Stderr, "---- sbserver log (last %d lines) ----\n%s\n", len(lines), strings.Join(lines, "\n"))
		}
	}
	if serverLog != nil {
		os.Remove(serverLog.Name())
	}
	return code
}

func startServer(cfgPath string) (func(), error) {
	var err error
	serverLog, err = os.CreateTemp("", "sbserver-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(nodeBin(), filepath.Join(repoRoot, "e2e/sbserver/server.mjs"), "--config", cfgPath, "--port", "0", "--verbose")
	cmd.Stderr = serverLog
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		_ = cmd.Process.Kill() // our own child, by PID
		_ = cmd.Wait()
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "READY "); ok {
				var info struct {
					Port     int `json:"port"`
					HTTPPort int `json:"httpPort"`
				}
				if err := json.Unmarshal([]byte(rest), &info); err != nil {
					ready <- err
					return
				}
				serverPort, httpPort = info.Port, info.HTTPPort
				ready <- nil
				continue
			}
		}
		ready <- fmt.Errorf("server exited before READY")
	}()
	select {
	case err := <-ready:
		if err != nil {
			stop()
			return nil, err
		}
	case <-time.After(15 * time.Second):
		stop()
		return nil, fmt.Errorf("no READY line within 15 s")
	}
	return stop, nil
}
