package natsmap

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/mapping"
)

// benchMessage: a 1 KiB body and 10 attributes of common kinds.
func benchMessage() *mapping.Message {
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	return &mapping.Message{
		Body:        []byte(strings.Repeat("x", 1024)),
		DedupID:     "31907572164743c38741631acd554d6f",
		ContentType: "application/json",
		GroupKey:    "customer-42",
		Trace:       tr,
		Attributes: []mapping.Attribute{
			{Name: "product", Value: mapping.String("Windows 7 Ultimate")},
			{Name: "price", Value: mapping.Float64(299.98)},
			{Name: "quantity", Value: mapping.Int64(3)},
			{Name: "gift", Value: mapping.Bool(false)},
			{Name: "order-time", Value: mapping.Timestamp(time.Unix(1299228577, 0))},
			{Name: "region", Value: mapping.String("emea")},
			{Name: "line", Value: mapping.Int32(7)},
			{Name: "customer-id", Value: mapping.UUID([16]byte{1, 2, 3})},
			{Name: "tags", Value: mapping.Strings("new", "promo")},
			{Name: "channel", Value: mapping.String("web")},
		},
	}
}

func BenchmarkEncode(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m, "orders.new", EncodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	msg, err := Encode(benchMessage(), "orders.new", EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(msg, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineWire is the baseline of BenchmarkEncode and
// BenchmarkDecode: what nats.go itself costs for the same message, given
// the header texts: building the nats.Msg with its headers (nats.Header Add
// per value, the headers the codec writes) and reading them back.
func BenchmarkBaselineWire(b *testing.B) {
	enc, err := Encode(benchMessage(), "orders.new", EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	type kv struct{ k, v string }
	var pairs []kv
	for _, k := range slices.Sorted(maps.Keys(enc.Header)) {
		for _, v := range enc.Header[k] {
			pairs = append(pairs, kv{k, v})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		msg := nats.NewMsg("orders.new")
		msg.Data = enc.Data
		for _, p := range pairs {
			msg.Header.Add(p.k, p.v)
		}
		n := 0
		for _, p := range pairs {
			n += len(msg.Header.Values(p.k))
		}
		if n < len(pairs) {
			b.Fatal("headers lost")
		}
	}
}

// plainMessages are what most traffic is: a body, no attributes; one with a
// group key.
func plainMessages() map[string]*mapping.Message {
	body := []byte(strings.Repeat("x", 1024))
	return map[string]*mapping.Message{
		"plain":   {Body: body},
		"grouped": {Body: body, GroupKey: "customer-42"},
	}
}

func BenchmarkEncodePlain(b *testing.B) {
	for name, m := range plainMessages() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(m, "orders.new", EncodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodePlain(b *testing.B) {
	for name, m := range plainMessages() {
		msg, err := Encode(m, "orders.new", EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(msg, DecodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
