package natsmap

import (
	"slices"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// TestEnvelopeNeverCostsAMessage: a message exactly at the size limit
// without the envelope is published under every policy with every header;
// the envelope is shed (mapping.ShedOrder). With the envelope off nothing
// is written and what it would carry is reported.
func TestEnvelopeNeverCostsAMessage(t *testing.T) {
	m := &mapping.Message{
		Body: []byte("data"), ID: "id-1", DedupID: "d-1", Subject: "s", CorrelationID: "c",
		Attributes: []mapping.Attribute{{Name: "n", Value: mapping.Int32(7)}, {Name: "s", Value: mapping.String("v")}},
	}
	off, err := Encode(m, "subj", EncodeOptions{Options: mapping.Options{Envelope: mapping.EnvelopeOff}})
	if err != nil {
		t.Fatal(err)
	}
	if off.Header[mapping.EnvelopeName] != nil {
		t.Fatalf("envelope off: %v", off.Header)
	}
	limit := headerSize(off.Header) + len(off.Data)
	for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
		var dropped, shed []string
		opt := EncodeOptions{Options: mapping.Options{Policy: p, MaxMessageSize: limit,
			OnDrop: func(f, _ string) { dropped = append(dropped, f) }, OnShed: func(f []string) { shed = append(shed, f...) }}}
		msg, err := Encode(m, "subj", opt)
		if err != nil {
			t.Fatalf("%s: a message that fits natively: %v", p, err)
		}
		want := []string{"subject", "correlationId", "id", "types"}
		if len(dropped) > 0 || !slices.Equal(shed, want) || msg.Header.Get("n") != "7" || msg.Header.Get("s") != "v" {
			t.Errorf("%s: dropped %v, shed %v (want %v), headers %v", p, dropped, shed, want, msg.Header)
		}
		opt.MaxMessageSize = limit - 1
		if _, err := Encode(m, "subj", opt); p != mapping.Drop && !mapping.IsReject(err) {
			t.Errorf("%s: one byte over: %v", p, err)
		}
	}
}
