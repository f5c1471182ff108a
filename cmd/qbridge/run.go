package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/bridge/monitor"
	"github.com/qbridge/qbridge/internal/config"
	"github.com/qbridge/qbridge/internal/telemetry"
)

func init() {
	register("run", command{Summary: "run the bridge daemon", Run: runRun})
}

func runRun(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	path := fs.String("config", "", "configuration file, or directory of *.hcl files (or give it as the argument)")
	var lf logFlags
	lf.register(fs)
	fs.Usage = func() {
		fmt.Fprint(std.Err, `usage: qbridge run [-log-format text|json] [-log-level L] [-config] FILE_OR_DIR

Runs the pipelines of the configuration until SIGTERM or SIGINT, then drains
them (in-flight messages are finished or handed back) and exits 0. SIGHUP
reloads the configuration: unchanged pipelines keep running, changed and
removed ones are drained, new ones started; an invalid configuration is
logged and the running one kept.

-log-format and -log-level win over $QBRIDGE_LOG_FORMAT and
$QBRIDGE_LOG_LEVEL, which win over the configuration's log block.

Example:
  qbridge run configs/quickstart.hcl
  qbridge run -log-format json -config /etc/qbridge/

`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return parseExit(err)
	}
	rest := fs.Args()
	if *path == "" && len(rest) > 0 {
		*path, rest = rest[0], rest[1:]
	}
	switch {
	case *path == "":
		fmt.Fprintln(std.Err, "qbridge run: which configuration? give a file or directory (qbridge run -h for help)")
		return 2
	case len(rest) != 0:
		fmt.Fprintf(std.Err, "qbridge run: one configuration path, not also %q (a directory runs all its *.hcl files)\n", rest[0])
		return 2
	}
	if err := lf.resolve(); err != nil {
		fmt.Fprintln(std.Err, "qbridge run:", err)
		return 2
	}
	// SIGINT and SIGTERM come from main's watcher: the first cancels ctx
	// (the drain), the second comes here (cut the drain short).
	second := takeSecondSignal(ctx)
	hup := make(chan os.Signal, 4)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d := &daemon{path: *path, std: std, signals: hup, second: second, logOverride: lf}
	return d.run(ctx)
}

// daemon is one "qbridge run".
type daemon struct {
	path string
	std  stdio
	// signals are SIGHUPs (reload); second is the second stop signal (the
	// first cancels run's ctx).
	signals, second <-chan os.Signal
	// listening, if set, is told the monitoring address (tests use port 0).
	listening func(net.Addr)
	// backlogInterval is how often sources are counted (0: the default).
	backlogInterval time.Duration

	// logOverride holds the -log-* flags and QBRIDGE_LOG_* variables,
	// which win over the configuration's log block.
	logOverride logFlags

	log   *slog.Logger
	level *slog.LevelVar
	tel   *telemetry.Tracing // nil: tracing off
	cfgMu sync.Mutex         // guards cfg: /readyz reads it during a reload
	cfg   *config.Config     // the configuration running
	holds *serverHolds       // the embedded servers cfg starts

	// What the last reload did, as Prometheus itself reports its own:
	// a failed SIGHUP was only an ERROR log line.
	reloadOK, reloadOKAt prometheus.Gauge
}

// run returns the exit code: 0 after a graceful stop, 1 if the daemon
// cannot start or a second signal cut the drain short.
func (d *daemon) run(ctx context.Context) int {
	l := config.NewLoader()
	cfg, diags := l.Load(d.path)
	if lg := d.jsonStartLog(cfg); lg != nil {
		// JSON logs are read by a program: the diagnostics are lines of
		// the log, as on reload, not the HCL snippets among the JSON.
		logDiagnostics(lg, diags)
		if diags.HasErrors() {
			lg.Error("the configuration has errors; nothing was started", "config", d.path, "errors", len(diags.Errs()))
			return 1
		}
	} else if err := config.WriteDiagnostics(d.std.Err, l.Files(), diags); err != nil || diags.HasErrors() {
		fmt.Fprintln(d.std.Err, "qbridge run: the configuration has errors; nothing was started")
		return 1
	}
	d.logOverride.apply(&cfg.Log)
	d.cfg = cfg
	d.level = new(slog.LevelVar)
	d.level.Set(cfg.Log.Level)
	d.log = newLogger(d.std.Err, cfg.Log.Format, d.level)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "qbridge_build_info", Help: "Always 1; the labels say which qbridge build runs.",
	}, []string{"version", "go_version"})
	buildInfo.WithLabelValues(buildVersion(), runtime.Version()).Set(1)
	backlog := monitor.NewBacklog(d.log)
	d.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qbridge_config_last_reload_successful",
		Help: "1 if the last configuration reload (SIGHUP) succeeded or none was tried, 0 if it failed and the previous configuration still runs.",
	})
	d.reloadOK.Set(1)
	d.reloadOKAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qbridge_config_last_reload_success_timestamp_seconds",
		Help: "When the running configuration was loaded: at the start or by the last successful reload.",
	})
	d.reloadOKAt.SetToCurrentTime()
	reg.MustRegister(buildInfo, backlog, d.reloadOK, d.reloadOKAt)
	sup := bridge.NewSupervisor(d.log, bridge.NewMetrics(reg))

	// Not ready until the pipelines are set up: an empty supervisor would
	// say it is.
	var started atomic.Bool
	ready := func(ctx context.Context) monitor.Readiness {
		if !started.Load() {
			return monitor.Readiness{Err: errors.New("starting")}
		}
		return d.readiness(ctx, sup)
	}
	reg.MustRegister(monitor.NewReadyCollector(ready))
	d.holds = newServerHolds(d.log)
	// Started: the pipelines are set up and the embedded servers listen;
	// not what the pipelines' brokers do (that is /readyz).
	startup := func() monitor.Startup {
		if !started.Load() {
			return monitor.Startup{Err: errors.New("starting")}
		}
		return d.holds.startup()
	}
	srv, err := monitor.Listen(cfg.HTTP.Listen, monitor.Handler(reg, ready, startup), d.log)
	if err != nil {
		d.log.Error("cannot start the monitoring endpoints", "error", err)
		return 1
	}
	if d.listening != nil {
		d.listening(srv.Addr())
	}
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(srvCtx) }()
	defer func() {
		stopSrv()
		if err := <-srvDone; err != nil {
			d.log.Warn("monitoring endpoints", "error", err)
		}
	}()

	tel, stopTel, err := telemetry.FromEnv(context.WithoutCancel(ctx), buildVersion(), d.log)
	if err != nil {
		d.log.Error("cannot set up tracing (OTEL_* variables)", "error", err)
		return 1
	}
	if tel != nil {
		d.log.Info("tracing on: spans go to the OTLP endpoint of the OTEL_* variables")
	}
	d.tel = tel
	defer func() {
		// Flush what the exporter holds; a collector that is gone costs
		// at most this long.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTel(fctx); err != nil {
			d.log.Warn("flushing traces", "error", err)
		}
	}()

	// Released at the return, after sup.Stop: a sidecar's app drains into
	// the servers first (a second stop signal returns sooner, and the
	// pipelines still draining keep theirs up).
	defer d.holds.close()
	defs, err := cfg.Definitions(d.log)
	if err == nil {
		err = sup.Apply(d.traced(cfg, defs))
	}
	if err != nil {
		d.log.Error("cannot start the pipelines", "error", err)
		return 1
	}
	d.holds.sync(cfg, true)
	started.Store(true)
	d.log.Info("qbridge running", "version", buildVersion(), "config", d.path, "pipelines", sup.Names(),
		"memory_limit_bytes", memoryLimit(), "gc_floor_bytes", gcFloorBytes)
	if memoryLimitErr != nil {
		d.log.Warn("the container's memory limit could not be read; set GOMEMLIMIT to bound the heap", "error", memoryLimitErr)
	}
	interval := d.backlogInterval
	if interval == 0 {
		interval = monitor.BacklogInterval
	}
	pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
	pollDone := make(chan struct{})
	go func() { backlog.Run(pollCtx, interval, d.counters); close(pollDone) }()
	defer func() { stopPoll(); <-pollDone }()
	// Outages are logged as they begin and end, not only shown on
	// /readyz; not once the drain begins (stopping is not an outage).
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watchDone := make(chan struct{})
	go func() { monitor.LogReadiness(watchCtx, monitor.ReadyLogInterval, ready, d.log); close(watchDone) }()
	defer func() { stopWatch(); <-watchDone }()

	for stopping := false; !stopping; {
		select {
		case <-ctx.Done():
			if sig, ok := errors.AsType[stopSignal](context.Cause(ctx)); ok {
				d.log.Info("stop requested; draining pipelines", "signal", sig.String())
			} else {
				d.log.Info("stop requested; draining pipelines")
			}
			stopping = true
		case <-d.signals:
			d.reload(sup)
			backlog.Refresh() // the reload's pipelines get (or lose) their series now
		}
	}

	stopWatch()
	stopped := make(chan struct{})
	go func() {
		sup.Stop()
		close(stopped)
	}()
	for {
		select {
		case <-stopped:
			d.log.Info("qbridge stopped")
			return 0
		case <-d.signals: // no reload while stopping
		case s := <-d.second:
			// Unsettled messages come back from the brokers when their
			// locks lapse: nothing is lost, some may be redelivered.
			d.log.Error("second stop signal; exiting without finishing the drain", "signal", s.String())
			return 1
		}
	}
}

