package sbmap

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/amqpmap"
)

// TestEnvelopeNeverCostsAMessage: at Service Bus's limits (32 KiB for one
// property, 64 KiB for all, the message size) a message whose own content
// fits is sent under every policy with every attribute native; the envelope
// is shed member by member (mapping.ShedOrder) until it fits.
func TestEnvelopeNeverCostsAMessage(t *testing.T) {
	// Exact texts that a double cannot say: the envelope outgrows 32 KiB
	// while the properties themselves are small.
	texts := &mapping.Message{Body: []byte("b"), AbsoluteExpiry: time.UnixMilli(1_800_000_000_000).UTC()}
	for i := range 100 {
		v, _ := mapping.ParseValue("Number.float", "1."+strings.Repeat("0", 330))
		texts.Attributes = append(texts.Attributes, mapping.Attribute{Name: fmt.Sprintf("n%03d", i), Value: v})
	}
	// User properties of exactly 64 KiB with the envelope off.
	header := &mapping.Message{Body: []byte("b"), AbsoluteExpiry: time.UnixMilli(1_800_000_000_000).UTC()}
	v, _ := mapping.ParseValue("Number.float", "3.50")
	header.Attributes = []mapping.Attribute{{Name: "f", Value: v}}
	for i := range 3 {
		header.Attributes = append(header.Attributes, mapping.Attribute{Name: fmt.Sprint("s", i), Value: mapping.String(strings.Repeat("x", 20000))})
	}
	off, err := Encode(header, mapping.Options{Envelope: mapping.EnvelopeOff})
	if err != nil {
		t.Fatal(err)
	}
	pad := MaxHeaderSize - amqpmap.MessageSize(off).Header
	header.Attributes[3].Value = mapping.String(strings.Repeat("x", 20000+pad))

	for _, tc := range []struct {
		name string
		m    *mapping.Message
		max  int
	}{
		{"envelope property over 32 KiB", texts, 0},
		{"properties at 64 KiB", header, 0},
		{"message at its size limit", texts, -1},
	} {
		for _, p := range []mapping.Policy{mapping.Reject, mapping.Drop, mapping.Encode} {
			t.Run(tc.name+"/"+p.String(), func(t *testing.T) {
				max := tc.max
				if max < 0 {
					o, err := Encode(tc.m, mapping.Options{Envelope: mapping.EnvelopeOff})
					if err != nil {
						t.Fatal(err)
					}
					max = amqpmap.MessageSize(o).Total
				}
				var dropped, shed []string
				opt := collect(p, &dropped)
				opt.MaxMessageSize = max
				opt.OnShed = func(f []string) { shed = append(shed, f...) }
				msg, err := Encode(tc.m, opt)
				if err != nil {
					t.Fatalf("a message that fits natively: %v", err)
				}
				if len(dropped) > 0 || len(shed) == 0 {
					t.Errorf("dropped %v, shed %v", dropped, shed)
				}
				for _, a := range tc.m.Attributes {
					if _, ok := msg.ApplicationProperties[a.Name]; !ok {
						t.Errorf("attribute %s left out", a.Name)
					}
				}
				if n, _ := amqpmap.PropertySize(mapping.EnvelopeName, msg.ApplicationProperties[mapping.EnvelopeName]); n > MaxPropertySize {
					t.Errorf("envelope property of %d bytes", n)
				}
				if s := amqpmap.MessageSize(msg); s.Header > MaxHeaderSize || max > 0 && s.Total > max {
					t.Errorf("size %+v", s)
				}
				t.Logf("shed %v", shed)
			})
		}
	}
	// One byte over with the message's own content: the policy decides.
	// Both are size limits: dead-lettered too-large, as over HTTPS.
	header.Attributes[3].Value = mapping.String(strings.Repeat("x", 20001+pad))
	var r *mapping.RejectError
	if _, err := Encode(header, mapping.Options{}); !errors.As(err, &r) || !r.TooLarge {
		t.Errorf("properties over 64 KiB: %v, want a too-large rejection", err)
	}
	big := &mapping.Message{Attributes: []mapping.Attribute{{Name: "s", Value: mapping.String(strings.Repeat("x", MaxPropertySize))}}}
	if _, err := Encode(big, mapping.Options{}); !errors.As(err, &r) || !r.TooLarge || r.Field != `application-properties "s"` {
		t.Errorf("a property over 32 KiB: %v, want a too-large rejection", err)
	}
}
