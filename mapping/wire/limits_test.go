package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// TestEnvelopeNeverCostsAMessage is the property behind the carry
// envelope's shedding: for random messages with exactly ten attributes (the
// SQS limit) and every kind of field that needs carrying, rendered from
// every form into every form, a message that the target takes without an
// envelope (envelope off) is also taken with it (auto), under the reject
// policy — and with the same attributes on the wire.
func TestEnvelopeNeverCostsAMessage(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 30
	}
	fits, shedding := 0, 0
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		m0 := randomMessage(r)
		m0.Attributes = nil
		used := map[string]bool{}
		for range 10 {
			m0.Attributes = append(m0.Attributes, mapping.Attribute{Name: randomName(r, used), Value: randomValue(r)})
		}
		m0.ID, m0.CorrelationID, m0.Subject = "id-1", "corr-1", "subject"
		for _, x := range All() {
			mx, _, err := through(x, m0, mapping.Options{Policy: mapping.Encode})
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, x.Name, err)
			}
			for _, y := range All() {
				if _, err := y.Render(mx, mapping.Options{Envelope: mapping.EnvelopeOff}); err != nil {
					continue // its own content does not fit: the policy's
				}
				fits++
				var shed []string
				opt := mapping.Options{OnShed: func(f []string) { shed = append(shed, f...) }}
				out, err := y.Render(mx, opt)
				if err != nil {
					t.Fatalf("seed %d: %s -> %s: fits without the envelope, refused with it: %v", seed, x.Name, y.Name, err)
				}
				if len(shed) > 0 {
					shedding++
				}
				back, err := y.Parse(out)
				if err != nil {
					t.Fatalf("seed %d: %s -> %s: %v", seed, x.Name, y.Name, err)
				}
				if len(back.Attributes) != len(mx.Attributes) {
					t.Fatalf("seed %d: %s -> %s: %d attributes of %d arrived (shed %v)", seed, x.Name, y.Name, len(back.Attributes), len(mx.Attributes), shed)
				}
			}
		}
	}
	if fits == 0 || shedding == 0 {
		t.Fatalf("%d messages fitted natively, %d shed: the test tests nothing", fits, shedding)
	}
	t.Logf("%d renderings fit natively, %d of them shed the envelope", fits, shedding)
}
