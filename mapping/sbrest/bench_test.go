package sbrest

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
		ID:          "31907572164743c38741631acd554d6f",
		ContentType: "application/json",
		Subject:     "order.created",
		GroupKey:    "customer-42",
		TTL:         time.Hour,
		Trace:       tr,
		Attributes: []mapping.Attribute{
			{Name: "Product", Value: mapping.String("Windows 7 Ultimate")},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Quantity", Value: mapping.Int64(3)},
			{Name: "Gift", Value: mapping.Bool(false)},
			{Name: "Order-Time", Value: mapping.Timestamp(time.Unix(1299228577, 0))},
			{Name: "Region", Value: mapping.String("emea")},
			{Name: "Line", Value: mapping.Int32(7)},
			{Name: "Customer-Id", Value: mapping.UUID([16]byte{1, 2, 3})},
			{Name: "Discount", Value: mapping.Float32(0.1)},
			{Name: "Channel", Value: mapping.String("web")},
		},
	}
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
	r, err := Encode(benchMessage(), mapping.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(r.Header, r.Body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderJSON(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderJSON(m, mapping.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON(b *testing.B) {
	out, err := RenderJSON(benchMessage(), mapping.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJSON(out); err != nil {
			b.Fatal(err)
		}
	}
}
