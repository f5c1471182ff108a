package sbrest

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// Service Bus infers one of five types from a custom property's text
// (docs/wire-servicebus.md §7): String, Boolean, Int64, Double, DateTime. In the model: these kinds,
// with their default labels.
const (
	dtString    = mapping.KindString
	dtBool      = mapping.KindBool
	dtLong      = mapping.KindInt64
	dtDouble    = mapping.KindFloat64
	dtTimestamp = mapping.KindTimestamp
)

// sameType reports whether v's data type is the one the broker infers
// (without building DataType strings on the hot path).
func sameType(v mapping.Value, inferred mapping.Kind) bool {
	return v.Kind == inferred && v.Label == ""
}

// wireValue is a custom property value as Service Bus REST carries it.
type wireValue struct {
	text     string // without the quotes
	quoted   bool
	inferred mapping.Kind // what Service Bus infers from the wire text
	// dateLike: a quoted text that Service Bus would read as a DateTime
	// although the value is not one; it cannot travel as a string.
	dateLike bool
}

// header renders the value as an HTTP header value.
func (w wireValue) header() string {
	if w.quoted {
		return `"` + w.text + `"`
	}
	return w.text
}

// size is the number of bytes the value takes on the wire.
func (w wireValue) size() int {
	if w.quoted {
		return len(w.text) + 2
	}
	return len(w.text)
}

// formatValue chooses the wire text of v. The rule: the kinds the broker can
// infer (string, bool, long, double, whole-second timestamp) are written so
// that it infers them; every other value is written as text whose inferred
// value has exactly v's Text(), so that mapping.ParseValue(v.DataType(),
// inferred.Text()) rebuilds v on any receiving side (REST or AMQP), given
// the data type that the caller records whenever inferred != v.DataType().
//
// A Number goes as its natural type where it has one; where that type
// renders another text, only when natural is set (the caller keeps the
// exact text in the envelope), else as its text.
func formatValue(v mapping.Value, natural bool) (wireValue, error) {
	switch v.Kind {
	case mapping.KindBool:
		return wireValue{text: strconv.FormatBool(v.Bool()), inferred: dtBool}, nil
	case mapping.KindInt8, mapping.KindInt16, mapping.KindInt32, mapping.KindInt64,
		mapping.KindUint8, mapping.KindUint16, mapping.KindUint32:
		t, _ := v.Text()
		return wireValue{text: t, inferred: dtLong}, nil
	case mapping.KindUint64:
		if v.Uint() <= math.MaxInt64 {
			return wireValue{text: strconv.FormatUint(v.Uint(), 10), inferred: dtLong}, nil
		}
	case mapping.KindFloat64, mapping.KindFloat32:
		bits := 64
		if v.Kind == mapping.KindFloat32 {
			bits = 32
		}
		if f := v.Float(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return wireValue{text: floatText(f, bits), inferred: dtDouble}, nil
		}
	case mapping.KindTimestamp:
		if t, ok := wholeSecondDate(v); ok {
			return wireValue{text: t, quoted: true, inferred: dtTimestamp}, nil
		}
	case mapping.KindNumber:
		// As on AMQP: its natural type (a long, a double) when it has one;
		// the encoder keeps the exact text in the envelope where it differs.
		if n, same := mapping.NaturalNumber(v); n.Kind != mapping.KindNumber && (same || natural) {
			return formatValue(n, natural)
		}
	case mapping.KindInvalid:
		return wireValue{}, errors.New("invalid value")
	}
	t, err := v.Text()
	if err != nil {
		return wireValue{}, err
	}
	return wireValue{text: t, quoted: true, inferred: dtString, dateLike: looksLikeDate(t)}, nil
}

// floatText renders a finite float so that it parses back to the same value
// (shortest digits for its width) and never as an integer: 1 becomes "1.0",
// since "1" would make Service Bus infer an Int64. Very large and very small
// magnitudes use exponent form, as .NET and JavaScript do.
func floatText(f float64, bits int) string {
	var buf [32]byte
	var b []byte
	if a := math.Abs(f); a == 0 || a >= 1e-7 && a < 1e21 {
		b = strconv.AppendFloat(buf[:0], f, 'f', -1, bits)
	} else {
		b = strconv.AppendFloat(buf[:0], f, 'e', -1, bits)
	}
	for _, c := range b {
		if c == '.' || c == 'e' {
			return string(b)
		}
	}
	return string(append(b, ".0"...))
}

