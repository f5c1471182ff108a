// Package sbconformance holds the official Azure Service Bus SDKs
// (azservicebus for Go, @azure/service-bus for JavaScript) against qbridge's
// Service Bus test server (e2e/sbserver), asserting the documented behaviour
// of docs/wire-servicebus.md.
package sbconformance

import (
	"fmt"
	"github.com/qbridge/qbridge/internal/sbtestserver"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

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
	if msg := sbtestserver.Missing(repoRoot, "e2e/sbconformance/js/node_modules/@azure/service-bus/package.json"); msg != "" {
		if os.Getenv("QBRIDGE_E2E_REQUIRED") != "" {
			fmt.Fprintln(os.Stderr, "sbconformance: "+msg)
			return 1
		}
		skipReason = msg
		return m.Run()
	}
	var err error
	if serverLog, err = os.CreateTemp("", "sbserver-*.log"); err != nil {
		fmt.Fprintln(os.Stderr, "sbconformance:", err)
		return 1
	}
	defer os.Remove(serverLog.Name())
	srv, err := sbtestserver.Start(repoRoot, entityConfig(), serverLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbconformance: starting the server:", err)
		return 1
	}
	serverPort, httpPort = srv.Port, srv.HTTPPort
	code := m.Run()
	srv.Stop()
	if code != 0 {
		if b, err := os.ReadFile(serverLog.Name()); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 200 {
				lines = lines[len(lines)-200:]
			}
			fmt.Fprintf(os.Stderr, "---- sbserver log (last %d lines) ----\n%s\n", len(lines), strings.Join(lines, "\n"))
		}
	}
	return code
}
