package config

import (
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// eval evaluates attributes into Go values, collecting diagnostics that point
// at the attribute's value. Each getter leaves the target alone when the
// attribute is absent, null or invalid.
type eval struct {
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
	// unknownOK: a value not known (env() of an unset variable in lenient
	// mode) is skipped without a diagnostic, as are the checks needing it.
	unknownOK bool
	// servers are the process's shared servers (AdapterKind.SourceServer)
	// the blocks decoded so far start, by key, across every file.
	servers map[string]serverUse
}

// serverUse is the first block to name a shared server.
type serverUse struct {
	settings, described, listen string
	at                          hcl.Range
}

func (e *eval) errorf(rng hcl.Range, summary, format string, args ...any) {
	e.diags = append(e.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// required reports a missing required attribute as HCL itself does.
func (e *eval) required(block hcl.Range, name string, a *hcl.Attribute) bool {
	if a != nil {
		return true
	}
	e.errorf(block, "Missing required argument", "The argument %q is required, but no definition was found.", name)
	return false
}

// value evaluates a and converts it to ty; ok is false when a is absent,
// null, or wrong (a diagnostic is recorded).
func (e *eval) value(a *hcl.Attribute, ty cty.Type, want string) (cty.Value, bool) {
	if a == nil {
		return cty.NilVal, false
	}
	v, diags := a.Expr.Value(e.ctx)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() || v.IsNull() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		if e.unknownOK {
			return cty.NilVal, false
		}
		e.errorf(a.Expr.Range(), "Unknown value", "The value of %q is not known.", a.Name)
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		e.errorf(a.Expr.Range(), "Incorrect attribute value type", "Inappropriate value for attribute %q: %s is required.", a.Name, want)
		return cty.NilVal, false
	}
	return cv, true
}

func (e *eval) str(a *hcl.Attribute, dst *string) bool {
	v, ok := e.value(a, cty.String, "a string")
	if ok {
		*dst = v.AsString()
	}
	return ok
}

func (e *eval) boolean(a *hcl.Attribute, dst *bool) bool {
	v, ok := e.value(a, cty.Bool, "a bool")
	if ok {
		*dst = v.True()
	}
	return ok
}

func (e *eval) strings(a *hcl.Attribute, dst *[]string) bool {
	v, ok := e.value(a, cty.List(cty.String), "a list of strings")
	if !ok {
		return false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() {
			e.errorf(a.Expr.Range(), "Incorrect attribute value type", "Inappropriate value for attribute %q: the list must not hold null.", a.Name)
			return false
		}
		out = append(out, ev.AsString())
	}
	*dst = out
	return true
}

// integer reads a whole number within [lo, hi].
func (e *eval) integer(a *hcl.Attribute, lo, hi int, dst *int) bool {
	v, ok := e.value(a, cty.Number, "a number")
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		e.errorf(a.Expr.Range(), "Invalid value", "%q must be a whole number, not %s.", a.Name, bf.Text('g', -1))
		return false
	}
	n, acc := bf.Int64()
	if acc != big.Exact || n < int64(lo) || n > int64(hi) {
		e.errorf(a.Expr.Range(), "Value out of range", "%q must be between %d and %d, not %s.", a.Name, lo, hi, bf.Text('g', -1))
		return false
	}
	*dst = int(n)
	return true
}

// float reads a number within [lo, hi].
func (e *eval) float(a *hcl.Attribute, lo, hi float64, dst *float64) bool {
	v, ok := e.value(a, cty.Number, "a number")
	if !ok {
		return false
	}
	f, _ := v.AsBigFloat().Float64()
	if f < lo || f > hi {
		e.errorf(a.Expr.Range(), "Value out of range", "%q must be between %g and %g, not %g.", a.Name, lo, hi, f)
		return false
	}
	*dst = f
	return true
}

// duration reads a Go duration string ("500ms", "30s", "5m"); zero is
// allowed only with allowZero.
func (e *eval) duration(a *hcl.Attribute, allowZero bool, dst *time.Duration) bool {
	var s string
	if !e.str(a, &s) {
		return false
	}
	d, err := adaptercfg.ParseDuration(s, allowZero)
	var de *adaptercfg.DurationError
	if errors.As(err, &de) {
		e.errorf(a.Expr.Range(), "Invalid duration", "%s.", de.For(a.Name))
		return false
	}
	*dst = d
	return true
}

// oneOf reads a string that must be one of the choices.
func (e *eval) oneOf(a *hcl.Attribute, choices []string, dst *string) bool {
	var s string
	if !e.str(a, &s) {
		return false
	}
	for _, c := range choices {
		if s == c {
			*dst = s
			return true
		}
	}
	e.errorf(a.Expr.Range(), "Invalid value", "%q must be one of %s, not %q.", a.Name, joinQuoted(choices), s)
	return false
}

// joinQuoted renders "a", "b" or "c".
func joinQuoted(ss []string) string {
	q := quoteAll(ss)
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	out := ""
	for i, s := range q {
		switch {
		case i == 0:
			out = s
		case i == len(q)-1:
			out += " or " + s
		default:
			out += ", " + s
		}
	}
	return out
}
