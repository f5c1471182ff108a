package config

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// KnownKinds are the adapter kinds qbridge has or plans. A configuration
// naming one that this build lacks gets "not available in this build"
// rather than "unknown".
var KnownKinds = []string{"amqp", "nats", "servicebus", "sqs"}

// AKind names an adapter kind for a sentence, with its article: "an SQS",
// "a Service Bus". The article goes by how the name is said, not by its
// first letter (it said "a sqs source").
func AKind(kind string) string {
	switch kind {
	case "sqs":
		return "an SQS"
	case "amqp":
		return "an AMQP"
	case "servicebus":
		return "a Service Bus"
	case "nats":
		return "a NATS"
	}
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// AdapterKind describes one adapter kind for Register, following the adapters'
// convention: package adapters/<kind> exports SourceConfig and SinkConfig
// (gohcl-tagged, each with a Validate() error method) and the two
// constructors.
type AdapterKind[S, K any] struct {
	Name      string
	NewSource func(ctx context.Context, cfg S, log *slog.Logger) (driver.Source, error)
	// NewSink's onDrop is the engine's drop callback (logged and counted
	// per pipeline): runtime state, so an argument rather than a field of
	// the configuration, which stays a value decoded once and shared.
	NewSink func(ctx context.Context, cfg K, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error)
	// SinkMapping copies the pipeline's mapping options (policy, size limit,
	// carry-source; not the drop callback) into the sink's configuration,
	// whose untagged fields hold them.
	SinkMapping func(cfg *K, opt mapping.Options)
	// SourceMapping does the same for a source that takes options (optional).
	SourceMapping func(cfg *S, opt mapping.Options)
	// Feeds reports whether a sink provably writes into what the source
	// reads (same server and entity), why naming both, for config to refuse
	// a pipeline or dead-letter sink that would pass its messages around
	// forever. It must answer true only when certain (optional).
	Feeds func(src S, sink K) (why string, loops bool)
	// SourceLock names the lock the source's broker holds on a delivery and
	// its duration where the configuration says (JetStream ack_wait, SQS
	// visibility_timeout); 0 where it does not. config refuses a lock
	// block whose extend_every is not shorter (optional).
	SourceLock func(cfg S) (name string, d time.Duration)
	// NoNativeDeadLetter says why a source of this configuration has no
	// dead-letter queue of its own ("" where it has one), for config to
	// refuse dead_letter { native = true } at load instead of nacking
	// each message at run time (optional: nil where every source has one).
	NoNativeDeadLetter func(cfg S) string
	// SourceServer and SinkServer name a server that blocks of this kind
	// start in the process and share (an embedded NATS server): key
	// names it ("" for none), and every block with that key must have the
	// same settings, since the first to open starts it; described says
	// what they are, without secrets. nil where the kind starts none.
	// listen is the address the server takes where the block fixes it
	// ("" where it does not): two servers cannot share one.
	SourceServer func(cfg S) (key, settings, described, listen string)
	SinkServer   func(cfg K) (key, settings, described, listen string)
	// HoldSourceServer and HoldSinkServer start, or join, that server and
	// return once it accepts connections, with where (no secrets) and the
	// release of the hold: the daemon holds each from its start, so that
	// it listens while the pipelines using it wait for their other side.
	// nil where the kind starts none.
	HoldSourceServer func(cfg S, log *slog.Logger) (where string, release func(), err error)
	HoldSinkServer   func(cfg K, log *slog.Logger) (where string, release func(), err error)

	// What qbridge migrate needs; each optional (nil: the kind cannot).

	// CountSource and CountSink ask the broker how many messages the
	// configured entity holds, on a connection of their own. An entity
	// that cannot be counted (a core NATS subject) gives an error wrapping
	// errors.ErrUnsupported: migrate then decides "drained" by idle time.
	CountSource func(ctx context.Context, cfg S, log *slog.Logger) (driver.Backlog, error)
	CountSink   func(ctx context.Context, cfg K, log *slog.Logger) (driver.Backlog, error)
	// Browse returns cfg changed so that its source reads without settling
	// (driver.Browser), starting after position after (0: from the first
	// message), or an error wrapping driver.ErrCannotBrowse.
	Browse func(cfg S, after uint64) (S, error)
	// DeadLetterSource returns cfg changed to read the entity's dead-letter
	// queue, or an error wrapping driver.ErrNoDeadLetterQueue.
	DeadLetterSource func(ctx context.Context, cfg S, log *slog.Logger) (S, error)
	// ForMigration returns cfg changed so that its source never creates
	// the entity it reads (a JetStream source's create_stream): a
	// migration of a mistyped name must fail, not find it empty.
	ForMigration func(cfg S) S
	// NewDrySink opens a sink that encodes every message exactly as
	// NewSink's would (same checks, limits, policy and drop reports) and
	// sends nothing: Send returns the encoder's verdict per message.
	NewDrySink func(ctx context.Context, cfg K, onDrop func(field, reason string), log *slog.Logger) (driver.Sink, error)
	// SourceIdentity names what a source reads and where, for people and
	// for comparison: the server (normalized, no credentials) and the
	// entity (queue, stream and consumer, sub-queue). Copy checkpoints are
	// kept with it, so that one source's position is never applied to
	// another. Settings that change how, not what, it reads stay out.
	SourceIdentity func(cfg S) string
	// SinkIdentity names what a sink writes to and where, as its count
	// (CountSink) sees it: the server and the entity, or the server alone
	// where the entity is a template or known only to the server. qbridge
	// migrate runs two pipelines at once only when their sinks' identities
	// differ, so that each one's counts bracket its own writes.
	SinkIdentity func(cfg K) string
}

// kind is the type-erased registry entry.
type kind struct {
	name string
	// decode reads and validates an adapter block body; opt are the mapping
	// options to apply before validation (OnDrop nil). open passes
	// opt.OnDrop to the constructor.
	decodeSource func(body hcl.Body, ctx *hcl.EvalContext, opt mapping.Options) (any, hcl.Diagnostics, error)
	decodeSink   func(body hcl.Body, ctx *hcl.EvalContext, opt mapping.Options) (any, hcl.Diagnostics, error)
	openSource   func(ctx context.Context, cfg any, log *slog.Logger) (driver.Source, error)
	openSink     func(ctx context.Context, cfg any, opt mapping.Options, log *slog.Logger) (driver.Sink, error)
	// feeds is AdapterKind.Feeds; nil where the kind has none.
	feeds func(src, sink any) (why string, loops bool)
	// server is AdapterKind.SourceServer or SinkServer, by role ("source"
	// or "sink"); nil where the kind starts none.
	server func(role string, cfg any) (key, settings, described, listen string)
	// holdServer is AdapterKind.HoldSourceServer or HoldSinkServer, by
	// role; nil where the kind starts none.
	holdServer func(role string, cfg any, log *slog.Logger) (where string, release func(), err error)
	// sourceLock is AdapterKind.SourceLock; nil where the kind has none.
	sourceLock func(cfg any) (name string, d time.Duration)
	// noNativeDeadLetter is AdapterKind.NoNativeDeadLetter; nil where the
	// kind has none.
	noNativeDeadLetter func(cfg any) string

	// Migration hooks; nil where the kind has none.
	countSource      func(ctx context.Context, cfg any, log *slog.Logger) (driver.Backlog, error)
	countSink        func(ctx context.Context, cfg any, log *slog.Logger) (driver.Backlog, error)
	browse           func(cfg any, after uint64) (any, error)
	deadLetterSource func(ctx context.Context, cfg any, log *slog.Logger) (any, error)
	forMigration     func(cfg any) any
	openDrySink      func(ctx context.Context, cfg any, opt mapping.Options, log *slog.Logger) (driver.Sink, error)
	sourceIdentity   func(cfg any) string
	sinkIdentity     func(cfg any) string
}

type validator interface{ Validate() error }

var (
	registryMu sync.RWMutex
	registry   = map[string]*kind{}
)

// Register adds an adapter kind. It panics on a programming error: a
// duplicate kind, a missing constructor, or config types without Validate.
func Register[S, K any](a AdapterKind[S, K]) {
	if a.Name == "" || a.NewSource == nil || a.NewSink == nil || a.SinkMapping == nil {
		panic("config.Register: Name, NewSource, NewSink and SinkMapping are required")
	}
	if _, ok := any(new(S)).(validator); !ok {
		panic(fmt.Sprintf("config.Register(%q): %T has no Validate() error method", a.Name, *new(S)))
	}
	if _, ok := any(new(K)).(validator); !ok {
		panic(fmt.Sprintf("config.Register(%q): %T has no Validate() error method", a.Name, *new(K)))
	}
	k := &kind{
		name: a.Name,
		decodeSource: func(body hcl.Body, ctx *hcl.EvalContext, opt mapping.Options) (any, hcl.Diagnostics, error) {
			var cfg S
			if diags := gohcl.DecodeBody(body, ctx, &cfg); diags.HasErrors() {
				return nil, suggestNames(diags, body, reflect.TypeFor[S]()), nil
			}
			if a.SourceMapping != nil {
				a.SourceMapping(&cfg, opt)
			}
			return cfg, nil, any(&cfg).(validator).Validate()
		},
		decodeSink: func(body hcl.Body, ctx *hcl.EvalContext, opt mapping.Options) (any, hcl.Diagnostics, error) {
			var cfg K
			if diags := gohcl.DecodeBody(body, ctx, &cfg); diags.HasErrors() {
				return nil, suggestNames(diags, body, reflect.TypeFor[K]()), nil
			}
			a.SinkMapping(&cfg, opt)
			return cfg, nil, any(&cfg).(validator).Validate()
		},
		openSource: func(ctx context.Context, cfg any, log *slog.Logger) (driver.Source, error) {
			return a.NewSource(ctx, cfg.(S), log)
		},
		openSink: func(ctx context.Context, cfg any, opt mapping.Options, log *slog.Logger) (driver.Sink, error) {
			c := cfg.(K)
			a.SinkMapping(&c, opt)
			return a.NewSink(ctx, c, opt.OnDrop, log)
		},
	}
	if a.Feeds != nil {
		k.feeds = func(src, sink any) (string, bool) {
			s, okS := src.(S)
			t, okK := sink.(K)
			if !okS || !okK {
				return "", false
			}
			return a.Feeds(s, t)
		}
	}
	if a.SourceServer != nil || a.SinkServer != nil {
		k.server = func(role string, cfg any) (string, string, string, string) {
			if c, ok := cfg.(S); ok && role == "source" && a.SourceServer != nil {
				return a.SourceServer(c)
			}
			if c, ok := cfg.(K); ok && role == "sink" && a.SinkServer != nil {
				return a.SinkServer(c)
			}
			return "", "", "", ""
		}
	}
	if a.HoldSourceServer != nil || a.HoldSinkServer != nil {
		k.holdServer = func(role string, cfg any, log *slog.Logger) (string, func(), error) {
			if c, ok := cfg.(S); ok && role == "source" && a.HoldSourceServer != nil {
				return a.HoldSourceServer(c, log)
			}
			if c, ok := cfg.(K); ok && role == "sink" && a.HoldSinkServer != nil {
				return a.HoldSinkServer(c, log)
			}
			return "", nil, nil
		}
	}
	if a.SourceLock != nil {
		k.sourceLock = func(cfg any) (string, time.Duration) {
			c, ok := cfg.(S)
			if !ok {
				return "", 0
			}
			return a.SourceLock(c)
		}
	}
	if a.NoNativeDeadLetter != nil {
		k.noNativeDeadLetter = func(cfg any) string {
			if c, ok := cfg.(S); ok {
				return a.NoNativeDeadLetter(c)
			}
			return ""
		}
	}
	if a.CountSource != nil {
		k.countSource = func(ctx context.Context, cfg any, log *slog.Logger) (driver.Backlog, error) {
			return a.CountSource(ctx, cfg.(S), log)
		}
	}
	if a.CountSink != nil {
		k.countSink = func(ctx context.Context, cfg any, log *slog.Logger) (driver.Backlog, error) {
			return a.CountSink(ctx, cfg.(K), log)
		}
	}
	if a.Browse != nil {
		k.browse = func(cfg any, after uint64) (any, error) { return a.Browse(cfg.(S), after) }
	}
	if a.DeadLetterSource != nil {
		k.deadLetterSource = func(ctx context.Context, cfg any, log *slog.Logger) (any, error) {
			return a.DeadLetterSource(ctx, cfg.(S), log)
		}
	}
	if a.ForMigration != nil {
		k.forMigration = func(cfg any) any { return a.ForMigration(cfg.(S)) }
	}
	if a.NewDrySink != nil {
		k.openDrySink = func(ctx context.Context, cfg any, opt mapping.Options, log *slog.Logger) (driver.Sink, error) {
			c := cfg.(K)
			a.SinkMapping(&c, opt)
			return a.NewDrySink(ctx, c, opt.OnDrop, log)
		}
	}
	if a.SourceIdentity != nil {
		k.sourceIdentity = func(cfg any) string { return a.SourceIdentity(cfg.(S)) }
	}
	if a.SinkIdentity != nil {
		k.sinkIdentity = func(cfg any) string { return a.SinkIdentity(cfg.(K)) }
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[a.Name]; dup {
		panic(fmt.Sprintf("config.Register: kind %q registered twice", a.Name))
	}
	registry[a.Name] = k
}

func lookupKind(name string) *kind {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return registry[name]
}

// Kinds returns the adapter kinds of this build, sorted.
func Kinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// kindDiag explains why name is not an adapter kind of this build.
func kindDiag(role, name string, rng hcl.Range) *hcl.Diagnostic {
	have := strings.Join(quoteAll(Kinds()), ", ")
	if slices.Contains(KnownKinds, name) {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Adapter kind %q is not available in this build", name),
			Detail:   fmt.Sprintf("This qbridge binary has the adapter kinds %s.", have),
			Subject:  rng.Ptr(),
		}
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Unknown adapter kind %q", name),
		Detail:   fmt.Sprintf("The %s block's label names its adapter: one of %s.", role, have),
		Subject:  rng.Ptr(),
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
