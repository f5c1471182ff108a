package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// unsupportedName finds the name in gohcl's "Unsupported argument" and
// "Unsupported block type" details.
var unsupportedName = regexp.MustCompile(`^(?:An argument named|Blocks of type) "([^"]+)"`)

// suggestNames adds HCL's "Did you mean" to what gohcl reports of a
// misspelled argument or block in an adapter's body. The adapters' configs
// embed their connection (or stream limit) settings with `hcl:",remain"`,
// and gohcl judges what is left over against the remain struct alone: a
// misspelled field of the outer struct got no suggestion. typ is the
// adapter's config struct; the names offered are those of the block the
// misspelling is in, the remain structs' included.
func suggestNames(diags hcl.Diagnostics, body hcl.Body, typ reflect.Type) hcl.Diagnostics {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return diags
	}
	for _, d := range diags {
		block := d.Summary == "Unsupported block type"
		if (!block && d.Summary != "Unsupported argument") || d.Subject == nil || strings.Contains(d.Detail, "Did you mean") {
			continue
		}
		m := unsupportedName.FindStringSubmatch(d.Detail)
		if m == nil {
			continue
		}
		attrs, blocks := hclNames(innermost(sb, typ, d.Subject.Start))
		names := attrs
		if block {
			names = blocks
		}
		if s := nearest(m[1], names); s != "" {
			d.Detail += fmt.Sprintf(" Did you mean %q?", s)
		}
	}
	return diags
}

// innermost is the struct type of the innermost block of body holding pos.
func innermost(body *hclsyntax.Body, typ reflect.Type, pos hcl.Pos) reflect.Type {
	for {
		var next *hclsyntax.Block
		for _, b := range body.Blocks {
			if b.Body != nil && b.Body.SrcRange.ContainsPos(pos) {
				next = b
				break
			}
		}
		if next == nil {
			return typ
		}
		t := blockType(typ, next.Type)
		if t == nil {
			return typ
		}
		body, typ = next.Body, t
	}
}

// blockType is the struct type of typ's block field named name, looked for
// in its remain structs too.
func blockType(typ reflect.Type, name string) reflect.Type {
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, kind := hclTag(f)
		ft := elem(f.Type)
		switch {
		case kind == "remain" && ft.Kind() == reflect.Struct:
			if t := blockType(ft, name); t != nil {
				return t
			}
		case kind == "block" && tag == name && ft.Kind() == reflect.Struct:
			return ft
		}
	}
	return nil
}

// hclNames are the argument and block names of a config struct, its
// remain structs' included.
func hclNames(typ reflect.Type) (attrs, blocks []string) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, kind := hclTag(f)
		switch kind {
		case "remain":
			if ft := elem(f.Type); ft.Kind() == reflect.Struct {
				a, b := hclNames(ft)
				attrs, blocks = append(attrs, a...), append(blocks, b...)
			}
		case "block":
			blocks = append(blocks, tag)
		case "label", "-":
		default:
			if tag != "" {
				attrs = append(attrs, tag)
			}
		}
	}
	return attrs, blocks
}

// hclTag splits a gohcl tag: `hcl:"url,optional"` is ("url", "optional").
func hclTag(f reflect.StructField) (name, kind string) {
	tag, ok := f.Tag.Lookup("hcl")
	if !ok {
		return "", "-"
	}
	name, kind, _ = strings.Cut(tag, ",")
	return name, kind
}

func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

// nearest is the name closest to given, or "": HCL's own rule for its
// suggestions (hcl.nameSuggestion, not exported), with the Levenshtein
// distance it uses, under 3.
func nearest(given string, names []string) string {
	for _, n := range names {
		if levenshtein.Distance(given, n, nil) < 3 {
			return n
		}
	}
	return ""
}
