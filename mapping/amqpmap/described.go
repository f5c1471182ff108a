package amqpmap

import (
	"fmt"
	"reflect"

	"github.com/Azure/go-amqp"
)

// The Service Bus (.NET) described types: a symbol descriptor and a string
// (uri) or long (.NET ticks) value.
const (
	DescriptorURI            = "com.microsoft:uri"
	DescriptorDateTimeOffset = "com.microsoft:datetime-offset"
	DescriptorTimeSpan       = "com.microsoft:timespan"
)

// go-amqp decodes a described value into its internal encoding.DescribedType
// {Descriptor, Value any} and re-marshals such a value as
// 0x00 <descriptor> <value>. There is no public constructor, so the type is
// learned once by decoding a minimal message, and values of it are built and
// read through reflection. Descriptor holds an amqp.Symbol when we build it
// (the decoder gives a plain string, which would re-marshal as a str8).
var described struct {
	typ        reflect.Type
	desc, val  int // field indexes
	available  bool
	reasonMiss string
}

func init() {
	// application-properties {"d": described(symbol "x", null)}
	raw := []byte{
		0x00, 0x53, 0x74, // application-properties descriptor
		0xd1, 0, 0, 0, 12, 0, 0, 0, 2, // map32, size 12, 2 elements
		0xa1, 0x01, 'd', // str8 "d"
		0x00, 0xa3, 0x01, 'x', 0x40, // described: sym8 "x", null
	}
	var msg amqp.Message
	if err := msg.UnmarshalBinary(raw); err != nil {
		described.reasonMiss = "go-amqp cannot decode a described value: " + err.Error()
		return
	}
	t := reflect.TypeOf(msg.ApplicationProperties["d"])
	if t == nil || t.Kind() != reflect.Struct {
		described.reasonMiss = fmt.Sprintf("go-amqp decodes described values as %T", msg.ApplicationProperties["d"])
		return
	}
	d, okD := t.FieldByName("Descriptor")
	v, okV := t.FieldByName("Value")
	anyType := reflect.TypeOf((*any)(nil)).Elem()
	if !okD || !okV || d.Type != anyType || v.Type != anyType || t.NumField() != 2 {
		described.reasonMiss = "go-amqp's described type has an unexpected shape " + t.String()
		return
	}
	described.typ, described.desc, described.val = t, d.Index[0], v.Index[0]
	described.available = true
}

// newDescribed builds a described value that go-amqp marshals as
// 0x00 <descriptor> <value>.
func newDescribed(descriptor string, value any) (any, bool) {
	if !described.available {
		return nil, false
	}
	v := reflect.New(described.typ).Elem()
	v.Field(described.desc).Set(reflect.ValueOf(amqp.Symbol(descriptor)))
	v.Field(described.val).Set(reflect.ValueOf(value))
	return v.Interface(), true
}

// describedParts returns the descriptor and value of a described value
// decoded by go-amqp; ok is false for any other value.
func describedParts(x any) (descriptor, value any, ok bool) {
	if !described.available {
		return nil, nil, false
	}
	rv := reflect.ValueOf(x)
	if rv.Type() != described.typ {
		return nil, nil, false
	}
	return rv.Field(described.desc).Interface(), rv.Field(described.val).Interface(), true
}

// descriptorName returns a symbol or string descriptor as text.
func descriptorName(d any) (string, bool) {
	switch d := d.(type) {
	case string:
		return d, true
	case amqp.Symbol:
		return string(d), true
	}
	return "", false
}
