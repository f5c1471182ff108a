package nats

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamHandBackSurvivesServerRestart: what a closing source hands
// back comes back at once, in stream order, after the server restarts (as
// an embedded server does with qbridge, and a resumed migration's), not
// after ack_wait. A plain NAK lived only in the server's memory, and the
// server dropped the NAKs still queued for its consumer when it stopped.
// One handed back with a delay that has not run out is due at once too.
func TestJetStreamHandBackSurvivesServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // the engine's Nack delay
		acked int           // messages acknowledged before the close
	}{
		{"at once", 0, 10},
		{"at once, nothing acknowledged", 0, 0},
		{"after a backoff", 300 * time.Millisecond, 10},
		// A retry's delay dies with the source that waited for it: the
		// messages came back only after it (here an hour).
		{"after a long backoff", time.Hour, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 2000 // enough NAKs that some can still be queued when the server stops
			srv := startServer(t)
			port, store := srv.Addr().(*net.TCPAddr).Port, srv.StoreDir()
			cfg := SourceConfig{ConnConfig: ConnConfig{URL: srv.ClientURL()}, Subject: "hb.>",
				JetStream: &JetStreamSourceConfig{Stream: "HB", Durable: "d", CreateStream: true, AckWait: "5m", FetchWait: "300ms", MaxAckPending: 2 * n, FetchBatch: 500}}
			src, closing := mustSource(t, cfg)
			pub, _ := jetstream.New(connect(t, srv.ClientURL()))
			for i := range n {
				if _, err := pub.Publish(ctxT(t, 5*time.Second), "hb.x", []byte(strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
			ds := receiveN(t, src, n, 10*time.Second)
			ackAll(t, ds[:tc.acked])
			for _, d := range ds[tc.acked:] {
				if err := d.Nack(ctxT(t, 5*time.Second), tc.delay); err != nil {
					t.Fatal(err)
				}
			}
			if err := src.Close(ctxT(t, 30*time.Second)); err != nil {
				t.Fatal(err)
			}
			srv.Shutdown()
			srv.WaitForShutdown()

			srv2 := startServer(t, func(o *server.Options) { o.Port = port; o.StoreDir = store })
			cfg.URL = srv2.ClientURL()
			src2, logs := mustSource(t, cfg)
			// Far below ack_wait: only a handed-back message is back by then.
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the closing source's log:\n%s", closing)
				}
			})
			back := receiveN(t, src2, n-tc.acked, 30*time.Second)
			for i, d := range back {
				if got, want := string(d.Message().Body), fmt.Sprint(tc.acked+i); got != want {
					t.Fatalf("message %d after the restart is %q, want %q; log:\n%s", i, got, want, logs)
				}
			}
			ackAll(t, back)
		})
	}
}

// TestDueNowAtClose: Close makes due at once, in stream order, only the
// delayed hand-backs still waiting on the server: not one about to run out
// (the server may be giving it out), not one delivered again since, not
// one Close hands back anyway.
func TestDueNowAtClose(t *testing.T) {
	now := time.Now()
	s := &jsSource{set: &sourceSettings{js: &jsSourceSettings{maxAckPending: 100}}}
	for _, n := range []struct {
		seq uint64
		in  time.Duration
	}{{10, time.Hour}, {5, time.Hour}, {3, dueMargin / 2}, {7, time.Hour}, {9, time.Hour}, {4, 2 * dueMargin}} {
		s.noteDelayed(n.seq, "reply."+strconv.FormatUint(n.seq, 10), now.Add(n.in))
	}
	s.mu.Lock()
	s.forgetDelayedLocked([]*jsDelivery{{seq: 9}}) // delivered again
	due := s.dueNowAtCloseLocked([]*jsDelivery{{seq: 7}})
	left := len(s.delayed)
	s.mu.Unlock()
	var got []string
	for _, n := range due {
		got = append(got, n.reply)
	}
	if want := []string{"reply.4", "reply.5", "reply.10"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("due at close: %v, want %v", got, want)
	}
	if left != 0 {
		t.Errorf("%d delayed hand-backs still recorded after close", left)
	}
}

// TestDelayedHandBacksBounded: past max_ack_pending entries, the ones that
// ran out are dropped.
func TestDelayedHandBacksBounded(t *testing.T) {
	s := &jsSource{set: &sourceSettings{js: &jsSourceSettings{maxAckPending: 3}}}
	past, later := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	s.noteDelayed(1, "r1", past)
	s.noteDelayed(2, "r2", later)
	s.noteDelayed(3, "r3", past)
	s.noteDelayed(4, "r4", later)
	if _, ok := s.delayed[2]; len(s.delayed) != 2 || !ok {
		t.Errorf("delayed hand-backs after the bound: %v, want 2 and 4", s.delayed)
	}
}
