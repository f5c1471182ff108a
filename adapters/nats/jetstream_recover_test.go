package nats

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// recoverStep: one row per consumer-info state recoverPending can see.
func TestRecoverStep(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		phase     recoverPhase
		missing   int
		pastBound bool
		act       recoverAction
		next      recoverPhase
	}{
		{"start, all ours", recoverStart, 0, false, recoverDone, recoverStart},
		{"start, more ours than pending (acks in flight)", recoverStart, -2, false, recoverDone, recoverStart},
		{"start, some not ours", recoverStart, 3, false, recoverTake, recoverPolling},
		{"start, bound ignored", recoverStart, 3, true, recoverTake, recoverPolling},
		{"polling, all came back", recoverPolling, 0, false, recoverDone, recoverPolling},
		{"polling, all came back at the bound", recoverPolling, 0, true, recoverDone, recoverPolling},
		{"polling, still missing", recoverPolling, 1, false, recoverWait, recoverPolling},
		{"polling, still missing past the bound", recoverPolling, 1, true, recoverTake, recoverLastLook},
		{"last look, all taken", recoverLastLook, 0, true, recoverDone, recoverLastLook},
		{"last look, another process's", recoverLastLook, 2, true, recoverGiveUp, recoverLastLook},
	} {
		act, next := recoverStep(c.phase, c.missing, c.pastBound)
		if act != c.act || next != c.next {
			t.Errorf("%s: got %v %v, want %v %v", c.name, act, next, c.act, c.next)
		}
	}
}

// The machine over whole recoveries: the consumer info after each action
// (messages pending, held by the source, with the engine; bound passed)
// gives the actions taken, and it always ends.
func TestRecoverScenarios(t *testing.T) {
	t.Parallel()
	type look struct {
		ackPending, held, outstanding int
		pastBound                     bool
	}
	for _, c := range []struct {
		name  string
		looks []look // the first is the look before anything is taken
		want  []recoverAction
	}{
		{"nothing pending", []look{{0, 0, 0, false}}, []recoverAction{recoverDone}},
		{"pending all with the engine", []look{{4, 0, 4, false}}, []recoverAction{recoverDone}},
		{"a killed process's messages come back on the first take",
			[]look{{5, 0, 2, false}, {5, 3, 2, false}},
			[]recoverAction{recoverTake, recoverDone}},
		{"they lapse while waiting",
			[]look{{5, 0, 2, false}, {5, 1, 2, false}, {5, 1, 2, false}, {5, 3, 2, false}},
			[]recoverAction{recoverTake, recoverWait, recoverWait, recoverDone}},
		{"the last lapse is taken at the bound",
			[]look{{5, 0, 0, false}, {5, 4, 0, false}, {5, 4, 0, true}, {5, 5, 0, true}},
			[]recoverAction{recoverTake, recoverWait, recoverTake, recoverDone}},
		{"another process holds some",
			[]look{{6, 0, 0, false}, {6, 2, 0, false}, {6, 2, 0, true}, {6, 3, 0, true}},
			[]recoverAction{recoverTake, recoverWait, recoverTake, recoverGiveUp}},
	} {
		var got []recoverAction
		phase := recoverStart
		for i, l := range c.looks {
			var act recoverAction
			act, phase = recoverStep(phase, notOurs(l.ackPending, l.held, l.outstanding), l.pastBound)
			got = append(got, act)
			if act == recoverDone || act == recoverGiveUp {
				if i != len(c.looks)-1 {
					t.Errorf("%s: ended after look %d of %d", c.name, i+1, len(c.looks))
				}
				break
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: actions %v, want %v", c.name, got, c.want)
		}
	}
}

// The consumer counts a message once however often it delivered it; so
// does missing. A message the server redelivered while the engine still
// held it (after a server restart, its ack timer restarts from the
// delivery) is two deliveries of one message: counted twice, it would end
// a recovery while a message that is not ours is still out.
func TestMissingCountsMessagesNotDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ackPending  int
		outstanding []uint64 // one entry per delivery the engine holds
		held        []uint64
		want        int
	}{
		{"nothing held", 3, nil, nil, 3},
		{"all ours", 3, []uint64{1, 2}, []uint64{3}, 0},
		{"engine holds a message twice", 3, []uint64{5, 5, 6}, nil, 1},
		{"held again what the engine holds", 4, []uint64{5, 6}, []uint64{5, 7}, 1},
		{"held twice", 3, nil, []uint64{7, 7}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &jsSource{log: slog.New(slog.DiscardHandler)}
			var ds []*jsDelivery
			for _, seq := range tc.outstanding {
				ds = append(ds, &jsDelivery{seq: seq, src: s})
			}
			s.handOut(ds)
			for _, seq := range tc.held {
				s.held = append(s.held, &jsDelivery{seq: seq, src: s})
			}
			if got := s.missing(&jetstream.ConsumerInfo{NumAckPending: tc.ackPending}); got != tc.want {
				t.Errorf("missing = %d, want %d", got, tc.want)
			}
			for _, d := range ds {
				d.settle(false)
			}
			if n := s.outstandingCount(); n != 0 {
				t.Errorf("after settling every delivery the engine holds %d", n)
			}
		})
	}
}

