package amqpmap

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// TestMessageSize compares the computed size with go-amqp's marshalled length.
func TestMessageSize(t *testing.T) {
	long := strings.Repeat("x", 300)
	var msgs []*amqp.Message
	for i, v := range everyValue() {
		m := &mapping.Message{Attributes: mappingtest.Attrs("a", v), Annotations: mappingtest.Attrs("x", v)}
		if b, err := v.MarshalJSON(); err == nil && v.Kind != mapping.KindString && v.Kind != mapping.KindNull {
			m.BodyType, m.Body = mapping.BodyValue, b
		}
		if i%2 == 0 {
			m.ID, m.Durable, m.TTL, m.GroupSequence = fmt.Sprint(i), true, time.Duration(i)*time.Hour, uint32(i)
		}
		msg, err := Encode(m, mapping.Options{})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	now := time.Now()
	msgs = append(msgs,
		&amqp.Message{},
		&amqp.Message{Header: &amqp.MessageHeader{Priority: 4}},
		&amqp.Message{Header: &amqp.MessageHeader{Priority: 1, DeliveryCount: 300, FirstAcquirer: true, TTL: MaxTTL}},
		&amqp.Message{Properties: &amqp.MessageProperties{}},
		&amqp.Message{Properties: &amqp.MessageProperties{MessageID: uint64(1 << 40), UserID: []byte(long), To: &long,
			CorrelationID: []byte("c"), ContentEncoding: ptr("gzip"), AbsoluteExpiryTime: &now, CreationTime: &now,
			GroupID: &long, GroupSequence: ptr(uint32(70000)), ReplyToGroupID: ptr("r")}},
		&amqp.Message{Data: [][]byte{[]byte(long), nil}, Footer: amqp.Annotations{"f": int64(1 << 40)},
			DeliveryAnnotations: amqp.Annotations{"d": amqp.UUID{}, int64(5): int32(-200)}},
		&amqp.Message{ApplicationProperties: map[string]any{long: long, "s": []string{long, "a"}, "l": []any{int64(-129), uint32(256)}}},
		&amqp.Message{Sequence: [][]any{{}, {nil, true, map[any]any{"k": []string{}}}}},
		&amqp.Message{Value: amqp.Null{}},
		&amqp.Message{Value: []int32{1, 2}}, // not sized: falls back to marshalling
	)
	for i, msg := range msgs {
		b, err := msg.MarshalBinary()
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got := MessageSize(msg).Total; got != len(b) {
			t.Errorf("%d: size %d, marshalled %d", i, got, len(b))
		}
		hdr := &amqp.Message{Annotations: msg.Annotations, Properties: msg.Properties, ApplicationProperties: msg.ApplicationProperties}
		hb, _ := hdr.MarshalBinary()
		if got := MessageSize(msg).Header; got != len(hb) {
			t.Errorf("%d: header size %d, marshalled %d", i, got, len(hb))
		}
	}
}
