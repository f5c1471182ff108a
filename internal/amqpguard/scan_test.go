package amqpguard

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
)

// magic values that tests patch into types go-amqp cannot decode: a uuid
// becomes a decimal128 (same 16 bytes), an int a char or a decimal32, a long
// a decimal64.
var (
	magicUUID = amqp.UUID{0xde, 0xc1, 0x28, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}
	magicInt  = int32(0x0c4a0c4a)
	magicLong = int64(0x0de64de64de64de6)
)

func patch(t testing.TB, raw []byte, from, to []byte) []byte {
	t.Helper()
	i := bytes.Index(raw, from)
	if i < 0 {
		t.Fatalf("pattern % x not in % x", from, raw)
	}
	out := append([]byte(nil), raw...)
	copy(out[i:], to)
	return out
}

func marshal(t testing.TB, m *amqp.Message) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// poisonPayload returns a message whose application property "d" is of the
// given undecodable type.
func poisonPayload(t testing.TB, typ string) []byte {
	t.Helper()
	switch typ {
	case "decimal128":
		raw := marshal(t, &amqp.Message{ApplicationProperties: map[string]any{"d": magicUUID}, Data: [][]byte{[]byte("x")}})
		return patch(t, raw, append([]byte{0x98}, magicUUID[:]...), append([]byte{0x94}, magicUUID[:]...))
	case "char", "decimal32":
		code := byte(0x73)
		if typ == "decimal32" {
			code = 0x74
		}
		raw := marshal(t, &amqp.Message{ApplicationProperties: map[string]any{"d": magicInt}, Data: [][]byte{[]byte("x")}})
		return patch(t, raw, []byte{0x71, 0x0c, 0x4a, 0x0c, 0x4a}, []byte{code, 0x0c, 0x4a, 0x0c, 0x4a})
	case "decimal64":
		raw := marshal(t, &amqp.Message{ApplicationProperties: map[string]any{"d": magicLong}, Data: [][]byte{[]byte("x")}})
		return patch(t, raw, []byte{0x81, 0x0d, 0xe6}, []byte{0x84, 0x0d, 0xe6})
	}
	t.Fatalf("unknown type %s", typ)
	return nil
}

func sampleMessages() []*amqp.Message {
	id := "id-1"
	to := "/queue/x"
	ct := "application/json"
	now := time.UnixMilli(1700000000123).UTC()
	seq := uint32(7)
	return []*amqp.Message{
		{},
		{Data: [][]byte{[]byte("hello")}},
		{Data: [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300)}},
		{Value: "text"},
		{Value: map[string]any{"a": int64(1), "b": []any{"x", true, nil}}},
		{Sequence: [][]any{{int32(1), "two"}, {3.5}}},
		{
			Header:     &amqp.MessageHeader{Durable: true, Priority: 7, TTL: time.Minute, DeliveryCount: 3},
			Properties: &amqp.MessageProperties{MessageID: id, To: &to, ContentType: &ct, CreationTime: &now, GroupSequence: &seq, UserID: []byte("guest")},
			Annotations: amqp.Annotations{
				amqp.Symbol("x-opt-a"): "v", amqp.Symbol("x-opt-list"): []any{int64(1), "x"},
				int64(5): amqp.UUID{1}, amqp.Symbol("x-opt-arr"): []int32{1, 2, 3},
			},
			ApplicationProperties: map[string]any{
				"s": "str", "i": int32(-5), "l": int64(1 << 40), "d": 2.5, "f": float32(1.5), "b": true,
				"t": now, "u": amqp.UUID{9}, "bin": []byte{1, 2}, "ub": uint8(1), "us": uint16(2),
				"ui": uint32(3), "ul": uint64(4), "by": int8(-1), "sh": int16(-2), "sym": amqp.Symbol("sy"), "n": nil,
			},
			Footer: amqp.Annotations{amqp.Symbol("x-hash"): []byte{1}},
			Data:   [][]byte{[]byte("body")},
		},
		{Properties: &amqp.MessageProperties{MessageID: uint64(5), CorrelationID: amqp.UUID{3}}},
		{Properties: &amqp.MessageProperties{MessageID: []byte{1, 2, 3}}, Value: []string{"a", "b"}},
		{Value: [][]byte{{1}, {2, 3}}},
		{Value: []time.Time{now}},
		{Value: []amqp.Symbol{"a", "b"}},
		{Value: map[any]any{int64(1): "x", "k": []any{map[string]any{"n": nil}}}},
	}
}

