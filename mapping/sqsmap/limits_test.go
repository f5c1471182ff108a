package sqsmap

import (
	"slices"
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// shedRecorder collects what encoders report as shed.
type shedRecorder struct{ fields []string }

func (r *shedRecorder) onShed(f []string) { r.fields = append(r.fields, f...) }

// busy is a message from another broker with as many carried fields as
// the envelope can hold, and n attributes.
func busy(n int) *mapping.Message {
	m := &mapping.Message{
		Body: []byte("b"), ID: "sb-1", CorrelationID: "c-1", ContentType: "application/json",
		Subject: "s", To: "t", ReplyTo: "r", Source: mapping.Source{Protocol: "servicebus"},
		Attributes: nAttrs(n),
	}
	return m
}

// TestEnvelopeNeverCostsAMessage: at every limit SQS has (10 attributes,
// the total size), a message that fits without the envelope is sent under
// every policy, without dropping an attribute: the envelope is shed instead,
// member by member in mapping.ShedOrder for the size, whole for the count.
func TestEnvelopeNeverCostsAMessage(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			// Exactly 10 attributes.
			var drops recorder
			var shed shedRecorder
			o := opts(p, &drops)
			o.OnShed = shed.onShed
			out, err := Encode(busy(10), o)
			if err != nil {
				t.Fatalf("10 attributes: %v", err)
			}
			if len(out.Attributes) != 10 || envelopeOf(t, out) != nil || len(drops.fields) > 0 {
				t.Errorf("10 attributes: wire %v, dropped %v", keys(out.Attributes), drops.fields)
			}
			want := []string{"replyTo", "to", "subject", "contentType", "correlationId", "id"}
			if !slices.Equal(shed.fields, want) {
				t.Errorf("shed %v, want %v (mapping.ShedOrder)", shed.fields, want)
			}

			// Total size exactly at the limit without the envelope.
			m := busy(3)
			probe, err := Encode(m, EncodeOptions{Options: mapping.Options{Envelope: mapping.EnvelopeOff}})
			if err != nil {
				t.Fatal(err)
			}
			shed = shedRecorder{}
			drops = recorder{}
			o = opts(p, &drops)
			o.OnShed = shed.onShed
			o.MaxMessageSize = probe.Size()
			out, err = Encode(m, o)
			if err != nil {
				t.Fatalf("size at the limit: %v", err)
			}
			if out.Size() != o.MaxMessageSize || len(drops.fields) > 0 || len(shed.fields) != 6 {
				t.Errorf("size at the limit: size %d of %d, dropped %v, shed %v", out.Size(), o.MaxMessageSize, drops.fields, shed.fields)
			}
			// Room for part of the envelope: only the first members go.
			full, err := Encode(m, opts(p, nil))
			if err != nil {
				t.Fatal(err)
			}
			shed = shedRecorder{}
			o.MaxMessageSize = full.Size() - 1
			out, err = Encode(m, o)
			if err != nil {
				t.Fatal(err)
			}
			env := envelopeOf(t, out)
			if len(shed.fields) != 1 || shed.fields[0] != "replyTo" || env == nil || env.Fields.ReplyTo != "" || env.Fields.ID != "sb-1" {
				t.Errorf("one byte short: shed %v, envelope %+v", shed.fields, env)
			}
			// One byte more than the message itself takes is the policy's.
			o.MaxMessageSize = probe.Size() - 1
			if _, err := Encode(m, o); p != mapping.Drop {
				wantReject(t, err, "message")
			}
		})
	}
}

// TestEnvelopeKeptWhenEssential: what the Encode policy moved into the
// envelope is content and is never shed: the envelope keeps its slot.
func TestEnvelopeKeptWhenEssential(t *testing.T) {
	var shed shedRecorder
	o := opts(mapping.Encode, nil)
	o.OnShed = shed.onShed
	m := busy(11)
	out, back := roundTrip(t, m, o)
	if len(out.Attributes) != 10 || envelopeOf(t, out) == nil || len(shed.fields) != 0 {
		t.Fatalf("wire %v, shed %v", keys(out.Attributes), shed.fields)
	}
	if d := diffMessages(m, back); d != "" {
		t.Error(d)
	}
}

// TestEnvelopeOff: no envelope on the wire, what it would carry reported.
func TestEnvelopeOff(t *testing.T) {
	for _, p := range policies {
		var shed shedRecorder
		o := opts(p, nil)
		o.Envelope = mapping.EnvelopeOff
		o.OnShed = shed.onShed
		m := busy(2)
		m.Attributes = append(m.Attributes, at("z", mapping.String("x").WithLabel(strings.Repeat("l", 300))))
		out, err := Encode(m, o)
		if p != mapping.Drop {
			// Encode needs the envelope for the long label: it rejects.
			wantReject(t, err, `attribute "z"`)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Attributes[mapping.EnvelopeName]; ok || len(out.Attributes) != 2 {
			t.Errorf("%s: wire %v", p, keys(out.Attributes))
		}
		if !slices.Equal(shed.fields, []string{"replyTo", "to", "subject", "contentType", "correlationId", "id"}) {
			t.Errorf("%s: shed %v", p, shed.fields)
		}
	}
	// FIFO without a group: the default group is not reported as shed.
	var shed shedRecorder
	o := opts(mapping.Reject, nil)
	o.FIFO = true
	o.Envelope = mapping.EnvelopeOff
	o.OnShed = shed.onShed
	if out, err := Encode(sqsMsg("b"), o); err != nil || len(out.Attributes) != 0 || len(shed.fields) != 0 {
		t.Errorf("FIFO off: %v %v %v", err, out, shed.fields)
	}
}
