package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
)

// The "test" adapter kind exists only in these tests.
type testSourceConfig struct {
	Address string     `hcl:"address"`
	Inner   *testInner `hcl:"inner,block"`
}

type testInner struct {
	Depth int `hcl:"depth,optional"`
}

func (c testSourceConfig) Validate() error {
	if !strings.HasPrefix(c.Address, "/") {
		return adaptercfg.Errorf("address", "must start with /")
	}
	if c.Inner != nil && c.Inner.Depth > 3 {
		return adaptercfg.Errorf("inner.depth", "%d is more than 3", c.Inner.Depth)
	}
	return nil
}

type testSinkConfig struct {
	Address string `hcl:"address,optional"`
	Policy  mapping.Policy
	Carry   bool
}

func (c *testSinkConfig) Validate() error {
	if c.Policy > mapping.Encode {
		return adaptercfg.Errorf("policy", "invalid")
	}
	return nil
}

// openedSink is what the test kind's NewSink was given.
type openedSink struct {
	testSinkConfig
	onDrop func(field, reason string)
	log    *slog.Logger
}

var (
	openedMu    sync.Mutex
	openedSinks []openedSink
)

type nopSource struct{}

func (nopSource) Receive(ctx context.Context, max int) ([]driver.Delivery, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (nopSource) Close(context.Context) error { return nil }

type nopSink struct{}

func (nopSink) Send(_ context.Context, msgs []*mapping.Message) []error {
	return make([]error, len(msgs))
}
func (nopSink) Close(context.Context) error { return nil }

func init() {
	Register(AdapterKind[testSourceConfig, testSinkConfig]{
		Name: "test",
		NewSource: func(context.Context, testSourceConfig, *slog.Logger) (driver.Source, error) {
			return nopSource{}, nil
		},
		NewSink: func(_ context.Context, c testSinkConfig, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error) {
			openedMu.Lock()
			openedSinks = append(openedSinks, openedSink{c, onDrop, log})
			openedMu.Unlock()
			return nopSink{}, nil
		},
		SinkMapping: func(c *testSinkConfig, o mapping.Options) {
			c.Policy, c.Carry = o.Policy, o.CarrySource
		},
	})
}

const minimal = `
pipeline "orders" {
  source "test" { address = "/in" }
  sink "test" {}
}
`

func load(t *testing.T, src string) (*Config, hcl.Diagnostics) {
	t.Helper()
	return NewLoader().LoadBytes("t.hcl", []byte(src))
}

func TestLoadMinimalDefaults(t *testing.T) {
	cfg, diags := load(t, minimal)
	if diags.HasErrors() || len(diags) != 0 {
		t.Fatalf("diags: %v", diags)
	}
	if cfg.Log.Level != slog.LevelInfo || cfg.Log.Format != "text" || cfg.HTTP.Listen != "127.0.0.1:9464" {
		t.Errorf("globals = %+v %+v", cfg.Log, cfg.HTTP)
	}
	if len(cfg.Pipelines) != 1 {
		t.Fatalf("pipelines = %d", len(cfg.Pipelines))
	}
	p := cfg.Pipelines[0]
	if p.Name != "orders" || p.Spec.Source.Kind != "test" || p.Spec.Sink.Kind != "test" {
		t.Errorf("pipeline = %+v", p)
	}
	if p.Spec.Engine != bridge.DefaultOptions() {
		t.Errorf("engine options = %+v, want the defaults", p.Spec.Engine)
	}
	if p.Spec.Mapping.Policy != mapping.Reject || !p.Spec.Mapping.Rules.IsZero() {
		t.Errorf("mapping = %+v", p.Spec.Mapping)
	}
	if got := p.Spec.Source.Config.(testSourceConfig); got.Address != "/in" {
		t.Errorf("source config = %+v", got)
	}
}

func TestLoadFull(t *testing.T) {
	t.Setenv("QB_TEST_ADDR", "/from-env")
	src := `
log {
  level  = "debug"
  format = "json"
}
http { listen = "127.0.0.1:0" }

pipeline "orders" {
  source "test" {
    address = env("QB_TEST_ADDR")
    inner { depth = 2 }
  }
  sink "test" { address = env("QB_UNSET_FOR_TEST", "/default") }
  mapping {
    policy           = "drop"
    carry_source     = true
    max_message_size = 1048576
    rename {
      from = "a"
      to   = "b"
    }
    drop = ["x", "y"]
    set "k" {
      type  = "Number.int"
      value = 42
    }
    group_key    = "{attr.tenant}"
    dedup_id     = "{id}"
    subject      = "orders.{group}"
    to           = "dest"
    content_type = "application/json"
  }
  ordering {
    max_in_flight = 500
    per_group     = 2
    ungrouped     = "concurrent"
  }
  batch {
    size        = 10
    linger      = "5ms"
    concurrency = 8
  }
  retry {
    initial      = "100ms"
    max          = "10s"
    multiplier   = 1.5
    jitter       = 0
    max_attempts = 7
    max_elapsed  = "1h"
  }
  lock {
    extend_every = "5s"
    extend_by    = "30s"
  }
  dead_letter {
    sink "test" { address = "/dlq" }
  }
  shutdown_timeout = "45s"
}
`
	cfg, diags := load(t, src)
	if diags.HasErrors() {
		t.Fatalf("diags: %v", diags)
	}
	if cfg.Log.Level != slog.LevelDebug || cfg.Log.Format != "json" || cfg.HTTP.Listen != "127.0.0.1:0" {
		t.Errorf("globals = %+v %+v", cfg.Log, cfg.HTTP)
	}
	s := cfg.Pipelines[0].Spec
	if a := s.Source.Config.(testSourceConfig); a.Address != "/from-env" || a.Inner.Depth != 2 {
		t.Errorf("source = %+v", a)
	}
	if a := s.Sink.Config.(testSinkConfig); a.Address != "/default" || a.Policy != mapping.Drop || !a.Carry {
		t.Errorf("sink = %+v", a)
	}
	if a := s.DeadLetter.Sink.Config.(testSinkConfig); a.Address != "/dlq" || a.Policy != mapping.Encode || !a.Carry {
		t.Errorf("dead-letter sink = %+v (want the encode policy)", a)
	}
	m := s.Mapping
	if m.Policy != mapping.Drop || !m.CarrySource || m.MaxMessageSize != 1<<20 {
		t.Errorf("mapping = %+v", m)
	}
	r := m.Rules
	if len(r.Rename) != 1 || r.Rename[0].From != "a" || r.Rename[0].To != "b" ||
		!reflect.DeepEqual(r.Drop, []string{"x", "y"}) || len(r.Set) != 1 ||
		r.Set[0].Value.DataType() != "Number.int" || r.Set[0].Value.Int() != 42 ||
		r.GroupKey != "{attr.tenant}" || r.DedupID != "{id}" || r.Subject != "orders.{group}" ||
		r.To != "dest" || r.ContentType != "application/json" {
		t.Errorf("rules = %+v", r)
	}
	want := bridge.DefaultOptions()
	want.Ordering = bridge.Ordering{MaxInFlight: 500, PerGroup: 2, Ungrouped: bridge.UngroupedConcurrent}
	want.Batch = bridge.Batch{Size: 10, Linger: 5 * time.Millisecond, Concurrency: 8}
	want.Retry = bridge.Retry{
		Backoff:     bridge.Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 1.5},
		MaxAttempts: 7, MaxElapsed: time.Hour,
	}
	want.Lock = bridge.Lock{ExtendEvery: 5 * time.Second, ExtendBy: 30 * time.Second}
	want.ShutdownTimeout = 45 * time.Second
	if s.Engine != want {
		t.Errorf("engine =\n%+v\nwant\n%+v", s.Engine, want)
	}
}

