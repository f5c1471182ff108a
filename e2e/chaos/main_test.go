// Package chaos runs replicas of the built qbridge binary under a seeded
// schedule of faults, one source kind at a time (JetStream, SQS FIFO,
// Service Bus sessions, AMQP on RabbitMQ) into a JetStream sink, and checks
// what reached the sink: nothing lost, nothing reordered within its group,
// duplicates counted. A migration killed and resumed is checked the same
// way.
//
// The schedule (kill -9 of a replica, restarts, a sink outage, a restart of
// the source broker where the test owns it) is drawn from one seed, printed
// by every test: -chaos.seed=N replays it. The short run is part of
// `go test ./...`; -chaos.kills=50 (and -chaos.outage=30s) is the long run:
//
//	go test ./e2e/chaos -run Chaos -chaos.kills=50 -chaos.outage=30s -timeout 2h -v
//
// Brokers: e2e/brokers/up.sh (fauxqs, RabbitMQ) and the Service Bus test
// server's npm packages (e2e/sbserver/install.sh); NATS is embedded. See
// docs/scaling.md for what each source kind does with replicas.
package chaos

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/e2etest"
)

var (
	flagSeed     = flag.Int64("chaos.seed", 0, "seed of the fault schedules (0: a new one, printed)")
	flagKills    = flag.Int("chaos.kills", 0, "kill -9 per source kind (0: the short run)")
	flagOutage   = flag.Duration("chaos.outage", 0, "length of the sink outage (0: 3s, or 30s with -chaos.kills)")
	flagMessages = flag.Int("chaos.messages", 0, "messages per source kind (0: 1,200, or 200 per kill with -chaos.kills)")
)

// binDir holds the daemon binary, built by the first test that needs it
// (so that a run of benchmarks or of other tests builds nothing).
var (
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// qbridge returns the built binary.
func qbridge(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { binPath, buildErr = e2etest.Build(binDir, "") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// seed is the run's seed: -chaos.seed, or drawn once.
var seed int64

func TestMain(m *testing.M) {
	flag.Parse()
	seed = *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	var err error
	if binDir, err = os.MkdirTemp("", "qbridge-chaos-bin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// plan is the size of one source kind's run.
type plan struct {
	kills    int
	outage   time.Duration
	messages int
	groups   int
	rate     int // messages published per second, while the faults happen
}

// runPlan reads the flags: the short run by default, the long one with
// -chaos.kills.
func runPlan() plan {
	p := plan{kills: 3, outage: 3 * time.Second, messages: 1200, groups: 24, rate: 150}
	if *flagKills > 0 {
		p.kills = *flagKills
		p.outage = 30 * time.Second
		p.messages = 200 * p.kills
	}
	if *flagOutage > 0 {
		p.outage = *flagOutage
	}
	if *flagMessages > 0 {
		p.messages = *flagMessages
	}
	p.messages -= p.messages % p.groups
	return p
}
