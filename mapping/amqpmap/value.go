package amqpmap

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// fidelity says how a native value comes back when the receiver decodes it.
type fidelity uint8

const (
	exact   fidelity = iota // the same Value
	demoted                 // the same, except that symbols come back as strings (go-amqp decodes them so)
	inexact                 // another kind or label: Text with the type recorded, or a fallback
)

// place is where a value goes: application-properties may hold simple types
// only (AMQP 1.0 §3.2.5), annotations and bodies any type.
type place uint8

const (
	inProperty place = iota
	inAnnotation
	inBody
)

var (
	// errNotNative: the value has no native encoding in this place (binary
	// or composite map keys, duplicate map keys, a strict kind).
	errNotNative   = errors.New("no native AMQP encoding")
	errInvalidUTF8 = errors.New("string is not valid UTF-8")
)

// valueEncoder turns model values into the Go values go-amqp marshals.
type valueEncoder struct {
	described    bool // URI, DateTimeOffset, TimeSpan as com.microsoft described types
	plainSymbols bool // symbols in application-properties as strings
	strict       bool // no Text fallback: kinds go-amqp cannot encode are errors (JSON rendering)
}

// native returns the go-amqp value of v and how faithfully it comes back.
func (e valueEncoder) native(v mapping.Value, p place) (any, fidelity, error) {
	f := exact
	if v.Label != "" {
		if e.strict {
			return nil, inexact, fmt.Errorf("%s with label %q: %w", v.Kind, v.Label, errNotNative)
		}
		f = inexact
	}
	switch v.Kind {
	case mapping.KindString:
		if !utf8.ValidString(v.Str()) {
			return nil, f, errInvalidUTF8
		}
		return v.Str(), f, nil
	case mapping.KindSymbol:
		if !utf8.ValidString(v.Str()) {
			return nil, f, errInvalidUTF8
		}
		if p == inProperty && e.plainSymbols {
			return v.Str(), inexact, nil
		}
		return amqp.Symbol(v.Str()), max(f, demoted), nil
	case mapping.KindBinary:
		b := v.Bytes()
		if b == nil {
			b = []byte{}
		}
		return b, f, nil
	case mapping.KindBool:
		return v.Bool(), f, nil
	case mapping.KindInt8:
		return int8(v.Int()), f, nil
	case mapping.KindInt16:
		return int16(v.Int()), f, nil
	case mapping.KindInt32:
		return int32(v.Int()), f, nil
	case mapping.KindInt64:
		return v.Int(), f, nil
	case mapping.KindUint8:
		return uint8(v.Uint()), f, nil
	case mapping.KindUint16:
		return uint16(v.Uint()), f, nil
	case mapping.KindUint32:
		return uint32(v.Uint()), f, nil
	case mapping.KindUint64:
		return v.Uint(), f, nil
	case mapping.KindFloat32:
		return v.Float32(), f, nil
	case mapping.KindFloat64:
		return v.Float(), f, nil
	case mapping.KindTimestamp:
		return time.UnixMilli(v.Int()).UTC(), f, nil
	case mapping.KindUUID:
		if len(v.Bytes()) != 16 {
			return nil, f, fmt.Errorf("uuid of %d bytes", len(v.Bytes()))
		}
		return amqp.UUID(v.UUID()), f, nil
	case mapping.KindNull:
		return nil, f, nil
	case mapping.KindURI, mapping.KindDateTimeOffset, mapping.KindTimeSpan:
		if e.described || e.strict {
			if n, ok := describedNative(v); ok {
				return n, f, nil
			}
			if e.strict {
				return nil, inexact, fmt.Errorf("%s: %s: %w", v.Kind, described.reasonMiss, errNotNative)
			}
		}
		return e.text(v)
	case mapping.KindNumber:
		if e.strict {
			return nil, inexact, fmt.Errorf("number: %w", errNotNative)
		}
		// Its natural type (a Number.float "3.50" is the double 3.5); the
		// encoder keeps the exact text in the envelope where it differs.
		n, _ := mapping.NaturalNumber(v)
		if n.Kind == mapping.KindNumber {
			return v.Str(), inexact, nil
		}
		x, _, err := e.native(n, p)
		return x, inexact, err
	case mapping.KindStrings:
		if p == inProperty {
			return e.text(v)
		}
		ss := v.Strings()
		for _, s := range ss {
			if !utf8.ValidString(s) {
				return nil, f, errInvalidUTF8
			}
		}
		if ss == nil {
			ss = []string{}
		}
		return ss, f, nil
	case mapping.KindList:
		if p == inProperty {
			return e.text(v)
		}
		items := v.List()
		out := make([]any, len(items))
		for i, it := range items {
			n, fi, err := e.native(it, inAnnotation)
			if err != nil {
				return nil, f, err
			}
			out[i], f = n, max(f, fi)
		}
		return out, f, nil
	case mapping.KindMap:
		if p == inProperty {
			return e.text(v)
		}
		return e.nativeMap(v, f)
	case mapping.KindDecimal32, mapping.KindDecimal64, mapping.KindDecimal128, mapping.KindChar:
		// go-amqp can neither encode nor decode these.
		if e.strict {
			return nil, inexact, fmt.Errorf("%s: go-amqp cannot encode it: %w", v.Kind, errNotNative)
		}
		return e.text(v)
	}
	return nil, inexact, fmt.Errorf("invalid value of kind %s", v.Kind)
}