// TestDiagnostics checks the message and the position of each error.
func TestDiagnostics(t *testing.T) {
	// pipe wraps lines into a pipeline with a valid source and sink; the
	// lines start on line 4, column 3 is their first character.
	pipe := func(lines string) string {
		return "pipeline \"p\" {\n  source \"test\" { address = \"/in\" }\n  sink \"test\" {}\n" + lines + "\n}\n"
	}
	tests := []struct {
		name      string
		src       string
		summary   string
		detail    string
		line, col int
	}{
		{"syntax error", "pipeline \"p\" {\n  source \"test\" {\n}\n", "Unclosed configuration block", "", 1, 14},
		{"unknown block", "pipelines \"p\" {}\n", "Unsupported block type", `"pipelines"`, 1, 1},
		{"unknown argument", pipe(`  colour = "x"`), "Unsupported argument", `"colour"`, 4, 3},
		{"missing label", "pipeline {\n}\n", "Missing name for pipeline", "", 1, 10},
		{"missing source", "pipeline \"p\" {\n  sink \"test\" {}\n}\n", "Missing source block", `such as source "nats"`, 1, 1},
		{"missing sink", "pipeline \"p\" {\n  source \"test\" { address = \"/x\" }\n}\n", "Missing sink block", "", 1, 1},
		{"two sources", pipe(`  source "test" { address = "/b" }`), "Duplicate source block", "", 4, 3},
		{"unknown kind", "pipeline \"p\" {\n  source \"kafka\" {}\n  sink \"test\" {}\n}\n", `Unknown adapter kind "kafka"`, `"nats"`, 2, 10},
		{"servicebus sink validated", "pipeline \"p\" {\n  source \"test\" { address = \"/x\" }\n  sink \"servicebus\" {}\n}\n", "Invalid servicebus sink configuration", "connection_string: required", 3, 3},
		{"adapter unknown field", "pipeline \"p\" {\n  source \"test\" {\n    address = \"/x\"\n    adress = \"/y\"\n  }\n  sink \"test\" {}\n}\n", "Unsupported argument", `"adress"`, 4, 5},
		{"adapter missing field", "pipeline \"p\" {\n  source \"test\" {}\n  sink \"test\" {}\n}\n", "Missing required argument", `"address"`, 2, 17},
		{"adapter validate at attribute", "pipeline \"p\" {\n  source \"test\" { address = \"in\" }\n  sink \"test\" {}\n}\n", "Invalid test source configuration", "address: must start with /", 2, 29},
		{"adapter validate nested", "pipeline \"p\" {\n  source \"test\" {\n    address = \"/in\"\n    inner { depth = 9 }\n  }\n  sink \"test\" {}\n}\n", "Invalid test source configuration", "inner.depth: 9 is more than 3", 4, 21},
		{"bad duration", pipe(`  shutdown_timeout = "30x"`), "Invalid duration", `"30x" for "shutdown_timeout" is not a duration`, 4, 22},
		{"zero duration", pipe(`  shutdown_timeout = "0s"`), "Invalid duration", "must be positive", 4, 22},
		{"negative duration", pipe(`  batch { linger = "-1s" }`), "Invalid duration", "zero or positive", 4, 20},
		{"duration wrong type", pipe(`  retry { initial = 5 }`), "Invalid duration", `"5" for "initial" is not a duration`, 4, 21},
		{"duration not a string", pipe(`  retry { initial = ["1s"] }`), "Incorrect attribute value type", `"initial": a string is required`, 4, 21},
		{"bad policy", pipe(`  mapping { policy = "ignore" }`), "Invalid mapping policy", `unknown policy "ignore": want reject, drop or encode`, 4, 22},
		{"bad envelope", pipe(`  mapping { envelope = "none" }`), "Invalid envelope mode", `unknown envelope mode "none": want auto or off`, 4, 24},
		{"encode without envelope", pipe("  mapping {\n    policy = \"encode\"\n    envelope = \"off\"\n  }"), "Conflicting mapping settings", `envelope = "off" never writes`, 6, 16},
		{"wrong type", pipe(`  ordering { max_in_flight = "many" }`), "Incorrect attribute value type", `"max_in_flight": a number is required`, 4, 30},
		{"not whole", pipe(`  ordering { max_in_flight = 1.5 }`), "Invalid value", "whole number", 4, 30},
		{"out of range", pipe(`  ordering { max_in_flight = 0 }`), "Value out of range", "between 1 and", 4, 30},
		{"per group above max", pipe("  ordering {\n    max_in_flight = 2\n    per_group = 3\n  }"), "Invalid value", "per_group (3) cannot exceed max_in_flight (2)", 6, 17},
		{"ungrouped mode", pipe(`  ordering { ungrouped = "random" }`), "Invalid value", `"ungrouped" must be one of "auto", "source" or "concurrent", not "random"`, 4, 26},
		{"jitter", pipe(`  retry { jitter = 2 }`), "Value out of range", "between 0 and 1", 4, 20},
		{"max below initial", pipe("  retry {\n    initial = \"2s\"\n    max = \"1s\"\n  }"), "Invalid duration", "max (1s) cannot be shorter than initial (2s)", 6, 11},
		{"lock lapses", pipe(`  lock { extend_by = "5s" }`), "Invalid lock settings", "extend_by (5s) must be longer than extend_every (10s)", 4, 22},
		{"bad template", pipe(`  mapping { group_key = "{tenant}" }`), "Invalid template", "unknown placeholder {tenant}", 4, 25},
		{"unclosed template", pipe(`  mapping { subject = "a.{group" }`), "Invalid template", "unclosed", 4, 23},
		{"bad set type", pipe("  mapping {\n    set \"k\" {\n      type = \"Strng\"\n      value = \"v\"\n    }\n  }"), "Invalid attribute type", `"Strng"`, 6, 14},
		{"bad set number", pipe("  mapping {\n    set \"k\" {\n      type = \"Number.int\"\n      value = \"abc\"\n    }\n  }"), "Invalid attribute value", `"abc" is not a number`, 7, 15},
		{"bad set base64", pipe("  mapping {\n    set \"k\" {\n      type = \"Binary\"\n      value = \"%%%\"\n    }\n  }"), "Invalid attribute value", "invalid base64", 7, 15},
		{"bad set bool", pipe("  mapping {\n    set \"k\" {\n      type = \"String.bool\"\n      value = \"maybe\"\n    }\n  }"), "Invalid attribute value", `"maybe" is not a valid String.bool`, 7, 15},
		{"bad set int", pipe("  mapping {\n    set \"k\" {\n      type = \"Number.int\"\n      value = \"99999999999\"\n    }\n  }"), "Invalid attribute value", `"99999999999" is not a valid Number.int`, 7, 15},
		{"empty set template", pipe("  mapping {\n    set \"k\" {\n      type = \"String\"\n      template = \"\"\n    }\n  }"), "Empty template", "would set nothing", 7, 18},
		{"set missing value", pipe("  mapping {\n    set \"k\" { type = \"String\" }\n  }"), "Missing required argument", `"value" is required, but no definition was found: a set block has value (a constant) or template`, 5, 5},
		{"set value and template", pipe("  mapping {\n    set \"k\" {\n      type = \"String\"\n      value = \"v\"\n      template = \"{id}\"\n    }\n  }"), "Conflicting set arguments", "not both", 8, 18},
		{"set bad template", pipe("  mapping {\n    set \"k\" {\n      type = \"String\"\n      template = \"{tenant}\"\n    }\n  }"), "Invalid template", "unknown placeholder {tenant}", 7, 18},
		{"rename missing to", pipe("  mapping {\n    rename { from = \"a\" }\n  }"), "Missing required argument", `"to"`, 5, 5},
		{"drop not a list", pipe(`  mapping { drop = "x" }`), "Incorrect attribute value type", "a list of strings", 4, 20},
		{"dead letter both", pipe("  dead_letter {\n    native = true\n    sink \"test\" {}\n  }"), "Conflicting dead-letter destinations", "", 6, 5},
		{"dead letter empty", pipe("  dead_letter {}"), "Missing dead-letter destination", "native = true", 4, 3},
		{"dead letter bad kind", pipe("  dead_letter {\n    sink \"kafka\" {}\n  }"), `Unknown adapter kind "kafka"`, "", 5, 10},
		{"duplicate pipeline", minimal + minimal, `Duplicate pipeline "orders"`, "already defined at t.hcl:2:10", 7, 10},
		{"bad name", "pipeline \"a b\" {\n  source \"test\" { address = \"/x\" }\n  sink \"test\" {}\n}\n", "Invalid pipeline name", `not "a b"`, 1, 10},
		{"env unset", "pipeline \"p\" {\n  source \"test\" { address = env(\"QB_SURELY_UNSET\") }\n  sink \"test\" {}\n}\n", "Invalid function argument", `environment variable "QB_SURELY_UNSET" is not set`, 2, 34},
		{"env too many", "pipeline \"p\" {\n  source \"test\" { address = env(\"A\", \"b\", \"c\") }\n  sink \"test\" {}\n}\n", "Error in function call", "at most one default", 2, 29},
		{"file missing", "pipeline \"p\" {\n  source \"test\" { address = file(\"nope.txt\") }\n  sink \"test\" {}\n}\n", "Invalid function argument", "nope.txt", 2, 35},
		{"unknown function", "pipeline \"p\" {\n  source \"test\" { address = upper(\"x\") }\n  sink \"test\" {}\n}\n", "Call to unknown function", "upper", 2, 29},
		{"log level", "log { level = \"verbose\" }\n" + minimal, "Invalid value", `"level" must be one of "debug", "info", "warn" or "error", not "verbose"`, 1, 15},
		{"log format", "log { format = \"xml\" }\n" + minimal, "Invalid value", `"text" or "json"`, 1, 16},
		{"listen", "http { listen = \"localhost\" }\n" + minimal, "Invalid listen address", "not host:port", 1, 17},
		{"listen port", "http { listen = \"127.0.0.1:99999\" }\n" + minimal, "Invalid listen address", "no valid port", 1, 17},
		{"duplicate log", "log {}\nlog {}\n" + minimal, "Duplicate log block", "", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src)
			if !diags.HasErrors() {
				t.Fatalf("no error; diags = %v", diags)
			}
			for _, d := range diags {
				if d.Severity != hcl.DiagError || !strings.Contains(d.Summary, tt.summary) || !strings.Contains(d.Detail, tt.detail) {
					continue
				}
				if d.Subject == nil {
					t.Fatalf("%q has no position", d.Summary)
				}
				if d.Subject.Filename != "t.hcl" || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
					t.Errorf("%q at %s:%d:%d, want t.hcl:%d:%d", d.Summary, d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, tt.line, tt.col)
				}
				return
			}
			t.Errorf("no error %q with detail containing %q; got:\n%s", tt.summary, tt.detail, diagList(diags))
		})
	}
}

