package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	natsadapter "github.com/qbridge/qbridge/adapters/nats"
	"github.com/qbridge/qbridge/internal/config"
)

func TestMigrateUsage(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.hcl", goodConfig)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help exits 0 with an example", []string{"-h"}, 0, "qbridge migrate -dry-run"},
		{"no configuration", nil, 2, "usage: qbridge migrate"},
		{"dry run and copy", []string{"-dry-run", "-copy", good}, 2, "exclude each other"},
		{"filter on a move", []string{"-where", "{group}==a", good}, 2, "use -copy with the filter"},
		{"bad filter", []string{"-copy", "-where", "{group}", good}, 2, "TEMPLATE==VALUE"},
		{"bad time", []string{"-copy", "-since", "yesterday", good}, 2, "RFC 3339"},
		{"state without copy", []string{"-state", "s.json", good}, 2, "-state keeps copy mode's checkpoints"},
		{"unknown pipeline", []string{"-yes", "-pipeline", "nope", good}, 2, `-pipeline "nope": the configuration has orders`},
		{"bad progress", []string{"-progress", "fancy", good}, 2, "-progress"},
		{"bad scheduled", []string{"-scheduled", "later", good}, 2, "leave or wait"},
		{"move needs -yes without a terminal", []string{good}, 2, "pass -yes to confirm"},
		{"configuration errors", []string{"-yes", writeFile(t, dir, "bad.hcl", "pipeline \"x\" {}\n")}, 1, "nothing was migrated"},
		{"two files", []string{good, good}, 2, `one FILE_OR_DIR argument, not 2`},
		{"-config and an argument", []string{"-config", good, good}, 2, "give the configuration once"},
		{"idle 0", []string{"-idle", "0s", good}, 2, "-idle 0s: must be more than 0"},
		{"negative idle", []string{"-idle", "-1s", good}, 2, "-idle -1s: cannot be negative"},
		{"connect-timeout 0", []string{"-connect-timeout", "0s", good}, 2, "-connect-timeout 0s: must be more than 0"},
		{"negative timeout", []string{"-timeout", "-1s", good}, 2, "-timeout -1s: cannot be negative"},
		{"progress-every 0", []string{"-progress-every", "0s", good}, 2, "-progress-every 0s: must be more than 0"},
		{"verify-wait 0", []string{"-verify-wait", "0s", good}, 2, "-verify-wait 0s: must be more than 0"},
		{"negative verify-wait", []string{"-verify-wait", "-1s", good}, 2, "-verify-wait -1s: cannot be negative"},
		{"unwritable report", []string{"-yes", "-report", filepath.Join(dir, "no-such-dir", "r.json"), good}, 2, "-report: cannot write " + filepath.Join(dir, "no-such-dir", "r.json") + ": no such file or directory"},
		{"unwritable state", []string{"-copy", "-yes", "-state", filepath.Join(dir, "no-such-dir", "s.json"), good}, 2, "-state: state file: cannot write " + filepath.Join(dir, "no-such-dir", "s.json") + ": no such file or directory (the checkpoints could not be saved"},
		{"state on standard output", []string{"-copy", "-yes", "-state", "-", good}, 2, "-state: state file: - is not a file"},
		{"state on a device", []string{"-copy", "-yes", "-state", os.DevNull, good}, 2, "is not a regular file"},
		// Refused when each pipeline started: exit 1, "failed", each
		// pipeline "skipped", with nothing done.
		{"state onto the configuration", []string{"-copy", "-yes", "-state", good, good}, 2, "-state: state file " + good + " is not a qbridge migrate state file"},
		{"state onto a report", []string{"-copy", "-yes", "-state", writeFile(t, dir, "report.json", `{"version":1,"mode":"copy","pipelines":[]}`), good}, 2, "it is a migration report (-report)"},
		{"sample on a move", []string{"-yes", "-sample", "10", good}, 2, "-sample is for a dry run"},
		{"report is a directory", []string{"-yes", "-report", dir, good}, 2, "is a directory"},
		{"state and report the same file", []string{"-copy", "-yes", "-state", filepath.Join(dir, "same.json"), "-report", filepath.Join(dir, ".", "same.json"), good}, 2, "-state and -report name the same file"},
		{"report onto the configuration", []string{"-yes", "-report", good, good}, 2, "exists and is not a migration report"},
		{"report onto a state file", []string{"-yes", "-report", writeFile(t, dir, "state.json", `{"version":1,"checkpoints":{}}`), good}, 2, "exists and is not a migration report"},
		{"parallel 0", []string{"-parallel", "0", good}, 2, "-parallel 0: must be at least 1"},
		{"pipeline twice", []string{"-yes", "-pipeline", "orders", "-pipeline", "orders", good}, 2, `-pipeline "orders" is given twice`},
		{"bar without a terminal", []string{"-yes", "-progress", "bar", writeFile(t, dir, "bad2.hcl", "pipeline \"x\" {}\n")}, 1, "standard output is not a terminal, so progress goes to log lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), append([]string{"migrate"}, tt.args...), stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, errb.String())
			}
		})
	}
}