// traced gives each pipeline's source and sink their spans when tracing is
// on (telemetry wraps the openers; the engine and the Specs that decide
// restarts are untouched).
func (d *daemon) traced(cfg *config.Config, defs []bridge.Definition) []bridge.Definition {
	if d.tel == nil {
		return defs
	}
	byName := map[string]*config.Pipeline{}
	for _, p := range cfg.Pipelines {
		byName[p.Name] = p
	}
	for i, def := range defs {
		if p := byName[def.Config.Name]; p != nil {
			var dlq telemetry.Endpoint
			if a := p.Spec.DeadLetter.Sink; a != nil {
				dlq = telemetry.EndpointOf(a.Kind, a.Config)
			}
			defs[i].Config = d.tel.Wrap(def.Config,
				telemetry.EndpointOf(p.Spec.Source.Kind, p.Spec.Source.Config),
				telemetry.EndpointOf(p.Spec.Sink.Kind, p.Spec.Sink.Config), dlq)
		}
	}
	return defs
}

// counters are the backlog gauge's counts, one per configured pipeline.
func (d *daemon) counters() []monitor.Counter {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	cs := make([]monitor.Counter, 0, len(d.cfg.Pipelines))
	for _, p := range d.cfg.Pipelines {
		cs = append(cs, monitor.Counter{Pipeline: p.Name, Count: func(ctx context.Context) (driver.Backlog, error) {
			return p.CountSource(ctx, d.log.With("pipeline", p.Name))
		}})
	}
	return cs
}

