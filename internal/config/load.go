package config

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Loader reads configurations. It keeps the parsed files, so diagnostics
// can be printed with source snippets (see WriteDiagnostics).
type Loader struct {
	parser *hclparse.Parser
	env    envMode
}

// NewLoader returns an empty loader.
func NewLoader() *Loader { return &Loader{parser: hclparse.NewParser()} }

// AllowUnsetEnv makes env("X") of an unset X without a default an unknown
// value instead of an error: the fields it feeds, and the adapter's checks
// across fields of that block, are not checked. For validating without the
// secrets (in CI); a configuration loaded so cannot run.
func (l *Loader) AllowUnsetEnv() { l.env.lenient = true }

// UnsetEnv returns the variables env() found unset under AllowUnsetEnv,
// sorted.
func (l *Loader) UnsetEnv() []string {
	names := make([]string, 0, len(l.env.unset))
	for n := range l.env.unset {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Files returns the files read so far, by name.
func (l *Loader) Files() map[string]*hcl.File { return l.parser.Files() }

// Load reads a file, or every *.hcl file of a directory (not recursive,
// in name order; names starting with "." are skipped). The configuration is
// usable only when the diagnostics have no errors; they may hold warnings.
func (l *Loader) Load(path string) (*Config, hcl.Diagnostics) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration",
			Detail:   err.Error(),
		}}
	}
	names := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read configuration directory", Detail: err.Error()}}
		}
		names = names[:0]
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".hcl") && !strings.HasPrefix(n, ".") {
				names = append(names, filepath.Join(path, n))
			}
		}
		if len(names) == 0 {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "No configuration files",
				Detail:   fmt.Sprintf("The directory %s holds no *.hcl files.", path),
			}}
		}
	}
	var files []*hcl.File
	var diags hcl.Diagnostics
	for _, n := range names {
		f, d := l.parser.ParseHCLFile(n)
		diags = append(diags, d...)
		if f != nil {
			files = append(files, f)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	cfg, d := decode(files, &l.env)
	return cfg, append(diags, d...)
}

// LoadBytes reads one configuration file given its content; filename is for
// messages and for file() paths.
func (l *Loader) LoadBytes(filename string, src []byte) (*Config, hcl.Diagnostics) {
	f, diags := l.parser.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	cfg, d := decode([]*hcl.File{f}, &l.env)
	return cfg, append(diags, d...)
}

// Load is a shortcut for NewLoader().Load.
func Load(path string) (*Config, map[string]*hcl.File, hcl.Diagnostics) {
	l := NewLoader()
	cfg, diags := l.Load(path)
	return cfg, l.Files(), diags
}

// rootBlock is the top level of one file.
type rootBlock struct {
	Log       *logBlock        `hcl:"log,block"`
	HTTP      *httpBlock       `hcl:"http,block"`
	Pipelines []*pipelineBlock `hcl:"pipeline,block"`
}

type logBlock struct {
	Level    *hcl.Attribute `hcl:"level,optional"`
	Format   *hcl.Attribute `hcl:"format,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type httpBlock struct {
	Listen   *hcl.Attribute `hcl:"listen,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// ParseLogLevel reads a log level as the log block spells it (debug, info,
// warn, error), for the flags and environment variables that override it.
func ParseLogLevel(s string) (slog.Level, bool) {
	l, ok := logLevels[s]
	return l, ok
}

// decode merges the files into one configuration.
func decode(files []*hcl.File, env *envMode) (*Config, hcl.Diagnostics) {
	cfg := &Config{Log: Log{Level: slog.LevelInfo, Format: "text"}, HTTP: HTTP{Listen: DefaultListen}}
	var diags hcl.Diagnostics
	var logDef, httpDef *hcl.Range
	seen := map[string]hcl.Range{}
	servers := map[string]serverUse{}
	for _, f := range files {
		e := &eval{ctx: evalContext(f.Body.MissingItemRange().Filename, env), unknownOK: env.lenient, servers: servers}
		// gohcl fills what it can even when part of the file is wrong, so
		// the rest is still checked and every error reported at once.
		var root rootBlock
		rootDiags := gohcl.DecodeBody(f.Body, e.ctx, &root)
		positionsInDetail(rootDiags)
		diags = append(diags, rootDiags...)
		if b := root.Log; b != nil {
			if logDef != nil {
				diags = append(diags, duplicate("log", logDef, b.DefRange))
			}
			logDef = b.DefRange.Ptr()
			var lvl string
			if e.oneOf(b.Level, []string{"debug", "info", "warn", "error"}, &lvl) {
				cfg.Log.Level = logLevels[lvl]
			}
			e.oneOf(b.Format, []string{"text", "json"}, &cfg.Log.Format)
		}
		if b := root.HTTP; b != nil {
			if httpDef != nil {
				diags = append(diags, duplicate("http", httpDef, b.DefRange))
			}
			httpDef = b.DefRange.Ptr()
			if e.str(b.Listen, &cfg.HTTP.Listen) {
				if err := checkListen(cfg.HTTP.Listen); err != nil {
					e.errorf(b.Listen.Expr.Range(), "Invalid listen address", "%s", err)
				}
			}
		}
		for _, pb := range root.Pipelines {
			if prev, dup := seen[pb.Name]; dup {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Duplicate pipeline %q", pb.Name),
					Detail:   fmt.Sprintf("Pipeline names must be unique; %q was already defined at %s.", pb.Name, position(prev)),
					Subject:  pb.NameRange.Ptr(),
				})
				continue
			}
			seen[pb.Name] = pb.NameRange
			pb.duplicated = duplicatedBlocks(rootDiags, pb.Body)
			if p := decodePipeline(e, pb); p != nil {
				cfg.Pipelines = append(cfg.Pipelines, p)
			}
		}
		diags = append(diags, e.diags...)
	}
	if !diags.HasErrors() && len(cfg.Pipelines) == 0 {
		d := &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "No pipelines",
			Detail:   `The configuration defines no pipeline block; qbridge will run idle. A pipeline looks like: pipeline "orders" { source "sqs" { ... } sink "nats" { ... } }`,
		}
		if len(files) > 0 {
			d.Subject = files[0].Body.MissingItemRange().Ptr()
		}
		diags = append(diags, d)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return cfg, diags
}

