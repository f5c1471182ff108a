package nats

import (
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/logpace"
)

func TestShareObserve(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	look := func(ms int, delivered, received uint64, waiting, ours int) shareObs {
		return shareObs{at: at(ms), epoch: 1, delivered: delivered, received: received, waiting: waiting, ours: ours,
			oursExact: true, inFlight: 10, waitWindow: 2 * time.Second}
	}
	tests := []struct {
		name  string
		looks []shareObs
		sign  []bool // whether each look reports a sign
	}{
		{"alone and busy", []shareObs{look(0, 100, 95, 0, 0), look(500, 300, 290, 0, 1), look(1000, 500, 500, 0, 0)}, []bool{false, false, false}},
		{"deliveries before the start are not another client's", []shareObs{look(0, 5000, 0, 0, 0), look(500, 5010, 10, 0, 0)}, []bool{false, false}},
		{"one pull on the wire is not another client", []shareObs{look(0, 100, 100, 0, 0), look(500, 110, 100, 0, 1), look(1000, 110, 110, 0, 0)}, []bool{false, false, false}},
		{"another busy client", []shareObs{look(0, 100, 100, 0, 0), look(500, 200, 150, 0, 0)}, []bool{false, true}},
		{"another idle client, seen for 2 s", []shareObs{look(0, 0, 0, 1, 0), look(500, 0, 0, 2, 1), look(1500, 0, 0, 1, 0), look(2000, 0, 0, 1, 0)}, []bool{false, false, false, true}},
		{"a waiting pull that goes away", []shareObs{look(0, 0, 0, 1, 0), look(1000, 0, 0, 0, 0), look(2500, 0, 0, 1, 0), look(3000, 0, 0, 1, 0)}, []bool{false, false, false, false}},
		{"push bound", []shareObs{{at: at(0), epoch: 1, pushBound: true}}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st shareState
			for i, o := range tt.looks {
				if got := st.observe(o) != ""; got != tt.sign[i] {
					t.Fatalf("look %d: sign %v, want %v", i, got, tt.sign[i])
				}
			}
		})
	}
	t.Run("a look while a pull of ours starts cannot tell", func(t *testing.T) {
		var st shareState
		st.observe(look(0, 0, 0, 1, 0))
		o := look(2500, 0, 0, 1, 0)
		o.oursExact = false
		if s := st.observe(o); s != "" {
			t.Fatalf("sign %q", s)
		}
	})
	t.Run("a new consumer starts over", func(t *testing.T) {
		var st shareState
		st.observe(look(0, 100, 100, 0, 0))
		o := look(500, 900, 100, 0, 0)
		o.epoch = 2
		if s := st.observe(o); s != "" {
			t.Fatalf("sign %q", s)
		}
	})
}

// TestJetStreamSharedConsumerWarns: two sources on one consumer without a
// pinned priority group both say so among their warnings, and log it.
func TestJetStreamSharedConsumerWarns(t *testing.T) {
	f := newJSFixture(t)
	off := false
	notPinned := func(c *SourceConfig) { c.JetStream.Pinned = &off; c.JetStream.FetchBatch = 4 }
	a, alogs := f.source(t, notPinned)
	b, _ := f.source(t, notPinned)
	ca, cb := collect(t, a, true), collect(t, b, true)
	if w := a.(*jsSource).Warnings(); len(w) != 0 {
		t.Fatalf("warnings before anything happened: %v", w)
	}
	f.publishGroups(t, 10, 0, 40)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.(*jsSource).Warnings()) == 0 || len(b.(*jsSource).Warnings()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no warning within 10s; a got %d, b %d; log:\n%s", ca.count(), cb.count(), alogs)
		}
		time.Sleep(50 * time.Millisecond) // a poll of the sources' warnings
	}
	w := a.(*jsSource).Warnings()[0]
	if !strings.Contains(w, "another client consumes durable") || !strings.Contains(w, "docs/scaling.md") {
		t.Errorf("warning %q", w)
	}
	// paced: the line says how many like it it stands for
	if !strings.Contains(alogs.String(), "level=ERROR") || !strings.Contains(alogs.String(), logpace.LeftOutKey+"=") {
		t.Errorf("not logged as a paced error:\n%s", alogs)
	}
}

// TestJetStreamPinnedConsumerNoSharedWarning: standbys are expected on a
// pinned consumer: no warning while the pinned source drains it and
// several looks pass.
func TestJetStreamPinnedConsumerNoSharedWarning(t *testing.T) {
	f := newJSFixture(t)
	a, _ := f.pinnedSource(t, "5s")
	b, _ := f.pinnedSource(t, "5s")
	ca, cb := collect(t, a, true), collect(t, b, true)
	start := time.Now()
	f.publishGroups(t, 10, 0, 40)
	looks := 3 * shareEvery(time.Second) // the fixture's ack_wait
	for {
		if len(a.Warnings()) > 0 || len(b.Warnings()) > 0 {
			t.Fatalf("warnings on a pinned consumer: %v %v", a.Warnings(), b.Warnings())
		}
		if ca.count()+cb.count() == 400 && time.Since(start) > looks {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("got %d + %d of 400", ca.count(), cb.count())
		}
		time.Sleep(50 * time.Millisecond) // a poll of the warnings
	}
}
