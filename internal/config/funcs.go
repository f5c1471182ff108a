package config

import (
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// maxFileFunc bounds what file() reads: it is for secrets and small
// certificates, not data.
const maxFileFunc = 1 << 20

// envMode says what env() of an unset variable without a default gives:
// an error (run, validate -strict), or with lenient an unknown value that
// the checks needing it skip (validate in CI, where secrets are absent).
type envMode struct {
	lenient bool
	unset   map[string]bool // names seen unset in lenient mode
}

// evalContext returns the functions a configuration file may call:
//
//	env("NAME")            the variable's value; if it is unset, an error
//	                       (or, for validate without -strict, unknown)
//	env("NAME", "default") the value, or default if unset
//	file("path")           the file's content, path relative to the
//	                       directory of the configuration file
//	trimspace(s)           s without leading and trailing white space
//	                       (for secrets read with file())
func evalContext(filename string, env *envMode) *hcl.EvalContext {
	dir := filepath.Dir(filename)
	return &hcl.EvalContext{Functions: map[string]function.Function{
		"env":       envFunc(env),
		"file":      fileFunc(dir),
		"trimspace": stdlib.TrimSpaceFunc,
	}}
}

func envFunc(m *envMode) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of an environment variable.",
		Params:      []function.Parameter{{Name: "name", Type: cty.String}},
		VarParam:    &function.Parameter{Name: "default", Type: cty.String},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.NilVal, fmt.Errorf("env takes a name and at most one default, not %d arguments", len(args))
			}
			name := args[0].AsString()
			if v, ok := os.LookupEnv(name); ok {
				return cty.StringVal(v), nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			if m != nil && m.lenient {
				if m.unset == nil {
					m.unset = map[string]bool{}
				}
				m.unset[name] = true
				return cty.UnknownVal(cty.String), nil
			}
			return cty.NilVal, function.NewArgErrorf(0, "environment variable %q is not set (give a default as env(%q, \"...\") if it is optional)", name, name)
		},
	})
}

func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the content of a file, relative to the configuration file's directory.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			st, err := os.Stat(p)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "%v", err)
			}
			if st.Size() > maxFileFunc {
				return cty.NilVal, function.NewArgErrorf(0, "%s is %d bytes; file() reads at most %d", p, st.Size(), maxFileFunc)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "%v", err)
			}
			if !utf8.Valid(b) {
				return cty.NilVal, function.NewArgErrorf(0, "%s is not UTF-8 text", p)
			}
			return cty.StringVal(string(b)), nil
		},
	})
}
