package mapping

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The typed JSON rendering of a value: {"type":"int","value":42}, with
// "label" when the value has a custom label. Types are the AMQP-style kind
// names of Kind.String. Integers and finite floats are JSON numbers; NaN and
// infinities, decimals, timestamps-as-text and the rest are strings; binary is
// base64; strings is an array of strings; list an array of typed values; map
// an array of [key, value] pairs; null has no value.
type jsonValue struct {
	Type  string          `json:"type"`
	Label string          `json:"label,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// MarshalJSON implements json.Marshaler with the typed rendering.
func (v Value) MarshalJSON() ([]byte, error) {
	if !v.IsValid() {
		return nil, fmt.Errorf("marshal invalid value")
	}
	raw, err := v.jsonRaw()
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNull {
		raw = nil
	}
	return json.Marshal(jsonValue{Type: v.Kind.String(), Label: v.Label, Value: raw})
}

// jsonRaw renders the "value" member of the typed rendering.
func (v Value) jsonRaw() (raw []byte, err error) {
	switch v.Kind {
	case KindNull:
		raw = []byte("null")
	case KindBool:
		raw = strconv.AppendBool(nil, v.Bool())
	case KindInt8, KindInt16, KindInt32, KindInt64, KindTimestamp:
		raw = strconv.AppendInt(nil, v.Int(), 10)
	case KindUint8, KindUint16, KindUint32, KindUint64:
		raw = strconv.AppendUint(nil, v.n, 10)
	case KindFloat32, KindFloat64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			raw, err = json.Marshal(formatFloat(f, 64))
		} else if v.Kind == KindFloat32 {
			raw = strconv.AppendFloat(nil, f, 'g', -1, 32)
		} else {
			raw = strconv.AppendFloat(nil, f, 'g', -1, 64)
		}
	case KindStrings:
		ss := v.ss
		if ss == nil {
			ss = []string{}
		}
		raw, err = json.Marshal(ss)
	case KindList:
		if v.vs == nil {
			raw = []byte("[]")
		} else {
			raw, err = json.Marshal(v.vs)
		}
	case KindMap:
		pairs := make([][2]Value, len(v.vs)/2)
		for i := range pairs {
			pairs[i] = [2]Value{v.vs[2*i], v.vs[2*i+1]}
		}
		raw, err = json.Marshal(pairs)
	default:
		var t string
		if t, err = v.Text(); err == nil {
			raw, err = json.Marshal(t)
		}
	}
	return raw, err
}

// UnmarshalJSON implements json.Unmarshaler for the typed rendering.
func (v *Value) UnmarshalJSON(b []byte) error {
	nv, err := UnmarshalValueJSON(b)
	if err != nil {
		return err
	}
	*v = nv
	return nil
}

// UnmarshalValueJSON parses the typed JSON rendering of a value.
func UnmarshalValueJSON(b []byte) (Value, error) {
	var j jsonValue
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Value{}, fmt.Errorf("typed value: %w", err)
	}
	k, ok := KindByName(j.Type)
	if !ok {
		return Value{}, fmt.Errorf("typed value: unknown type %q", j.Type)
	}
	v, err := valueFromJSON(k, j.Value)
	if err != nil {
		return Value{}, fmt.Errorf("typed value of type %s: %w", j.Type, err)
	}
	return v.WithLabel(j.Label), nil
}

func valueFromJSON(k Kind, raw json.RawMessage) (Value, error) {
	if k == KindNull {
		if len(raw) != 0 && string(raw) != "null" {
			return Value{}, fmt.Errorf("null takes no value")
		}
		return Null(), nil
	}
	if len(raw) == 0 {
		return Value{}, fmt.Errorf("missing value")
	}
	switch k {
	case KindBool:
		var b bool
		err := json.Unmarshal(raw, &b)
		return Bool(b), err
	case KindInt8, KindInt16, KindInt32, KindInt64, KindTimestamp:
		n, err := strconv.ParseInt(string(raw), 10, intBits(k))
		if k == KindTimestamp {
			return TimestampMillis(n), err
		}
		return Value{Kind: k, n: uint64(n)}, err
	case KindUint8, KindUint16, KindUint32, KindUint64:
		n, err := strconv.ParseUint(string(raw), 10, intBits(k))
		return Value{Kind: k, n: n}, err
	case KindFloat32, KindFloat64:
		bits := 64
		if k == KindFloat32 {
			bits = 32
		}
		text := string(raw)
		if raw[0] == '"' {
			if err := json.Unmarshal(raw, &text); err != nil {
				return Value{}, err
			}
			switch text {
			case "NaN", "Infinity", "-Infinity":
			default:
				return Value{}, fmt.Errorf("float string must be NaN, Infinity or -Infinity, not %q", text)
			}
			text = map[string]string{"NaN": "NaN", "Infinity": "+Inf", "-Infinity": "-Inf"}[text]
		}
		f, err := strconv.ParseFloat(text, bits)
		if err != nil {
			return Value{}, err
		}
		if k == KindFloat32 {
			return Float32(float32(f)), nil
		}
		return Float64(f), nil
	case KindStrings:
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil || ss == nil {
			return Value{}, fmt.Errorf("want an array of strings")
		}
		return Strings(ss...), nil
	case KindList:
		var vs []Value
		if err := json.Unmarshal(raw, &vs); err != nil {
			return Value{}, err
		}
		return List(vs...), nil
	case KindMap:
		var pairs [][]Value
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return Value{}, err
		}
		kv := make([]Value, 0, 2*len(pairs))
		for i, p := range pairs {
			if len(p) != 2 {
				return Value{}, fmt.Errorf("map entry %d: want a [key, value] pair, got %d values", i, len(p))
			}
			kv = append(kv, p[0], p[1])
		}
		return Map(kv...), nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return Value{}, fmt.Errorf("want a string: %w", err)
	}
	switch k {
	case KindString:
		return String(text), nil
	case KindNumber:
		return Number(text), nil
	case KindSymbol:
		return Symbol(text), nil
	case KindURI:
		return URI(text), nil
	case KindBinary:
		b, err := base64.StdEncoding.DecodeString(text)
		return Binary(b), err
	}
	v, ok := parseExact(k, text)
	if !ok {
		return Value{}, fmt.Errorf("%q is not a canonical %s", text, k)
	}
	return v, nil
}
