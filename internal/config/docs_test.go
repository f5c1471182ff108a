package config

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestDocumentedExamplesParse keeps the HCL examples of the README and the
// docs valid HCL (single-line blocks with two attributes, for one, are not).
func TestDocumentedExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	block := regexp.MustCompile("(?s)```hcl\n(.*?)```")
	n := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatch(text, -1) {
			n++
			if _, diags := hclsyntax.ParseConfig(m[1], f, hcl.InitialPos); diags.HasErrors() {
				t.Errorf("%s: an hcl example does not parse: %s\n%s", f, diags.Error(), m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no hcl examples found")
	}
}