func diagList(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString("  " + DiagnosticString(d) + "\n")
	}
	return b.String()
}

func TestNoPipelinesWarns(t *testing.T) {
	cfg, diags := load(t, "log { level = \"info\" }\n")
	if diags.HasErrors() || cfg == nil {
		t.Fatalf("diags: %v", diags)
	}
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "No pipelines" {
		t.Errorf("diags = %v, want the no-pipelines warning", diags)
	}
}

func TestFileFunction(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("/secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `pipeline "p" {
  source "test" { address = trimspace(file("secret.txt")) }
  sink "test" { address = file("secret.txt") }
}
`
	path := filepath.Join(dir, "q.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// Relative to the configuration file, whatever the working directory.
	cfg, _, diags := Load(path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := cfg.Pipelines[0].Spec
	if got := s.Source.Config.(testSourceConfig).Address; got != "/secret" {
		t.Errorf("source address = %q", got)
	}
	if got := s.Sink.Config.(testSinkConfig).Address; got != "/secret\n" {
		t.Errorf("sink address = %q (file() keeps the content as is)", got)
	}
}

func TestLoadDirectory(t *testing.T) {
	write := func(dir, name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pipeline := func(name string) string {
		return fmt.Sprintf("pipeline %q {\n  source \"test\" { address = \"/%s\" }\n  sink \"test\" {}\n}\n", name, name)
	}

	t.Run("merged", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "a.hcl", "log { level = \"warn\" }\n"+pipeline("one"))
		write(dir, "b.hcl", pipeline("two"))
		write(dir, ".hidden.hcl", "garbage {{{")
		write(dir, "notes.txt", "garbage {{{")
		cfg, _, diags := Load(dir)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if len(cfg.Pipelines) != 2 || cfg.Pipelines[0].Name != "one" || cfg.Pipelines[1].Name != "two" || cfg.Log.Level != slog.LevelWarn {
			t.Errorf("cfg = %+v", cfg)
		}
	})
	t.Run("duplicate across files", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "a.hcl", pipeline("one"))
		write(dir, "b.hcl", "\n"+pipeline("one"))
		_, _, diags := Load(dir)
		if !diags.HasErrors() || !strings.Contains(diags[0].Summary, `Duplicate pipeline "one"`) ||
			!strings.HasSuffix(diags[0].Subject.Filename, "b.hcl") || diags[0].Subject.Start.Line != 2 ||
			!strings.Contains(diags[0].Detail, "a.hcl:1") {
			t.Errorf("diags = %v", diagList(diags))
		}
	})
	t.Run("duplicate log across files", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "a.hcl", "log {}\n"+pipeline("one"))
		write(dir, "b.hcl", "log {}\n")
		_, _, diags := Load(dir)
		if !diags.HasErrors() || diags[0].Summary != "Duplicate log block" || !strings.HasSuffix(diags[0].Subject.Filename, "b.hcl") {
			t.Errorf("diags = %v", diagList(diags))
		}
	})
	t.Run("errors in several files", func(t *testing.T) {
		dir := t.TempDir()
		write(dir, "a.hcl", "pipeline \"a\" {\n  shutdown_timeout = \"x\"\n}\n")
		write(dir, "b.hcl", "bogus {}\n")
		_, _, diags := Load(dir)
		files := map[string]bool{}
		for _, d := range diags {
			files[filepath.Base(d.Subject.Filename)] = true
		}
		if !files["a.hcl"] || !files["b.hcl"] {
			t.Errorf("want errors from both files, got:\n%s", diagList(diags))
		}
	})
	t.Run("empty", func(t *testing.T) {
		_, _, diags := Load(t.TempDir())
		if !diags.HasErrors() || diags[0].Summary != "No configuration files" {
			t.Errorf("diags = %v", diags)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, _, diags := Load(filepath.Join(t.TempDir(), "nope.hcl"))
		if !diags.HasErrors() || diags[0].Summary != "Cannot read configuration" {
			t.Errorf("diags = %v", diags)
		}
	})
}

func TestSpecComparesAcrossLoads(t *testing.T) {
	a, diags := load(t, minimal)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// Same pipeline, moved down and reformatted: unchanged.
	b, diags := load(t, "\n\n# comment\n"+strings.ReplaceAll(minimal, "  ", "    "))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if !reflect.DeepEqual(a.Pipelines[0].Spec, b.Pipelines[0].Spec) {
		t.Error("an unchanged pipeline compares unequal")
	}
	c, _ := load(t, strings.Replace(minimal, `"/in"`, `"/other"`, 1))
	if reflect.DeepEqual(a.Pipelines[0].Spec, c.Pipelines[0].Spec) {
		t.Error("a changed source compares equal")
	}
	d, _ := load(t, strings.Replace(minimal, "sink \"test\" {}", "sink \"test\" {}\n  retry { max_attempts = 3 }", 1))
	if reflect.DeepEqual(a.Pipelines[0].Spec, d.Pipelines[0].Spec) {
		t.Error("a changed engine setting compares equal")
	}
}

func TestDefinitions(t *testing.T) {
	src := `pipeline "p" {
  source "test" { address = "/in" }
  sink "test" { address = "/out" }
  mapping {
    policy = "drop"
    group_key = "{attr.tenant}"
  }
  dead_letter {
    sink "test" { address = "/dlq" }
  }
}
`
	cfg, diags := load(t, src)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var logs bytes.Buffer
	defs, err := cfg.Definitions(slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d := defs[0]
	c := d.Config
	if c.Name != "p" || c.SourceKind != "test" || c.SinkKind != "test" || c.DeadLetter.SinkKind != "test" || c.Transform == nil {
		t.Fatalf("config = %+v", c)
	}
	if !reflect.DeepEqual(d.Spec, cfg.Pipelines[0].Spec) {
		t.Error("Spec is not the pipeline's")
	}

	m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "tenant", Value: mapping.String("acme")}}}
	if err := c.Transform(m); err != nil || m.GroupKey != "acme" {
		t.Errorf("Transform: %v, group %q", err, m.GroupKey)
	}

	openedMu.Lock()
	openedSinks = nil
	openedMu.Unlock()
	var dropped []string
	onDrop := func(field, reason string) { dropped = append(dropped, field) }
	if _, err := c.Source(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sink(context.Background(), onDrop); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeadLetter.Sink(context.Background(), onDrop); err != nil {
		t.Fatal(err)
	}
	openedMu.Lock()
	defer openedMu.Unlock()
	if len(openedSinks) != 2 {
		t.Fatalf("opened %d sinks", len(openedSinks))
	}
	sink, dlq := openedSinks[0], openedSinks[1]
	if sink.Address != "/out" || sink.Policy != mapping.Drop || sink.onDrop == nil {
		t.Errorf("sink opened with %+v", sink.testSinkConfig)
	}
	if dlq.Address != "/dlq" || dlq.Policy != mapping.Encode || !dlq.Carry || dlq.onDrop == nil {
		t.Errorf("dead-letter sink opened with %+v", dlq.testSinkConfig)
	}
	// Each adapter's lines say its kind and role once: a JSON log with a
	// key twice keeps only one of them (the dead-letter sink's role was
	// lost that way).
	for _, o := range []struct {
		log  *slog.Logger
		role string
	}{{sink.log, "sink"}, {dlq.log, "dead-letter"}} {
		logs.Reset()
		o.log.Info("hello")
		line := logs.String()
		if strings.Count(line, `"role":`) != 1 || strings.Count(line, `"adapter":`) != 1 ||
			!strings.Contains(line, `"pipeline":"p","adapter":"test","role":"`+o.role+`"`) {
			t.Errorf("the %s's log line: %s", o.role, line)
		}
	}
	sink.onDrop("attribute \"x\"", "too many")
	dlq.onDrop("attribute \"y\"", "too many")
	if !slices.Equal(dropped, []string{`attribute "x"`, `attribute "y"`}) {
		t.Errorf("dropped %q: the constructors' onDrop is not the engine's callback", dropped)
	}
	// Opening changed nothing stored: the spec holds no callback and
	// still compares.
	if !reflect.DeepEqual(d.Spec, cfg.Pipelines[0].Spec) {
		t.Error("the spec changed when its sinks were opened")
	}
}

func TestRealAdaptersValidate(t *testing.T) {
	src := `pipeline "bridge" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in.>"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out.{group}"
  }
}
pipeline "broken" {
  source "nats" {
    url = "nats://127.0.0.1:4222"
    jetstream {
      stream   = "S"
      durable  = "d"
      ack_wait = "soon"
    }
  }
  sink "nats" { url = "nats://127.0.0.1:4222" }
}
`
	_, diags := load(t, src)
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
	}
	want := []string{
		`17:18 Invalid nats source configuration: jetstream.ack_wait: "soon" is not a duration: want a number and a unit (ms, s, m, h), such as "500ms", "30s" or "5m".`,
		`20:3 Invalid nats sink configuration: subject: required.`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diags =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Each real adapter's sink reports what the Drop policy leaves out to the
// callback its constructor is given (the config layer passes the engine's):
// a dry-run sink, which encodes as the sink does, without a broker.
func TestRealAdaptersReportDrops(t *testing.T) {
	const notUTF8 = "\xff" // no wire takes it in its text, but a NATS header takes its bytes
	for _, tc := range []struct{ kind, body, field, bad string }{
		{"amqp", `url = "amqp://127.0.0.1:1"
    address = "/queue/out"`, `application-properties "bad"`, notUTF8},
		{"nats", `url = "nats://127.0.0.1:1"
    subject = "out"`, `attribute "bad"`, "a\nb"}, // a header value is one line
		{"servicebus", `connection_string = "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0"
    queue = "out"`, `application-properties "bad"`, notUTF8},
		{"sqs", `queue_url = "http://127.0.0.1:1/000000000000/out"
    region    = "us-east-1"`, `attribute "bad"`, notUTF8},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			src := fmt.Sprintf(`pipeline "p" {
  source "test" { address = "/in" }
  sink %q {
    %s
  }
  mapping { policy = "drop" }
}
`, tc.kind, tc.body)
			cfg, diags := load(t, src)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			d, err := cfg.Pipelines[0].DryRunDefinition(slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			var dropped []string
			snk, err := d.Config.Sink(context.Background(), func(field, _ string) { dropped = append(dropped, field) })
			if err != nil {
				t.Fatal(err)
			}
			defer snk.Close(context.Background())
			m := &mapping.Message{Body: []byte("hello"), Attributes: []mapping.Attribute{
				{Name: "small", Value: mapping.String("s")},
				{Name: "bad", Value: mapping.String(tc.bad)},
			}}
			if errs := snk.Send(context.Background(), []*mapping.Message{m}); errs[0] != nil {
				t.Fatalf("Send: %v", errs[0])
			}
			if !slices.Equal(dropped, []string{tc.field}) {
				t.Errorf("dropped %q, want [%q]", dropped, tc.field)
			}
		})
	}
}

// TestRealAdaptersReportShed: with envelope = "off", each real adapter's
// sink leaves out what only the envelope could carry and reports it through
// the drop callback it was given; the pipeline's wrapper counts it in
// qbridge_mapping_envelope_shed_total, and the engine's callback sees no
// drop.
func TestRealAdaptersReportShed(t *testing.T) {
	reg := prometheus.NewRegistry()
	bridge.NewMetrics(reg)
	for _, tc := range []struct{ kind, body, field string }{
		{"amqp", `url = "amqp://127.0.0.1:1"
    address = "/queue/out"`, "types"},
		{"nats", `url = "nats://127.0.0.1:1"
    subject = "out"`, "replyToGroup"},
		{"servicebus", `connection_string = "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0"
    queue = "out"`, "types"},
		{"sqs", `queue_url = "http://127.0.0.1:1/000000000000/out"
    region    = "us-east-1"`, "replyToGroup"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			src := fmt.Sprintf(`pipeline "shed-%s" {
  source "test" { address = "/in" }
  sink %q {
    %s
  }
  mapping { envelope = "off" }
}
`, tc.kind, tc.kind, tc.body)
			cfg, diags := load(t, src)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if cfg.Pipelines[0].Spec.Mapping.Envelope != mapping.EnvelopeOff {
				t.Fatalf("mapping %+v", cfg.Pipelines[0].Spec.Mapping)
			}
			d, err := cfg.Pipelines[0].DryRunDefinition(slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			snk, err := d.Config.Sink(context.Background(), func(field, reason string) { t.Errorf("dropped %s: %s", field, reason) })
			if err != nil {
				t.Fatal(err)
			}
			defer snk.Close(context.Background())
			m := &mapping.Message{Body: []byte("hello"), ReplyToGroup: "rg", Attributes: []mapping.Attribute{
				{Name: "tagged", Value: mapping.String("s").WithLabel("x")},
			}}
			// The counter is shared by every registry: an earlier run of
			// the test (-count) counted too.
			before := shedCount(t, reg, "shed-"+tc.kind, tc.field)
			if errs := snk.Send(context.Background(), []*mapping.Message{m}); errs[0] != nil {
				t.Fatalf("Send: %v", errs[0])
			}
			if n := shedCount(t, reg, "shed-"+tc.kind, tc.field) - before; n != 1 {
				t.Errorf("qbridge_mapping_envelope_shed_total{field=%q} grew by %v, want 1", tc.field, n)
			}
		})
	}
}

func shedCount(t *testing.T, reg *prometheus.Registry, pipeline, field string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "qbridge_mapping_envelope_shed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["pipeline"] == pipeline && l["field"] == field {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestKinds(t *testing.T) {
	got := strings.Join(Kinds(), ",")
	if got != "amqp,nats,servicebus,sqs,test" {
		t.Errorf("Kinds = %s", got)
	}
}

// Every adapter's Validate names the field it is about with an
// adaptercfg.FieldError; the diagnostic points at that field's value (an
// attribute), its block, or the first of several fields it names.
func TestRealAdaptersFieldErrors(t *testing.T) {
	const sink = "\n  sink \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"out\"\n  }\n}\n"
	for _, tc := range []struct {
		name, source string
		line, col    int
		detail       string
	}{
		{"amqp nested attribute", "source \"amqp\" {\n    url     = \"amqp://h\"\n    address = \"/queue/q\"\n    sasl { mechanism = \"MAGIC\" }\n  }",
			5, 24, `sasl.mechanism: "MAGIC": want PLAIN, ANONYMOUS, EXTERNAL or NONE.`},
		{"sqs list element", "source \"sqs\" {\n    queue_url       = \"http://127.0.0.1:1/000000000000/q\"\n    attribute_names = [\"All\", \"Nope\"]\n  }",
			4, 23, `attribute_names[1]: "Nope" is not All`},
		{"servicebus first of two fields", "source \"servicebus\" {\n    connection_string = \"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s\"\n    queue             = \"q\"\n    topic             = \"t\"\n    subscription      = \"s\"\n  }",
			4, 25, "queue and topic/subscription: set one."},
		{"nats duration", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    jetstream {\n      stream   = \"S\"\n      durable  = \"d\"\n      ack_wait = \"-1s\"\n    }\n  }",
			8, 18, `jetstream.ack_wait: must be positive, not "-1s".`},
		{"field not written: the block", "source \"amqp\" {\n    address = \"/queue/q\"\n  }",
			2, 3, "url: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, "pipeline \"p\" {\n  "+tc.source+sink)
			if len(diags) != 1 {
				t.Fatalf("diags: %v", diags)
			}
			d := diags[0]
			if d.Subject.Start.Line != tc.line || d.Subject.Start.Column != tc.col || !strings.Contains(d.Detail, tc.detail) {
				t.Errorf("%d:%d %s, want %d:%d %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Detail, tc.line, tc.col, tc.detail)
			}
		})
	}
}

// A lock heartbeat that is not shorter than the lock the source's
// configuration gives (JetStream ack_wait, SQS visibility_timeout) is
// refused: the broker redelivers what the engine holds while a sink is
// slow (an audit saw 445 duplicates of 3,000 during a sink outage).
func TestLockHeartbeatShorterThanTheSourceLock(t *testing.T) {
	js := func(ackWait, lock string) string {
		return fmt.Sprintf(`pipeline "p" {
  source "nats" {
    url = "nats://127.0.0.1:4222"
    subject = "in.>"
    jetstream {
      stream   = "S"
      durable  = "d"
      ack_wait = %q
    }
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
%s}
`, ackWait, lock)
	}
	sqsSrc := func(vis string) string {
		return fmt.Sprintf(`pipeline "p" {
  source "sqs" {
    queue_url          = "http://127.0.0.1:1/000000000000/in"
    region             = "us-east-1"
    visibility_timeout = %q
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
`, vis)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"ack_wait under the default heartbeat", js("3s", ""), "every 10s (lock { extend_every }), but the nats source's jetstream.ack_wait is 3s"},
		{"heartbeat set shorter", js("3s", "  lock {\n    extend_every = \"1s\"\n  }\n"), ""},
		{"heartbeat equal to ack_wait", js("20s", "  lock {\n    extend_every = \"20s\"\n  }\n"), "jetstream.ack_wait is 20s"},
		{"default ack_wait", js("30s", ""), ""},
		// Accepted, with a warning: one late extension and it lapses.
		{"ack_wait just above the heartbeat", js("11s", ""), "warn:every 10s (lock { extend_every }), and the nats source's jetstream.ack_wait is 11s"},
		{"sqs visibility under the heartbeat", sqsSrc("4s"), "sqs source's visibility_timeout is 4s"},
		{"sqs visibility above it", sqsSrc("60s"), ""},
		{"core nats has no lock", `pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, tc.src)
			if w, ok := strings.CutPrefix(tc.want, "warn:"); ok {
				if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || !strings.Contains(diags[0].Detail, w) {
					t.Fatalf("diags %v, want one warning containing %q", diags, w)
				}
				return
			}
			if tc.want == "" {
				if len(diags) > 0 {
					t.Fatalf("diagnostics: %s", diags.Error())
				}
				return
			}
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "Lock heartbeat too slow") {
				t.Fatalf("diags %v, want one containing %q", diags, tc.want)
			}
		})
	}
}