// readiness is /readyz's report: each pipeline's state, with the ones
// whose configuration says readiness = "ignored" marked so.
func (d *daemon) readiness(ctx context.Context, sup *bridge.Supervisor) monitor.Readiness {
	d.cfgMu.Lock()
	ignored := map[string]bool{}
	for _, p := range d.cfg.Pipelines {
		ignored[p.Name] = p.Readiness == config.ReadinessIgnored
	}
	d.cfgMu.Unlock()
	var r monitor.Readiness
	for _, p := range sup.ReadyEach(ctx) {
		r.Pipelines = append(r.Pipelines, monitor.PipelineReadiness{Name: p.Name, Err: p.Err, Ignored: ignored[p.Name], Warnings: p.Warnings})
	}
	return r
}

// reload applies the configuration file again; on any error the running
// configuration stays.
func (d *daemon) reload(sup *bridge.Supervisor) {
	d.log.Info("reloading the configuration", "config", d.path)
	l := config.NewLoader()
	cfg, diags := l.Load(d.path)
	logDiagnostics(d.log, diags)
	if diags.HasErrors() {
		d.reloadOK.Set(0)
		d.log.Error("configuration reload failed; the running configuration stays", "errors", len(diags.Errs()))
		return
	}
	defs, err := cfg.Definitions(d.log)
	if err == nil {
		// Release the servers this configuration changes or drops before
		// their pipelines stop, so that their new versions can start.
		d.holds.sync(cfg, false)
		err = sup.Apply(d.traced(cfg, defs))
		// Hold the servers of whichever configuration runs now.
		running := cfg
		if err != nil {
			running = d.cfg
		}
		d.holds.sync(running, true)
	}
	if err != nil {
		d.reloadOK.Set(0)
		d.log.Error("configuration reload failed; the running configuration stays", "error", err)
		return
	}
	d.reloadOK.Set(1)
	d.reloadOKAt.SetToCurrentTime()
	d.logOverride.apply(&cfg.Log)
	if cfg.Log.Format != d.cfg.Log.Format || cfg.HTTP != d.cfg.HTTP {
		d.log.Warn("log.format and http.listen take effect at the next start, not on reload")
	}
	d.level.Set(cfg.Log.Level)
	cfg.Log.Format, cfg.HTTP = d.cfg.Log.Format, d.cfg.HTTP // what actually runs
	d.cfgMu.Lock()
	d.cfg = cfg
	d.cfgMu.Unlock()
	d.log.Info("configuration reloaded", "pipelines", sup.Names())
}

