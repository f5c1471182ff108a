package mapping

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a Value. The set is the union of what the four protocols
// can type: SQS String/Number/Binary, every AMQP 1.0 primitive, the Service Bus
// described types and NATS multi-valued headers, plus AMQP composites so that
// message annotations and amqp-value bodies survive.
type Kind uint8

const (
	KindInvalid Kind = iota
	KindString
	KindNumber // arbitrary-precision decimal text, as SQS Number
	KindBinary
	KindBool
	KindInt8
	KindInt16
	KindInt32
	KindInt64
	KindUint8
	KindUint16
	KindUint32
	KindUint64
	KindFloat32
	KindFloat64
	KindDecimal32  // decimal text; AMQP decimal32
	KindDecimal64  // decimal text; AMQP decimal64
	KindDecimal128 // decimal text; AMQP decimal128 (.NET decimal)
	KindChar       // one Unicode code point
	KindTimestamp  // AMQP timestamp, millisecond precision
	KindUUID
	KindSymbol
	KindURI            // com.microsoft:uri
	KindDateTimeOffset // com.microsoft:datetime-offset, a UTC instant with 100 ns ticks
	KindTimeSpan       // com.microsoft:timespan, 100 ns ticks
	KindStrings        // multi-valued string (NATS header with several values)
	KindList           // AMQP list
	KindMap            // AMQP map
	KindNull           // AMQP null
	kindCount
)

var kindNames = [...]string{
	KindInvalid: "invalid", KindString: "string", KindNumber: "number", KindBinary: "binary",
	KindBool: "bool", KindInt8: "byte", KindInt16: "short", KindInt32: "int", KindInt64: "long",
	KindUint8: "ubyte", KindUint16: "ushort", KindUint32: "uint", KindUint64: "ulong",
	KindFloat32: "float", KindFloat64: "double", KindDecimal32: "decimal32",
	KindDecimal64: "decimal64", KindDecimal128: "decimal128", KindChar: "char",
	KindTimestamp: "timestamp", KindUUID: "uuid", KindSymbol: "symbol", KindURI: "uri",
	KindDateTimeOffset: "datetime-offset", KindTimeSpan: "timespan", KindStrings: "strings",
	KindList: "list", KindMap: "map", KindNull: "null",
}

// String returns the AMQP-style name of the kind ("int", "ulong", "uuid", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// KindByName is the inverse of Kind.String.
func KindByName(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name && Kind(k) != KindInvalid {
			return Kind(k), true
		}
	}
	return KindInvalid, false
}

// Value is one typed value. The zero Value is invalid. Values are immutable:
// constructors copy nothing, so callers must not modify slices they hand over.
//
// Label is the custom type label (the "png" of SQS "Binary.png"). It is empty
// when the label is the kind's default one, so that one attribute has exactly
// one representation; see DataType.
type Value struct {
	Kind  Kind
	Label string

	s  string   // String, Number, Decimal*, Symbol, URI, Char
	b  []byte   // Binary, UUID (16 bytes)
	n  uint64   // integers (two's complement), bool, float bits, timestamp ms, ticks
	ss []string // Strings
	vs []Value  // List; Map as key, value, key, value...
}

// String-like constructors.
func String(s string) Value { return Value{Kind: KindString, s: s} }
func Symbol(s string) Value { return Value{Kind: KindSymbol, s: s} }
func URI(s string) Value    { return Value{Kind: KindURI, s: s} }
func Char(r rune) Value     { return Value{Kind: KindChar, s: string(r)} }

// Number holds decimal text (SQS Number) without reinterpreting it, so no digit
// is lost (38 digits do not fit a float64).
func Number(text string) Value { return Value{Kind: KindNumber, s: text} }

// Decimal holds an AMQP decimal32/64/128 as decimal text; kind must be one of
// KindDecimal32, KindDecimal64, KindDecimal128.
func Decimal(kind Kind, text string) Value { return Value{Kind: kind, s: text} }

func Binary(b []byte) Value { return Value{Kind: KindBinary, b: b} }
func Bool(v bool) Value {
	if v {
		return Value{Kind: KindBool, n: 1}
	}
	return Value{Kind: KindBool}
}
func Int8(v int8) Value       { return Value{Kind: KindInt8, n: uint64(int64(v))} }
func Int16(v int16) Value     { return Value{Kind: KindInt16, n: uint64(int64(v))} }
func Int32(v int32) Value     { return Value{Kind: KindInt32, n: uint64(int64(v))} }
func Int64(v int64) Value     { return Value{Kind: KindInt64, n: uint64(v)} }
func Uint8(v uint8) Value     { return Value{Kind: KindUint8, n: uint64(v)} }
func Uint16(v uint16) Value   { return Value{Kind: KindUint16, n: uint64(v)} }
func Uint32(v uint32) Value   { return Value{Kind: KindUint32, n: uint64(v)} }
func Uint64(v uint64) Value   { return Value{Kind: KindUint64, n: v} }
func Float32(v float32) Value { return Value{Kind: KindFloat32, n: uint64(math.Float32bits(v))} }
func Float64(v float64) Value { return Value{Kind: KindFloat64, n: math.Float64bits(v)} }

// Timestamp is an AMQP timestamp: milliseconds since the Unix epoch.
func Timestamp(t time.Time) Value { return Value{Kind: KindTimestamp, n: uint64(t.UnixMilli())} }

// TimestampMillis builds a timestamp from epoch milliseconds.
func TimestampMillis(ms int64) Value { return Value{Kind: KindTimestamp, n: uint64(ms)} }

func UUID(u [16]byte) Value { return Value{Kind: KindUUID, b: u[:]} }

