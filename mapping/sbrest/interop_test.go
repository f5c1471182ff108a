package sbrest

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// amqpNative is what an AMQP receiver gets for a custom property Service
// Bus inferred from a header: long, double, bool, timestamp or string.
func amqpNative(inferred mapping.Value) any {
	switch inferred.Kind {
	case mapping.KindInt64:
		return inferred.Int()
	case mapping.KindFloat64:
		return inferred.Float()
	case mapping.KindBool:
		return inferred.Bool()
	case mapping.KindTimestamp:
		return inferred.Time() // AMQP timestamp: milliseconds
	}
	return inferred.Str()
}

// amqpText is the Text() an AMQP decoder computes for the native value, as
// sbmap would, without going through this package's code.
func amqpText(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return strconv.FormatInt(x.UnixMilli(), 10)
	}
	return v.(string)
}

// TestAMQPReceiverView: a message sent over HTTPS and received over AMQP
// (package sbmap) sees each custom property as the natively typed value the
// broker inferred; with the envelope's type, ParseValue(type, Text())
// must give back the original value, for every kind.
func TestAMQPReceiverView(t *testing.T) {
	m := &mapping.Message{Attributes: allKinds()}
	r, err := Encode(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := mapping.ParseEnvelope(unquoted(r.Header[mapping.EnvelopeName][0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Attributes {
		hv := r.Header[a.Name]
		if len(hv) != 1 {
			t.Fatalf("%s: header %v", a.Name, hv)
		}
		inferred, err := InferHeader(hv[0]) // the broker
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		native := amqpNative(inferred)
		var got mapping.Value
		if dt, ok := env.TypeOf(a.Name); ok {
			text := amqpText(native)
			if exact, ok := env.Texts[a.Name]; ok {
				text = exact // a Number sent in its natural type
			}
			got, err = mapping.ParseValue(dt, text)
			if err != nil {
				t.Fatalf("%s: %v", a.Name, err)
			}
		} else {
			got = inferred // natural type: the AMQP decoder's own mapping
		}
		if !got.Equal(a.Value) {
			t.Errorf("%s = %#v: header %s, AMQP %T %v, rebuilt %#v", a.Name, a.Value, hv[0], native, native, got)
		}
	}
}

// The brief's examples, spelled out.
func TestAMQPExamples(t *testing.T) {
	for _, tc := range []struct {
		v      mapping.Value
		header string
		native any
	}{
		{mapping.Int32(42), "42", int64(42)},
		{mapping.Binary([]byte("hi")), `"aGk="`, "aGk="},
		{mapping.Float64(1), "1.0", 1.0},
		{mapping.Timestamp(time.Unix(1299228577, 0)), `"Fri, 04 Mar 2011 08:49:37 GMT"`, time.Unix(1299228577, 0).UTC()},
		{mapping.UUID([16]byte{15: 1}), `"00000000-0000-0000-0000-000000000001"`, "00000000-0000-0000-0000-000000000001"},
	} {
		h, _, err := FormatHeader(tc.v)
		if err != nil || h != tc.header {
			t.Errorf("%#v: %s %v", tc.v, h, err)
			continue
		}
		inferred, _ := InferHeader(h)
		if n := amqpNative(inferred); n != tc.native {
			t.Errorf("%#v: AMQP sees %T %v, want %T %v", tc.v, n, n, tc.native, tc.native)
		}
		if got, err := mapping.ParseValue(tc.v.DataType(), amqpText(amqpNative(inferred))); err != nil || !got.Equal(tc.v) {
			t.Errorf("%#v: rebuilt %#v %v", tc.v, got, err)
		}
	}
}

func unquoted(s string) string { return s[1 : len(s)-1] }