// The help's exit status 4 names every cause docs/migrate.md lists under
// it: deferred Service Bus messages were missing there.
func TestMigrateHelpExitNotDrained(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"migrate", "-h"}, stdio{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	help := strings.Join(strings.Fields(errb.String()), " ") // the text is wrapped
	_, clause, ok := strings.Cut(help, "4 not drained (")
	clause, _, _ = strings.Cut(clause, "); 5 drained")
	if !ok {
		t.Fatalf("no exit status 4 in the help:\n%s", errb.String())
	}
	for _, want := range []string{
		"timeout", "scheduled messages left", "messages that arrived late", "messages not copied",
		"stuck messages that nothing takes", "messages the source's broker dead-lettered",
		"deferred Service Bus messages", "a dry run that finds messages that would be stuck",
	} {
		if !strings.Contains(clause, want) {
			t.Errorf("exit status 4 lacks %q: %q", want, clause)
		}
	}
}

// TestMigrateDeclinedIsNotAFailure answers n at the prompt: nothing ran,
// which exits 2 (as a move without -yes and no terminal), not 1 (failed).
func TestMigrateDeclinedIsNotAFailure(t *testing.T) {
	good := writeFile(t, t.TempDir(), "good.hcl", goodConfig)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("n\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	old := stdinIsTerminal
	stdinIsTerminal = func(*os.File) bool { return true }
	defer func() { stdinIsTerminal = old }()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"migrate", good}, stdio{In: r, Out: &out, Err: &errb})
	if code != 2 || !strings.Contains(errb.String(), "not confirmed; nothing was done") {
		t.Fatalf("exit %d, want 2\nstderr: %s", code, errb.String())
	}
}

// TestMigrateInterruptedAtThePrompt: Ctrl-C while the prompt waits for an
// answer ends it (exit 130, nothing done); it used to wait on until a
// second signal killed it without a word.
func TestMigrateInterruptedAtThePrompt(t *testing.T) {
	good := writeFile(t, t.TempDir(), "good.hcl", goodConfig)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // no answer comes
	old := stdinIsTerminal
	stdinIsTerminal = func(*os.File) bool { return true }
	defer func() { stdinIsTerminal = old }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal, before any answer
	var out, errb bytes.Buffer
	code := dispatch(ctx, []string{"migrate", good}, stdio{In: r, Out: &out, Err: &errb})
	if code != 130 || !strings.Contains(errb.String(), "interrupted at the prompt; nothing was done") {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, errb.String())
	}
}

// unreachablePipeline is a pipeline NAME from and to a NATS server that is
// not there: nothing listens on port 1, so it fails after -connect-timeout.
func unreachablePipeline(name string) string {
	return fmt.Sprintf(`
pipeline %[1]q {
  source "nats" {
    url     = "nats://127.0.0.1:1"
    subject = "in.%[1]s"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:1"
    subject = "out.%[1]s"
  }
}
`, name)
}

