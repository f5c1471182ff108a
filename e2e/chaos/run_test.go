package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// kind is one source kind of a chaos run.
type kind struct {
	name     string
	replicas int
	// source is the pipeline's source block.
	source string
	// env is added to each replica's environment; replicaEnv, when set,
	// gives replica i more.
	env        []string
	replicaEnv func(i int) []string
	// send puts msgs into the source, in order. An error is retried
	// with the same messages: a copy it leaves behind has the same dedup
	// id, right after the first one.
	send func(ctx context.Context, msgs []msgRef) error
	// restartBroker stops and starts the source broker; nil where the
	// test does not own it (fauxqs, RabbitMQ and the Service Bus test
	// server are shared or keep their state in memory).
	restartBroker func(t *testing.T)
	// afterEvent, when set, checks something after each fault (e.g. that
	// only one replica receives).
	afterEvent func(t *testing.T, reps []*replica)
}

// stall is how long a run may go without the sink storing anything more
// before it fails (a failover after a kill takes the source's lock time).
const stall = 90 * time.Second

// runChaos runs k's replicas into snk under the seeded schedule and checks
// what the sink stored.
func runChaos(t *testing.T, p plan, k kind, snk *sink) {
	per := p.messages / p.groups
	evs := makeSchedule(seed, k.name, p, k.replicas, k.restartBroker != nil)
	t.Logf("chaos %s: seed %d (replay with -chaos.seed=%d), %d messages in %d groups, %d replicas, sink outage %s; schedule:%s",
		k.name, seed, seed, p.messages, p.groups, k.replicas, p.outage, describe(evs))
	cfg := e2etest.WriteConfig(t, "debug", fmt.Sprintf("pipeline \"chaos\" {\n%s%s%s}\n", k.source, snk.block(), engineBlocks))
	reps := make([]*replica, k.replicas)
	for i := range reps {
		env := k.env
		if k.replicaEnv != nil {
			env = append(slices.Clone(env), k.replicaEnv(i)...)
		}
		reps[i] = &replica{t: t, id: i, config: cfg, env: env, logs: &testlog.Buffer{}}
	}
	t.Cleanup(func() {
		for _, r := range reps {
			r.kill()
		}
		if t.Failed() {
			// The whole logs go to the artifact directory (kept with
			// go test -artifacts -outputdir DIR), the tails to the output.
			dir := t.ArtifactDir()
			for _, r := range reps {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("replica-%d.log", r.id)), []byte(r.logs.String()), 0o644)
				t.Logf("replica %d (%d starts), last lines:\n%s", r.id, r.starts, e2etest.Tail(r.logs.String(), 60))
			}
			t.Logf("whole replica logs: %s", dir)
			t.Logf("replay with -chaos.seed=%d", seed)
		}
	})
	for _, r := range reps {
		r.start()
	}
	start := time.Now()
	published := publish(t, p, k.send)

	deferred := map[int]bool{}
	restartDeferred := func() {
		for i := range reps {
			if deferred[i] {
				reps[i].start()
				delete(deferred, i)
			}
		}
	}
	for _, ev := range evs {
		waitStored(t, snk, ev.at)
		restartDeferred()
		switch ev.act {
		case actKill:
			r := reps[ev.replica]
			if ev.active {
				if i := receiving(reps); i >= 0 {
					r = reps[i]
				}
			}
			r.kill()
			if ev.restartNow || !anyRunning(reps) {
				r.start()
			} else {
				deferred[r.id] = true
			}
		case actSinkOutage:
			snk.srv.Stop()
			time.Sleep(p.outage) // the outage itself
			snk.srv.Start()
		case actBrokerRestart:
			k.restartBroker(t)
		}
		t.Logf("%s: done at %s, %d stored", ev, time.Since(start).Round(time.Millisecond), snk.stored())
		if k.afterEvent != nil {
			k.afterEvent(t, reps)
		}
	}
	restartDeferred()
	select {
	case <-published:
	case <-time.After(stall):
		t.Fatalf("publishing did not end within %s", stall)
	}
	waitComplete(t, snk, p)
	took := time.Since(start)
	for _, r := range reps {
		if err := r.stop(30 * time.Second); err != nil {
			t.Errorf("replica %d: %v", r.id, err)
		}
	}
	v := check(snk.bodies(t), p.groups, per)
	t.Logf("chaos %s: %v, in %s (seed %d)", k.name, v, took.Round(time.Millisecond), seed)
	if v.lost > 0 || v.reordered > 0 || v.foreign > 0 {
		t.Errorf("chaos %s: %v (replay with -chaos.seed=%d)", k.name, v, seed)
	}
	// The sink deduplicates for an hour on the ids the messages carry:
	// a copy that gets past it is a defect too.
	if v.duplicates > 0 {
		t.Errorf("chaos %s: %d duplicates got past the sink's deduplication (replay with -chaos.seed=%d)", k.name, v.duplicates, seed)
	}
}

