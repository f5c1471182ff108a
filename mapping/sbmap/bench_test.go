package sbmap

import (
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// benchMessage is mappingtest.BenchMessage in a session.
func benchMessage() *mapping.Message {
	m := mappingtest.BenchMessage()
	m.GroupKey = "s"
	return m
}

func BenchmarkEncode(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m, mapping.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	msg, err := Encode(benchMessage(), mapping.Options{})
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := msg.MarshalBinary()
	var wire amqp.Message
	if err := wire.UnmarshalBinary(raw); err != nil {
		b.Fatal(err)
	}
	wire.DeliveryTag = make([]byte, 16)
	wire.Annotations = amqp.Annotations{AnnotationSequenceNumber: int64(5), AnnotationEnqueuedTime: time.UnixMilli(1700000000000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(&wire); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineWire is the baseline of BenchmarkEncode and
// BenchmarkDecode: what go-amqp itself costs for the same message, encoded
// to its wire bytes and decoded back ((*amqp.Message).MarshalBinary +
// UnmarshalBinary). The codec's figures read as a ratio against it.
func BenchmarkBaselineWire(b *testing.B) {
	msg, err := Encode(benchMessage(), mapping.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		raw, err := msg.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		var wire amqp.Message
		if err := wire.UnmarshalBinary(raw); err != nil {
			b.Fatal(err)
		}
	}
}