// text is the fallback: the value's Text as a string, its type to be recorded.
func (e valueEncoder) text(v mapping.Value) (any, fidelity, error) {
	if e.strict {
		return nil, inexact, fmt.Errorf("%s in application-properties: %w", v.Kind, errNotNative)
	}
	t, err := v.Text()
	if err != nil {
		return nil, inexact, err
	}
	if !utf8.ValidString(t) {
		return nil, inexact, errInvalidUTF8
	}
	return t, inexact, nil
}

func (e valueEncoder) nativeMap(v mapping.Value, f fidelity) (any, fidelity, error) {
	kv := v.MapEntries()
	out := make(map[any]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, fk, err := e.native(kv[i], inAnnotation)
		if err != nil {
			return nil, f, err
		}
		if !comparableKey(k) {
			return nil, f, fmt.Errorf("map key of kind %s: %w", kv[i].Kind, errNotNative)
		}
		if _, dup := out[k]; dup {
			return nil, f, fmt.Errorf("duplicate map key %#v: %w", kv[i], errNotNative)
		}
		val, fv, err := e.native(kv[i+1], inAnnotation)
		if err != nil {
			return nil, f, err
		}
		out[k] = val
		f = max(f, fk, fv)
	}
	return out, f, nil
}

// comparableKey reports whether k can be a Go map key without panicking and
// still be found again (NaN cannot).
func comparableKey(k any) bool {
	switch k := k.(type) {
	case nil, string, amqp.Symbol, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
		time.Time, amqp.UUID:
		return true
	case float32:
		return k == k
	case float64:
		return k == k
	}
	_, _, ok := describedParts(k) // holds a string or an int64
	return ok
}

func describedNative(v mapping.Value) (any, bool) {
	switch v.Kind {
	case mapping.KindURI:
		return newDescribed(DescriptorURI, v.Str())
	case mapping.KindDateTimeOffset:
		return newDescribed(DescriptorDateTimeOffset, v.Ticks())
	case mapping.KindTimeSpan:
		return newDescribed(DescriptorTimeSpan, v.Ticks())
	}
	return nil, false
}

