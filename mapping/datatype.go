package mapping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The type spelling of a value is SQS's data type: a base (String, Number or
// Binary) and an optional custom label. Every kind has a default label, so
// every value has one spelling that SQS can carry natively and that any other
// wire form can carry as a type hint (see README "Typed attributes").
//
//	int32  <-> Number.int        uuid      <-> String.uuid
//	double <-> Number.double     timestamp <-> Number.timestamp (epoch ms)
//	binary <-> Binary            Binary.png keeps its label "png"
const (
	BaseString = "String"
	BaseNumber = "Number"
	BaseBinary = "Binary"
)

var kindBase = [kindCount]string{
	KindString: BaseString, KindNumber: BaseNumber, KindBinary: BaseBinary,
	KindBool: BaseString, KindInt8: BaseNumber, KindInt16: BaseNumber, KindInt32: BaseNumber,
	KindInt64: BaseNumber, KindUint8: BaseNumber, KindUint16: BaseNumber, KindUint32: BaseNumber,
	KindUint64: BaseNumber, KindFloat32: BaseNumber, KindFloat64: BaseNumber,
	KindDecimal32: BaseNumber, KindDecimal64: BaseNumber, KindDecimal128: BaseNumber,
	KindChar: BaseString, KindTimestamp: BaseNumber, KindUUID: BaseString, KindSymbol: BaseString,
	KindURI: BaseString, KindDateTimeOffset: BaseString, KindTimeSpan: BaseNumber,
	KindStrings: BaseString, KindList: BaseString, KindMap: BaseString, KindNull: BaseString,
}

var kindLabel = [kindCount]string{
	KindBool: "bool", KindInt8: "byte", KindInt16: "short", KindInt32: "int", KindInt64: "long",
	KindUint8: "ubyte", KindUint16: "ushort", KindUint32: "uint", KindUint64: "ulong",
	KindFloat32: "float32", KindFloat64: "double", KindDecimal32: "decimal32",
	KindDecimal64: "decimal64", KindDecimal128: "decimal128", KindChar: "char",
	KindTimestamp: "timestamp", KindUUID: "uuid", KindSymbol: "symbol", KindURI: "uri",
	KindDateTimeOffset: "datetime-offset", KindTimeSpan: "timespan", KindStrings: "strings",
	KindList: "list", KindMap: "map", KindNull: "null",
}

// labelKind maps a (base, label) to the kind a value of that type becomes when
// its text parses exactly. "Number.float" is a double: that is what SQS
// producers mean by it and what a Service Bus consumer should see.
var labelKind = map[string]Kind{}

func init() {
	for k := KindString; k < kindCount; k++ {
		if l := kindLabel[k]; l != "" {
			labelKind[kindBase[k]+"."+l] = k
		}
	}
	labelKind["Number.float"] = KindFloat64
}

func defaultLabel(k Kind) string {
	if k < kindCount {
		return kindLabel[k]
	}
	return ""
}

// Base returns the SQS base type of the value: String, Number or Binary.
func (v Value) Base() string {
	if v.Kind < kindCount {
		return kindBase[v.Kind]
	}
	return ""
}

// kindDataType is the DataType of each kind with its default label,
// precomputed: building it allocates, and codecs ask on every attribute.
var kindDataType = func() (t [kindCount]string) {
	for k := range t {
		if b := kindBase[k]; b != "" {
			if l := kindLabel[k]; l != "" {
				t[k] = b + "." + l
			} else {
				t[k] = b
			}
		}
	}
	return t
}()

// DataType returns the value's full type spelling, e.g. "Number.int".
func (v Value) DataType() string {
	if v.Label == "" && v.Kind < kindCount && kindDataType[v.Kind] != "" {
		return kindDataType[v.Kind]
	}
	base := v.Base()
	if base == "" {
		return "Invalid"
	}
	l := v.Label
	if l == "" {
		l = defaultLabel(v.Kind)
	}
	if l == "" {
		return base
	}
	return base + "." + l
}

// SplitDataType splits "Number.int" into "Number" and "int". It checks the
// base and that neither part is empty; it does not apply SQS length limits.
func SplitDataType(dt string) (base, label string, err error) {
	base, label, dotted := strings.Cut(dt, ".")
	switch base {
	case BaseString, BaseNumber, BaseBinary:
	default:
		return "", "", fmt.Errorf("data type %q: must be String, Number or Binary, optionally followed by .label", dt)
	}
	if dotted && label == "" {
		return "", "", fmt.Errorf("data type %q: empty custom label after '.'", dt)
	}
	return base, label, nil
}