// jsonStartLog is the logger for the diagnostics of the configuration
// loaded at start when the logs are JSON (-log-format, QBRIDGE_LOG_FORMAT,
// else the log block of a configuration that loaded), else nil.
func (d *daemon) jsonStartLog(cfg *config.Config) *slog.Logger {
	l := config.Log{Level: slog.LevelInfo}
	if cfg != nil {
		l = cfg.Log
	}
	d.logOverride.apply(&l)
	if l.Format != "json" {
		return nil
	}
	return newLogger(d.std.Err, l.Format, l.Level)
}

// logDiagnostics logs the configuration's problems, one line each.
func logDiagnostics(log *slog.Logger, diags hcl.Diagnostics) {
	for _, dg := range diags {
		level := slog.LevelError
		if dg.Severity == hcl.DiagWarning {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "configuration problem", "diagnostic", config.DiagnosticString(dg))
	}
}

func newLogger(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationText writes a duration in JSON logs as the text logs do
// ("1.077s"): slog's JSON handler writes bare nanoseconds, which whatever
// reads the logs cannot tell from any other number.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// logFlags are -log-format and -log-level, defaulting to
// $QBRIDGE_LOG_FORMAT and $QBRIDGE_LOG_LEVEL; empty fields leave the
// configuration's log block alone.
type logFlags struct {
	format, level string
	lvl           slog.Level
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "log-format", os.Getenv("QBRIDGE_LOG_FORMAT"), "log format, text or json (default $QBRIDGE_LOG_FORMAT, else the config's log.format)")
	fs.StringVar(&f.level, "log-level", os.Getenv("QBRIDGE_LOG_LEVEL"), "log level: debug, info, warn or error (default $QBRIDGE_LOG_LEVEL, else the config's log.level)")
}

// resolve checks the values, naming the flag (or variable) that is wrong.
func (f *logFlags) resolve() error {
	switch f.format {
	case "", "text", "json":
	default:
		return fmt.Errorf("-log-format (or QBRIDGE_LOG_FORMAT) %q: want text or json", f.format)
	}
	if f.level != "" {
		lvl, ok := config.ParseLogLevel(f.level)
		if !ok {
			return fmt.Errorf("-log-level (or QBRIDGE_LOG_LEVEL) %q: want debug, info, warn or error", f.level)
		}
		f.lvl = lvl
	}
	return nil
}

func (f logFlags) apply(l *config.Log) {
	if f.format != "" {
		l.Format = f.format
	}
	if f.level != "" {
		l.Level = f.lvl
	}
}
