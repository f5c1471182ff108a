package natsmap

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/qbridge/qbridge/mapping"
)

func asReject(err error, r **mapping.RejectError) bool { return errors.As(err, r) }

func sortAttributes(a []mapping.Attribute) {
	slices.SortStableFunc(a, func(x, y mapping.Attribute) int { return cmp.Compare(x.Name, y.Name) })
}

// allKinds has one or more values of every kind, each edge the encoding
// treats specially.
func allKinds() []mapping.Attribute {
	var u [16]byte
	for i := range u {
		u[i] = byte(i * 17)
	}
	vs := []mapping.Value{
		mapping.String("Windows 7 Ultimate"), mapping.String(""), mapping.String(`q"uo\te: ü 🙂`),
		mapping.String("in\tside"), mapping.String("{}").WithLabel("json"),
		mapping.Number("42"), mapping.Number("1e5"), mapping.Number("12345678901234567890123456789012345678"),
		mapping.Binary([]byte{0, 1, 2, 255}), mapping.Binary(nil), mapping.Binary([]byte("x")).WithLabel("png"),
		mapping.Bool(true), mapping.Bool(false),
		mapping.Int8(math.MinInt8), mapping.Int16(math.MaxInt16), mapping.Int32(math.MinInt32),
		mapping.Int64(math.MaxInt64), mapping.Uint8(math.MaxUint8), mapping.Uint16(math.MaxUint16),
		mapping.Uint32(math.MaxUint32), mapping.Uint64(math.MaxUint64),
		mapping.Float32(0.1), mapping.Float32(float32(math.Inf(-1))), mapping.Float64(299.98), mapping.Float64(1),
		mapping.Float64(math.Copysign(0, -1)), mapping.Float64(math.NaN()), mapping.Float64(2.5).WithLabel("float"),
		mapping.Decimal(mapping.KindDecimal128, "-79228162514264337593543950335"),
		mapping.Char('ж'), mapping.TimestampMillis(1299228577123), mapping.UUID(u),
		mapping.Symbol("amqp:sym"), mapping.URI("https://contoso.com/a?b=c"),
		mapping.DateTimeOffsetTicks(634347557771234567), mapping.TimeSpanTicks(-15000001),
		// Strings() with no arguments renders "null", which mapping.ParseValue
		// cannot rebuild (a model issue, reported); an empty list is "[]".
		mapping.Strings("a", "b,c"), mapping.Strings([]string{}...), mapping.Strings("x"),
		mapping.Strings(" padded ", "b"),
		mapping.List(mapping.Int32(1), mapping.String("two")), mapping.Map(mapping.Symbol("k"), mapping.Null()), mapping.Null(),
	}
	attrs := make([]mapping.Attribute, len(vs))
	for i, v := range vs {
		attrs[i] = mapping.Attribute{Name: "P" + strconv.Itoa(100+i), Value: v}
	}
	return attrs
}
