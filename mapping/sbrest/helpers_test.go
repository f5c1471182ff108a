package sbrest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

func asReject(err error, r **mapping.RejectError) bool { return errors.As(err, r) }

var (
	timeType  = reflect.TypeFor[time.Time]()
	valueType = reflect.TypeFor[mapping.Value]()
	bytesType = reflect.TypeFor[[]byte]()
)

// diffMessages names the first difference between two messages: times by
// instant, bytes by content (nil equals empty), values with Value.Equal.
func diffMessages(want, got *mapping.Message) string {
	return diffReflect("Message", reflect.ValueOf(*want), reflect.ValueOf(*got))
}

func diffReflect(path string, a, b reflect.Value) string {
	switch {
	case a.Type() == timeType:
		if !a.Interface().(time.Time).Equal(b.Interface().(time.Time)) {
			return fmt.Sprintf("%s: want %v, got %v", path, a.Interface(), b.Interface())
		}
		return ""
	case a.Type() == valueType:
		if !a.Interface().(mapping.Value).Equal(b.Interface().(mapping.Value)) {
			return fmt.Sprintf("%s: want %#v, got %#v", path, a.Interface(), b.Interface())
		}
		return ""
	case a.Type() == bytesType:
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
			if d := diffReflect(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: want %d items %v, got %d %v", path, a.Len(), a.Interface(), b.Len(), b.Interface())
		}
		for i := 0; i < a.Len(); i++ {
			if d := diffReflect(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
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
		return diffReflect(path, a.Elem(), b.Elem())
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: want %#v, got %#v", path, a.Interface(), b.Interface())
	}
	return ""
}
