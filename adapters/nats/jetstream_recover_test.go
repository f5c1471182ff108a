package nats

import (
	"slices"
	"testing"
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