// TestMigratePipelinesRunInFlagOrder: every named pipeline runs, in the
// order of the flags, and one that fails does not stop the next.
func TestMigratePipelinesRunInFlagOrder(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "two.hcl", unreachablePipeline("a")+unreachablePipeline("b"))
	report := filepath.Join(dir, "r.json")
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"migrate", "-yes", "-progress", "off", "-connect-timeout", "300ms",
		"-report", report, "-pipeline", "b", "-pipeline", "a", cfg}, stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Pipelines []struct{ Pipeline, Outcome string }
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Pipelines) != 2 || rep.Pipelines[0].Pipeline != "b" || rep.Pipelines[1].Pipeline != "a" {
		t.Fatalf("report pipelines %+v, want b then a", rep.Pipelines)
	}
	for _, name := range []string{"  b: nats → nats, failed", "  a: nats → nats, failed"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("summary lacks %q:\n%s", name, out.String())
		}
	}
}

// The dry-run sampling note names what the sample costs at that broker (a
// Service Bus source was told about SQS's ApproximateReceiveCount).
func TestSampleCostNamesTheBroker(t *testing.T) {
	for kind, want := range map[string]string{
		"sqs":        "ApproximateReceiveCount",
		"servicebus": "DeliveryCount",
		"amqp":       "quorum queue each one counts as a delivery",
		"nats":       "where the broker counts them",
	} {
		got := sampleCost(kind)
		if !strings.Contains(got, want) || (kind != "sqs" && strings.Contains(got, "ApproximateReceiveCount")) {
			t.Errorf("%s: %q, want it to say %q", kind, got, want)
		}
	}
}

// The dry run's sampling note names the source's kind with the article it
// is said with: it wrote "a sqs source".
func TestSampledNoteNamesTheKind(t *testing.T) {
	for _, tc := range []struct {
		source, want string
	}{
		{`source "sqs" {
    region     = "us-east-1"
    queue_name = "q"
  }`, "pipeline p: an SQS source cannot be read without receiving"},
	} {
		hcl := "pipeline \"p\" {\n  " + tc.source + "\n  sink \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"out\"\n  }\n}\n"
		cfg, diags := config.NewLoader().LoadBytes("test.hcl", []byte(hcl))
		if diags.HasErrors() {
			t.Fatalf("config: %s\n%s", diags.Error(), hcl)
		}
		var buf bytes.Buffer
		warnSampled(&buf, cfg.Pipelines, 100)
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("%q, want %q", buf.String(), tc.want)
		}
	}
}

// -report - writes the JSON report to standard output, alone (the summary
// goes to standard error): it wrote a file named "-".
func TestMigrateReportToStdout(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "one.hcl", unreachablePipeline("a"))
	t.Chdir(dir)
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"migrate", "-yes", "-progress", "off", "-connect-timeout", "300ms", "-report", "-", cfg},
		stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	var rep struct {
		Pipelines []struct{ Pipeline, Outcome string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Pipelines) != 1 || rep.Pipelines[0].Outcome != "failed" {
		t.Fatalf("standard output is not the report (%v):\n%s", err, out.String())
	}
	if !strings.Contains(errb.String(), "  a: nats → nats, failed") {
		t.Errorf("the summary is not on standard error:\n%s", errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`a file named "-" was written`)
	}
}

// -report /dev/stdout is -report -: the report alone on standard output
// (the summary went there first, and jq read it).
func TestIsStdout(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !isStdout(f, fmt.Sprintf("/proc/self/fd/%d", f.Fd())) || !isStdout(f, f.Name()) {
		t.Error("the file standard output writes to is not recognised")
	}
	if isStdout(f, filepath.Join(t.TempDir(), "other")) || isStdout(&bytes.Buffer{}, f.Name()) {
		t.Error("another file taken for standard output")
	}
}

