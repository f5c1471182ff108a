package mapping

import (
	"math"
	"math/big"
	"strconv"
)

// NaturalNumber returns the natural typed value of a Number (KindNumber:
// decimal text kept verbatim, such as an SQS Number, or a labelled number
// whose text did not parse exactly as its label's kind) for wire forms with
// numeric types: the label's kind when the text denotes such a value
// (Number.int "007" is the int 7, Number.float "3.50" the double 3.5), else
// a long for an integer that fits, else a double when no significant digit
// is lost; otherwise v itself, whose text then travels as a string. same
// reports whether the natural value's Text is v's text; where it is not, a
// codec keeps the exact text in the envelope (Envelope.SetText).
func NaturalNumber(v Value) (n Value, same bool) {
	if v.Kind != KindNumber {
		return v, true
	}
	s := v.s
	if !IsDecimalText(s) || !smallExponent(s) {
		return v, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v, true
	}
	var r big.Rat
	if _, ok := r.SetString(s); !ok {
		return v, true
	}
	switch k := labelKind[BaseNumber+"."+v.Label]; k {
	case KindInt8, KindInt16, KindInt32, KindInt64:
		if r.IsInt() && r.Num().IsInt64() {
			if i := r.Num().Int64(); i == i<<(64-intBits(k))>>(64-intBits(k)) {
				return natural(Value{Kind: k, n: uint64(i)}, s)
			}
		}
	case KindUint8, KindUint16, KindUint32, KindUint64:
		if r.IsInt() && r.Num().IsUint64() {
			if u := r.Num().Uint64(); u>>intBits(k) == 0 || intBits(k) == 64 {
				return natural(Value{Kind: k, n: u}, s)
			}
		}
	case KindFloat32:
		if g := float32(f); !math.IsInf(float64(g), 0) && sameRat(&r, strconv.FormatFloat(float64(g), 'g', -1, 32)) {
			return natural(Float32(g), s)
		}
	case KindFloat64:
		if sameRat(&r, strconv.FormatFloat(f, 'g', -1, 64)) {
			return natural(Float64(f), s)
		}
	}
	if r.IsInt() && r.Num().IsInt64() {
		return natural(Int64(r.Num().Int64()), s)
	}
	if sameRat(&r, strconv.FormatFloat(f, 'g', -1, 64)) {
		return natural(Float64(f), s)
	}
	return v, true
}

func natural(n Value, text string) (Value, bool) {
	t, err := n.Text()
	return n, err == nil && t == text
}

// sameRat reports whether decimal text t denotes exactly r.
func sameRat(r *big.Rat, t string) bool {
	var q big.Rat
	_, ok := q.SetString(t)
	return ok && q.Cmp(r) == 0
}

// smallExponent bounds the work big.Rat does: an exponent of more than
// three digits is outside every numeric type anyway.
func smallExponent(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			e := s[i+1:]
			if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
				e = e[1:]
			}
			return len(e) <= 3
		}
	}
	return len(s) <= 400
}