// A misspelled field of an adapter block is answered with the name it
// resembles, as one of the pipeline block is: the adapters embed their
// connection settings with `hcl:",remain"`, and gohcl judged the leftover
// against those alone, so "subjekt" got no suggestion and "streem" in a
// jetstream block none either.
func TestRealAdaptersSuggestMisspelledFields(t *testing.T) {
	const natsSink = "\n  sink \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"out\"\n  }\n}\n"
	const natsSource = "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n  }\n"
	for _, tc := range []struct {
		name, body string
		want       string // "" for no suggestion
	}{
		{"source field", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subjekt = \"in\"\n  }" + natsSink, `Did you mean "subject"?`},
		{"connection field", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    pasword = \"x\"\n  }" + natsSink, `Did you mean "password"?`},
		{"nested block field", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    jetstream {\n      streem  = \"S\"\n      durable = \"d\"\n    }\n  }" + natsSink, `Did you mean "stream"?`},
		{"nested block remain field", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    jetstream {\n      stream         = \"S\"\n      durable        = \"d\"\n      create_stream  = true\n      stream_max_age = \"1h\"\n      stream_max_byts = 10\n    }\n  }" + natsSink, `Did you mean "stream_max_bytes"?`},
		{"a name of another block is not offered", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    jetstream {\n      stream  = \"S\"\n      durable = \"d\"\n      subjekt = \"x\"\n    }\n  }" + natsSink, ""},
		{"block type", "source \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"in\"\n    jetstrem {\n      stream  = \"S\"\n      durable = \"d\"\n    }\n  }" + natsSink, `Did you mean "jetstream"?`},
		{"sink field", natsSource + "  sink \"sqs\" {\n    queue_ur = \"https://sqs.eu-west-1.amazonaws.com/123456789012/q\"\n  }\n}\n", `Did you mean "queue_url"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, "pipeline \"p\" {\n  "+tc.body)
			if len(diags) == 0 {
				t.Fatal("no diagnostics")
			}
			d := diags[0]
			if !strings.HasPrefix(d.Summary, "Unsupported") {
				t.Fatalf("diags: %v", diags)
			}
			switch {
			case tc.want == "" && strings.Contains(d.Detail, "Did you mean"):
				t.Errorf("detail %q: want no suggestion", d.Detail)
			case tc.want != "" && !strings.HasSuffix(d.Detail, tc.want):
				t.Errorf("detail %q: want it to end with %s", d.Detail, tc.want)
			}
		})
	}
}

// dead_letter { native = true } is refused at load on a source whose
// broker has no dead-letter queue of its own: the daemon nacked each
// failing message instead, once a second, and dead-lettered none (audit).
func TestNativeDeadLetterNeedsOne(t *testing.T) {
	const sb = `connection_string = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a2V5"`
	for _, tc := range []struct {
		name, source, refusal string
	}{
		{"sqs", `source "sqs" { queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/q" }`, "SQS has no call that dead-letters"},
		{"core nats", `source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in"
  }`, "core NATS subject keeps no messages"},
		{"jetstream", `source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in"
    jetstream {
      stream  = "IN"
      durable = "d"
    }
  }`, ""},
		{"servicebus queue", `source "servicebus" {
    ` + sb + `
    queue = "q"
  }`, ""},
		{"servicebus dead-letter sub-queue", `source "servicebus" {
    ` + sb + `
    queue     = "q"
    sub_queue = "deadletter"
  }`, `sub-queue "deadletter"`},
		{"servicebus https", `source "servicebus" {
    ` + sb + `
    queue     = "q"
    transport = "https"
  }`, "REST API"},
		{"amqp", `source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queues/q"
  }`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline \"p\" {\n  " + tc.source + "\n  sink \"test\" {}\n  dead_letter { native = true }\n}\n"
			_, diags := load(t, src)
			var got *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Summary == "No native dead-letter queue" {
					got = d
				}
			}
			switch {
			case tc.refusal == "" && diags.HasErrors():
				t.Fatalf("refused:\n%s", diagList(diags))
			case tc.refusal != "" && (got == nil || !strings.Contains(got.Detail, tc.refusal) || !strings.Contains(got.Detail, "sink block")):
				t.Fatalf("want a refusal saying %q; got:\n%s", tc.refusal, diagList(diags))
			case got != nil && (got.Subject == nil || got.Subject.Start.Column != 26):
				t.Errorf("refusal at %v, want at the native attribute's value", got.Subject)
			}
		})
	}
}
