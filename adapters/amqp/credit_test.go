package amqp

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
)

type fakeIssuer struct{ grants []int }

func (f *fakeIssuer) IssueCredit(n uint32) error {
	f.grants = append(f.grants, int(n))
	return nil
}

// linkCredit gives a delivery's credit back when it settles or is held,
// with go-amqp's rule for when: once what is owed reaches what the broker
// still has. At credit 1 every settlement flows at once; at a larger credit
// settlements are coalesced, and deliveries the engine keeps unsettled do
// not stop the link while others settle.
func TestLinkCredit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		credit int
		steps  string // r: a delivery received, s: one settled or held
		grants []int  // the IssueCredit calls after the first grant
	}{
		{"credit 1: each settlement flows", 1, "rsrsrs", []int{1, 1, 1}},
		{"credit 1: nothing flows while the delivery is out", 1, "rr", nil},
		{"credit 4: coalesced until the broker's credit is used", 4, "rrsrrss", []int{2}},
		{"credit 4: owed reaches what is left", 4, "rrss", []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeIssuer{}
			c := &linkCredit{rcv: f, log: slog.New(slog.DiscardHandler)}
			if err := c.issue(tc.credit); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				switch s {
				case 'r':
					c.received(1)
				case 's':
					c.settled()
				}
			}
			if got := f.grants[1:]; !slices.Equal(got, tc.grants) {
				t.Errorf("grants %v, want %v", got, tc.grants)
			}
		})
	}
}

func TestRedeliveries(t *testing.T) {
	var r redeliveries
	if got := r.deliveryCount("a", 1); got != 1 {
		t.Fatalf("nothing handed back: %d", got)
	}
	r.handedBack("a")
	r.handedBack("a")
	r.handedBack("") // no id: not counted
	for _, tc := range []struct {
		id           string
		broker, want int
	}{
		{"a", 1, 3}, // the broker's count did not grow
		{"a", 5, 5}, // it did, further
		{"b", 1, 1}, // another message
		{"", 2, 2},  // no id
	} {
		if got := r.deliveryCount(tc.id, tc.broker); got != tc.want {
			t.Errorf("deliveryCount(%q, %d) = %d, want %d", tc.id, tc.broker, got, tc.want)
		}
	}
	r.settled("a")
	if got := r.deliveryCount("a", 1); got != 1 {
		t.Errorf("after settled: %d", got)
	}
	for i := range maxRedeliveries + 10 {
		r.handedBack(fmt.Sprint(i))
	}
	if len(r.n) != maxRedeliveries {
		t.Errorf("%d ids held, want at most %d", len(r.n), maxRedeliveries)
	}
}
