package sbmap

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

var uuid1 = [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}

func everyValue() []mapping.Value {
	return []mapping.Value{
		mapping.String("text"), mapping.String("x").WithLabel("custom"), mapping.Symbol("sym"),
		mapping.Number("42"), mapping.Number("1.5"), mapping.Number("1.50"), mapping.Number("123456789012345678901234567890"),
		mapping.Binary([]byte{0, 1}), mapping.Binary([]byte{1}).WithLabel("png"), mapping.Bool(true),
		mapping.Int8(-1), mapping.Int16(-300), mapping.Int32(42), mapping.Int64(math.MinInt64),
		mapping.Uint8(255), mapping.Uint16(65535), mapping.Uint32(math.MaxUint32), mapping.Uint64(math.MaxUint64),
		mapping.Float32(1.25), mapping.Float64(math.Pi), mapping.Float64(math.Inf(1)), mapping.Float64(0.1).WithLabel("float"),
		mapping.Decimal(mapping.KindDecimal32, "1.5"), mapping.Decimal(mapping.KindDecimal64, "2"),
		mapping.Decimal(mapping.KindDecimal128, "79228162514264337593543950335"), mapping.Char('€'),
		mapping.Timestamp(time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)), mapping.UUID(uuid1),
		// Not mapping.URI("x").WithLabel("link"): its type spelling String.link
		// parses back as a labelled String (a model limit, reported).
		mapping.URI("https://example.com/"),
		mapping.DateTimeOffset(time.Date(2024, 5, 6, 7, 8, 9, 1234567*100, time.UTC)),
		mapping.TimeSpan(-90*time.Minute - 100), mapping.Strings("a", "b"),
		mapping.List(mapping.Int32(1), mapping.URI("u")), mapping.Map(mapping.String("k"), mapping.TimeSpanTicks(1)),
		mapping.Null(),
	}
}

func TestRoundTripValues(t *testing.T) {
	m := &mapping.Message{Body: []byte("x")}
	for i, v := range everyValue() {
		name := fmt.Sprintf("a%02d", i)
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: name, Value: v})
		m.Annotations = append(m.Annotations, mapping.Attribute{Name: "x-" + name, Value: v})
		t.Run(name+"_"+v.DataType(), func(t *testing.T) {
			one := &mapping.Message{Body: []byte("x"), Attributes: mappingtest.Attrs("a", v), Annotations: mappingtest.Attrs("x", v)}
			mappingtest.Check(t, one, roundTrip(t, one, mapping.Options{}))
			b, _ := json.Marshal(v)
			body := &mapping.Message{BodyType: mapping.BodyValue, Body: b}
			mappingtest.Check(t, body, roundTrip(t, body, mapping.Options{}))
		})
	}
	mappingtest.Check(t, m, roundTrip(t, m, mapping.Options{}))
}

func TestRoundTripProperties(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6e6, time.UTC)
	tr, _ := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	tr.State = "k=v"
	full := &mapping.Message{
		Body: []byte("payload"), BodyType: mapping.BodyText,
		ID: mapping.UUIDString(uuid1), IDKind: mapping.KindUUID, CorrelationID: "AAE=", CorrelationKind: mapping.KindBinary,
		ContentType: "application/json", ContentEncoding: "gzip", Subject: "subject", To: "to", ReplyTo: "rt",
		ReplyToGroup: "rg", GroupKey: "g1", GroupSequence: 7, PartitionKey: "g1", ViaPartitionKey: "vpk",
		DedupID: "dedup", UserID: []byte("user"), TTL: 90 * time.Second, ScheduledAt: at.Add(time.Hour),
		CreationTime: at, AbsoluteExpiry: at.Add(2 * time.Hour), Durable: true, Priority: ptr(uint8(9)), FirstAcquirer: true,
		Trace: tr, Attributes: mappingtest.Attrs("a", mapping.Int32(1)), Annotations: mappingtest.Attrs("x-custom", mapping.Symbol("v")),
	}
	cases := map[string]func(m *mapping.Message){
		"full": func(*mapping.Message) {},
		"multi-data body": func(m *mapping.Message) {
			m.BodyType, m.Body = mapping.BodyMultiData, []byte(`{"type":"list","value":[]}`)
		},
		"sub-ms times": func(m *mapping.Message) {
			m.ScheduledAt, m.CreationTime, m.TTL = at.Add(1), at.Add(2), time.Microsecond
		},
		"x-ray trace": func(m *mapping.Message) {
			m.Trace, _ = mapping.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
		},
		"user Diagnostic-Id": func(m *mapping.Message) {
			m.Attributes = mappingtest.Attrs(DiagnosticIDProperty, mapping.String("mine"), "a", mapping.Int32(1))
		},
		"empty":              func(m *mapping.Message) { *m = mapping.Message{} },
		"dedup id, no id":    func(m *mapping.Message) { m.ID, m.IDKind = "", 0 },
		"id equals dedup id": func(m *mapping.Message) { m.ID, m.IDKind = m.DedupID, 0 },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			m := full.Clone()
			edit(m)
			mappingtest.Check(t, m, roundTrip(t, m, mapping.Options{}))
		})
	}
	t.Run("long dedup id, no id, Encode policy", func(t *testing.T) {
		m := full.Clone()
		m.ID, m.IDKind, m.DedupID = "", 0, strings.Repeat("d", 200)
		mappingtest.Check(t, m, roundTrip(t, m, mapping.Options{Policy: mapping.Encode}))
	})
	t.Run("ttl over 49.7 days, Encode policy", func(t *testing.T) {
		m := full.Clone()
		m.TTL = 100 * 24 * time.Hour
		mappingtest.Check(t, m, roundTrip(t, m, mapping.Options{Policy: mapping.Encode}))
	})
}

func TestCarrySource(t *testing.T) {
	m := &mapping.Message{Body: []byte("x"), Source: mapping.Source{Protocol: "sqs", SequenceNumber: "7", DeliveryCount: 3}}
	got := roundTrip(t, m, mapping.Options{CarrySource: true})
	if got.Source.Protocol != "sqs" || got.Source.SequenceNumber != "7" || got.Source.DeliveryCount != 3 {
		t.Errorf("source %+v", got.Source)
	}
	if got := roundTrip(t, m, mapping.Options{}); got.Source.Protocol != "servicebus" || got.Source.DeliveryCount != 1 {
		t.Errorf("source %+v", got.Source)
	}
}
