package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

// Options are what "qbridge migrate" takes besides the configuration.
type Options struct {
	Mode Mode
	// IncludeDeadLetters also migrates the source's dead-letter queue,
	// after its main queue.
	IncludeDeadLetters bool
	// Rate caps messages per second taken from the source; 0 is no cap.
	Rate float64
	// Idle is how long the source must yield nothing, with nothing in
	// flight, before a count is trusted (or, for brokers that cannot
	// count, before the source counts as drained).
	Idle time.Duration
	// CountEvery paces the broker counts once the pipeline is quiet.
	CountEvery time.Duration
	// CountTimeout bounds one count (and the hand-back of a dry run's sample).
	CountTimeout time.Duration
	// Timeout ends the migration, not drained, after this long; 0 is none.
	Timeout time.Duration
	// VerifyWait is how long a sink that holds fewer messages than were
	// written to it is counted again before that is reported: SQS counts
	// are approximate and lag behind the writes.
	VerifyWait time.Duration
	// ConnectTimeout fails the migration when its adapters cannot be opened
	// for this long (a daemon retries forever; a job should say why).
	ConnectTimeout time.Duration
	// Sample bounds a dry run's read on sources that cannot browse (SQS,
	// AMQP brokers without copy mode): each message read there counts as
	// a delivery at the broker.
	Sample int64
	// StateFile keeps copy mode's checkpoints, so a copy resumes.
	StateFile string
	// Since and Until select messages by enqueue time (copy and dry run).
	Since, Until time.Time
	// Where selects messages by template conditions (copy and dry run).
	Where []Condition
	// RunID, when set, rewrites deduplication ids so a deliberate re-run
	// is not dropped by the sink's duplicate detection.
	RunID string
	// WaitScheduled waits for scheduled messages to become due instead of
	// finishing with them left at the source.
	WaitScheduled bool
	// Parallel is how many pipelines run at once (default 1: one after the
	// other). Pipelines that read or write the same entity still run one
	// after the other (see lanes).
	Parallel int
	// Log receives the pipelines' logs.
	Log *slog.Logger

	// pingEvery paces the pings of a source whose broker cannot count
	// (liveness); tests shorten it.
	pingEvery time.Duration
}

// withDefaults fills the zero values; a negative one is left for Validate
// to refuse (it used to become the default silently).
func (o *Options) withDefaults() {
	if o.Mode == "" {
		o.Mode = ModeMove
	}
	if o.Idle == 0 {
		o.Idle = 5 * time.Second
	}
	if o.CountEvery == 0 {
		o.CountEvery = time.Second
	}
	if o.CountTimeout == 0 {
		o.CountTimeout = 30 * time.Second
	}
	if o.VerifyWait == 0 {
		o.VerifyWait = verifyWait
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 2 * time.Minute
	}
	// A broker unreachable for the connect timeout fails the job: no count
	// needs to wait longer for it.
	if o.ConnectTimeout > 0 && o.CountTimeout > o.ConnectTimeout {
		o.CountTimeout = o.ConnectTimeout
	}
	if o.Sample == 0 {
		o.Sample = 100
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	if o.pingEvery == 0 {
		o.pingEvery = pingEvery
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Validate reports options that contradict each other.
func (o *Options) Validate() error {
	var errs []error
	switch o.Mode {
	case ModeMove, ModeCopy, ModeDryRun:
	default:
		errs = append(errs, fmt.Errorf("unknown mode %q", o.Mode))
	}
	filtered := !o.Since.IsZero() || !o.Until.IsZero() || len(o.Where) > 0
	if filtered && o.Mode == ModeMove {
		errs = append(errs, errors.New("-since, -until and -where select messages to copy or to dry-run: a move would have to hand every other message back to the source, which counts as a delivery on every broker (Service Bus dead-letters at MaxDeliveryCount); use -copy with the filter"))
	}
	if !o.Since.IsZero() && !o.Until.IsZero() && !o.Until.After(o.Since) {
		errs = append(errs, errors.New("-until must be after -since"))
	}
	if o.StateFile != "" && o.Mode != ModeCopy {
		errs = append(errs, errors.New("-state keeps copy mode's checkpoints: it goes with -copy (a move resumes from the source itself)"))
	}
	if o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		errs = append(errs, fmt.Errorf("-rate %v: want a number of messages per second, 0 for no cap", o.Rate))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-idle", o.Idle}, {"-timeout", o.Timeout}, {"-verify-wait", o.VerifyWait}, {"-connect-timeout", o.ConnectTimeout}, {"count interval", o.CountEvery}, {"count timeout", o.CountTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %s cannot be negative", d.flag, d.v))
		}
	}
	if o.Sample < 0 {
		errs = append(errs, errors.New("-sample cannot be negative"))
	}
	if o.Parallel < 0 {
		errs = append(errs, errors.New("-parallel cannot be negative"))
	}
	return errors.Join(errs...)
}

