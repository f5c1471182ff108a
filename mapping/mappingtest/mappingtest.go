// Package mappingtest provides helpers for the tests of the codec packages:
// a model comparison, attribute builders and a sample message for
// benchmarks. Like net/http/httptest it is imported only by tests.
package mappingtest

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// Option adjusts what Diff compares.
type Option func(*config)

type config struct {
	source bool
	ignore map[string]bool
}

// WithSource makes Diff compare the Source facts as well.
func WithSource() Option { return func(c *config) { c.source = true } }

// Ignore leaves the named top-level Message fields out of the comparison.
func Ignore(fields ...string) Option {
	return func(c *config) {
		if c.ignore == nil {
			c.ignore = map[string]bool{}
		}
		for _, f := range fields {
			c.ignore[f] = true
		}
	}
}

// Diff lists the top-level Message fields in which got differs from want,
// one line each naming the first difference within the field. Source is
// left out unless WithSource is given. Values compare with Value.Equal,
// times with Equal (the instant), and a nil slice equals an empty one;
// everything else compares with reflect.DeepEqual.
func Diff(want, got *mapping.Message, opts ...Option) []string {
	var c config
	for _, o := range opts {
		o(&c)
	}
	var out []string
	wv, gv := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := 0; i < wv.NumField(); i++ {
		f := wv.Type().Field(i)
		if !f.IsExported() || c.ignore[f.Name] || f.Name == "Source" && !c.source {
			continue
		}
		if d := diff(f.Name, wv.Field(i), gv.Field(i)); d != "" {
			out = append(out, d)
		}
	}
	return out
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	valueType = reflect.TypeFor[mapping.Value]()
	bytesType = reflect.TypeFor[[]byte]()
)

func diff(path string, a, b reflect.Value) string {
	switch a.Type() {
	case timeType:
		if !a.Interface().(time.Time).Equal(b.Interface().(time.Time)) {
			return fmt.Sprintf("%s: want %v, got %v", path, a.Interface(), b.Interface())
		}
		return ""
	case valueType:
		if !a.Interface().(mapping.Value).Equal(b.Interface().(mapping.Value)) {
			return fmt.Sprintf("%s: want %#v, got %#v", path, a.Interface(), b.Interface())
		}
		return ""
	case bytesType:
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			return fmt.Sprintf("%s: want %q, got %q", path, a.Bytes(), b.Bytes())
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if d := diff(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: want %d items %v, got %d %v", path, a.Len(), a.Interface(), b.Len(), b.Interface())
		}
		for i := 0; i < a.Len(); i++ {
			if d := diff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: want %v, got %v", path, a.Interface(), b.Interface())
			}
			return ""
		}
		return diff(path, a.Elem(), b.Elem())
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: want %#v, got %#v", path, a.Interface(), b.Interface())
	}
	return ""
}

// Attrs builds attributes from name, value pairs: Attrs("a", v, "b", w).
// It returns nil when given nothing.
func Attrs(kv ...any) []mapping.Attribute {
	var a []mapping.Attribute
	for i := 0; i < len(kv); i += 2 {
		a = append(a, mapping.Attribute{Name: kv[i].(string), Value: kv[i+1].(mapping.Value)})
	}
	return a
}

// BenchMessage is a 1 KiB body with 10 attributes of mixed kinds, an ID, a
// content type and a W3C trace: the message the AMQP codecs' benchmarks
// encode and decode.
func BenchMessage() *mapping.Message {
	m := &mapping.Message{Body: make([]byte, 1024), ID: "0f8fad5b-d9cb-469f-a165-70867728950e", ContentType: "application/json"}
	for i := 0; i < 10; i++ {
		var v mapping.Value
		switch i % 4 {
		case 0:
			v = mapping.String(fmt.Sprintf("value-%d", i))
		case 1:
			v = mapping.Int64(int64(i) * 1000)
		case 2:
			v = mapping.Bool(true)
		case 3:
			v = mapping.Float64(float64(i) / 3)
		}
		m.Attributes = append(m.Attributes, mapping.Attribute{Name: fmt.Sprintf("attr-%02d", i), Value: v})
	}
	tr, err := mapping.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if err != nil {
		panic(err)
	}
	m.Trace = tr
	return m
}

// Check reports each difference Diff finds with t.Error.
func Check(t testing.TB, want, got *mapping.Message, opts ...Option) {
	t.Helper()
	for _, d := range Diff(want, got, opts...) {
		t.Error(d)
	}
}

// DiffHeaders lists, one per line, the keys whose values differ between
// two header maps (nats.Header, http.Header), in value order, and the keys
// got has that want lacks. Values compare joined with NUL, so an empty
// list equals a list of one empty value.
func DiffHeaders(want, got map[string][]string) string {
	var b strings.Builder
	for k, v := range want {
		if g, ok := got[k]; !ok || strings.Join(g, "\x00") != strings.Join(v, "\x00") {
			fmt.Fprintf(&b, "header %s: want %q, got %q\n", k, v, g)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "unexpected header %s: %q\n", k, v)
		}
	}
	return b.String()
}
