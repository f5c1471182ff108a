package amqpguard

import "encoding/binary"

// Reading an AMQP 1.0 connection's byte stream (part 2 §2.3) and the
// performatives in it: the guard's own parsing, exported for the other
// readers of the stream (the AMQP adapter's attach tap), so that one copy
// validates sizes.

// Unit is what NextUnit found at the start of a byte stream.
type Unit uint8

const (
	// UnitPartial: the bytes hold less than one unit; read more.
	UnitPartial Unit = iota
	// UnitHeader: a protocol header, "AMQP" and 4 bytes (the first of
	// them, b[4], the protocol id: 0 AMQP, 2 TLS, 3 SASL).
	UnitHeader
	// UnitFrame: a frame (size, data offset, type, channel; then its
	// extended header and body).
	UnitFrame
	// UnitInvalid: not an AMQP frame stream (a size below 8 or a data
	// offset below 2): nothing after it can be read.
	UnitInvalid
)

// HeaderSize is the size of a protocol header.
const HeaderSize = 8

// NextUnit reads the unit at b's start and its size. For UnitPartial,
// size is the frame's declared size once b holds its first 8 bytes (0
// before), so that a reader can bound what it buffers.
func NextUnit(b []byte) (u Unit, size int) {
	if len(b) < 8 {
		return UnitPartial, 0
	}
	if string(b[:4]) == "AMQP" {
		return UnitHeader, HeaderSize
	}
	s := binary.BigEndian.Uint32(b[:4])
	if s < 8 || b[4] < 2 {
		return UnitInvalid, 0
	}
	if uint64(s) > uint64(len(b)) {
		return UnitPartial, int(s)
	}
	return UnitFrame, int(s)
}

// FrameBody returns the body of an AMQP frame f (as NextUnit delimits it):
// the performative and any payload. ok is false for a SASL frame, a
// heartbeat (no body) and a data offset past the frame.
func FrameBody(f []byte) (body []byte, ok bool) {
	doff := int(f[4]) * 4
	if f[5] != 0 || doff >= len(f) {
		return nil, false
	}
	return f[doff:], true
}

// DescribedList reads the described list at b's start whose descriptor is
// code, in any of its encodings (small or full ulong, or its symbolic name
// sym: part 1 §1.5), such as a performative (attach: 0x12,
// "amqp:attach:list") or a source (0x28, "amqp:source:list"). It returns
// the list's fields as encoded, their count and the length read,
// descriptor included; list0 has no fields. The list's declared size must
// fit in b, and its fields lie within it.
func DescribedList(b []byte, code uint64, sym string) (fields []byte, count, n int, ok bool) {
	if len(b) < 2 || b[0] != 0 {
		return nil, 0, 0, false
	}
	dn, ok := SkipValue(b[1:])
	if !ok {
		return nil, 0, 0, false
	}
	switch d := b[1 : 1+dn]; d[0] {
	case 0x53:
		ok = uint64(d[1]) == code
	case 0x80:
		ok = binary.BigEndian.Uint64(d[1:9]) == code
	case 0x44:
		ok = code == 0
	case 0xa3, 0xb3:
		s, _ := ReadString(d)
		ok = s == sym
	default:
		ok = false
	}
	i := 1 + dn
	if !ok || i >= len(b) {
		return nil, 0, 0, false
	}
	switch b[i] {
	case 0x45:
		return nil, 0, i + 1, true
	case 0xc0, 0xd0:
		fields, count, ln, ok := compound(b[i:])
		return fields, count, i + ln, ok
	}
	return nil, 0, 0, false
}

// ListFields sets dst to the encoded values of the first fields of a list
// (fields and count as DescribedList returns them), as many as dst holds
// and the list has, and returns how many it set; ok is false when a field
// runs past the list. It does not allocate.
func ListFields(fields []byte, count int, dst [][]byte) (n int, ok bool) {
	for ; n < count && n < len(dst); n++ {
		l, ok := SkipValue(fields)
		if !ok {
			return n, false
		}
		dst[n], fields = fields[:l], fields[l:]
	}
	return n, true
}

// ReadString reads an encoded string or symbol (str8, str32, sym8, sym32)
// as SkipValue delimits it; null is "".
func ReadString(v []byte) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case 0x40:
		return "", true
	case 0xa1, 0xa3:
		if len(v) >= 2 {
			return string(v[2:]), true
		}
	case 0xb1, 0xb3:
		if len(v) >= 5 {
			return string(v[5:]), true
		}
	}
	return "", false
}

// ReadBool reads an encoded boolean (true, false, or boolean with its
// byte); ok is false for anything else, null included.
func ReadBool(v []byte) (b, ok bool) {
	switch {
	case len(v) == 0:
		return false, false
	case v[0] == 0x41:
		return true, true
	case v[0] == 0x42:
		return false, true
	case v[0] == 0x56 && len(v) >= 2:
		return v[1] != 0, true
	}
	return false, false
}