func TestScanCleanMessages(t *testing.T) {
	for i, m := range sampleMessages() {
		raw := marshal(t, m)
		if scanSuspect(raw) {
			t.Errorf("message %d: suspect, want clean: % x", i, raw)
		}
		if err := decodeCheck(raw); err != nil {
			t.Errorf("message %d: go-amqp cannot decode it: %v", i, err)
		}
	}
}

func TestScanUndecodable(t *testing.T) {
	for _, typ := range []string{"decimal32", "decimal64", "decimal128", "char"} {
		raw := poisonPayload(t, typ)
		if !scanSuspect(raw) {
			t.Errorf("%s: scan says clean", typ)
		}
		err := decodeCheck(raw)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(typ+" not implemented")) {
			t.Errorf("%s: decodeCheck = %v", typ, err)
		}
	}
	// A header field of the wrong type: go-amqp fails, the scan must not
	// call it clean.
	raw := marshal(t, &amqp.Message{Header: &amqp.MessageHeader{Durable: true}})
	hdr := []byte{0x00, 0x53, 0x70, 0xd0, 0, 0, 0, 7, 0, 0, 0, 2, 0x41}
	bad := patch(t, raw, hdr, append(hdr[:len(hdr)-1:len(hdr)-1], 0x43))
	if err := decodeCheck(bad); err == nil {
		t.Fatalf("go-amqp decodes a uint durable: the test needs another malformed header")
	}
	if !scanSuspect(bad) {
		t.Error("header with uint durable: scan says clean")
	}
	// Truncations of a valid message are never called clean unless go-amqp
	// decodes them.
	full := marshal(t, sampleMessages()[6])
	for n := 0; n < len(full); n++ {
		if !scanSuspect(full[:n]) && decodeCheck(full[:n]) != nil {
			t.Fatalf("truncated at %d: scan clean, go-amqp fails: %v", n, decodeCheck(full[:n]))
		}
	}
}

// FuzzScanSound: whatever the bytes, a payload the scan calls clean must
// decode with go-amqp (the guard lets it through undecoded).
func FuzzScanSound(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := m.MarshalBinary()
		f.Add(b)
	}
	for _, typ := range []string{"decimal32", "decimal64", "decimal128", "char"} {
		f.Add(poisonPayload(f, typ))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		suspect := scanSuspect(p)
		err := decodeCheck(p)
		if !suspect && err != nil {
			t.Fatalf("scan says clean, go-amqp fails: %v\n% x", err, p)
		}
		_, _ = SkipValue(p)
	})
}

func BenchmarkScan(b *testing.B) {
	ap := map[string]any{}
	for i := 0; i < 10; i++ {
		ap[string(rune('a'+i))+"-prop"] = "value-of-the-property"
	}
	raw := marshal(b, &amqp.Message{Header: &amqp.MessageHeader{Durable: true}, Properties: &amqp.MessageProperties{MessageID: "id"},
		ApplicationProperties: ap, Data: [][]byte{make([]byte, 1024)}})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if scanSuspect(raw) {
				b.Fatal("suspect")
			}
		}
	})
	b.Run("go-amqp-decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := decodeCheck(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An annotations map keyed by a list or map makes go-amqp panic ("hash of
// unhashable type") — in a receiver, inside go-amqp's own goroutine, which
// would take the process down. The guard catches it before go-amqp sees it.
func TestUnhashableAnnotationKey(t *testing.T) {
	for name, key := range map[string][]byte{
		"list": {0xc0, 0x01, 0x00},
		"map":  {0xc1, 0x01, 0x00},
	} {
		// message-annotations {key: null} + data "x"
		body := append(append([]byte{}, key...), 0x40)
		p := append([]byte{0x00, 0x53, 0x72, 0xc1, byte(1 + len(body)), 0x02}, body...)
		p = append(p, 0x00, 0x53, 0x75, 0xa0, 0x01, 'x')
		if !scanSuspect(p) {
			t.Errorf("%s key: scan says clean", name)
		}
		err := decodeCheck(p)
		if err == nil {
			t.Errorf("%s key: go-amqp decodes it", name)
			continue
		}
		t.Logf("%s key: %v", name, err)
		frame := transferFrame(0, 0, 1, false, false, p)
		out, log, reasons := runGuard(t, false, frame, 16)
		if len(reasons) != 1 {
			t.Fatalf("%s key: reasons %v", name, reasons)
		}
		_, info := stubMessage(t, log, readFrames(t, out)[0].payload)
		if !strings.HasPrefix(info.Reason, "message-annotations: go-amqp panicked") || !bytes.Equal(info.Raw, p) {
			t.Fatalf("info %+v", info)
		}
	}
}
