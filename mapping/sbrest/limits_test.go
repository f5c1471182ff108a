package sbrest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// TestEnvelopeNeverCostsAMessage: at the Service Bus limits over HTTPS (32
// KiB for one property, 64 KiB for all, the message size), single send and
// batch, a message whose own content fits is sent under every policy with
// every attribute; the envelope is shed (mapping.ShedOrder) until it fits.
func TestEnvelopeNeverCostsAMessage(t *testing.T) {
	texts := &mapping.Message{Body: []byte("b"), TTL: time.Second + 1}
	for i := range 100 {
		v, _ := mapping.ParseValue("Number.float", "1."+strings.Repeat("0", 330))
		texts.Attributes = append(texts.Attributes, mapping.Attribute{Name: fmt.Sprintf("n%03d", i), Value: v})
	}
	header := &mapping.Message{Body: []byte("b"), TTL: time.Second + 1}
	for _, n := range []string{"a", "b", "c"} {
		header.Attributes = append(header.Attributes, mapping.Attribute{Name: n, Value: mapping.String(strings.Repeat("x", 20000))})
	}
	off, err := encodeMessage(header, &mapping.Options{Envelope: mapping.EnvelopeOff}, formHeader)
	if err != nil {
		t.Fatal(err)
	}
	pad := MaxHeaderSize - off.headerBytes
	header.Attributes[0].Value = mapping.String(strings.Repeat("x", 20000+pad))
	sized := &mapping.Message{Body: []byte(strings.Repeat("b", 1000)), TTL: time.Second + 1, Attributes: header.Attributes[:0:0]}
	off, err = encodeMessage(sized, &mapping.Options{Envelope: mapping.EnvelopeOff}, formHeader)
	if err != nil {
		t.Fatal(err)
	}
	sizedMax := off.headerBytes + len(off.body)

	for _, tc := range []struct {
		name string
		m    *mapping.Message
		max  int
	}{
		{"envelope property over 32 KiB", texts, 0},
		{"properties at 64 KiB", header, 0},
		{"message at its size limit", sized, sizedMax},
	} {
		for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
			t.Run(tc.name+"/"+p.String(), func(t *testing.T) {
				var dropped, shed []string
				opt := mapping.Options{Policy: p, MaxMessageSize: tc.max,
					OnDrop: func(f, _ string) { dropped = append(dropped, f) }, OnShed: func(f []string) { shed = append(shed, f...) }}
				r, err := Encode(tc.m, opt)
				if err != nil {
					t.Fatalf("a message that fits natively: %v", err)
				}
				if len(dropped) > 0 || len(shed) == 0 {
					t.Errorf("dropped %v, shed %v", dropped, shed)
				}
				for _, a := range tc.m.Attributes {
					if r.Header[a.Name] == nil {
						t.Errorf("attribute %s left out", a.Name)
					}
				}
				if tc.max == 0 {
					shed = nil
					if _, err := EncodeBatch([]*mapping.Message{tc.m}, opt); err != nil || len(shed) == 0 {
						t.Errorf("batch: %v, shed %v", err, shed)
					}
				}
			})
		}
	}
	header.Attributes[0].Value = mapping.String(strings.Repeat("x", 20001+pad))
	if _, err := Encode(header, mapping.Options{}); !mapping.IsReject(err) {
		t.Errorf("properties over 64 KiB: %v", err)
	}
}
