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
func TestJetStreamHandBackSurvivesServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // the engine's Nack delay
		acked int           // messages acknowledged before the close
	}{
		{"at once", 0, 10},
		{"at once, nothing acknowledged", 0, 0},
		{"after a backoff", 300 * time.Millisecond, 10},
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
