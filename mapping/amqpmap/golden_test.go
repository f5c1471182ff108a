package amqpmap

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// unhex reads hex written with spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenEncode checks encoded messages byte for byte against
// hand-written AMQP 1.0 encodings (one map entry per map, so that Go's map
// order cannot matter), and that they decode back.
func TestGoldenEncode(t *testing.T) {
	tests := []struct {
		name string
		m    mapping.Message
		want string
	}{
		{"header, properties, application property, data", mapping.Message{
			ID: "m1", Durable: true, TTL: time.Second, Body: []byte("hi"), Attributes: mappingtest.Attrs("n", mapping.Int32(42)),
		}, `
			00 53 70  d0 0000000b 00000003  41 40 70 000003e8        header: durable, priority null, ttl uint 1000
			00 53 73  d0 00000008 00000001  a1 02 6d31               properties: message-id str8 "m1"
			00 53 74  d1 00000009 00000002  a1 01 6e  54 2a          application-properties: "n" smallint 42
			00 53 75  a0 02 6869                                     data "hi"`},
		{"typed ids, content-type symbol, group-sequence", mapping.Message{
			ID: mapping.UUIDString(uuid1), IDKind: mapping.KindUUID, CorrelationID: "5", CorrelationKind: mapping.KindUint64,
			ContentType: "t",
		}, `
			00 53 73  d0 0000001e 00000007
			   98 123456789abcdef0 0123456789abcdef                  message-id uuid
			   40 40 40 40                                           user-id, to, subject, reply-to: null
			   53 05                                                 correlation-id smallulong 5
			   a3 01 74                                              content-type sym8 "t"
			00 53 75  a0 00                                          empty data section`},
		{"amqp-value string", mapping.Message{BodyType: mapping.BodyText, Body: []byte("hi")}, `
			00 53 77  a1 02 6869`},
		{"amqp-sequence", mapping.Message{BodyType: mapping.BodySequence,
			Body: []byte(`{"type":"list","value":[{"type":"list","value":[{"type":"int","value":1}]}]}`)}, `
			00 53 76  d0 00000006 00000001  54 01`},
		{"message annotation with a symbol key", mapping.Message{Annotations: mappingtest.Attrs("x-k", mapping.Int64(1))}, `
			00 53 72  d1 0000000b 00000002  a3 03 782d6b  55 01
			00 53 75  a0 00`},
		{"ttl capped at 2^32-1 ms (Encode policy keeps the exact TTL in the envelope)", mapping.Message{TTL: MaxTTL}, `
			00 53 70  d0 0000000b 00000003  42 40 70 ffffffff
			00 53 75  a0 00`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Encode(&tt.m, mapping.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := msg.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, line := range strings.Split(tt.want, "\n") {
				// hex runs up to the first word that is not hex
				for _, w := range strings.Fields(line) {
					if _, err := hex.DecodeString(w); err != nil {
						break
					}
					want = append(want, unhex(t, w)...)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%x\nwant\n%x", got, want)
			}
			mappingtest.Check(t, &tt.m, roundTrip(t, Plain, &tt.m, mapping.Options{}))
		})
	}
}
