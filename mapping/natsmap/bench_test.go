package natsmap

import (
	"strings"
	"testing"
	"time"

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
