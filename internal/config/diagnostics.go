package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics prints diagnostics the way HCL tools do, with the
// position as file:line:column (which editors and terminals link) and the
// offending source underlined:
//
//	Error: Invalid duration
//
//	  on orders.hcl:7:22, in pipeline "orders":
//	     7:   shutdown_timeout = "30x"
//	                             ^^^^^
//
//	"30x" for "shutdown_timeout" is not a duration: ...
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	var b bytes.Buffer
	for _, d := range diags {
		writeDiagnostic(&b, files, d)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func writeDiagnostic(b *bytes.Buffer, files map[string]*hcl.File, d *hcl.Diagnostic) {
	sev := "Error"
	if d.Severity == hcl.DiagWarning {
		sev = "Warning"
	}
	fmt.Fprintf(b, "%s: %s\n\n", sev, d.Summary)
	if s := d.Subject; s != nil {
		f := files[s.Filename]
		ctx := ""
		if f != nil {
			if cs, ok := f.Nav.(interface{ ContextString(int) string }); ok {
				if c := cs.ContextString(s.Start.Byte); c != "" {
					ctx = ", in " + c
				}
			}
		}
		fmt.Fprintf(b, "  on %s:%d:%d%s:\n", s.Filename, s.Start.Line, s.Start.Column, ctx)
		if f != nil && f.Bytes != nil {
			writeSnippet(b, f.Bytes, *s)
		}
		b.WriteByte('\n')
	}
	if d.Detail != "" {
		b.WriteString(d.Detail)
		b.WriteString("\n\n")
	}
}

// writeSnippet prints the lines of rng with a caret line under each.
func writeSnippet(b *bytes.Buffer, src []byte, rng hcl.Range) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if line < rng.Start.Line {
			continue
		}
		if line > rng.End.Line {
			break
		}
		text := strings.ReplaceAll(sc.Text(), "\t", " ")
		fmt.Fprintf(b, "  %4d: %s\n", line, text)
		// Columns count characters; underline from start to end on this line.
		from, to := 1, len([]rune(text))+1
		if line == rng.Start.Line {
			from = rng.Start.Column
		}
		if line == rng.End.Line {
			to = rng.End.Column
		}
		if to <= from {
			to = from + 1
		}
		fmt.Fprintf(b, "        %s%s\n", strings.Repeat(" ", from-1), strings.Repeat("^", to-from))
	}
}

// DiagnosticString renders one diagnostic on one line, for logs:
// "orders.hcl:7:22: Invalid duration: detail".
func DiagnosticString(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	if d.Severity == hcl.DiagWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(strings.ReplaceAll(d.Detail, "\n", " "))
	}
	return b.String()
}
