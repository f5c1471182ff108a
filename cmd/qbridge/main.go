// Command qbridge bridges messages between Amazon SQS, Azure Service Bus,
// AMQP 1.0 brokers and NATS, keeping their typed attributes, ids, trace
// context and per-group order. "qbridge run" is the daemon; the other
// commands are tools around it. Run "qbridge help" for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/qbridge/qbridge/internal/config"
)

// stdio is a command's standard streams, so tests can capture them.
type stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// command is one subcommand. Run returns the exit code: 0 success, 1
// failure, 2 usage error.
type command struct {
	Summary string
	Run     func(ctx context.Context, args []string, io stdio) int
}

// commands is filled from init() by each command's file.
var commands = map[string]command{}

func register(name string, c command) {
	if _, dup := commands[name]; dup {
		panic("qbridge: command " + name + " registered twice")
	}
	commands[name] = c
}

// atExit runs before the process exits (the pprof build's profile writer).
var atExit = func() {}

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

func init() {
	register("version", command{Summary: "print the version and the adapters of this build", Run: runVersion})
}

func main() {
	setMemoryLimit()
	setGCFloor()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &signalWatcher{cancel: cancel, exit: func(code int) { // ends with the process
		atExit()
		os.Exit(code)
	}}
	go w.watch(sigs)
	ctx = withSignalWatcher(ctx, w)
	code := dispatch(ctx, os.Args[1:], stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	cancel(nil)
	atExit()
	os.Exit(code)
}

// signalWatcher is the process's one handler of stop signals (SIGINT,
// SIGTERM). The first cancels the command's context, with a stopSignal as
// its cause; a second one ends the process at once, 128 + the signal as a
// shell reports a kill by it, unless the command took it (takeSecond:
// "qbridge run" logs it and exits 1). Restoring the default disposition
// instead brought back an ignore the process inherited: started with nohup
// or in the background of a script, SIGINT is ignored, and the second
// Ctrl-C did nothing.
type signalWatcher struct {
	cancel context.CancelCauseFunc
	exit   func(code int)

	mu     sync.Mutex
	second chan os.Signal // a command's, from takeSecond; nil: exit
}

// stopSignal is the cause of a context cancelled by a stop signal.
type stopSignal struct{ os.Signal }

func (s stopSignal) Error() string { return "stop signal " + s.String() }

// watch handles sigs until the second signal, or until sigs is closed.
func (w *signalWatcher) watch(sigs <-chan os.Signal) {
	s, ok := <-sigs
	if !ok {
		return
	}
	w.cancel(stopSignal{s})
	if s, ok = <-sigs; !ok {
		return
	}
	w.mu.Lock()
	second := w.second
	w.mu.Unlock()
	if second != nil {
		second <- s // buffered; the one send
		return
	}
	code := 1
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	w.exit(code)
}

// takeSecond hands the second stop signal to the command instead of
// ending the process.
func (w *signalWatcher) takeSecond() <-chan os.Signal {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.second == nil {
		w.second = make(chan os.Signal, 1)
	}
	return w.second
}

type signalWatcherKey struct{}

func withSignalWatcher(ctx context.Context, w *signalWatcher) context.Context {
	return context.WithValue(ctx, signalWatcherKey{}, w)
}

// takeSecondSignal is ctx's watcher's takeSecond; nil (never ready) when
// no watcher handles the process's signals (a test).
func takeSecondSignal(ctx context.Context) <-chan os.Signal {
	if w, ok := ctx.Value(signalWatcherKey{}).(*signalWatcher); ok {
		return w.takeSecond()
	}
	return nil
}

// dispatch runs the command named by args[0].
func dispatch(ctx context.Context, args []string, std stdio) int {
	if len(args) == 0 {
		usage(std.Err)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				c.Run(ctx, []string{"-h"}, std) // prints the command's usage
				return 0
			}
		}
		usage(std.Out)
		return 0
	case "-version", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(std.Err, "qbridge: unknown command %q\n\n", name)
		usage(std.Err)
		return 2
	}
	if len(args) == 2 && isHelpFlag(args[1]) {
		// Asked for help is not a usage error, whatever the command returns.
		c.Run(ctx, args[1:], std)
		return 0
	}
	return c.Run(ctx, args[1:], std)
}

func isHelpFlag(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func usage(w io.Writer) {
	fmt.Fprint(w, `qbridge moves messages between Amazon SQS, Azure Service Bus, AMQP 1.0 and NATS.

Usage:
  qbridge COMMAND [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprint(w, `
Run "qbridge COMMAND -h" for a command's flags.
`)
}

// parseArgs parses args into fs with the flags anywhere among the
// arguments ("validate FILE -strict", "migrate FILE -yes"): the flag
// package stops at the first argument, and a flag after it was taken for
// a path. After "--" everything is an argument (a BODY that begins with
// '-'). fs.Args() then holds the arguments in their order.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" && !takesValue(fs, args[:n-1]) {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// takesValue reports whether the last of before is a flag that takes the
// argument after it as its value ("-subject --": the "--" is the subject,
// not the end of the flags).
func takesValue(fs *flag.FlagSet, before []string) bool {
	if len(before) == 0 {
		return false
	}
	a := before[len(before)-1]
	name, ok := strings.CutPrefix(a, "-")
	if !ok || strings.Contains(a, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// parseExit is the exit code after fs.Parse failed: 0 when the user asked
// for the help (-h), 2 for a usage error.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func runVersion(_ context.Context, args []string, std stdio) int {
	if len(args) > 0 {
		fmt.Fprint(std.Err, "usage: qbridge version\n\nPrints the version, the Go toolchain and the adapter kinds of this binary.\n\nExample:\n  qbridge version\n")
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	fmt.Fprintf(std.Out, "qbridge %s (%s %s/%s)\nadapters: %s\n",
		buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.Join(config.Kinds(), ", "))
	return 0
}

// buildVersion prefers the -ldflags version, then the module version that
// "go install ...@vX" records.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}
