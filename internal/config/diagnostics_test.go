package config

import (
	"strings"
	"testing"
)

func TestWriteDiagnostics(t *testing.T) {
	l := NewLoader()
	src := "pipeline \"orders\" {\n  source \"test\" { address = \"/in\" }\n  sink \"test\" {}\n  shutdown_timeout = \"30x\"\n}\n"
	_, diags := l.LoadBytes("orders.hcl", []byte(src))
	var b strings.Builder
	if err := WriteDiagnostics(&b, l.Files(), diags); err != nil {
		t.Fatal(err)
	}
	want := `Error: Invalid duration

  on orders.hcl:4:22, in pipeline "orders":
     4:   shutdown_timeout = "30x"
                             ^^^^^

"30x" for "shutdown_timeout" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m".

`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := DiagnosticString(diags[0]); !strings.HasPrefix(got, `orders.hcl:4:22: Invalid duration: "30x"`) {
		t.Errorf("DiagnosticString = %q", got)
	}
}

func TestFunctionErrorIsTheOnlyError(t *testing.T) {
	_, diags := load(t, "pipeline \"p\" {\n  source \"test\" { address = env(\"QB_SURELY_UNSET\") }\n  sink \"test\" {}\n}\n")
	if len(diags) != 1 {
		t.Errorf("want one diagnostic, got:\n%s", diagList(diags))
	}
}
