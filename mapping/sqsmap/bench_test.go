package sqsmap

import (
	"strings"
	"testing"

	"github.com/qbridge/qbridge/mapping"
)

// benchMessage: a 1 KiB body and 10 attributes of mixed types, all native,
// read from SQS (so no envelope is needed).
func benchMessage() *mapping.Message {
	return &mapping.Message{
		Body: []byte(strings.Repeat(`{"k":"Grüße, value"},`, 1024/22+1)[:1024]),
		Attributes: []mapping.Attribute{
			at("a_str", mapping.String("some text value")),
			at("b_int", mapping.Int32(42)),
			at("c_long", mapping.Int64(1<<40)),
			at("d_double", mapping.Float64(3.25)),
			at("e_uuid", mapping.UUID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})),
			at("f_bin", mapping.Binary([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 3}).WithLabel("png")),
			at("g_bool", mapping.Bool(true)),
			at("h_ts", mapping.TimestampMillis(1700000000000)),
			at("i_num", mapping.Number("12345.678")),
			at("j_type", mapping.String("order.created")),
		},
		Source: mapping.Source{Protocol: "sqs"},
	}
}

func BenchmarkEncode(b *testing.B) {
	m := benchMessage()
	opt := EncodeOptions{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeEnvelope: 9 attributes and fields that ride in the
// envelope (a message from another broker).
func BenchmarkEncodeEnvelope(b *testing.B) {
	m := benchMessage()
	m.Attributes = m.Attributes[:9]
	m.ID, m.CorrelationID, m.ContentType, m.Source.Protocol = "id-1", "c-1", "application/json", "amqp"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m, EncodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	o, err := Encode(benchMessage(), EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	msg := Deliver(o, "id", "rh", t0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	m := benchMessage()
	m.Attributes = m.Attributes[:9]
	m.ID, m.CorrelationID, m.ContentType, m.Source.Protocol = "id-1", "c-1", "application/json", "amqp"
	o, err := Encode(m, EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	msg := Deliver(o, "id", "rh", t0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineWire is the baseline of the benchmarks above: what any
// SQS client must do per message of this shape, whatever maps it: the MD5
// of the body and of the attributes (docs/wire-sqs.md §2; the SDK checks both on send
// and receive) and building the SDK's SendMessageInput.
func BenchmarkBaselineWire(b *testing.B) {
	o, err := Encode(benchMessage(), EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if MD5OfBody(o.Body) == "" || MD5OfAttributes(o.Attributes) == "" {
			b.Fatal("no digest")
		}
		if in := o.SendMessageInput("https://sqs.eu-west-1.amazonaws.com/123456789012/q"); in.MessageBody == nil {
			b.Fatal("no body")
		}
	}
}
