package amqpguard

import "encoding/binary"

// A cheap, allocation-free walk over an encoded AMQP message (its sections
// as they arrive in transfer frames) that says whether go-amqp v1.7.0's
// decoder might fail on it. go-amqp cannot decode decimal32/64/128 or char,
// arrays of several element types, non-hashable map keys and some described
// values; when its receiver meets one it closes the link with
// amqp:internal-error and the broker redelivers the same message forever.
// The walk is conservative: "suspect" means "confirm with the real decoder",
// never "reject".

const maxScanDepth = 48

// Suspect reports whether go-amqp may fail to decode the encoded message p
// (false means it certainly decodes it).
func Suspect(p []byte) bool { return scanSuspect(p) }

// DecodeCheck runs go-amqp's decoder on the encoded message p; a panic in it
// is returned as an error.
func DecodeCheck(p []byte) error { return decodeCheck(p) }

// scanSuspect reports whether go-amqp may fail to decode the message p.
func scanSuspect(p []byte) bool {
	for len(p) > 0 {
		// Every section is described with a small-ulong code 0x70..0x78
		// (go-amqp's PeekMessageType accepts only this form).
		if len(p) < 4 || p[0] != 0x00 || p[1] != 0x53 {
			return true
		}
		code := p[2]
		v := p[3:]
		var n int
		var ok bool
		switch code {
		case 0x70: // header
			n, ok = walkFields(v, headerFields)
		case 0x73: // properties
			n, ok = walkFields(v, propertiesFields)
		case 0x71, 0x72, 0x78: // delivery-annotations, message-annotations, footer
			if !isMap(v[0]) {
				return true
			}
			n, ok = walk(v, 0)
		case 0x74: // application-properties: keys must be strings
			if !isMap(v[0]) {
				return true
			}
			n, ok = walkMap(v, 0, true)
		case 0x75: // data
			if v[0] != 0xa0 && v[0] != 0xb0 {
				return true
			}
			n, ok = walk(v, 0)
		case 0x76: // amqp-sequence
			if !isList(v[0]) {
				return true
			}
			n, ok = walk(v, 0)
		case 0x77: // amqp-value
			n, ok = walk(v, 0)
		default:
			return true
		}
		if !ok {
			return true
		}
		p = v[n:]
	}
	return false
}

// Field types of the header and properties lists, as go-amqp decodes them
// into typed Go fields (null is always accepted).
type fieldKind uint8

const (
	fAny fieldKind = iota
	fBool
	fUbyte
	fUint
	fString // str or sym
	fBinary
	fTimestamp
)

var (
	// durable, priority, ttl, first-acquirer, delivery-count
	headerFields = []fieldKind{fBool, fUbyte, fUint, fBool, fUint}
	// message-id, user-id, to, subject, reply-to, correlation-id,
	// content-type, content-encoding, absolute-expiry-time, creation-time,
	// group-id, group-sequence, reply-to-group-id
	propertiesFields = []fieldKind{fAny, fBinary, fString, fString, fString, fAny,
		fString, fString, fTimestamp, fTimestamp, fString, fUint, fString}
)

func kindOK(k fieldKind, c byte) bool {
	switch k {
	case fBool:
		return c == 0x41 || c == 0x42 || c == 0x56
	case fUbyte:
		return c == 0x50
	case fUint:
		return c == 0x43 || c == 0x52 || c == 0x70
	case fString:
		return c == 0xa1 || c == 0xb1 || c == 0xa3 || c == 0xb3
	case fBinary:
		return c == 0xa0 || c == 0xb0
	case fTimestamp:
		return c == 0x83
	}
	return true
}

// walkFields walks a header or properties list whose fields have the kinds
// given; more fields than kinds is an error for go-amqp.
func walkFields(p []byte, kinds []fieldKind) (int, bool) {
	switch p[0] {
	case 0x45:
		return 1, true
	case 0xc0, 0xd0:
	default:
		return 0, false
	}
	body, count, n, ok := compound(p)
	if !ok || count > len(kinds) {
		return 0, false
	}
	for i := 0; i < count; i++ {
		if len(body) == 0 || body[0] != 0x40 && !kindOK(kinds[i], body[0]) {
			return 0, false
		}
		en, ok := walk(body, 1)
		if !ok {
			return 0, false
		}
		body = body[en:]
	}
	return n, len(body) == 0
}

