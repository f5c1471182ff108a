package chaos

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// TestChaosMigrateKillAndResume: `qbridge migrate -copy -state FILE` from a
// JetStream stream into the sink, killed with SIGKILL at seeded points and
// started again with the same command until it completes: every message
// arrives once (what a resumed run writes again the sink deduplicates), in
// order within its group, and the source is left as it was.
func TestChaosMigrateKillAndResume(t *testing.T) {
	p := runPlan()
	per := p.messages / p.groups
	src := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, src.URL())
	if _, err := js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{
		Name: "IN", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	send := sendJetStream(js)
	all := publishOrder(p)
	for off := 0; off < len(all); off += 100 {
		if err := send(ctxFor(t, 30*time.Second), all[off:min(off+100, len(all))]); err != nil {
			t.Fatal(err)
		}
	}
	snk := startSink(t)
	cfg := e2etest.WriteConfig(t, "debug", fmt.Sprintf(`pipeline "mig" {
  source "nats" {
    url = %q
    jetstream {
      stream          = "IN"
      durable         = "mig"
      filter_subjects = ["in.>"]
    }
  }
%s%s}
`, src.URL(), snk.block(), engineBlocks))
	state := filepath.Join(t.TempDir(), "migrate.state")

	// The kill points: p.kills of them between 5% and 90% of the messages.
	h := fnv.New64a()
	h.Write([]byte("migrate"))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	kills := make([]int, p.kills)
	for i := range kills {
		kills[i] = p.messages/20 + rng.IntN(p.messages*85/100)
	}
	slices.Sort(kills)
	t.Logf("chaos migrate: seed %d (replay with -chaos.seed=%d), %d messages in %d groups, kill -9 when the sink holds %v",
		seed, seed, p.messages, p.groups, kills)

	// -rate keeps each run long enough for a kill to land in it.
	rate := fmt.Sprint(max(p.messages/8, 50))
	report := filepath.Join(t.TempDir(), "report.json")
	run := func() (*exec.Cmd, *testlog.Buffer, chan error) {
		logs := &testlog.Buffer{}
		cmd := exec.Command(qbridge(t), "migrate", "-yes", "-copy", "-state", state, "-idle", "1s",
			"-rate", rate, "-progress", "off", "-report", report, cfg)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			if t.Failed() {
				t.Logf("qbridge migrate, last lines:\n%s", e2etest.Tail(logs.String(), 30))
			}
		})
		return cmd, logs, done
	}
	runs := 0
	for _, at := range kills {
		if snk.stored() >= at {
			continue // an earlier run got past this point already
		}
		cmd, _, done := run()
		runs++
		for snk.stored() < at {
			select {
			case err := <-done:
				t.Fatalf("run %d ended (%v) before the kill at %d (%d stored)", runs, err, at, snk.stored())
			case <-time.After(20 * time.Millisecond): // a poll of the sink's count
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Logf("run %d killed with %d stored", runs, snk.stored())
	}
	_, logs, done := run()
	runs++
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the last run (%d): %v\n%s", runs, err, e2etest.Tail(logs.String(), 30))
		}
	case <-time.After(stall):
		t.Fatalf("the last run (%d) did not end within %s", runs, stall)
	}
	var rep struct {
		Outcome string `json:"outcome"`
		Jobs    []struct {
			ResumedFrom uint64 `json:"resumed_from"`
			Written     int64  `json:"written"`
		} `json:"pipelines"`
	}
	if b, err := os.ReadFile(report); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Jobs) != 1 {
		t.Fatalf("the last run's report: %v %s", err, b)
	}
	if j := rep.Jobs[0]; rep.Outcome != "complete" || (runs > 1 && (j.ResumedFrom == 0 || j.Written >= int64(p.messages))) {
		t.Errorf("the last run: outcome %s, resumed from %d, wrote %d of %d: it did not resume", rep.Outcome, j.ResumedFrom, j.Written, p.messages)
	}
	v := check(snk.bodies(t), p.groups, per)
	t.Logf("chaos migrate: %v, %d runs, the last one resumed from sequence %d (seed %d)", v, runs, rep.Jobs[0].ResumedFrom, seed)
	if v.lost > 0 || v.reordered > 0 || v.foreign > 0 || v.duplicates > 0 {
		t.Errorf("chaos migrate: %v (replay with -chaos.seed=%d)", v, seed)
	}
	st, err := js.Stream(ctxFor(t, 5*time.Second), "IN")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != uint64(p.messages) {
		t.Errorf("the copy changed the source: %d messages, want %d", n, p.messages)
	}
}
