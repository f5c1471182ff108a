package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/e2etest"
	"github.com/qbridge/qbridge/internal/testlog"
)

// TestChaosJetStream: three replicas on one durable consumer, which qbridge
// creates with a pinned priority group: one receives, the others stand by
// and take over after a kill, a stall (the sink outage fills the pinned
// one's engine) or the source server's restart.
func TestChaosJetStream(t *testing.T) {
	p := runPlan()
	src := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, src.URL())
	if _, err := js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{
		Name: "IN", Subjects: []string{"in.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	snk := startSink(t)
	runChaos(t, p, kind{
		name:     "jetstream",
		replicas: 3,
		source: fmt.Sprintf(`  source "nats" {
    url            = %q
    reconnect_wait = "200ms"
    jetstream {
      stream          = "IN"
      durable         = "chaos"
      filter_subjects = ["in.>"]
      ack_wait        = "2s"
      pin_timeout     = "2s"
      fetch_wait      = "500ms"
      max_ack_pending = 2000
    }
  }
`, src.URL()),
		send: sendJetStream(js),
		restartBroker: func(t *testing.T) {
			src.Stop()
			src.Start()
		},
		afterEvent: func(t *testing.T, reps []*replica) {
			if hasLog(reps, "another client consumes durable") {
				t.Errorf("a replica reported another client on the pinned consumer")
			}
		},
	}, snk)
}

// TestChaosJetStreamPartitioned: the stream partitions its subjects in two
// (a partition(2, ...) subject transform, made by qbridge's create_stream)
// and four replicas read them, two per partition: one receives in each
// partition, the other stands by. Every group lives in one partition; the
// faults are those of the other runs.
func TestChaosJetStreamPartitioned(t *testing.T) {
	p := runPlan()
	src := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, src.URL())
	snk := startSink(t)
	runChaos(t, p, kind{
		name:     "jetstream-partitioned",
		replicas: 4,
		source: fmt.Sprintf(`  source "nats" {
    url                      = %q
    reconnect_wait           = "200ms"
    group_from_subject_token = 3
    jetstream {
      stream          = "IN"
      create_stream   = true
      durable         = "chaos-{partition}"
      filter_subjects = ["in.{partition}.*"]
      partitions      = 2
      partition       = env("QBRIDGE_PARTITION")
      ack_wait        = "2s"
      pin_timeout     = "2s"
      fetch_wait      = "500ms"
      max_ack_pending = 2000
    }
  }
`, src.URL()),
		replicaEnv: func(i int) []string { return []string{fmt.Sprintf("QBRIDGE_PARTITION=%d", i%2)} },
		send:       sendJetStream(js),
		restartBroker: func(t *testing.T) {
			src.Stop()
			src.Start()
		},
	}, snk)
	for k := range 2 {
		cons, err := js.Consumer(ctxFor(t, 5*time.Second), "IN", fmt.Sprintf("chaos-%d", k))
		if err != nil {
			t.Fatalf("partition %d: %v", k, err)
		}
		if info := cons.CachedInfo(); info.Delivered.Stream == 0 || info.NumPending != 0 {
			t.Errorf("partition %d's consumer: last delivered %d, pending %d", k, info.Delivered.Stream, info.NumPending)
		}
	}
}

// sendJetStream publishes msgs to in.<group>, with the group in the
// Qbridge-Group header and the dedup id as Nats-Msg-Id.
func sendJetStream(js jetstream.JetStream) func(context.Context, []msgRef) error {
	return func(ctx context.Context, msgs []msgRef) error {
		for _, r := range msgs {
			m := nats.NewMsg("in." + group(r.g))
			m.Data = []byte(body(r.g, r.i))
			m.Header.Set("Qbridge-Group", group(r.g))
			m.Header.Set(nats.MsgIdHdr, dedupID(r.g, r.i))
			if _, err := js.PublishMsg(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestChaosJetStreamSharedConsumerWarns: the case of the issue that led to
// pinned consumers. Two replicas on one durable consumer without a pinned
// priority group (pinned = false) split each group's messages between them;
// each says so in its log and among the warnings of /readyz.
func TestChaosJetStreamSharedConsumerWarns(t *testing.T) {
	src := e2etest.StartNATS(t)
	_, js := e2etest.ConnectNATS(t, src.URL())
	if _, err := js.CreateStream(ctxFor(t, 10*time.Second), jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}}); err != nil {
		t.Fatal(err)
	}
	snk := startSink(t)
	cfg := e2etest.WriteConfig(t, "debug", fmt.Sprintf(`pipeline "shared" {
  source "nats" {
    url = %q
    jetstream {
      stream          = "IN"
      durable         = "shared"
      filter_subjects = ["in.>"]
      ack_wait        = "2s"
      pinned          = false
    }
  }
%s%s}
`, src.URL(), snk.block(), engineBlocks))
	reps := []*replica{{t: t, id: 0, config: cfg, logs: &testlog.Buffer{}}, {t: t, id: 1, config: cfg, logs: &testlog.Buffer{}}}
	t.Cleanup(func() {
		for _, r := range reps {
			r.kill()
			if t.Failed() {
				t.Logf("replica %d, last lines:\n%s", r.id, e2etest.Tail(r.logs.String(), 30))
			}
		}
	})
	for _, r := range reps {
		r.start()
	}
	publish(t, plan{messages: 2400, groups: 24, rate: 400}, sendJetStream(js)) // stopped at cleanup
	for _, r := range reps {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r.mu.Lock()
			addr := r.addr
			r.mu.Unlock()
			code, body := e2etest.Get(addr, "/readyz")
			if code == 200 && strings.Contains(body, "another client consumes durable") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: /readyz never warned: %d %s", r.id, code, body)
			}
			time.Sleep(100 * time.Millisecond) // a poll of /readyz
		}
	}
	if !hasLog(reps, `"level":"ERROR"`, "another client consumes durable") {
		t.Error("no replica logged the shared consumer as an error")
	}
}
