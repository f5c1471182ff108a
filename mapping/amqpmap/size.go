package amqpmap

import (
	"time"

	"github.com/Azure/go-amqp"
)

// Size is the encoded size of a message as go-amqp marshals it.
type Size struct {
	Total int
	// Header is the size of the message-annotations, properties and
	// application-properties sections: what Service Bus counts against its
	// header limit.
	Header int
}

// MessageSize computes the encoded size of msg without marshalling it. It
// mirrors go-amqp v1.7.0's encoder for the values the codecs produce and
// falls back to marshalling for anything else.
func MessageSize(msg *amqp.Message) Size {
	s, ok := messageSize(msg)
	if !ok {
		b, _ := msg.MarshalBinary()
		return Size{Total: len(b), Header: s.Header}
	}
	return s
}

// PropertySize is the encoded size of one application property (key and
// value) as go-amqp marshals it; ok is false for a value it cannot size.
func PropertySize(key string, v any) (int, bool) {
	n, ok := valueSize(v)
	return varSize(len(key)) + n, ok
}

const descriptorSize = 3 // 0x00 0x53 <code>

func messageSize(msg *amqp.Message) (Size, bool) {
	var s Size
	ok := true
	add := func(n int, good bool) int {
		ok = ok && good
		return n
	}
	if h := msg.Header; h != nil {
		s.Total += headerSize(h)
	}
	if msg.DeliveryAnnotations != nil {
		s.Total += descriptorSize + add(valueSize(msg.DeliveryAnnotations))
	}
	if msg.Annotations != nil {
		s.Header += descriptorSize + add(valueSize(msg.Annotations))
	}
	if p := msg.Properties; p != nil {
		s.Header += add(propertiesSize(p))
	}
	if msg.ApplicationProperties != nil {
		s.Header += descriptorSize + add(valueSize(msg.ApplicationProperties))
	}
	s.Total += s.Header
	for _, d := range msg.Data {
		s.Total += descriptorSize + varSize(len(d))
	}
	if msg.Value != nil {
		s.Total += descriptorSize + add(valueSize(msg.Value))
	}
	for _, seq := range msg.Sequence {
		s.Total += descriptorSize + add(valueSize(seq))
	}
	if msg.Footer != nil {
		s.Total += descriptorSize + add(valueSize(msg.Footer))
	}
	return s, ok
}

// compositeSize is MarshalComposite's size: fields after the last set one
// are left out, unset ones before it are nulls.
func compositeSize(fields []int) int {
	last := -1
	for i, f := range fields {
		if f > 0 {
			last = i
		}
	}
	if last < 0 {
		return 4 // descriptor + list0
	}
	n := descriptorSize + 9 // list32: code, size, count
	for _, f := range fields[:last+1] {
		if f == 0 {
			f = 1 // null
		}
		n += f
	}
	return n
}

func headerSize(h *amqp.MessageHeader) int {
	f := [5]int{1}
	if h.Priority != 4 {
		f[1] = 2
	}
	if h.TTL != 0 {
		f[2] = uintSize(uint64(uint32(h.TTL/time.Millisecond)), 5) // go-amqp truncates to uint32
	}
	if h.FirstAcquirer {
		f[3] = 1
	}
	if h.DeliveryCount != 0 {
		f[4] = uintSize(uint64(h.DeliveryCount), 5)
	}
	return compositeSize(f[:])
}

func propertiesSize(p *amqp.MessageProperties) (int, bool) {
	var f [13]int
	ok := true
	opt := func(v any, present bool) int {
		if !present {
			return 0
		}
		n, good := valueSize(v)
		ok = ok && good
		return n
	}
	strp := func(s *string) int {
		if s == nil {
			return 0
		}
		return varSize(len(*s))
	}
	f[0] = opt(p.MessageID, p.MessageID != nil)
	if len(p.UserID) > 0 {
		f[1] = varSize(len(p.UserID))
	}
	f[2], f[3], f[4] = strp(p.To), strp(p.Subject), strp(p.ReplyTo)
	f[5] = opt(p.CorrelationID, p.CorrelationID != nil)
	f[6], f[7] = strp(p.ContentType), strp(p.ContentEncoding)
	if p.AbsoluteExpiryTime != nil {
		f[8] = 9
	}
	if p.CreationTime != nil {
		f[9] = 9
	}
	f[10] = strp(p.GroupID)
	if p.GroupSequence != nil {
		f[11] = uintSize(uint64(*p.GroupSequence), 5)
	}
	f[12] = strp(p.ReplyToGroupID)
	return compositeSize(f[:]), ok
}

// varSize is the size of a string, symbol or binary of n bytes.
func varSize(n int) int {
	if n < 256 {
		return 2 + n
	}
	return 5 + n
}

// uintSize is the size of a uint (full 5) or ulong (full 9): 0 and small
// values have one- and two-byte forms.
func uintSize(n uint64, full int) int {
	switch {
	case n == 0:
		return 1
	case n < 256:
		return 2
	}
	return full
}

func intSize(n int64, full int) int {
	if n >= -128 && n < 128 {
		return 2
	}
	return full
}

func valueSize(v any) (int, bool) {
	switch v := v.(type) {
	case nil, bool, amqp.Null:
		return 1, true
	case int8, uint8:
		return 2, true
	case int16, uint16:
		return 3, true
	case int32:
		return intSize(int64(v), 5), true
	case int64:
		return intSize(v, 9), true
	case int:
		return intSize(int64(v), 9), true
	case uint32:
		return uintSize(uint64(v), 5), true
	case uint64:
		return uintSize(v, 9), true
	case uint:
		return uintSize(uint64(v), 9), true
	case float32:
		return 5, true
	case float64, time.Time:
		return 9, true
	case amqp.UUID:
		return 17, true
	case string:
		return varSize(len(v)), true
	case amqp.Symbol:
		return varSize(len(v)), true
	case []byte:
		return varSize(len(v)), true
	case []string:
		total, wide := 0, false
		for _, s := range v {
			total += len(s)
			wide = wide || len(s) > 255
		}
		if wide {
			total += 4 * len(v)
		} else {
			total += len(v)
		}
		if total+2 <= 255 {
			return total + 4, true
		}
		return total + 10, true
	case []any:
		if len(v) == 0 {
			return 1, true
		}
		n := 9
		for _, e := range v {
			s, ok := valueSize(e)
			if !ok {
				return 0, false
			}
			n += s
		}
		return n, true
	case map[string]any:
		n := 9
		for k, e := range v {
			s, ok := valueSize(e)
			if !ok {
				return 0, false
			}
			n += varSize(len(k)) + s
		}
		return n, true
	case map[any]any:
		return anyMapSize(v, false)
	case amqp.Annotations:
		return anyMapSize(v, true)
	}
	if d, val, ok := describedParts(v); ok {
		ds, ok1 := valueSize(d)
		vs, ok2 := valueSize(val)
		return 1 + ds + vs, ok1 && ok2
	}
	return 0, false
}

func anyMapSize(m map[any]any, annotations bool) (int, bool) {
	n := 9
	for k, e := range m {
		if annotations {
			if _, ok := k.(int); ok {
				k = int64(k.(int))
			}
		}
		ks, ok1 := valueSize(k)
		vs, ok2 := valueSize(e)
		if !ok1 || !ok2 {
			return 0, false
		}
		n += ks + vs
	}
	return n, true
}
