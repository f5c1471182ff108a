package sbrest

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
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

// baselineBrokerProps is BrokerProperties as a plain client would declare it
// for encoding/json.
type baselineBrokerProps struct {
	MessageId        string  `json:",omitempty"`
	CorrelationId    string  `json:",omitempty"`
	SessionId        string  `json:",omitempty"`
	PartitionKey     string  `json:",omitempty"`
	Label            string  `json:",omitempty"`
	To               string  `json:",omitempty"`
	ReplyTo          string  `json:",omitempty"`
	ReplyToSessionId string  `json:",omitempty"`
	ContentType      string  `json:",omitempty"`
	TimeToLive       float64 `json:",omitempty"`
}

// BenchmarkBaselineWire is the baseline of BenchmarkEncode and
// BenchmarkDecode: what net/http and encoding/json cost a plain client for
// the same message, given the property texts: setting the same headers
// (custom properties and Content-Type, http.Header.Set) and reading them
// back (Get), marshalling the same BrokerProperties with encoding/json and
// unmarshalling them.
func BenchmarkBaselineWire(b *testing.B) {
	r, err := Encode(benchMessage(), mapping.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var bp baselineBrokerProps
	if err := json.Unmarshal([]byte(r.Header.Get(hdrBrokerProps)), &bp); err != nil {
		b.Fatal(err)
	}
	type kv struct{ k, v string }
	var pairs []kv
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		if k != hdrBrokerProps {
			pairs = append(pairs, kv{k, r.Header[k][0]})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		h := make(http.Header, len(pairs)+1)
		for _, p := range pairs {
			h.Set(p.k, p.v)
		}
		bpJSON, err := json.Marshal(&bp)
		if err != nil {
			b.Fatal(err)
		}
		h.Set(hdrBrokerProps, string(bpJSON))
		n := 0
		for _, p := range pairs {
			n += len(h.Get(p.k))
		}
		var back baselineBrokerProps
		if err := json.Unmarshal([]byte(h.Get(hdrBrokerProps)), &back); err != nil || n == 0 {
			b.Fatal(err)
		}
	}
}
