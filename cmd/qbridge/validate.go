package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/qbridge/qbridge/internal/config"
)

func init() {
	register("validate", command{
		Summary: "check configuration files or directories without connecting to anything",
		Run:     runValidate,
	})
}

// runValidate checks each argument as a whole configuration (a file, or a
// directory whose *.hcl files are merged). Diagnostics go to stderr with
// file:line:column and the source underlined; each valid argument gets an
// "ok" line on stdout.
func runValidate(_ context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	fs.Usage = func() {
		fmt.Fprint(std.Err, `usage: qbridge validate FILE_OR_DIR...

Checks each configuration completely (syntax, fields, types, durations,
adapter kinds and settings, templates) without connecting to any broker.
Exit status 1 if any has errors.
`)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		l := config.NewLoader()
		cfg, diags := l.Load(path)
		if err := config.WriteDiagnostics(std.Err, l.Files(), diags); err != nil {
			fmt.Fprintln(std.Err, "qbridge validate:", err)
			return 1
		}
		if diags.HasErrors() {
			code = 1
			continue
		}
		fmt.Fprintf(std.Out, "%s: ok (%s)\n", path, plural(len(cfg.Pipelines), "pipeline"))
	}
	return code
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
