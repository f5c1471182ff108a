package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/migrate"
)

func init() {
	register("migrate", command{
		Summary: "move or copy everything in a source to its sink, then stop and report",
		Run:     runMigrate,
	})
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func runMigrate(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	var (
		path       = fs.String("config", "", "configuration file or directory (or give it as the argument)")
		pipelines  listFlag
		dryRun     = fs.Bool("dry-run", false, "read and translate without writing or settling anything; report what would happen")
		copyMode   = fs.Bool("copy", false, "copy: leave the source untouched (brokers that can browse: Service Bus, JetStream, AMQP with copy mode)")
		reportPath = fs.String("report", "", "write the final report to this file as JSON (-: to standard output, and the summary and progress to standard error)")
		rateCap    = fs.Float64("rate", 0, "take at most this many messages per second from the source (0: no cap)")
		deadLetter = fs.Bool("include-dead-letters", false, "also migrate the source's dead-letter queue (Service Bus $DeadLetterQueue, the SQS redrive target)")
		yes        = fs.Bool("yes", false, "do not ask for confirmation")
		progress   = fs.String("progress", "auto", "auto|bar|log|off: a live bar on a terminal, else a log line every -progress-every")
		every      = fs.Duration("progress-every", 5*time.Second, "interval of progress log lines; more than 0")
		idle       = fs.Duration("idle", 5*time.Second, "how long the source must yield nothing before its count is trusted (JetStream counts exactly: at most 1s there; brokers that cannot count: before it is drained); more than 0")
		timeout    = fs.Duration("timeout", 0, "give up on a pipeline, not drained, once it has run this long (each pipeline has its own; 0: no limit)")
		verifyWait = fs.Duration("verify-wait", 15*time.Second, "how long a sink that holds fewer messages than were written is counted again before that is reported (SQS counts lag behind writes); more than 0")
		connect    = fs.Duration("connect-timeout", 2*time.Minute, "fail when the brokers cannot be reached for this long; more than 0")
		sample     = fs.Int64("sample", 100, "dry run on sources that cannot browse (SQS, AMQP without copy mode, session-enabled Service Bus): read at most this many messages, each one counting as a delivery")
		stateFile  = fs.String("state", "", "copy mode: keep checkpoints in this file, so the same command resumes where it stopped")
		since      = fs.String("since", "", "copy/dry run: only messages enqueued at or after this time (RFC 3339)")
		until      = fs.String("until", "", "copy/dry run: only messages enqueued before this time (RFC 3339)")
		where      listFlag
		rerun      = fs.String("new-dedup-ids", "", "a run name: derive new deduplication ids from it, so a deliberate re-run is not dropped as duplicates by the sink")
		scheduled  = fs.String("scheduled", "leave", "leave|wait: finish with scheduled messages left at the source (reported), or wait until they are due")
		logFormat  = fs.String("log-format", "", "text|json (default: the configuration's)")
		logLevel   = fs.String("log-level", "", "debug|info|warn|error (default: the configuration's; warn under a progress bar)")
		parallel   = fs.Int("parallel", 1, "run up to this many pipelines at once; pipelines that read or write the same queue, stream or entity still run one after the other")
	)
	fs.Var(&pipelines, "pipeline", "migrate only this pipeline (repeatable; default: every pipeline of the configuration)")
	fs.Var(&where, "where", "copy/dry run: only messages where TEMPLATE==VALUE or TEMPLATE!=VALUE, e.g. '{attr.tenant}==acme' (repeatable, all must hold)")
	fs.Usage = func() {
		fmt.Fprint(std.Err, `usage: qbridge migrate [flags] FILE_OR_DIR

Runs the configuration's pipelines as a one-shot migration: each runs until
its source is drained (the broker's count is 0 and receives come back empty;
for AMQP brokers and core NATS subjects, which cannot count, until nothing
arrives for -idle), then stops. Progress is shown live; at the end a report
says what was read, written, dead-lettered and left behind.

Exit status: 0 drained and everything written; 3 drained, some messages
dead-lettered (see the report); 4 not drained (timeout, scheduled messages
left, messages that arrived late, messages not copied, stuck messages that
nothing takes, messages the source's broker dead-lettered, deferred
Service Bus messages; a dry run that finds messages that would be stuck); 5
drained, but the counts prove messages lost (the sink merged distinct
messages sharing a deduplication id, or messages left the source another
way); 1 failed (configuration, unreachable broker, missing source or sink; a
failed pipeline does not stop the others); 2 usage, or not confirmed
(nothing was done); 130 interrupted (in-flight messages finished or handed
back; pipelines not started are listed as skipped; a signal after a
pipeline's last message leaves it complete). Running the same command
again resumes: a move continues from what is left; a copy with -state
continues after its checkpoint.

Flags may follow FILE_OR_DIR. Pipelines run one after the other: in the
order of the -pipeline flags, else in file order; -parallel N runs up to N
at once.

Example:
  qbridge migrate -dry-run configs/sqs-to-servicebus.hcl
  qbridge migrate -report report.json -yes configs/sqs-to-servicebus.hcl

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(std.Err, "qbridge migrate: "+format+"\n", a...)
		return 2
	}
	switch {
	case *path == "" && fs.NArg() == 1:
		*path = fs.Arg(0)
	case *path != "" && fs.NArg() == 0:
	case *path == "" && fs.NArg() == 0:
		fs.Usage()
		return 2
	case *path != "":
		return usageErr("-config %s and the argument %q: give the configuration once", *path, fs.Arg(0))
	default:
		return usageErr("one FILE_OR_DIR argument, not %d (%q is another)", fs.NArg(), fs.Arg(1))
	}
	// Durations the engine would otherwise replace with a default, or take
	// as "no limit": a value that means nothing is refused, not replaced.
	for _, d := range []struct {
		name, why string
		v         time.Duration
		zeroOK    bool
	}{
		{"idle", "how long the source must yield nothing before it counts as drained", *idle, false},
		{"connect-timeout", "how long the brokers may be unreachable before the migration fails", *connect, false},
		{"progress-every", "the interval of progress log lines", *every, false},
		{"timeout", "0 is no limit", *timeout, true},
		{"verify-wait", "how long a sink that holds fewer messages than were written is counted again", *verifyWait, false},
	} {
		switch {
		case d.v < 0:
			return usageErr("-%s %s: cannot be negative (%s)", d.name, d.v, d.why)
		case d.v == 0 && !d.zeroOK:
			return usageErr("-%s 0s: must be more than 0 (%s)", d.name, d.why)
		}
	}
	if *reportPath != "" && *reportPath != "-" {
		// Found out before anything moves, not after a completed move.
		if err := migrate.CheckWritable(*reportPath); err != nil {
			return usageErr("-report: %v", err)
		}
		if err := migrate.CheckReportTarget(*reportPath); err != nil {
			return usageErr("-report: %v", err)
		}
		if *stateFile != "" && sameFile(*reportPath, *stateFile) {
			return usageErr("-state and -report name the same file, %s: the report would replace the checkpoints, and the next run would copy everything again; give each its own file", *stateFile)
		}
	}
	if *stateFile != "" {
		if err := migrate.CheckStateFile(*stateFile); err != nil {
			return usageErr("-state: %v (the checkpoints could not be saved, and the next run would copy everything again)", err)
		}
		if err := migrate.CheckStateContent(*stateFile); err != nil {
			return usageErr("-state: %v", err)
		}
	}
	opt := migrate.Options{
		Mode: migrate.ModeMove, IncludeDeadLetters: *deadLetter, Rate: *rateCap, Idle: *idle,
		Timeout: *timeout, VerifyWait: *verifyWait, ConnectTimeout: *connect, Sample: *sample, StateFile: *stateFile,
		RunID: *rerun, Parallel: *parallel,
	}
	switch {
	case *dryRun && *copyMode:
		return usageErr("-dry-run and -copy exclude each other (a dry run writes nothing at all)")
	case *dryRun:
		opt.Mode = migrate.ModeDryRun
	case *copyMode:
		opt.Mode = migrate.ModeCopy
	}
	for _, s := range []struct {
		flag, v string
		dst     *time.Time
	}{{"since", *since, &opt.Since}, {"until", *until, &opt.Until}} {
		if s.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s.v)
		if err != nil {
			return usageErr("-%s %q: want an RFC 3339 time such as 2026-01-31T12:00:00Z", s.flag, s.v)
		}
		*s.dst = t
	}
	for _, w := range where {
		c, err := migrate.ParseCondition(w)
		if err != nil {
			return usageErr("%v", err)
		}
		opt.Where = append(opt.Where, c)
	}
	switch *scheduled {
	case "leave":
	case "wait":
		opt.WaitScheduled = true
	default:
		return usageErr("-scheduled %q: want leave or wait", *scheduled)
	}
	if *sample < 1 {
		return usageErr("-sample must be at least 1")
	}
	sampleSet := false
	fs.Visit(func(f *flag.Flag) { sampleSet = sampleSet || f.Name == "sample" })
	if sampleSet && !*dryRun {
		return usageErr("-sample is for a dry run (-dry-run): a move or a copy reads every message")
	}
	if *parallel < 1 {
		return usageErr("-parallel %d: must be at least 1 (1 runs the pipelines one after the other)", *parallel)
	}
	if err := opt.Validate(); err != nil {
		return usageErr("%v", err)
	}
	// out takes the summary and the bars; with -report -, standard output
	// is the report's alone.
	out, outName := std.Out, "standard output"
	if *reportPath != "-" && isStdout(std.Out, *reportPath) {
		*reportPath = "-" // -report /dev/stdout: the report, alone
	}
	if *reportPath == "-" {
		out, outName = std.Err, "standard error"
	}
	outTTY := isTerminal(out)
	mode := *progress
	switch mode {
	case "auto":
		mode = "log"
		if outTTY && hasSize(out) {
			mode = "bar"
		}
	case "bar":
		switch {
		case !outTTY:
			// A bar needs a terminal: without one it draws nothing.
			fmt.Fprintf(std.Err, "qbridge migrate: -progress bar: %s is not a terminal, so progress goes to log lines on standard error instead (-progress log)\n", outName)
			mode = "log"
		case !hasSize(out):
			fmt.Fprintln(std.Err, "qbridge migrate: -progress bar: the terminal reports no size (stty size: set rows and columns), so progress goes to log lines on standard error instead (-progress log)")
			mode = "log"
		}
	case "log", "off":
	default:
		return usageErr("-progress %q: want auto, bar, log or off", *progress)
	}

	l := config.NewLoader()
	cfg, diags := l.Load(*path)
	if err := config.WriteDiagnostics(std.Err, l.Files(), diags); err != nil || diags.HasErrors() {
		fmt.Fprintln(std.Err, "qbridge migrate: the configuration has errors; nothing was migrated")
		return 1
	}
	pipes := cfg.Pipelines
	if len(pipelines) > 0 {
		// In the order of the flags: the user chose it (a queue whose
		// consumers move first, say); without -pipeline, file order.
		pipes = nil
		for k, name := range pipelines {
			if slices.Index(pipelines[:k], name) >= 0 {
				return usageErr("-pipeline %q is given twice", name)
			}
			i := slices.IndexFunc(cfg.Pipelines, func(p *config.Pipeline) bool { return p.Name == name })
			if i < 0 {
				names := make([]string, len(cfg.Pipelines))
				for k, p := range cfg.Pipelines {
					names[k] = p.Name
				}
				return usageErr("-pipeline %q: the configuration has %s", name, strings.Join(names, ", "))
			}
			pipes = append(pipes, cfg.Pipelines[i])
		}
	}
	if len(pipes) == 0 {
		return usageErr("the configuration has no pipeline")
	}

	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level)
	if mode == "bar" {
		level.Set(max(cfg.Log.Level, slog.LevelWarn)) // keep the bar readable
	}
	if *logLevel != "" {
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usageErr("-log-level %q: want debug, info, warn or error", *logLevel)
		}
	}
	format := cfg.Log.Format
	if *logFormat != "" {
		if *logFormat != "text" && *logFormat != "json" {
			return usageErr("-log-format %q: want text or json", *logFormat)
		}
		format = *logFormat
	}
	logOut := &swapWriter{w: std.Err}
	log := newLogger(logOut, format, level)
	opt.Log = log

	if opt.Mode == migrate.ModeDryRun {
		warnSampled(std.Err, pipes, opt.Sample)
	} else if !*yes {
		if code, ok := confirm(ctx, std, pipes, opt.Mode, log); !ok {
			return code
		}
	}

	var prog migrate.Progress
	switch mode {
	case "bar":
		bar := migrate.NewBarProgress(out)
		if isTerminal(std.Err) {
			// Both on the terminal: log lines go above the bars.
			logOut.set(bar.Above(std.Err))
		}
		prog = bar
	case "log":
		// Progress lines are what -progress log asks for: they are written
		// whatever level the configuration's log block sets for the rest
		// (a sidecar's "warn" silenced them all; -progress off does).
		progressLevel := new(slog.LevelVar)
		progressLevel.Set(slog.LevelInfo)
		prog = &migrate.LogProgress{Log: newLogger(std.Err, format, progressLevel), Every: *every}
	default:
		prog = migrate.NoProgress{}
	}
	release := holdServers(pipes, log)
	rep := migrate.Run(ctx, pipes, opt, prog)
	release()
	rep.Summary(out)
	if *reportPath != "" {
		write := func() error { return rep.WriteFile(*reportPath) }
		if *reportPath == "-" {
			write = func() error { return rep.WriteJSON(std.Out) }
		}
		if err := write(); err != nil {
			fmt.Fprintln(std.Err, "qbridge migrate:", err)
			if rep.ExitCode == 0 {
				return 1
			}
		}
	}
	if line := rep.ErrorLine(); rep.ExitCode != 0 && line != "" {
		fmt.Fprintf(std.Err, "qbridge migrate: %s\n", line)
	}
	return rep.ExitCode
}

// swapWriter is a log destination that can change while loggers hold it.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	return w.Write(p)
}

// stdinIsTerminal is a variable so that tests can answer the prompt.
var stdinIsTerminal = func(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// hasSize reports whether a terminal says how large it is: a bar cannot be
// drawn on one that reports no columns or no rows (some exec sessions, a
// "stty cols" alone; mpb draws no row beyond the height), so progress goes
// to log lines there.
func hasSize(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	cols, rows, err := term.GetSize(int(f.Fd()))
	return err == nil && cols > 0 && rows > 0
}

// confirm shows what a move or copy is about to do and asks; without a
// terminal to ask on, it refuses (pass -yes in scripts and Jobs).
func confirm(ctx context.Context, std stdio, pipes []*config.Pipeline, mode migrate.Mode, log *slog.Logger) (int, bool) {
	in, ok := std.In.(*os.File)
	if !ok || !stdinIsTerminal(in) {
		fmt.Fprintf(std.Err, "qbridge migrate: a %s changes the brokers; pass -yes to confirm (there is no terminal to ask on), or try -dry-run first\n", mode)
		return migrate.ExitUsage, false
	}
	verb := "Move every message (each is acknowledged at the source once written: a queue is emptied; a JetStream stream keeps them unless its retention is work-queue, and the durable consumer moves past them)"
	if mode == migrate.ModeCopy {
		verb = "Copy every message (the source stays as it is)"
	}
	fmt.Fprintf(std.Err, "%s:\n", verb)
	for _, p := range pipes {
		fmt.Fprintf(std.Err, "  %s: %s → %s, %s\n", p.Name, p.Spec.Source.Kind, p.Spec.Sink.Kind, sourceCount(ctx, p, log))
	}
	fmt.Fprint(std.Err, "Go on? [y/N] ")
	// The answer is read aside, so that Ctrl-C at the prompt ends it: the
	// first signal only cancels ctx. The reader goroutine ends with the
	// process, which exits next.
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- line
	}()
	var line string
	select {
	case line = <-answer:
	case <-ctx.Done():
		fmt.Fprintln(std.Err, "\nqbridge migrate: interrupted at the prompt; nothing was done")
		return migrate.ExitInterrupted, false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return 0, true
	}
	// Not confirmed, as a move without -yes and no terminal: nothing ran,
	// so not "failed" (1).
	fmt.Fprintln(std.Err, "qbridge migrate: not confirmed; nothing was done")
	return migrate.ExitUsage, false
}

// isStdout reports whether path names the file standard output writes to
// (/dev/stdout, /proc/self/fd/1, or the file it was sent to).
func isStdout(stdout io.Writer, path string) bool {
	f, ok := stdout.(*os.File)
	if !ok || path == "" {
		return false
	}
	fo, errO := f.Stat()
	fp, errP := os.Stat(path)
	return errO == nil && errP == nil && os.SameFile(fo, fp)
}

// sameFile reports whether two paths name one file: the same path once
// cleaned and made absolute, or the same existing file.
func sameFile(a, b string) bool {
	a, _, _ = migrate.ResolveLinks(a) // a link to a file not written yet
	b, _, _ = migrate.ResolveLinks(b)
	aa, errA := filepath.Abs(a)
	bb, errB := filepath.Abs(b)
	if errA == nil && errB == nil && aa == bb {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

func sourceCount(ctx context.Context, p *config.Pipeline, log *slog.Logger) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := p.CountSource(cctx, log)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return "the source cannot count its messages"
	case err != nil:
		return fmt.Sprintf("the source could not be counted (%v)", err)
	}
	s := fmt.Sprintf("%d messages at the source", b.Pending())
	if b.DeadLetter > 0 {
		s += fmt.Sprintf(", %d in its dead-letter queue", b.DeadLetter)
	}
	return s
}

// warnSampled says, before a dry run, which sources are sampled and what
// that costs.
func warnSampled(w io.Writer, pipes []*config.Pipeline, sample int64) {
	for _, p := range pipes {
		if _, err := p.WithBrowsingSource(0); err == nil {
			continue
		}
		fmt.Fprintf(w, "qbridge migrate: pipeline %s: %s source cannot be read without receiving, so the dry run reads a sample of at most %d messages (-sample) and hands them back; %s\n",
			p.Name, config.AKind(p.Spec.Source.Kind), sample, sampleCost(p.Spec.Source.Kind))
	}
}

// sampleCost says what handing a sampled message back costs at a source
// of kind, in the broker's terms.
func sampleCost(kind string) string {
	switch kind {
	case "sqs":
		return "each one counts as a receive (ApproximateReceiveCount, which a redrive policy may act on)"
	case "servicebus":
		return "each one counts as a delivery (DeliveryCount: at MaxDeliveryCount Service Bus dead-letters it, so do not repeat dry runs many times), and on a session entity the sample comes from at most sessions.max_concurrent sessions"
	case "amqp":
		return "on a RabbitMQ quorum queue each one counts as a delivery (at its delivery-limit RabbitMQ drops or dead-letters the message, so do not repeat dry runs many times); a classic queue counts nothing"
	}
	return "each one counts as a delivery where the broker counts them (a redelivery limit may act on it)"
}

// holdServers starts the embedded servers of pipes for the whole run and
// returns their release. Without it the counts before and after each
// pipeline, and the pipeline itself, each started and stopped the server:
// its store recovered three times over, its port closed in between. A
// server that does not start is left to the pipeline that needs it, whose
// open says why (and the job's report with it).
func holdServers(pipes []*config.Pipeline, log *slog.Logger) (release func()) {
	var releases []func()
	// As the jobs will run them: a hold of a source's server would make
	// its stream (create_stream), which a migration never does.
	forMigration := make([]*config.Pipeline, len(pipes))
	for i, p := range pipes {
		forMigration[i] = p.ForMigration()
	}
	for _, s := range (&config.Config{Pipelines: forMigration}).Servers() {
		if _, rel, err := s.Hold(log); err == nil {
			releases = append(releases, rel)
		}
	}
	return func() {
		for _, rel := range slices.Backward(releases) {
			rel()
		}
	}
}