// wholeSecondDate renders a timestamp as an RFC 2616 date when that is
// exact: whole seconds within .NET DateTime's years 1–9999.
func wholeSecondDate(v mapping.Value) (string, bool) {
	if v.Int()%1000 != 0 {
		return "", false
	}
	t := v.Time()
	if y := t.Year(); y < 1 || y > 9999 {
		return "", false
	}
	return t.Format(http.TimeFormat), true
}

// looksLikeDate reports whether Service Bus would read quoted text s as an
// RFC 2616 date. All three RFC 2616 date formats count, so the check errs
// on the safe side.
func looksLikeDate(s string) bool {
	// All three formats start with a day name (matched without case, as
	// time.Parse does); checking it first spares failing parses.
	if len(s) < 20 || len(s) > 40 || !dayName(s[:3]) {
		return false
	}
	_, err := parseDate(s)
	return err == nil
}

func dayName(s string) bool {
	for _, d := range [...]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"} {
		if strings.EqualFold(s, d) {
			return true
		}
	}
	return false
}

// parseDate parses an RFC 2616 date (RFC 1123, RFC 850 or asctime form).
func parseDate(s string) (time.Time, error) {
	t, err := http.ParseTime(s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// InferHeader infers the value of a custom property from its HTTP header
// text exactly as Service Bus does (docs/wire-servicebus.md §7): a quoted RFC 2616 date is a
// timestamp, other quoted text a string; unquoted true/false a bool, an
// integer an Int64 (a Double when it overflows), a float a Double. Anything
// else is an error. Surrounding whitespace is ignored, as HTTP does.
func InferHeader(s string) (mapping.Value, error) {
	s = strings.Trim(s, " \t")
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return inferString(s[1 : len(s)-1]), nil
	}
	return inferBare(s)
}

// inferString is the quoted case: the broker strips the quotes and nothing
// else (no escapes are defined), then looks for a date.
func inferString(s string) mapping.Value {
	if looksLikeDate(s) {
		t, _ := parseDate(s)
		return mapping.Timestamp(t)
	}
	return mapping.String(s)
}

var errNotInferable = errors.New("not a quoted string, true/false, an integer or a float (Service Bus rejects such a value; quote strings)")

// inferBare is the unquoted case.
func inferBare(s string) (mapping.Value, error) {
	switch s {
	case "true":
		return mapping.Bool(true), nil
	case "false":
		return mapping.Bool(false), nil
	case "NaN", "Infinity", "-Infinity":
		// .NET's invariant spellings, which double parsing accepts.
		f, _ := strconv.ParseFloat(s, 64)
		return mapping.Float64(f), nil
	}
	if isIntegerText(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return mapping.Int64(n), nil
		}
		// Too large for Int64: the broker's next try is Double.
	} else if !mapping.IsDecimalText(s) {
		return mapping.Value{}, fmt.Errorf("%q: %w", s, errNotInferable)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return mapping.Value{}, fmt.Errorf("%q: float out of range", s)
	}
	return mapping.Float64(f), nil
}

// isIntegerText: optional sign and ASCII digits.
func isIntegerText(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatHeader renders v as a custom property header value. dataType is
// non-empty when Service Bus will infer another type from the text: the
// caller must then record it in the carry envelope (Encode does). It fails
// for values no header can carry as they are (non-ASCII or control
// characters, or a string Service Bus would take for a date).
func FormatHeader(v mapping.Value) (value, dataType string, err error) {
	w, err := formatValue(v, false)
	if err != nil {
		return "", "", err
	}
	if w.quoted && !headerSafe(w.text) {
		return "", "", errors.New(reasonUnsafe)
	}
	if w.dateLike {
		return "", "", errors.New(reasonDateLike)
	}
	if !sameType(v, w.inferred) {
		dataType = v.DataType()
	}
	return w.header(), dataType, nil
}

const (
	reasonUnsafe   = "value has characters an HTTP header cannot carry (non-ASCII or control characters)"
	reasonDateLike = "text looks like an RFC 2616 date, which Service Bus would turn into a DateTime"
)

var inferredTypes = map[mapping.Kind]string{
	dtString: "String", dtBool: "String.bool", dtLong: "Number.long",
	dtDouble: "Number.double", dtTimestamp: "Number.timestamp",
}

// rebuild turns an inferred value into the attribute value, given the data
// type the envelope records for it (if any).
func rebuild(inferred mapping.Value, dt string, ok bool) (mapping.Value, error) {
	if !ok || dt == inferredTypes[inferred.Kind] {
		return inferred, nil
	}
	t, err := inferred.Text()
	if err != nil {
		return mapping.Value{}, err
	}
	return mapping.ParseValue(dt, t)
}