func isList(c byte) bool { return c == 0x45 || c == 0xc0 || c == 0xd0 }
func isMap(c byte) bool  { return c == 0xc1 || c == 0xd1 }

// fixedWidth is the encoded size (constructor included) of the fixed-width
// types go-amqp decodes; 0 for any other constructor.
var fixedWidth = [256]uint8{
	0x40: 1, 0x41: 1, 0x42: 1, 0x43: 1, 0x44: 1, 0x45: 1, // null, true, false, uint0, ulong0, list0
	0x50: 2, 0x51: 2, 0x52: 2, 0x53: 2, 0x54: 2, 0x55: 2, 0x56: 2,
	0x60: 3, 0x61: 3,
	0x70: 5, 0x71: 5, 0x72: 5, // uint, int, float (0x73 char, 0x74 decimal32: not decodable)
	0x80: 9, 0x81: 9, 0x82: 9, 0x83: 9, // ulong, long, double, timestamp (0x84 decimal64: no)
	0x98: 17, // uuid (0x94 decimal128: no)
}

// arrayElem is the per-element size of the array element constructors
// go-amqp decodes: >0 fixed, -1 one-byte length prefix, -4 four-byte prefix.
var arrayElem = [256]int8{
	0x50: 1, 0x51: 1, 0x56: 1, // ubyte, byte, bool
	0x60: 2, 0x61: 2,
	0x52: 1, 0x54: 1, 0x53: 1, 0x55: 1, // small uint/int/ulong/long
	0x70: 4, 0x71: 4, 0x72: 4,
	0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8,
	0x98: 16,
	0xa0: -1, 0xa1: -1, 0xa3: -1,
	0xb0: -4, 0xb1: -4, 0xb3: -4,
}

// walk returns the encoded length of the value at p[0] and ok=false when it
// is malformed or go-amqp might not decode it.
func walk(p []byte, depth int) (int, bool) {
	if len(p) == 0 || depth > maxScanDepth {
		return 0, false
	}
	c := p[0]
	if w := int(fixedWidth[c]); w > 0 {
		return w, len(p) >= w
	}
	switch c {
	case 0x00: // described: descriptor, then value
		dn, ok := walk(p[1:], depth+1)
		if !ok {
			return 0, false
		}
		// go-amqp decodes ulong descriptors up to 0xff as its own
		// performatives, states and sections, some of which fail.
		switch p[1] {
		case 0x44, 0x53:
			return 0, false
		case 0x80:
			if binary.BigEndian.Uint64(p[2:10]) <= 0xff {
				return 0, false
			}
		}
		vn, ok := walk(p[1+dn:], depth+1)
		return 1 + dn + vn, ok
	case 0xa0, 0xa1, 0xa3:
		if len(p) < 2 {
			return 0, false
		}
		n := 2 + int(p[1])
		return n, len(p) >= n
	case 0xb0, 0xb1, 0xb3:
		if len(p) < 5 {
			return 0, false
		}
		n := 5 + int(binary.BigEndian.Uint32(p[1:5]))
		return n, n >= 5 && len(p) >= n
	case 0xc0, 0xd0:
		body, count, n, ok := compound(p)
		if !ok {
			return 0, false
		}
		for i := 0; i < count; i++ {
			en, ok := walk(body, depth+1)
			if !ok {
				return 0, false
			}
			body = body[en:]
		}
		return n, len(body) == 0
	case 0xc1, 0xd1:
		return walkMap(p, depth, false)
	case 0xe0, 0xf0:
		return walkArray(p)
	}
	return 0, false // 0x73 char, 0x74/0x84/0x94 decimals, unknown codes
}

// compound splits a list8/map8/list32/map32 into its element bytes, count
// and total length.
func compound(p []byte) (body []byte, count, n int, ok bool) {
	if p[0]&0xf0 == 0xc0 {
		if len(p) < 3 {
			return nil, 0, 0, false
		}
		size, count := int(p[1]), int(p[2])
		n = 2 + size
		if size < 1 || len(p) < n {
			return nil, 0, 0, false
		}
		return p[3:n], count, n, true
	}
	if len(p) < 9 {
		return nil, 0, 0, false
	}
	size := binary.BigEndian.Uint32(p[1:5])
	cnt := binary.BigEndian.Uint32(p[5:9])
	if size < 4 || uint64(len(p)) < 5+uint64(size) || cnt > size {
		return nil, 0, 0, false
	}
	n = 5 + int(size)
	return p[9:n], int(cnt), n, true
}

