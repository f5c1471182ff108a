package amqpmap

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/qbridge/qbridge/mapping"
)

// overWire marshals msg and unmarshals it again, as a receiver sees it.
func overWire(t testing.TB, msg *amqp.Message) *amqp.Message {
	t.Helper()
	b, err := msg.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	var r amqp.Message
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	return &r
}

// roundTrip is model -> Encode -> bytes -> Decode.
func roundTrip(t testing.TB, d *Dialect, m *mapping.Message, opt mapping.Options) *mapping.Message {
	t.Helper()
	msg, err := d.Encode(m, opt)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	got, err := d.Decode(overWire(t, msg))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

var (
	attrsType = reflect.TypeOf([]mapping.Attribute(nil))
	timeType  = reflect.TypeOf(time.Time{})
	bytesType = reflect.TypeOf([]byte(nil))
)

// diff lists the model fields (Source excluded) in which got differs from
// want. Values compare with Value.Equal, byte slices treat nil as empty.
func diff(want, got *mapping.Message) []string {
	var out []string
	wv, gv := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := 0; i < wv.NumField(); i++ {
		name := wv.Type().Field(i).Name
		if name == "Source" {
			continue
		}
		w, g := wv.Field(i), gv.Field(i)
		same := true
		switch w.Type() {
		case attrsType:
			wa, ga := w.Interface().([]mapping.Attribute), g.Interface().([]mapping.Attribute)
			same = len(wa) == len(ga)
			for j := 0; same && j < len(wa); j++ {
				same = wa[j].Name == ga[j].Name && wa[j].Value.Equal(ga[j].Value)
			}
		case timeType:
			same = w.Interface().(time.Time).Equal(g.Interface().(time.Time))
		case bytesType:
			same = bytes.Equal(w.Bytes(), g.Bytes())
		default:
			same = reflect.DeepEqual(w.Interface(), g.Interface())
		}
		if !same {
			out = append(out, fmt.Sprintf("%s: want %#v, got %#v", name, w.Interface(), g.Interface()))
		}
	}
	return out
}

func checkSame(t testing.TB, want, got *mapping.Message) {
	t.Helper()
	for _, d := range diff(want, got) {
		t.Error(d)
	}
}

func attrs(kv ...any) []mapping.Attribute {
	var a []mapping.Attribute
	for i := 0; i < len(kv); i += 2 {
		a = append(a, mapping.Attribute{Name: kv[i].(string), Value: kv[i+1].(mapping.Value)})
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// collect returns Options whose drops are appended to *got.
func collect(p mapping.Policy, got *[]string) mapping.Options {
	return mapping.Options{Policy: p, OnDrop: func(f, r string) { *got = append(*got, f) }}
}