// embeddedMigration writes a configuration that moves the JetStream stream
// IN of an embedded server (its store under dir) to OUT, and publishes n
// messages to IN.
func embeddedMigration(t *testing.T, dir string, n int) string {
	t.Helper()
	cfg := embeddedMigrationConfig(t, dir, "IN")
	js, done := embeddedJetStream(t, filepath.Join(dir, "store"))
	defer done()
	if _, err := js.AddStream(&nats.StreamConfig{Name: "IN", Subjects: []string{"in.x"}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish("in.x", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// embeddedMigrationConfig writes the configuration of embeddedMigration,
// whose source reads the stream named source (create_stream set).
func embeddedMigrationConfig(t *testing.T, dir, source string) string {
	t.Helper()
	return writeFile(t, dir, "m.hcl", fmt.Sprintf(`
pipeline "archive" {
  source "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "in.x"
    jetstream {
      stream        = %[2]q
      durable       = "archive"
      create_stream = true
    }
  }
  sink "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "out.x"
    jetstream {
      stream        = "OUT"
      create_stream = true
    }
  }
}
`, filepath.Join(dir, "store"), source))
}

// embeddedJetStream holds the embedded server of store and returns a
// JetStream context on it, and done, which closes the connection and
// releases the server (a migration run after it starts the server anew).
func embeddedJetStream(t *testing.T, store string) (js nats.JetStreamContext, done func()) {
	t.Helper()
	url, release, err := natsadapter.HoldEmbedded(natsadapter.ConnConfig{Embedded: true, StoreDir: store}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		release()
		t.Fatal(err)
	}
	done = func() {
		nc.Close()
		release()
	}
	if js, err = nc.JetStream(); err != nil {
		done()
		t.Fatal(err)
	}
	return js, done
}

// TestMigrateStartsItsEmbeddedServerOnce: the server of an embedded store
// runs from the counts before the move to the counts after it. Each of them
// and the pipeline used to start and stop it on its own, recovering the
// store each time.
func TestMigrateStartsItsEmbeddedServerOnce(t *testing.T) {
	cfg := embeddedMigration(t, t.TempDir(), 3)
	code, out, errOut := runCmd(t, "migrate", "-yes", "-progress", "off", "-connect-timeout", "30s", cfg)
	if code != 0 || !strings.Contains(out, "read 3, written 3") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if n := strings.Count(errOut, "embedded nats-server started"); n != 1 {
		t.Errorf("the embedded server started %d times, want once:\n%s", n, errOut)
	}
}

// An interrupted move says why once, on the pipeline's line of the summary;
// the first line and the last line on standard error said it too, word for
// word. The last line still says it was interrupted, and where.
func TestMigrateInterruptSaysItOnce(t *testing.T) {
	cfg := embeddedMigration(t, t.TempDir(), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal: the job stops at once
	var out, errb bytes.Buffer
	code := dispatch(ctx, []string{"migrate", "-yes", "-progress", "off", cfg}, stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	const why = "in-flight messages were finished or handed back to the source; run the same command again to go on"
	if n := strings.Count(out.String()+errb.String(), why); n != 1 || !strings.Contains(out.String(), "archive: nats → nats, interrupted ("+why+")") {
		t.Errorf("the reason is said %d times, want once on the pipeline's line:\nstdout: %s\nstderr: %s", n, out.String(), errb.String())
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); strings.Contains(first, "pipeline") {
		t.Errorf("first line %q repeats the pipeline's", first)
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if last, want := lines[len(lines)-1], "qbridge migrate: interrupted in pipeline archive; the summary says what was done and what is left"; last != want {
		t.Errorf("last line on standard error %q, want %q", last, want)
	}
}

// A migration never makes its source's stream, whatever the source block's
// create_stream says (a misspelt stream would be moved from empty and said
// complete): the daemon's hold of an embedded server makes a source's
// stream now, and migrate holds its servers as the jobs run the pipelines.
func TestMigrateHoldMakesNoSourceStream(t *testing.T) {
	dir := t.TempDir()
	cfg := embeddedMigrationConfig(t, dir, "MISSPELT")
	code, out, errOut := runCmd(t, "migrate", "-yes", "-progress", "off", "-connect-timeout", "30s", cfg)
	if code != 1 || !strings.Contains(out+errOut, "MISSPELT does not exist") {
		t.Fatalf("exit %d, want 1 naming the missing stream\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	js, done := embeddedJetStream(t, filepath.Join(dir, "store"))
	defer done()
	if _, err := js.StreamInfo("MISSPELT"); !errors.Is(err, nats.ErrStreamNotFound) {
		t.Errorf("the source's stream after the migration: %v, want none", err)
	}
}