// Condition is one -where filter: a template compared with a value.
type Condition struct {
	Template *rules.Template
	Value    string
	Negate   bool
}

// ParseCondition reads "TEMPLATE==VALUE" or "TEMPLATE!=VALUE", such as
// "{attr.tenant}==acme" or "{group}!=".
func ParseCondition(s string) (Condition, error) {
	op, neg := "==", false
	i := strings.Index(s, "==")
	if j := strings.Index(s, "!="); j >= 0 && (i < 0 || j < i) {
		i, op, neg = j, "!=", true
	}
	if i < 0 {
		return Condition{}, fmt.Errorf("-where %q: want TEMPLATE==VALUE or TEMPLATE!=VALUE, such as {attr.tenant}==acme", s)
	}
	tmpl, value := s[:i], s[i+len(op):]
	if t, v := strings.TrimRight(tmpl, " \t"), strings.TrimLeft(value, " \t"); t != tmpl || v != value {
		// Taken as written, "{attr.tenant} == acme" compares "acme " with
		// " acme": it matched nothing, and a copy copied nothing, complete.
		return Condition{}, fmt.Errorf("-where %q: the spaces beside %s would be part of the template and the value, so it would not match what it says; write %s%s%s", s, op, t, op, v)
	}
	t, err := rules.Parse(tmpl)
	if err != nil {
		return Condition{}, fmt.Errorf("-where %q: %w", s, err)
	}
	return Condition{Template: t, Value: value, Negate: neg}, nil
}

func (c Condition) match(m *mapping.Message) bool {
	got, err := c.Template.Execute(m)
	if err != nil {
		// A missing attribute: the message does not match "==", and
		// matches "!=".
		return c.Negate
	}
	return (got == c.Value) != c.Negate
}

// filterText names the selection in words that compare: "" for none, else
// the -since, -until and -where flags as given, sorted. A copy checkpoint
// is kept with it (stateFile.check).
func (o *Options) filterText() string {
	var parts []string
	if !o.Since.IsZero() {
		parts = append(parts, "-since "+o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		parts = append(parts, "-until "+o.Until.UTC().Format(time.RFC3339Nano))
	}
	for _, c := range o.Where {
		op := "=="
		if c.Negate {
			op = "!="
		}
		parts = append(parts, "-where "+strconv.Quote(c.Template.String()+op+c.Value))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// filter returns the selection, or nil when everything is selected.
func (o *Options) filter() func(*mapping.Message) bool {
	if o.Since.IsZero() && o.Until.IsZero() && len(o.Where) == 0 {
		return nil
	}
	since, until, where := o.Since, o.Until, o.Where
	return func(m *mapping.Message) bool {
		t := m.Source.EnqueuedTime
		if !since.IsZero() && (t.IsZero() || t.Before(since)) {
			return false
		}
		if !until.IsZero() && (t.IsZero() || !t.Before(until)) {
			return false
		}
		for _, c := range where {
			if !c.match(m) {
				return false
			}
		}
		return true
	}
}

// rerunDedupID derives a new deduplication id from the old one and a run id:
// stable within a run (a resumed re-run still deduplicates against itself),
// different from the first run's. 64 hex characters fit every sink's limit
// (SQS and Service Bus take 128) and SQS's character set.
func rerunDedupID(key, runID string) string {
	h := sha256.Sum256([]byte(runID + "\x00" + key))
	return hex.EncodeToString(h[:])
}

// leavesScheduled reports a dry run of a move that leaves scheduled
// messages (-scheduled leave): it passes over what the broker holds as
// scheduled, as the move will. A dry run with filters previews a copy,
// which writes them.
func (o *Options) leavesScheduled() bool {
	return o.Mode == ModeDryRun && !o.WaitScheduled && o.filter() == nil
}