// ParseValue builds a value from its type spelling and text, as SQS carries it
// (Binary text is base64 here; use ParseBinary for raw bytes). The result
// renders back to exactly the same data type and text: a labelled value whose
// text does not parse exactly as the label's kind (say Number.int "007") stays
// a Number with that label rather than being altered.
func ParseValue(dataType, text string) (Value, error) {
	base, label, err := SplitDataType(dataType)
	if err != nil {
		return Value{}, err
	}
	if base == BaseBinary {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return Value{}, fmt.Errorf("%s value: invalid base64: %w", dataType, err)
		}
		return Binary(b).WithLabel(label), nil
	}
	if k, ok := labelKind[dataType]; ok {
		if v, ok := parseExact(k, text); ok {
			return v.WithLabel(label), nil
		}
	}
	if base == BaseNumber {
		return Number(text).WithLabel(label), nil
	}
	return String(text).WithLabel(label), nil
}

// ParseBinary builds a Binary value with the label of dataType.
func ParseBinary(dataType string, b []byte) (Value, error) {
	base, label, err := SplitDataType(dataType)
	if err != nil {
		return Value{}, err
	}
	if base != BaseBinary {
		return Value{}, fmt.Errorf("data type %q is not Binary", dataType)
	}
	return Binary(b).WithLabel(label), nil
}

// CheckText reports an error when text is not a value of dataType: a
// Number that is not a decimal number, or a label that names a kind
// ("Number.int", "String.uuid", "Number.float") and a text that does not
// parse as one ("1.5", "maybe", "not-a-uuid"; "3.50" is a float). A free
// label ("Binary.png", "String.sku") takes any text of its base. ParseValue
// keeps such text as it is, since a broker may carry anything; what a user
// writes (a constant in the configuration, a command line, a template's
// rendering) is checked with this instead.
func CheckText(dataType, text string) error {
	base, _, err := SplitDataType(dataType)
	if err != nil {
		return err
	}
	if base == BaseBinary {
		if _, err := base64.StdEncoding.DecodeString(text); err != nil {
			return fmt.Errorf("%q is not base64, as %s needs", text, dataType)
		}
		return nil
	}
	if base == BaseNumber && !IsDecimalText(text) {
		return fmt.Errorf("%q is not a number, as %s needs", text, dataType)
	}
	if k, ok := labelKind[dataType]; ok {
		if _, ok := parseKind(k, text); !ok {
			return fmt.Errorf("%q is not a valid %s", text, dataType)
		}
	}
	return nil
}

// parseExact parses text as kind k and succeeds only when Text renders it back
// byte for byte.
func parseExact(k Kind, text string) (Value, bool) {
	v, ok := parseKind(k, text)
	if !ok {
		return v, false
	}
	if k == KindDecimal32 || k == KindDecimal64 || k == KindDecimal128 {
		return v, true // the text itself is the value
	}
	got, err := v.Text()
	return v, err == nil && got == text
}

// parseKind parses text as kind k; the value may render back otherwise
// ("3.50" is the float 3.5).
func parseKind(k Kind, text string) (Value, bool) {
	var v Value
	switch k {
	case KindBool:
		// Any case: .NET writes True and False. Only true and false
		// render back exactly (parseExact).
		switch {
		case strings.EqualFold(text, "true"):
			v = Bool(true)
		case strings.EqualFold(text, "false"):
			v = Bool(false)
		default:
			return v, false
		}
	case KindInt8, KindInt16, KindInt32, KindInt64:
		n, err := strconv.ParseInt(text, 10, intBits(k))
		if err != nil {
			return v, false
		}
		v = Value{Kind: k, n: uint64(n)}
	case KindUint8, KindUint16, KindUint32, KindUint64:
		n, err := strconv.ParseUint(text, 10, intBits(k))
		if err != nil {
			return v, false
		}
		v = Value{Kind: k, n: n}
	case KindFloat32:
		f, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return v, false
		}
		v = Float32(float32(f))
	case KindFloat64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return v, false
		}
		v = Float64(f)
	case KindDecimal32, KindDecimal64, KindDecimal128:
		if !IsDecimalText(text) {
			return v, false
		}
		return Decimal(k, text), true
	case KindTimestamp:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return v, false
		}
		v = TimestampMillis(n)
	case KindTimeSpan:
		t, ok := parseSeconds7(text)
		if !ok {
			return v, false
		}
		v = TimeSpanTicks(t)
	case KindDateTimeOffset:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return v, false
		}
		v = DateTimeOffset(t)
	case KindUUID:
		u, err := ParseUUID(text)
		if err != nil {
			return v, false
		}
		v = UUID(u)
	case KindChar:
		r, size := utf8.DecodeRuneInString(text)
		if size == 0 || size != len(text) || r == utf8.RuneError {
			return v, false
		}
		v = Char(r)
	case KindSymbol:
		v = Symbol(text)
	case KindURI:
		v = URI(text)
	case KindStrings:
		var ss []string
		if err := json.Unmarshal([]byte(text), &ss); err != nil || ss == nil {
			return v, false
		}
		v = Strings(ss...)
	case KindList, KindMap, KindNull:
		var err error
		if v, err = valueFromJSON(k, []byte(text)); err != nil {
			return Value{}, false
		}
	default:
		return v, false
	}
	return v, true
}

