// Package testenv lets a package whose tests need a broker say, once and
// visibly, that they are about to skip for lack of one.
//
// go test hides all output of a package that passes, so a bare
// `go test ./adapters/amqp/` printed `ok` while most of its tests skipped.
// Missing writes its line to the terminal when there is one (and to stderr
// otherwise), and with QBRIDGE_E2E_REQUIRED set the package fails instead,
// as CI wants. Require applies the same rule to one test.
//
// SharedRabbitMQ and RabbitMQForRestart give a test one of the two RabbitMQ
// nodes of e2e/brokers/up.sh, and RabbitMQ.Ctl runs rabbitmqctl on it.
package testenv

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// RequiredVar makes a missing environment an error rather than a skip.
const RequiredVar = "QBRIDGE_E2E_REQUIRED"

// Check is called from TestMain before m.Run. When one of vars is unset it
// reports, in one line naming pkg and the missing variables, that the tests
// needing what is described skip, and how to provide it. It returns false
// when that must fail the package (QBRIDGE_E2E_REQUIRED is set).
func Check(pkg, what, how string, vars ...string) bool {
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return true
	}
	return Report(pkg, strings.Join(missing, ", ")+" not set: the tests that need "+what+" skip ("+how+")")
}

// Report says msg about pkg as Check does, for a package that finds out
// itself what is missing. It returns false when QBRIDGE_E2E_REQUIRED is set.
func Report(pkg, msg string) bool {
	required := os.Getenv(RequiredVar) != ""
	if required {
		msg += "; " + RequiredVar + " is set, so this fails"
	}
	w, closeW := out(required)
	defer closeW()
	fmt.Fprintf(w, "%s: %s\n", pkg, msg)
	return !required
}

// Require returns the broker setting in the environment variable name
// (written by e2e/brokers/up.sh). Without it the test skips, or fails when
// QBRIDGE_E2E_REQUIRED is set.
func Require(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := name + " is not set: start the test brokers with e2e/brokers/up.sh and load its env file, or run bash e2e/test.sh"
	if os.Getenv(RequiredVar) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// out is the controlling terminal, where go test cannot swallow the line,
// or stderr when there is none or the package fails anyway (go test then
// shows the output).
func out(failing bool) (io.Writer, func()) {
	if !failing {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			return tty, func() { _ = tty.Close() }
		}
	}
	return os.Stderr, func() {}
}
