package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/filelock"
)

// RabbitMQ is one of the RabbitMQ nodes e2e/brokers/up.sh starts.
type RabbitMQ struct {
	URL string // amqp://guest:guest@127.0.0.1:PORT
	Env string // the node's env file (from rabbitmq/start.sh), for its CLI tools
}

// SharedRabbitMQ is the node every test shares (QBRIDGE_AMQP_URL and
// QBRIDGE_RABBITMQ_ENV): the tests of other packages use it at the same
// time, so it must never be stopped, restarted or have its connections
// closed. A test that does that takes RabbitMQForRestart.
func SharedRabbitMQ(t testing.TB) RabbitMQ {
	t.Helper()
	return RabbitMQ{URL: Require(t, "QBRIDGE_AMQP_URL"), Env: Require(t, "QBRIDGE_RABBITMQ_ENV")}
}

// RestartLockWait bounds how long RabbitMQForRestart waits for the node:
// several restart tests in a row, each well under a minute.
const RestartLockWait = 5 * time.Minute

// RabbitMQForRestart is the node kept for the tests that restart their
// broker (QBRIDGE_AMQP_RESTART_URL and QBRIDGE_RABBITMQ_RESTART_ENV); no
// other test uses it. The test holds it alone until it ends: a restart
// test of another package, run at the same time, waits its turn rather
// than have the node restarted under it. Call it from the test's
// goroutine; the node must be running again when the test ends.
func RabbitMQForRestart(t testing.TB) RabbitMQ {
	t.Helper()
	r := RabbitMQ{URL: Require(t, "QBRIDGE_AMQP_RESTART_URL"), Env: Require(t, "QBRIDGE_RABBITMQ_RESTART_ENV")}
	t0 := time.Now()
	release, err := waitLock(filepath.Join(filepath.Dir(r.Env), "restart-test.lock"), RestartLockWait)
	if err != nil {
		t.Fatalf("the RabbitMQ restart node: %v", err)
	}
	t.Cleanup(release)
	if d := time.Since(t0); d > time.Second { // says where a slow test's time went
		t.Logf("waited %v for the RabbitMQ restart node (another restart test held it)", d.Round(time.Millisecond))
	}
	return r
}

// waitLock takes the lock at path, trying again until it is free or wait
// has passed.
func waitLock(path string, wait time.Duration) (release func(), err error) {
	deadline := time.Now().Add(wait)
	for {
		release, err := filelock.TryLock(path)
		var held *filelock.HeldError
		if !errors.As(err, &held) {
			return release, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("waited %v: %w", wait, err)
		}
		time.Sleep(100 * time.Millisecond) // polling: the holder signals nothing but its lock
	}
}

// Ctl runs rabbitmqctl against the node and returns its output. It is safe
// from any goroutine; the error holds the output.
func (r RabbitMQ) Ctl(args ...string) (string, error) {
	// The env file (passed as $1, then shifted off) names the node and
	// holds its cookie's HOME and its private epmd.
	const script = `. "$1" && shift && exec /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RABBITMQ_NODENAME" "$@"`
	out, err := exec.Command("bash", append([]string{"-c", script, "rabbitmqctl", r.Env}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %v (%s): %w: %s", args, r.Env, err, out)
	}
	return string(out), nil
}

// DeclareQueue declares a durable classic queue on the node (it survives
// stop_app / start_app with its persistent messages), with single active
// consumer when singleActive is set (RabbitMQ then delivers to one consumer
// at a time). RabbitMQ 3.x's AMQP 1.0 plugin cannot declare queue
// arguments, so operators declare such queues with their own tools; the
// test does it through rabbitmqctl eval. Address it as /amq/queue/NAME (the
// plugin would declare /queue/NAME itself, without the argument). The queue
// is deleted when the test ends.
func (r RabbitMQ) DeclareQueue(t testing.TB, name string, singleActive bool) {
	t.Helper()
	args := "[]"
	if singleActive {
		args = `[{<<"x-single-active-consumer">>, bool, true}]`
	}
	expr := fmt.Sprintf(`rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, <<"%s">>), true, false, %s, none, <<"guest">>).`, name, args)
	if _, err := r.Ctl("eval", expr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := r.Ctl("delete_queue", name); err != nil {
			t.Log(err)
		}
	})
}
