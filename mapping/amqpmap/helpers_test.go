package amqpmap

import (
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// overWire marshals msg and unmarshals it again, as a receiver sees it.
func overWire(t testing.TB, msg *amqp.Message) *amqp.Message {
	t.Helper()
	b, err := msg.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	var r amqp.Message
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	return &r
}

// roundTrip is model -> Encode -> bytes -> Decode.
func roundTrip(t testing.TB, d *Dialect, m *mapping.Message, opt mapping.Options) *mapping.Message {
	t.Helper()
	msg, err := d.Encode(m, opt)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	got, err := d.Decode(overWire(t, msg))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

func ptr[T any](v T) *T { return &v }

// collect returns Options whose drops are appended to *got (what the
// Encode policy reports through the same callback is not a drop).
func collect(p mapping.Policy, got *[]string) mapping.Options {
	return mapping.Options{Policy: p, OnDrop: func(f, r string) {
		if _, encoded := mapping.EncodedReport(r); !encoded {
			*got = append(*got, f)
		}
	}}
}
