package sbmap

import (
	"bytes"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// TestGoldenDescribed checks that URI, DateTimeOffset and TimeSpan values
// leave as the exact bytes a .NET producer (Microsoft.Azure.Amqp) writes:
// 0x00, a sym8 descriptor, then a str8 or a long (smalllong from -128 to
// 127), inside go-amqp's map32 application-properties section.
func TestGoldenDescribed(t *testing.T) {
	tests := []struct {
		name  string
		v     mapping.Value
		value string // the encoded described value
	}{
		{"uri", mapping.URI("https://x/"), `
			00 a3 11 636f6d2e6d6963726f736f66743a757269                           sym8 "com.microsoft:uri"
			a1 0a 68747470733a2f2f782f                                          str8 "https://x/"`},
		{"timespan", mapping.TimeSpan(1500 * time.Millisecond), `
			00 a3 16 636f6d2e6d6963726f736f66743a74696d657370616e                   sym8 "com.microsoft:timespan"
			81 0000000000e4e1c0                                                 long 15000000 ticks`},
		{"small timespan", mapping.TimeSpanTicks(-5), `
			00 a3 16 636f6d2e6d6963726f736f66743a74696d657370616e
			55 fb                                                               smalllong -5`},
		{"datetime-offset", mapping.DateTimeOffset(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)), `
			00 a3 1d 636f6d2e6d6963726f736f66743a6461746574696d652d6f6666736574     sym8 "com.microsoft:datetime-offset"
			81 08dc0a5c9900c000                                                 long 638396640000000000 UTC ticks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value := hexWords(t, tt.value)
			entries := append([]byte{0xa1, 0x01, 'p'}, value...)
			size := 4 + len(entries)
			// The empty message-annotations (map32) and properties (list0)
			// sections the Azure SDK sends on every message, then the
			// application-properties.
			want := []byte{0x00, 0x53, 0x72, 0xd1, 0, 0, 0, 4, 0, 0, 0, 0, 0x00, 0x53, 0x73, 0x45}
			want = append(want, 0x00, 0x53, 0x74, 0xd1, 0, 0, 0, byte(size), 0, 0, 0, 2)
			want = append(want, entries...)
			want = append(want, 0x00, 0x53, 0x75, 0xa0, 0x00) // empty data section

			msg, err := Encode(&mapping.Message{Attributes: mappingtest.Attrs("p", tt.v)}, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := msg.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%x\nwant\n%x", got, want)
			}
			// and the .NET bytes decode to the same value
			var back amqp.Message
			if err := back.UnmarshalBinary(want); err != nil {
				t.Fatal(err)
			}
			m, err := Decode(&back)
			if err != nil {
				t.Fatal(err)
			}
			mappingtest.Check(t, &mapping.Message{Attributes: mappingtest.Attrs("p", tt.v)}, m)
		})
	}
}

// TestGoldenLockToken: the delivery tag is a .NET GUID (Guid.ToByteArray);
// the lock token is its canonical string, and the x-opt-lock-token delivery
// annotation (an AMQP uuid, RFC order) overrides it.
func TestGoldenLockToken(t *testing.T) {
	tag := unhex(t, "d5cfa97d d540 b14b 8d64ec5a52e1c547") // Guid 7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547
	msg := &amqp.Message{DeliveryTag: tag, Data: [][]byte{nil}}
	m, err := Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"; m.Source.LockToken != want {
		t.Errorf("lock token %q, want %q", m.Source.LockToken, want)
	}
	if u, _ := LockToken(msg); GUIDToUUID([16]byte(u)) != amqp.UUID(tag) {
		t.Error("GUIDToUUID is not its own inverse")
	}

	// delivery-annotations {x-opt-lock-token: uuid 11111111-2222-3333-4444-555555555555}
	var withAnn amqp.Message
	raw := unhex(t, `00 53 71 d1 0000001e 00000002
		a3 10 782d6f70742d6c6f636b2d746f6b656e
		98 11111111 2222 3333 4444 555555555555`)
	if err := withAnn.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	withAnn.DeliveryTag = tag
	if m, err = Decode(&withAnn); err != nil {
		t.Fatal(err)
	}
	if want := "11111111-2222-3333-4444-555555555555"; m.Source.LockToken != want {
		t.Errorf("lock token %q, want the annotation's %q", m.Source.LockToken, want)
	}

	for _, tag := range [][]byte{nil, make([]byte, 8)} {
		if m, _ := Decode(&amqp.Message{DeliveryTag: tag}); m.Source.LockToken != "" {
			t.Errorf("tag %x: lock token %q, want none", tag, m.Source.LockToken)
		}
	}
}

// TestGoldenBrokerProperties: the bytes of a received Service Bus message
// with the broker's annotations (content-type a symbol on the wire).
func TestGoldenBrokerProperties(t *testing.T) {
	m := &mapping.Message{ID: "m", ContentType: "application/json", GroupKey: "s", PartitionKey: "s",
		ScheduledAt: time.UnixMilli(1000).UTC(), Body: []byte("{}")}
	msg, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Two annotations: marshal order follows Go's map order, so check the
	// sections other than annotations byte by byte.
	msg2 := *msg
	msg2.Annotations = nil
	got, err := msg2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, `
		00 53 73 d0 00000024 0000000b
		   a1 01 6d  40 40 40 40 40
		   a3 10 6170706c69636174696f6e2f6a736f6e
		   40 40 40
		   a1 01 73
		00 53 75 a0 02 7b7d`)
	if !bytes.Equal(got, want) {
		t.Errorf("encoded\n%x\nwant\n%x", got, want)
	}
	wantAnn := amqp.Annotations{AnnotationPartitionKey: "s", AnnotationScheduledEnqueueTime: time.UnixMilli(1000).UTC()}
	if len(msg.Annotations) != 2 || msg.Annotations[AnnotationPartitionKey] != wantAnn[AnnotationPartitionKey] ||
		!msg.Annotations[AnnotationScheduledEnqueueTime].(time.Time).Equal(time.UnixMilli(1000)) {
		t.Errorf("annotations %#v, want %#v", msg.Annotations, wantAnn)
	}
}

func hexWords(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	for _, line := range bytes.Split([]byte(s), []byte("\n")) {
		for _, w := range bytes.Fields(line) {
			b, err := hexDecode(string(w))
			if err != nil {
				break // a comment
			}
			out = append(out, b...)
		}
	}
	return out
}
