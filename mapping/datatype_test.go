package mapping

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseValueKinds(t *testing.T) {
	tests := []struct {
		dataType, text string
		want           Value
	}{
		{"String", "héllo ✓", String("héllo ✓")},
		{"String.json", `{"a":1}`, String(`{"a":1}`).WithLabel("json")},
		{"Number", "12345678901234567890123456789012345678", Number("12345678901234567890123456789012345678")},
		{"Number.int", "42", Int32(42)},
		{"Number.int", "-2147483648", Int32(math.MinInt32)},
		{"Number.int", "2147483648", Number("2147483648").WithLabel("int")}, // out of range: kept as text
		{"Number.int", "007", Number("007").WithLabel("int")},               // not canonical: kept as text
		{"Number.long", "-9223372036854775808", Int64(math.MinInt64)},
		{"Number.byte", "-128", Int8(-128)},
		{"Number.short", "300", Int16(300)},
		{"Number.ubyte", "255", Uint8(255)},
		{"Number.ushort", "65535", Uint16(65535)},
		{"Number.uint", "4294967295", Uint32(math.MaxUint32)},
		{"Number.ulong", "18446744073709551615", Uint64(math.MaxUint64)},
		{"Number.float", "1.5", Float64(1.5).WithLabel("float")},
		{"Number.double", "0.1", Float64(0.1)},
		{"Number.double", "0.10", Number("0.10").WithLabel("double")},
		{"Number.float32", "0.1", Float32(0.1)},
		{"Number.decimal128", "-1.25e-10", Decimal(KindDecimal128, "-1.25e-10")},
		{"Number.timestamp", "1700000000123", TimestampMillis(1700000000123)},
		{"Number.timespan", "90.5", TimeSpan(90500 * time.Millisecond)},
		{"Number.timespan", "-0.0000001", TimeSpanTicks(-1)},
		{"String.bool", "true", Bool(true)},
		{"String.bool", "True", String("True").WithLabel("bool")},
		{"String.uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", UUID([16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8})},
		{"String.uuid", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8", String("6BA7B810-9DAD-11D1-80B4-00C04FD430C8").WithLabel("uuid")},
		{"String.char", "ж", Char('ж')},
		{"String.symbol", "amqp:accepted", Symbol("amqp:accepted")},
		{"String.uri", "https://example.com/a?b", URI("https://example.com/a?b")},
		{"String.datetime-offset", "2024-02-29T23:59:59.1234567Z", DateTimeOffset(time.Date(2024, 2, 29, 23, 59, 59, 123456700, time.UTC))},
		{"String.strings", `["a","b"]`, Strings("a", "b")},
		{"String.list", `[{"type":"int","value":1},{"type":"string","value":"x"}]`, List(Int32(1), String("x"))},
		{"String.map", `[[{"type":"symbol","value":"k"},{"type":"long","value":2}]]`, Map(Symbol("k"), Int64(2))},
		{"String.null", "null", Null()},
		{"Binary", "AAEC/w==", Binary([]byte{0, 1, 2, 255})},
		{"Binary.png", "iVBORw==", Binary([]byte{0x89, 'P', 'N', 'G'}).WithLabel("png")},
	}
	for _, tt := range tests {
		t.Run(tt.dataType+"/"+tt.text, func(t *testing.T) {
			got, err := ParseValue(tt.dataType, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Fatalf("ParseValue = %#v, want %#v", got, tt.want)
			}
			// The rendering is the exact inverse: same data type, same text.
			if dt := got.DataType(); dt != tt.dataType {
				t.Errorf("DataType() = %q, want %q", dt, tt.dataType)
			}
			if text, err := got.Text(); err != nil || text != tt.text {
				t.Errorf("Text() = %q, %v; want %q", text, err, tt.text)
			}
		})
	}
}

func TestParseValueErrors(t *testing.T) {
	for _, dt := range []string{"", "string", "Number.", "Blob", "Binary"} {
		text := "x"
		if _, err := ParseValue(dt, text); err == nil {
			t.Errorf("ParseValue(%q, %q): want error", dt, text)
		}
	}
}

func TestDefaultLabelsAreCanonical(t *testing.T) {
	// Every kind's own spelling parses back to that kind with an empty label.
	samples := map[Kind]Value{
		KindBool: Bool(false), KindInt8: Int8(1), KindInt16: Int16(1), KindInt32: Int32(1),
		KindInt64: Int64(1), KindUint8: Uint8(1), KindUint16: Uint16(1), KindUint32: Uint32(1),
		KindUint64: Uint64(1), KindFloat32: Float32(1.25), KindFloat64: Float64(1.25),
		KindDecimal32: Decimal(KindDecimal32, "1.5"), KindDecimal64: Decimal(KindDecimal64, "1.5"),
		KindDecimal128: Decimal(KindDecimal128, "1.5"), KindChar: Char('x'),
		KindTimestamp: TimestampMillis(1), KindUUID: UUID([16]byte{1}), KindSymbol: Symbol("s"),
		KindURI: URI("u:x"), KindDateTimeOffset: DateTimeOffsetTicks(epochTicks),
		KindTimeSpan: TimeSpanTicks(1), KindStrings: Strings("a"), KindList: List(),
		KindMap: Map(), KindNull: Null(), KindString: String("s"), KindNumber: Number("1"),
		KindBinary: Binary([]byte("b")),
	}
	for k := KindString; k < kindCount; k++ {
		v, ok := samples[k]
		if !ok {
			t.Errorf("no sample for kind %s", k)
			continue
		}
		text, err := v.Text()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		got, err := ParseValue(v.DataType(), text)
		if err != nil || !got.Equal(v) {
			t.Errorf("%s: ParseValue(%q, %q) = %#v, %v", k, v.DataType(), text, got, err)
		}
	}
}

func TestWithLabelNormalizesDefault(t *testing.T) {
	if l := Int32(1).WithLabel("int").Label; l != "" {
		t.Fatalf("default label kept as %q", l)
	}
	if dt := Float64(1).WithLabel("float").DataType(); dt != "Number.float" {
		t.Fatalf("DataType = %q", dt)
	}
}

func TestTicks(t *testing.T) {
	tm := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := TicksFromTime(tm); got != 0 {
		t.Fatalf("ticks of 0001-01-01 = %d", got)
	}
	if got := TicksFromTime(time.Unix(0, 0)); got != epochTicks {
		t.Fatalf("ticks of epoch = %d", got)
	}
	for _, ticks := range []int64{0, 1, epochTicks - 1, epochTicks, epochTicks + 12345678, 3155378975999999999} {
		if got := TicksFromTime(TimeFromTicks(ticks)); got != ticks {
			t.Errorf("ticks %d -> %d", ticks, got)
		}
	}
}

func TestIsDecimalText(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-1.5": true, "+.5": true, "5.": true, "1e10": true, "1E-3": true,
		"": false, "-": false, ".": false, "1e": false, "1.2.3": false, "0x10": false, "NaN": false, " 1": false,
	} {
		if got := IsDecimalText(s); got != want {
			t.Errorf("IsDecimalText(%q) = %v", s, got)
		}
	}
}