// value turns a Go value decoded by go-amqp (or built in memory) into a model
// value.
func value(x any) (mapping.Value, error) {
	switch t := x.(type) {
	case nil:
		return mapping.Null(), nil
	case amqp.Null:
		return mapping.Null(), nil
	case string:
		return mapping.String(t), nil
	case amqp.Symbol:
		return mapping.Symbol(string(t)), nil
	case []byte:
		return mapping.Binary(t), nil
	case bool:
		return mapping.Bool(t), nil
	case int8:
		return mapping.Int8(t), nil
	case int16:
		return mapping.Int16(t), nil
	case int32:
		return mapping.Int32(t), nil
	case int64:
		return mapping.Int64(t), nil
	case int:
		return mapping.Int64(int64(t)), nil
	case uint8:
		return mapping.Uint8(t), nil
	case uint16:
		return mapping.Uint16(t), nil
	case uint32:
		return mapping.Uint32(t), nil
	case uint64:
		return mapping.Uint64(t), nil
	case uint:
		return mapping.Uint64(uint64(t)), nil
	case float32:
		return mapping.Float32(t), nil
	case float64:
		return mapping.Float64(t), nil
	case time.Time:
		return mapping.TimestampMillis(t.UnixMilli()), nil
	case amqp.UUID:
		return mapping.UUID(t), nil
	case []string:
		return mapping.Strings(t...), nil
	case []any:
		return listValue(t)
	case map[string]any:
		kv := make([]mapping.Value, 0, 2*len(t))
		for k, v := range t {
			vv, err := value(v)
			if err != nil {
				return mapping.Value{}, fmt.Errorf("map value of key %q: %w", k, err)
			}
			kv = append(kv, mapping.String(k), vv)
		}
		return sortedMap(kv), nil
	case map[amqp.Symbol]any:
		kv := make([]mapping.Value, 0, 2*len(t))
		for k, v := range t {
			vv, err := value(v)
			if err != nil {
				return mapping.Value{}, fmt.Errorf("map value of key %q: %w", k, err)
			}
			kv = append(kv, mapping.Symbol(string(k)), vv)
		}
		return sortedMap(kv), nil
	case map[any]any:
		return anyMapValue(t)
	case amqp.Annotations:
		return anyMapValue(t)
	}
	if d, v, ok := describedParts(x); ok {
		return describedValue(d, v)
	}
	// The remaining AMQP arrays ([]int32, []amqp.UUID, []time.Time, ...)
	// become lists: the model has no array kind.
	if rv := reflect.ValueOf(x); rv.Kind() == reflect.Slice {
		items := make([]mapping.Value, rv.Len())
		for i := range items {
			v, err := value(rv.Index(i).Interface())
			if err != nil {
				return mapping.Value{}, fmt.Errorf("array element %d: %w", i, err)
			}
			items[i] = v
		}
		return mapping.List(items...), nil
	}
	return mapping.Value{}, fmt.Errorf("AMQP value of Go type %T is not supported", x)
}

func listValue(l []any) (mapping.Value, error) {
	items := make([]mapping.Value, len(l))
	for i, e := range l {
		v, err := value(e)
		if err != nil {
			return mapping.Value{}, fmt.Errorf("list element %d: %w", i, err)
		}
		items[i] = v
	}
	return mapping.List(items...), nil
}

func anyMapValue(m map[any]any) (mapping.Value, error) {
	kv := make([]mapping.Value, 0, 2*len(m))
	for k, v := range m {
		kk, err := value(k)
		if err != nil {
			return mapping.Value{}, fmt.Errorf("map key: %w", err)
		}
		vv, err := value(v)
		if err != nil {
			return mapping.Value{}, fmt.Errorf("map value: %w", err)
		}
		kv = append(kv, kk, vv)
	}
	return sortedMap(kv), nil
}

// sortedMap orders map entries by key (kind, then text): AMQP maps decoded by
// go-amqp have no order, and a decode must be deterministic.
func sortedMap(kv []mapping.Value) mapping.Value {
	n := len(kv) / 2
	if n > 1 {
		idx := make([]int, n)
		keys := make([]string, n)
		for i := range idx {
			idx[i] = i
			keys[i], _ = kv[2*i].Text()
		}
		slices.SortFunc(idx, func(a, b int) int {
			ka, kb := kv[2*a], kv[2*b]
			if ka.Kind != kb.Kind {
				return int(ka.Kind) - int(kb.Kind)
			}
			return strings.Compare(keys[a], keys[b])
		})
		out := make([]mapping.Value, 0, len(kv))
		for _, i := range idx {
			out = append(out, kv[2*i], kv[2*i+1])
		}
		kv = out
	}
	return mapping.Map(kv...)
}

// describedValue maps the Service Bus described types; any other described
// value has no model kind.
func describedValue(d, v any) (mapping.Value, error) {
	name, ok := descriptorName(d)
	if !ok {
		return mapping.Value{}, fmt.Errorf("described value with descriptor %v (%T) is not supported", d, d)
	}
	switch name {
	case DescriptorURI:
		if s, ok := v.(string); ok {
			return mapping.URI(s), nil
		}
	case DescriptorDateTimeOffset:
		if n, ok := v.(int64); ok {
			return mapping.DateTimeOffsetTicks(n), nil
		}
	case DescriptorTimeSpan:
		if n, ok := v.(int64); ok {
			return mapping.TimeSpanTicks(n), nil
		}
	default:
		return mapping.Value{}, fmt.Errorf("described value %q is not supported", name)
	}
	return mapping.Value{}, fmt.Errorf("described value %q holds a %T", name, v)
}