// mapKeyOK: go-amqp refuses slice and map keys, and a described key could
// hold one (it panics hashing it); application-properties keys must be
// strings or symbols.
func mapKeyOK(c byte, appProps bool) bool {
	if appProps {
		return c == 0xa1 || c == 0xb1 || c == 0xa3 || c == 0xb3
	}
	if c == 0x45 {
		return false
	}
	return fixedWidth[c] > 0 || c == 0xa1 || c == 0xb1 || c == 0xa3 || c == 0xb3
}

func walkMap(p []byte, depth int, appProps bool) (int, bool) {
	if !isMap(p[0]) {
		return 0, false
	}
	body, count, n, ok := compound(p)
	if !ok || count%2 != 0 {
		return 0, false
	}
	for i := 0; i < count; i++ {
		if len(body) == 0 {
			return 0, false
		}
		if i%2 == 0 && !mapKeyOK(body[0], appProps) {
			return 0, false
		}
		en, ok := walk(body, depth+1)
		if !ok {
			return 0, false
		}
		body = body[en:]
	}
	return n, len(body) == 0
}

func walkArray(p []byte) (int, bool) {
	var body []byte
	var count, n int
	if p[0] == 0xe0 {
		if len(p) < 4 {
			return 0, false
		}
		size := int(p[1])
		count, n = int(p[2]), 2+size
		if size < 2 || len(p) < n {
			return 0, false
		}
		body = p[3:n]
	} else {
		if len(p) < 10 {
			return 0, false
		}
		size := binary.BigEndian.Uint32(p[1:5])
		cnt := binary.BigEndian.Uint32(p[5:9])
		if size < 5 || uint64(len(p)) < 5+uint64(size) || cnt > size {
			return 0, false
		}
		count, n = int(cnt), 5+int(size)
		body = p[9:n]
	}
	ctor := body[0]
	body = body[1:]
	w := int(arrayElem[ctor])
	switch {
	case w > 0:
		return n, len(body) == count*w
	case w == -1:
		for i := 0; i < count; i++ {
			if len(body) < 1 || len(body) < 1+int(body[0]) {
				return 0, false
			}
			body = body[1+int(body[0]):]
		}
		return n, len(body) == 0
	case w == -4:
		for i := 0; i < count; i++ {
			if len(body) < 4 {
				return 0, false
			}
			l := binary.BigEndian.Uint32(body)
			if uint64(len(body)) < 4+uint64(l) {
				return 0, false
			}
			body = body[4+int(l):]
		}
		return n, len(body) == 0
	}
	// arrays of maps, lists, described values, zero-width or undecodable
	// types: let the real decoder decide.
	return 0, false
}

// SkipValue returns the encoded length of the AMQP value at p[0] (a
// described value with its descriptor) from its constructor and size
// fields alone, without checking its contents; false when p is too short
// or the constructor unknown. Used to step over performative fields.
func SkipValue(p []byte) (int, bool) {
	if len(p) == 0 {
		return 0, false
	}
	c := p[0]
	var n int
	switch c >> 4 {
	case 0x4:
		n = 1
	case 0x5:
		n = 2
	case 0x6:
		n = 3
	case 0x7:
		n = 5
	case 0x8:
		n = 9
	case 0x9:
		n = 17
	case 0xa, 0xc, 0xe:
		if len(p) < 2 {
			return 0, false
		}
		n = 2 + int(p[1])
	case 0xb, 0xd, 0xf:
		if len(p) < 5 {
			return 0, false
		}
		l := uint64(binary.BigEndian.Uint32(p[1:5])) + 5
		if l > uint64(len(p)) {
			return 0, false
		}
		n = int(l)
	case 0x0:
		if c != 0 {
			return 0, false
		}
		dn, ok := SkipValue(p[1:])
		if !ok {
			return 0, false
		}
		vn, ok := SkipValue(p[1+dn:])
		if !ok {
			return 0, false
		}
		n = 1 + dn + vn
	default:
		return 0, false
	}
	return n, n <= len(p)
}