// TestMissingAfterAckOfAMessageHeldAgain: the server forgets a message that
// is acked whichever delivery the ack names, so a copy of it that is held
// (the server redelivered it while the engine had it) or arrives later is
// not ours any more; counting it hid a message of another client.
func TestMissingAfterAckOfAMessageHeldAgain(t *testing.T) {
	s := &jsSource{log: slog.New(slog.DiscardHandler)}
	acks := 0
	m := &countingMsg{acks: &acks}
	engine := &jsDelivery{seq: 5, src: s, m: m}
	s.handOut([]*jsDelivery{engine})
	s.hold([]*jsDelivery{{seq: 5, src: s, m: m}, {seq: 7, src: s, m: m}})
	// Pending on the server: 5, 7 and 9, which another client has.
	if got := s.missing(&jetstream.ConsumerInfo{NumAckPending: 3}); got != 1 {
		t.Fatalf("before the ack: missing = %d, want 1", got)
	}
	engine.settle(true) // the engine acks 5: pending 7 and 9
	if got := s.missing(&jetstream.ConsumerInfo{NumAckPending: 2}); got != 1 {
		t.Errorf("after the ack: missing = %d, want 1 (9 is still out)", got)
	}
	s.hold([]*jsDelivery{{seq: 5, src: s, m: m}}) // a copy sent before the server had the ack
	if got := s.missing(&jetstream.ConsumerInfo{NumAckPending: 2}); got != 1 {
		t.Errorf("after a late copy: missing = %d, want 1", got)
	}
	if len(s.held) != 1 || s.held[0].seq != 7 {
		t.Errorf("held %v, want only 7", deliverySeqs(s.held))
	}
	if out := s.handOut([]*jsDelivery{{seq: 5, src: s, m: m}}); len(out) != 0 {
		t.Errorf("a copy of an acked message was handed to the engine")
	}
	if acks != 3 {
		t.Errorf("%d copies of the acked message acked, want 3", acks)
	}
	// An ack that failed: the server may still have the message, and the
	// copy it redelivers is ours.
	engine.unsettled()
	s.hold([]*jsDelivery{{seq: 5, src: s, m: m}})
	if got := s.missing(&jetstream.ConsumerInfo{NumAckPending: 3}); got != 1 {
		t.Errorf("after a failed ack and a redelivery: missing = %d, want 1", got)
	}
}

func TestSeqSetKeepsTheRecentOnes(t *testing.T) {
	var g seqSet
	for seq := range uint64(3 * goneKeep) {
		g.add(seq)
	}
	if !g.has(3*goneKeep-1) || !g.has(2*goneKeep) || g.has(goneKeep-1) {
		t.Error("the set does not keep the most recent sequences")
	}
	if n := len(g.cur) + len(g.prev); n > 2*goneKeep {
		t.Errorf("%d sequences kept", n)
	}
}

// countingMsg is a delivery's message that counts its acks.
type countingMsg struct {
	jetstream.Msg
	acks *int
}

func (m *countingMsg) Ack() error { *m.acks++; return nil }
