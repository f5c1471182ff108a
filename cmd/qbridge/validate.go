package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

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
	strict := fs.Bool("strict", false, "every env(\"X\") without a default must be set, as for run")
	fs.Usage = func() {
		fmt.Fprint(std.Err, `usage: qbridge validate [-strict] FILE_OR_DIR...

Checks each configuration completely (syntax, fields, types, durations,
adapter kinds and settings, templates) without connecting to any broker.
Exit status 1 if any has errors.

Secrets need not be set: env("X") of an unset X is an unknown value, and
only the checks that need its value are skipped (the "ok" line names the
unset variables). -strict requires them, as "qbridge run" does.

Example:
  qbridge validate configs/*.hcl
  qbridge validate -strict /etc/qbridge/

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(std.Err, "qbridge validate: which configuration? give one or more files or directories (qbridge validate -h for help)")
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		l := config.NewLoader()
		if !*strict {
			l.AllowUnsetEnv()
		}
		cfg, diags := l.Load(path)
		if err := config.WriteDiagnostics(std.Err, l.Files(), diags); err != nil {
			fmt.Fprintln(std.Err, "qbridge validate:", err)
			return 1
		}
		if diags.HasErrors() {
			code = 1
			continue
		}
		unset := ""
		if u := l.UnsetEnv(); len(u) > 0 {
			unset = "; not set, so not checked: " + strings.Join(u, ", ")
		}
		fmt.Fprintf(std.Out, "%s: ok (%s%s)\n", path, plural(len(cfg.Pipelines), "pipeline"), unset)
	}
	return code
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