// position is where r starts, as file:line:column: the form of every
// other position qbridge prints (hcl.Range's String is file:line,col-col).
func position(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// hclRangeText is hcl.Range's String, which gohcl writes into the details
// of its diagnostics: file:line,col-col on one line, file:line,col-line,col
// over several.
var hclRangeText = regexp.MustCompile(`([^\s]+):(\d+),(\d+)-(?:\d+,)?\d+\b`)

// positionsInDetail rewrites the positions in gohcl's details ("Another
// was defined at a.hcl:3,3-16") as file:line:column.
func positionsInDetail(diags hcl.Diagnostics) {
	for _, d := range diags {
		d.Detail = hclRangeText.ReplaceAllString(d.Detail, "$1:$2:$3")
	}
}

// duplicatedBlocks names the block types that gohcl found more than once
// in body (a pipeline's): gohcl then leaves the field empty, and a missing
// block is not to be reported besides.
func duplicatedBlocks(diags hcl.Diagnostics, body hcl.Body) map[string]bool {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil
	}
	var out map[string]bool
	for _, d := range diags {
		typ, found := strings.CutPrefix(d.Summary, "Duplicate ")
		typ, isBlock := strings.CutSuffix(typ, " block")
		if !found || !isBlock || d.Subject == nil || d.Subject.Filename != sb.SrcRange.Filename ||
			!sb.SrcRange.ContainsOffset(d.Subject.Start.Byte) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[typ] = true
	}
	return out
}

func duplicate(block string, first *hcl.Range, again hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s block", block),
		Detail:   fmt.Sprintf("Only one %s block is allowed across all files. Another was defined at %s.", block, position(*first)),
		Subject:  again.Ptr(),
	}
}

// checkListen accepts host:port with a numeric port; the host may be empty
// (all interfaces, which the operator then asked for explicitly).
func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port, such as %q: %v", s, DefaultListen, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has no valid port number", s)
	}
	return nil
}

// validName keeps pipeline names usable as metric labels and in logs.
func validName(s string) bool {
	if s == "" {
		return false
	}
	return !slices.ContainsFunc([]rune(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	})
}
