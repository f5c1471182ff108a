package sbmap

import (
	"encoding/hex"
	"strings"
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
func roundTrip(t testing.TB, m *mapping.Message, opt mapping.Options) *mapping.Message {
	t.Helper()
	msg, err := Encode(m, opt)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	got, err := Decode(overWire(t, msg))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

func ptr[T any](v T) *T { return &v }

func envelopeOf(t testing.TB, msg *amqp.Message) *mapping.Envelope {
	t.Helper()
	s, ok := msg.ApplicationProperties[mapping.EnvelopeName].(string)
	if !ok {
		return nil
	}
	env, err := mapping.ParseEnvelope(s)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// unhex reads hex written with spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// collect returns Options whose drops are appended to *got (what the
// Encode policy reports through the same callback is not a drop).
func collect(p mapping.Policy, got *[]string) mapping.Options {
	return mapping.Options{Policy: p, OnDrop: func(f, r string) {
		if _, encoded := mapping.EncodedReport(r); !encoded {
			*got = append(*got, f)
		}
	}}
}

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }
