package chaos

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// action is one fault.
type action int

const (
	actKill          action = iota // kill -9 one replica
	actSinkOutage                  // stop the sink's server for plan.outage
	actBrokerRestart               // stop and start the source broker (where the test owns it)
)

func (a action) String() string {
	return [...]string{"kill -9", "sink outage", "broker restart"}[a]
}

// event is one fault of a schedule, due once the sink stored at least at
// messages: progress, not time, so that a slow machine runs the same
// schedule.
type event struct {
	at      int
	act     action
	replica int
	// active: kill the replica that receives at that moment (the pinned
	// one of a JetStream consumer, RabbitMQ's single active consumer)
	// rather than replica.
	active bool
	// restartNow: a killed replica starts again at once; otherwise at the
	// next event (or at the end), so that the others work without it.
	restartNow bool
}

func (e event) String() string {
	s := fmt.Sprintf("at %d: %s", e.at, e.act)
	if e.act == actKill {
		when := "at the next event"
		if e.restartNow {
			when = "at once"
		}
		which := fmt.Sprintf("replica %d", e.replica)
		if e.active {
			which = "the receiving replica"
		}
		s += fmt.Sprintf(" %s, restarted %s", which, when)
	}
	return s
}

// makeSchedule draws kind's schedule from seed: p.kills kills (of a random
// replica, or of the one receiving then), one sink outage and, when the test can restart the source
// broker, one restart of it, each due at a random point between 5% and
// 90% of the messages. The same seed, kind and plan give the same
// schedule.
func makeSchedule(seed int64, kind string, p plan, replicas int, brokerRestart bool) []event {
	h := fnv.New64a()
	h.Write([]byte(kind))
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	at := func() int { return p.messages/20 + rng.IntN(p.messages*85/100) }
	var evs []event
	for range p.kills {
		evs = append(evs, event{at: at(), act: actKill, replica: rng.IntN(replicas), restartNow: rng.IntN(2) == 0, active: rng.IntN(2) == 0})
	}
	evs = append(evs, event{at: at(), act: actSinkOutage})
	if brokerRestart {
		evs = append(evs, event{at: at(), act: actBrokerRestart})
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at - b.at })
	return evs
}

func describe(evs []event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("\n  " + e.String())
	}
	return b.String()
}

func TestMakeSchedule(t *testing.T) {
	p := plan{kills: 5, messages: 1000, groups: 10}
	a := makeSchedule(42, "jetstream", p, 3, true)
	if b := makeSchedule(42, "jetstream", p, 3, true); !slices.Equal(a, b) {
		t.Fatalf("the same seed gave two schedules:%s\n---%s", describe(a), describe(b))
	}
	if b := makeSchedule(43, "jetstream", p, 3, true); slices.Equal(a, b) {
		t.Errorf("seeds 42 and 43 gave the same schedule:%s", describe(a))
	}
	if b := makeSchedule(42, "sqs", p, 3, true); slices.Equal(a, b) {
		t.Errorf("two kinds share a schedule:%s", describe(a))
	}
	count := map[action]int{}
	for i, e := range a {
		count[e.act]++
		if e.at < 50 || e.at >= 900 {
			t.Errorf("event %v outside 5%%..90%%", e)
		}
		if i > 0 && e.at < a[i-1].at {
			t.Errorf("not sorted:%s", describe(a))
		}
		if e.replica < 0 || e.replica >= 3 {
			t.Errorf("event %v: no such replica", e)
		}
	}
	if count[actKill] != 5 || count[actSinkOutage] != 1 || count[actBrokerRestart] != 1 {
		t.Errorf("actions %v", count)
	}
	if n := len(makeSchedule(42, "sqs", p, 2, false)); n != 6 {
		t.Errorf("without a broker restart: %d events, want 6", n)
	}
}
