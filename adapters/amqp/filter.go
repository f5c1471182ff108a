package amqp

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// linkFilter builds the go-amqp filter of a filter block.
func (f FilterConfig) linkFilter() (amqp.LinkFilter, error) {
	if f.Name == "" {
		return nil, adaptercfg.Errorf("name", "the block label must not be empty")
	}
	var code uint64
	if f.Code != "" {
		if f.Descriptor != "" {
			return nil, errors.New("descriptor and code: set one")
		}
		c, err := parseDescriptorCode(f.Code)
		if err != nil {
			return nil, adaptercfg.Errorf("code", "%w", err)
		}
		if c == 0 {
			return nil, adaptercfg.Errorf("code", "0 is not a valid descriptor code")
		}
		code = c
	}
	v, err := filterValue(f.Type, f.Value)
	if err != nil {
		return nil, err
	}
	if f.Descriptor != "" && f.Descriptor != f.Name {
		return describedFilter(f.Name, f.Descriptor, v)
	}
	return amqp.NewLinkFilter(f.Name, code, v), nil
}

func parseDescriptorCode(s string) (uint64, error) {
	if dom, id, ok := strings.Cut(s, ":"); ok {
		d, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(dom), "0x"), 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%q: domain: %w", s, err)
		}
		i, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(id), "0x"), 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%q: id: %w", s, err)
		}
		return d<<32 | i, nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want hex such as 0x0000468C00000004: %w", s, err)
	}
	return v, nil
}

func filterValue(typ, s string) (any, error) {
	bad := func(err error) (any, error) {
		return nil, adaptercfg.Errorf("value", "%q is not a %s: %w", s, typ, err)
	}
	switch typ {
	case "", "string":
		return s, nil
	case "symbol":
		return amqp.Symbol(s), nil
	case "null":
		if s != "" {
			return nil, adaptercfg.Errorf("value", "must be empty with type null")
		}
		return nil, nil
	case "boolean":
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return b, nil
	case "byte", "short", "int", "long":
		bits := map[string]int{"byte": 8, "short": 16, "int": 32, "long": 64}[typ]
		n, err := strconv.ParseInt(s, 0, bits)
		if err != nil {
			return bad(err)
		}
		switch typ {
		case "byte":
			return int8(n), nil
		case "short":
			return int16(n), nil
		case "int":
			return int32(n), nil
		}
		return n, nil
	case "ubyte", "ushort", "uint", "ulong":
		bits := map[string]int{"ubyte": 8, "ushort": 16, "uint": 32, "ulong": 64}[typ]
		n, err := strconv.ParseUint(s, 0, bits)
		if err != nil {
			return bad(err)
		}
		switch typ {
		case "ubyte":
			return uint8(n), nil
		case "ushort":
			return uint16(n), nil
		case "uint":
			return uint32(n), nil
		}
		return n, nil
	case "double":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		return f, nil
	}
	return nil, adaptercfg.Errorf("type", "%q: want string, symbol, boolean, byte, short, int, long, ubyte, ushort, uint, ulong, double or null", typ)
}

// describedFilter is a filter keyed by name whose symbolic descriptor is
// another symbol (Qpid JMS keys its selector "jms-selector" with descriptor
// apache.org:selector-filter:string). go-amqp's NewLinkFilter always uses the
// key as the symbolic descriptor and its filter-set type is internal, so the
// LinkFilter is built by reflection: it runs NewLinkFilter's filter, then
// replaces the Descriptor of the entry it added.
func describedFilter(name, descriptor string, value any) (amqp.LinkFilter, error) {
	base := amqp.NewLinkFilter(name, 0, value)
	ft := reflect.TypeOf(base)
	if ft.NumIn() != 1 || ft.In(0).Kind() != reflect.Map || ft.In(0).Key().Kind() != reflect.String {
		return nil, adaptercfg.Errorf("descriptor", "go-amqp's filter set has an unexpected shape; use code or leave descriptor unset")
	}
	setType := ft.In(0)
	elem := setType.Elem()
	if elem.Kind() != reflect.Pointer || elem.Elem().Kind() != reflect.Struct {
		return nil, adaptercfg.Errorf("descriptor", "go-amqp's filter set has an unexpected shape; use code or leave descriptor unset")
	}
	field, ok := elem.Elem().FieldByName("Descriptor")
	if !ok || field.Type.Kind() != reflect.Interface {
		return nil, adaptercfg.Errorf("descriptor", "go-amqp's described type has no Descriptor field; use code or leave descriptor unset")
	}
	baseV := reflect.ValueOf(base)
	key := reflect.ValueOf(name).Convert(setType.Key())
	desc := reflect.ValueOf(amqp.Symbol(descriptor))
	fn := reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		baseV.Call(args)
		if dt := args[0].MapIndex(key); dt.IsValid() && !dt.IsNil() {
			dt.Elem().FieldByIndex(field.Index).Set(desc)
		}
		return nil
	})
	return fn.Interface().(amqp.LinkFilter), nil
}