// msgRef is message i of group g.
type msgRef struct{ g, i int }

// publishChunk is how many messages one send call takes.
const publishChunk = 10

// publishOrder lists the plan's messages: the groups take turns, each
// with a run of 1 to 4 consecutive messages, so that neighbours in the
// source are often of one group (two consumers that split a queue then
// hold two messages of a group at once) and often not.
func publishOrder(p plan) []msgRef {
	per := p.messages / p.groups
	next := make([]int, p.groups)
	all := make([]msgRef, 0, p.messages)
	for round := 0; len(all) < p.messages; round++ {
		for g := range p.groups {
			for range 1 + (g+round)%4 {
				if next[g] < per {
					all = append(all, msgRef{g, next[g]})
					next[g]++
				}
			}
		}
	}
	return all
}

// publish sends the plan's messages (in publishOrder) at p.rate while the faults happen, retrying what fails (the
// source broker may be down); the channel closes when all are sent.
func publish(t *testing.T, p plan, send func(context.Context, []msgRef) error) <-chan struct{} {
	all := publishOrder(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(time.Duration(publishChunk) * time.Second / time.Duration(p.rate))
		defer tick.Stop()
		failures := 0
		for off := 0; off < len(all); off += publishChunk {
			chunk := all[off:min(off+publishChunk, len(all))]
			for {
				sctx, scancel := context.WithTimeout(ctx, 3*time.Second) // a broker restart loses requests: retry soon
				err := send(sctx, chunk)
				scancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				if failures++; failures%20 == 1 {
					t.Logf("publish (retried): %v", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond): // the source broker may be restarting
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C: // the publishing pace
			}
		}
		t.Logf("published %d messages in %s (%d failed sends retried)", len(all), time.Since(start).Round(time.Millisecond), failures)
	}()
	return done
}

// receiving returns the running replica that received the most in the
// next moments (by qbridge_messages_received_total), or -1 when none
// received anything within 5 s.
func receiving(reps []*replica) int {
	const metric = "qbridge_messages_received_total"
	before := make([]float64, len(reps))
	for i, r := range reps {
		if r.running() {
			before[i] = r.metric(metric)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // a poll of the replicas' counters
		best, most := -1, 0.0
		for i, r := range reps {
			if !r.running() {
				continue
			}
			if got := r.metric(metric) - before[i]; got > most {
				best, most = i, got
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

func anyRunning(reps []*replica) bool {
	for _, r := range reps {
		if r.running() {
			return true
		}
	}
	return false
}

// waitStored returns once the sink stored at least n messages; it fails the
// test when the sink stores nothing more for stall.
func waitStored(t *testing.T, snk *sink, n int) {
	t.Helper()
	last, since := -1, time.Now()
	for {
		got := snk.stored()
		if got >= n {
			return
		}
		if got > last {
			last, since = got, time.Now()
		}
		if time.Since(since) > stall {
			t.Fatalf("the sink stored nothing more for %s (%d stored, waiting for %d)", stall, last, n)
		}
		time.Sleep(20 * time.Millisecond) // a poll of the sink's count
	}
}

// waitComplete returns once every message is in the sink; duplicates past
// the sink's deduplication do not count towards it.
func waitComplete(t *testing.T, snk *sink, p plan) {
	t.Helper()
	per := p.messages / p.groups
	last, since := -1, time.Now()
	for {
		waitStored(t, snk, p.messages)
		v := check(snk.bodies(t), p.groups, per)
		if v.lost == 0 {
			return
		}
		if v.stored > last {
			last, since = v.stored, time.Now()
		}
		if time.Since(since) > stall {
			t.Fatalf("incomplete after %s without progress: %v", stall, v)
		}
		time.Sleep(200 * time.Millisecond) // a poll of the sink's content
	}
}

// hasLog reports whether any replica logged every fragment on one line.
func hasLog(reps []*replica, frags ...string) bool {
	for _, r := range reps {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			ok := true
			for _, f := range frags {
				if !strings.Contains(line, f) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}
