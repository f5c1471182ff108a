package sbmap

import (
	"fmt"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// benchMessage is a 1 KiB body with 10 attributes of mixed kinds and a trace.
func benchMessage(testing.TB) *mapping.Message {
	m := &mapping.Message{Body: make([]byte, 1024), ID: "0f8fad5b-d9cb-469f-a165-70867728950e", ContentType: "application/json", GroupKey: "s"}
	for i := 0; i < 10; i++ {
		var v mapping.Value
		switch i % 4 {
		case 0:
			v = mapping.String(fmt.Sprintf("value-%d", i))
		case 1:
			v = mapping.Int64(int64(i) * 1000)
		case 2:
			v = mapping.Bool(true)
		case 3:
			v = mapping.Float64(float64(i) / 3)
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: fmt.Sprintf("attr-%02d", i), Value: v})
	}
	m.Trace, _ = mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	return m
}

func BenchmarkEncode(b *testing.B) {
	m := benchMessage(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m, mapping.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	msg, err := Encode(benchMessage(b), mapping.Options{})
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
	msg, err := Encode(benchMessage(b), mapping.Options{})
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
