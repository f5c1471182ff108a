package sbmap

import (
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestRenderJSON(t *testing.T) {
	m := &mapping.Message{ID: "m", PartitionKey: "p", Body: []byte("hi"),
		Attributes: mappingtest.Attrs("ts", mapping.TimeSpan(time.Second))}
	got, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messageAnnotations":[{"key":"x-opt-partition-key","value":{"type":"string","value":"p"}}],` +
		`"properties":{"messageId":{"type":"string","value":"m"}},` +
		`"applicationProperties":[{"key":"ts","value":{"type":"timespan","value":"1"}}],"body":{"data":["aGk="]}}`
	if string(got) != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	back, err := ParseJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	mappingtest.Check(t, m, back)
}

func TestParseJSON(t *testing.T) {
	j := `{"deliveryTag":"1c+pfdVAsUuNZOxaUuHFRw==","header":{"deliveryCount":1},` +
		`"messageAnnotations":[{"key":"x-opt-sequence-number","value":{"type":"long","value":12}},` +
		`{"key":"x-opt-enqueued-time","value":{"type":"timestamp","value":1700000000000}}],` +
		`"applicationProperties":[{"key":"Diagnostic-Id","value":{"type":"string","value":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},` +
		`{"key":"when","value":{"type":"datetime-offset","value":"2024-01-01T00:00:00.0000000Z"}}],"body":{"data":[""]}}`
	m, err := ParseJSON([]byte(j))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Source
	if s.LockToken != "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547" || s.SequenceNumber != "12" || s.DeliveryCount != 2 ||
		!s.EnqueuedTime.Equal(time.UnixMilli(1700000000000)) || m.Trace.IsZero() {
		t.Errorf("decoded %+v", m)
	}
	mappingtest.Check(t, &mapping.Message{Trace: m.Trace, Attributes: mappingtest.Attrs("when", mapping.DateTimeOffset(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)))}, m)

	for _, bad := range []string{`{"extra":1}`, `{"properties":{"to":"x","bogus":2}}`} {
		if _, err := ParseJSON([]byte(bad)); !mapping.IsReject(err) || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v, want an unknown-field RejectError", bad, err)
		}
	}
}