func intBits(k Kind) int {
	switch k {
	case KindInt8, KindUint8:
		return 8
	case KindInt16, KindUint16:
		return 16
	case KindInt32, KindUint32:
		return 32
	}
	return 64
}

// ErrTextNotUTF8 is Text's error for a Strings, List or Map value holding a
// string that is not valid UTF-8: their text is JSON, which would put U+FFFD
// in place of the bytes, silently.
var ErrTextNotUTF8 = errors.New("a string in it is not valid UTF-8, which its JSON text cannot hold")

// Text renders the value as the text SQS carries for its data type (String
// and Number StringValue). Binary renders as base64. Wire forms that carry only
// strings (NATS headers, HTTP headers) use this same text with the DataType as
// the hint, so one convention serves them all.
func (v Value) Text() (string, error) {
	switch v.Kind {
	case KindString, KindNumber, KindDecimal32, KindDecimal64, KindDecimal128,
		KindSymbol, KindURI, KindChar:
		return v.s, nil
	case KindBinary:
		return base64.StdEncoding.EncodeToString(v.b), nil
	case KindBool:
		return strconv.FormatBool(v.Bool()), nil
	case KindInt8, KindInt16, KindInt32, KindInt64:
		return strconv.FormatInt(int64(v.n), 10), nil
	case KindUint8, KindUint16, KindUint32, KindUint64, KindTimestamp:
		if v.Kind == KindTimestamp {
			return strconv.FormatInt(int64(v.n), 10), nil
		}
		return strconv.FormatUint(v.n, 10), nil
	case KindFloat32:
		return formatFloat(v.Float(), 32), nil
	case KindFloat64:
		return formatFloat(v.Float(), 64), nil
	case KindTimeSpan:
		return formatSeconds7(int64(v.n)), nil
	case KindDateTimeOffset:
		return v.Time().Format("2006-01-02T15:04:05.0000000Z07:00"), nil
	case KindUUID:
		if len(v.b) != 16 {
			return "", fmt.Errorf("uuid of %d bytes", len(v.b))
		}
		return UUIDString(v.UUID()), nil
	case KindStrings:
		if !v.ValidUTF8() {
			return "", ErrTextNotUTF8
		}
		ss := v.ss
		if ss == nil {
			ss = []string{} // "[]", not "null"
		}
		b, err := json.Marshal(ss)
		return string(b), err
	case KindList, KindMap, KindNull:
		if !v.ValidUTF8() {
			return "", ErrTextNotUTF8
		}
		// The data type says which; the text is the typed JSON's value member.
		b, err := v.jsonRaw()
		return string(b), err
	}
	return "", errors.New("invalid value")
}

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'f', -1, bits)
}

// formatSeconds7 renders ticks (100 ns) as seconds with up to 7 decimals,
// the REST convention for TimeSpan ("total seconds").
func formatSeconds7(ticks int64) string {
	neg := ticks < 0
	u := uint64(ticks)
	if neg {
		u = -u
	}
	s := strconv.FormatUint(u/1e7, 10)
	if frac := u % 1e7; frac != 0 {
		f := strconv.FormatUint(frac+1e7, 10)[1:]
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

func parseSeconds7(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	t := strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(t, ".")
	if whole == "" || len(frac) > 7 {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > math.MaxInt64/10000000 {
		return 0, false
	}
	var f uint64
	if frac != "" {
		f, err = strconv.ParseUint((frac + "000000")[:7], 10, 64)
		if err != nil {
			return 0, false
		}
	}
	ticks := int64(w*1e7 + f)
	if neg {
		ticks = -ticks
	}
	return ticks, formatSeconds7(ticks) == s
}

// IsDecimalText reports whether s is a plain decimal number: optional sign,
// digits with an optional fraction, optional exponent.
func IsDecimalText(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}