func TestValueJSONRoundTrip(t *testing.T) {
	values := []Value{
		String("a\"b"), Number("1e-128"), Binary(nil), Bool(true), Int8(-1), Int64(math.MaxInt64),
		Uint64(math.MaxUint64), Float32(float32(math.Inf(-1))), Float64(math.NaN()), Float64(-0.0),
		Decimal(KindDecimal64, "9.99"), Char('🙂'), TimestampMillis(-1), UUID([16]byte{15: 1}),
		Symbol("x-opt-y"), URI("urn:a"), DateTimeOffsetTicks(epochTicks + 1), TimeSpanTicks(-5),
		Strings("a", "", "c"), List(Null(), List(Bool(false))), Map(String("k"), Map()),
		Binary([]byte{1}).WithLabel("gif"), String("x").WithLabel("json"),
	}
	for _, v := range values {
		b, err := v.MarshalJSON()
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		got, err := UnmarshalValueJSON(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !got.Equal(v) {
			t.Errorf("%s: got %#v want %#v", b, got, v)
		}
	}
}

func FuzzParseValue(f *testing.F) {
	for _, s := range [][2]string{{"Number.int", "42"}, {"String.uuid", "x"}, {"Binary.png", "AA=="}, {"String.list", "[]"}, {"Number.timespan", "1.0000001"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dt, text string) {
		v, err := ParseValue(dt, text)
		if err != nil {
			return
		}
		// Whatever parses renders back exactly (Binary text is base64 and may be
		// non-canonical on input, so compare bytes there).
		if v.Base() == BaseBinary {
			return
		}
		got, err := v.Text()
		if err != nil || got != text || v.DataType() != dt {
			t.Fatalf("ParseValue(%q, %q) renders %q %q (%v)", dt, text, v.DataType(), got, err)
		}
	})
}

func FuzzUnmarshalValueJSON(f *testing.F) {
	f.Add([]byte(`{"type":"int","value":1}`))
	f.Add([]byte(`{"type":"map","value":[[{"type":"null"},{"type":"binary","value":"AA=="}]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := UnmarshalValueJSON(b)
		if err != nil {
			return
		}
		out, err := v.MarshalJSON()
		if err != nil {
			t.Fatalf("re-marshal %#v: %v", v, err)
		}
		v2, err := UnmarshalValueJSON(out)
		if err != nil || !v2.Equal(v) {
			t.Fatalf("unstable: %s -> %s", b, out)
		}
	})
}

func TestDataTypeTableMatchesSpelling(t *testing.T) {
	for k := KindInvalid; k < kindCount; k++ {
		v := Value{Kind: k}
		want := "Invalid"
		if b := v.Base(); b != "" {
			want = b
			if l := defaultLabel(k); l != "" {
				want += "." + l
			}
		}
		if got := v.DataType(); got != want {
			t.Errorf("%s: DataType %q, want %q", k, got, want)
		}
	}
}

// The text of a Strings, List or Map value is JSON: a string that is not
// valid UTF-8 in it is an error, never U+FFFD.
func TestTextRefusesInvalidUTF8(t *testing.T) {
	for name, tc := range map[string]struct {
		v    Value
		want error
	}{
		"strings":       {Strings("a", "\xff"), ErrTextNotUTF8},
		"list":          {List(String("\xff")), ErrTextNotUTF8},
		"map":           {Map(String("k"), String("\xa3")), ErrTextNotUTF8},
		"valid strings": {Strings("a", "ü"), nil},
		"plain string":  {String("\xff"), nil}, // its text is the string itself
		"binary":        {Binary([]byte{0xff}), nil},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.v.Text(); !errors.Is(err, tc.want) {
				t.Errorf("Text() error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		dataType, text string
		ok             bool
	}{
		{"String", "", true},
		{"String.sku", "anything", true},
		{"Number", "1.50", true},
		{"Number", "abc", false},
		{"Number.int", "007", true},
		{"Number.int", "1.5", false},
		{"Number.int", "99999999999", false},
		{"Number.float", "3.50", true},
		{"Number.float", "1e3", true},
		{"Number.double", "19.90", true},
		{"Number.float32", "1e39", false},
		{"Number.decimal128", "12345678901234567890123456789012345678", true},
		{"String.bool", "true", true},
		{"String.bool", "maybe", false},
		{"String.bool", "True", true}, // .NET's; travels as the text it is
		{"String.uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"String.uuid", "not-a-uuid", false},
		{"Binary", "aGk=", true},
		{"Binary.png", "!!", false},
		{"Strng", "x", false},
	} {
		if err := CheckText(tc.dataType, tc.text); (err == nil) != tc.ok {
			t.Errorf("CheckText(%q, %q) = %v, want ok=%v", tc.dataType, tc.text, err, tc.ok)
		}
	}
}

// "True" is a bool to CheckText, but not an exact one: ParseValue keeps it
// as the text it is, as before.
func TestParseValueKeepsACapitalisedBoolAsText(t *testing.T) {
	v, err := ParseValue("String.bool", "True")
	if err != nil || v.Kind != KindString || v.Str() != "True" {
		t.Errorf("%v %v, want the string True", v, err)
	}
	if v, _ := ParseValue("String.bool", "true"); v.Kind != KindBool {
		t.Errorf("true: %v, want the bool", v)
	}
}