// DateTimeOffset is the .NET DateTimeOffset as Service Bus carries it: UTC ticks.
func DateTimeOffset(t time.Time) Value {
	return Value{Kind: KindDateTimeOffset, n: uint64(TicksFromTime(t))}
}

// DateTimeOffsetTicks builds a datetime-offset from .NET UTC ticks.
func DateTimeOffsetTicks(ticks int64) Value { return Value{Kind: KindDateTimeOffset, n: uint64(ticks)} }

// TimeSpan is a .NET TimeSpan in 100 ns ticks.
func TimeSpan(d time.Duration) Value { return Value{Kind: KindTimeSpan, n: uint64(int64(d / 100))} }

// TimeSpanTicks builds a timespan from .NET ticks.
func TimeSpanTicks(ticks int64) Value { return Value{Kind: KindTimeSpan, n: uint64(ticks)} }

// Strings is a multi-valued string, such as a NATS header with several values.
func Strings(v ...string) Value { return Value{Kind: KindStrings, ss: v} }

func List(v ...Value) Value { return Value{Kind: KindList, vs: v} }

// Map takes alternating keys and values.
func Map(kv ...Value) Value {
	if len(kv)%2 != 0 {
		panic("mapping.Map: odd number of arguments")
	}
	return Value{Kind: KindMap, vs: kv}
}

func Null() Value { return Value{Kind: KindNull} }

// WithLabel returns v with a custom type label. The kind's default label
// becomes the empty label. Custom labels belong on String, Number and
// Binary values (and Float64's alternative "float"): a typed kind with a
// label of its own has no wire spelling that decodes back to that kind.
func (v Value) WithLabel(label string) Value {
	if label == defaultLabel(v.Kind) {
		label = ""
	}
	v.Label = label
	return v
}

// Accessors. Each returns the zero value for a kind it does not apply to.

// Str returns the text of String, Symbol, URI, Char, Number and Decimal values.
func (v Value) Str() string   { return v.s }
func (v Value) Bytes() []byte { return v.b }
func (v Value) Bool() bool    { return v.Kind == KindBool && v.n == 1 }
func (v Value) Int() int64    { return int64(v.n) }
func (v Value) Uint() uint64  { return v.n }
func (v Value) Float() float64 {
	if v.Kind == KindFloat32 {
		return float64(math.Float32frombits(uint32(v.n)))
	}
	return math.Float64frombits(v.n)
}
func (v Value) Float32() float32 { return math.Float32frombits(uint32(v.n)) }
func (v Value) Char() rune {
	for _, r := range v.s {
		return r
	}
	return 0
}

// Time returns the instant of a Timestamp or DateTimeOffset.
func (v Value) Time() time.Time {
	switch v.Kind {
	case KindTimestamp:
		return time.UnixMilli(int64(v.n)).UTC()
	case KindDateTimeOffset:
		return TimeFromTicks(int64(v.n))
	}
	return time.Time{}
}

// Ticks returns the .NET ticks of a DateTimeOffset or TimeSpan.
func (v Value) Ticks() int64 { return int64(v.n) }

// Duration returns a TimeSpan as a Go duration (saturating).
func (v Value) Duration() time.Duration {
	t := int64(v.n)
	if t > math.MaxInt64/100 {
		return math.MaxInt64
	}
	if t < math.MinInt64/100 {
		return math.MinInt64
	}
	return time.Duration(t * 100)
}

func (v Value) UUID() (u [16]byte) {
	copy(u[:], v.b)
	return u
}
func (v Value) Strings() []string { return v.ss }
func (v Value) List() []Value     { return v.vs }

// MapEntries returns alternating keys and values of a Map.
func (v Value) MapEntries() []Value { return v.vs }

// IsValid reports whether v holds a value.
func (v Value) IsValid() bool { return v.Kind != KindInvalid && v.Kind < kindCount }

// Equal reports whether a and b have the same kind, label and value, bit for bit
// (so NaN equals NaN of the same payload).
func (a Value) Equal(b Value) bool {
	if a.Kind != b.Kind || a.Label != b.Label || a.s != b.s || a.n != b.n ||
		!bytes.Equal(a.b, b.b) || !slices.Equal(a.ss, b.ss) || len(a.vs) != len(b.vs) {
		return false
	}
	for i := range a.vs {
		if !a.vs[i].Equal(b.vs[i]) {
			return false
		}
	}
	return true
}

// GoString renders the value for test failures and logs.
func (v Value) GoString() string {
	t, err := v.Text()
	if err != nil {
		t = "<" + err.Error() + ">"
	}
	return v.DataType() + "(" + strconv.Quote(t) + ")"
}

func (v Value) String() string { return v.GoString() }

// TicksFromTime converts an instant to .NET UTC ticks (100 ns since 0001-01-01).
func TicksFromTime(t time.Time) int64 {
	return epochTicks + t.Unix()*1e7 + int64(t.Nanosecond())/100
}

// TimeFromTicks converts .NET UTC ticks to an instant.
func TimeFromTicks(ticks int64) time.Time {
	d := ticks - epochTicks
	sec, rem := d/1e7, d%1e7
	if rem < 0 {
		sec, rem = sec-1, rem+1e7
	}
	return time.Unix(sec, rem*100).UTC()
}

// epochTicks is the Unix epoch in .NET ticks.
const epochTicks = 621355968000000000

// UUIDString formats a UUID in the canonical 8-4-4-4-12 form.
func UUIDString(u [16]byte) string {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return string(buf[:])
}

// ParseUUID parses the canonical form (hyphens optional, braces allowed, any case).
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	t := strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	t = strings.ReplaceAll(t, "-", "")
	if len(t) != 32 {
		return u, fmt.Errorf("uuid %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(u[:], []byte(t)); err != nil {
		return u, fmt.Errorf("uuid %q: %w", s, err)
	}
	return u, nil
}
