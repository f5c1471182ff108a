package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
)

// Mode is what a migration does to the source.
type Mode string

const (
	ModeMove   Mode = "move"    // receive, write, then delete at the source
	ModeCopy   Mode = "copy"    // browse: the source stays untouched
	ModeDryRun Mode = "dry-run" // read and translate, write nothing, settle nothing
)

// Outcome is how a migration ended; each has its own exit code.
type Outcome string

const (
	// OutcomeComplete: the source is drained and every message was written.
	OutcomeComplete Outcome = "complete"
	// OutcomeDeadLettered: drained, every message accounted for, but some
	// went to the dead-letter destination (with their reasons).
	OutcomeDeadLettered Outcome = "complete-with-dead-letters"
	// OutcomeNotDrained: the migration stopped with messages left at the
	// source (a timeout, scheduled messages not yet due, a source that
	// keeps failing).
	OutcomeNotDrained Outcome = "not-drained"
	// OutcomeInterrupted: stopped by a signal; in-flight messages were
	// finished or handed back.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeFailed: the migration could not run (configuration, a broker
	// that cannot be reached).
	OutcomeFailed Outcome = "failed"
)

// Exit codes, as documented in docs/migrate.md.
const (
	ExitComplete     = 0
	ExitFailed       = 1
	ExitUsage        = 2
	ExitDeadLettered = 3
	ExitNotDrained   = 4
	// ExitNotVerified: drained and written (complete, or complete with
	// dead letters), and yet messages are at neither end
	// (Verification.Lost): an automation that checks only for 0 took them
	// for a clean move. A sink that only holds fewer keeps 0 or 3: a
	// consumer reading it already is normal during a cut-over; so does one
	// that dropped duplicates of what an earlier run wrote (a copy before
	// a move).
	ExitNotVerified = 5
	ExitInterrupted = 130
)

// ExitCode maps an outcome to the process exit code.
func (o Outcome) ExitCode() int {
	switch o {
	case OutcomeComplete:
		return ExitComplete
	case OutcomeDeadLettered:
		return ExitDeadLettered
	case OutcomeNotDrained:
		return ExitNotDrained
	case OutcomeInterrupted:
		return ExitInterrupted
	default:
		return ExitFailed
	}
}

// severity orders outcomes so that a run's outcome is its worst job's.
func (o Outcome) severity() int {
	switch o {
	case OutcomeComplete:
		return 0
	case OutcomeDeadLettered:
		return 1
	case OutcomeNotDrained:
		return 2
	case OutcomeInterrupted:
		return 3
	default:
		return 4
	}
}

// Report is what a migration did, written with -report as JSON. Field
// names are stable: docs/migrate.md lists them.
type Report struct {
	Version    int          `json:"version"`
	Mode       Mode         `json:"mode"`
	Outcome    Outcome      `json:"outcome"`
	ExitCode   int          `json:"exit_code"`
	Reason     string       `json:"reason,omitempty"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at"`
	Seconds    float64      `json:"duration_seconds"`
	Rate       float64      `json:"rate_per_second"`
	Jobs       []*JobReport `json:"pipelines"`
	Totals     Counts       `json:"totals"`
}

// Counts are the message counts of a job, or of all jobs.
type Counts struct {
	// Read counts deliveries, redeliveries included.
	Read int64 `json:"read"`
	// Written counts messages the sink confirmed.
	Written int64 `json:"written"`
	// Acknowledged counts messages settled at the source after they were
	// written or dead-lettered (in copy mode and dry runs nothing is
	// settled at the broker; the count is of messages done).
	Acknowledged int64 `json:"acknowledged"`
	// HandedBack counts deliveries returned to the source for another try
	// (a transient failure during shutdown, a restart).
	HandedBack int64 `json:"handed_back"`
	// DeadLettered counts by reason code (bridge.Reason*).
	DeadLettered      map[string]int64 `json:"dead_lettered"`
	DeadLetteredTotal int64            `json:"dead_lettered_total"`
	Retried           int64            `json:"retried"`
	Throttled         int64            `json:"throttled"`
	// Redelivered counts messages acknowledged at the source that it had
	// delivered before this run took them (to an interrupted earlier run,
	// which may have written them; a deduplicating sink then drops the
	// copy): the verification's allowance for a resumed move.
	Redelivered int64 `json:"redelivered,omitempty"`
	// AckFailed counts acknowledgements that failed: the sink has those
	// messages, and the source delivers them again (a duplicate a
	// deduplicating sink drops; RabbitMQ's redelivery carries no count).
	AckFailed int64 `json:"ack_failed,omitempty"`
	// DuplicatesDropped counts messages the sink's broker said it dropped
	// as duplicates (JetStream); other brokers do not say.
	DuplicatesDropped int64 `json:"duplicates_dropped_by_sink"`
	// Skipped counts messages the filters left out.
	Skipped int64 `json:"skipped"`
	// Dropped counts attributes or fields the drop policy left out.
	Dropped int64 `json:"mapping_dropped"`
	// Encoded counts items the encode policy changed to fit the sink
	// (moved into the carry envelope, sent base64, a schedule sent now).
	Encoded int64 `json:"mapping_encoded"`
	// EnvelopeShed counts, by member (correlation_id, subject...), the
	// messages whose carry envelope did not fit on the sink (an SQS
	// message with 10 attributes has no room for it) and went without
	// that member: what the sink's native properties cannot hold is lost
	// for them, under any policy.
	EnvelopeShed map[string]int64 `json:"envelope_shed,omitempty"`
	// Stuck counts messages nothing takes, by the reason code of the
	// refusal that ended them (the dead-letter sink's, or the sink's where
	// there is no dead-letter destination): they stay at the source. Each
	// is counted once, however often it came back.
	Stuck      map[string]int64 `json:"stuck,omitempty"`
	StuckTotal int64            `json:"stuck_total"`
}

func (c *Counts) add(o Counts) {
	c.Read += o.Read
	c.Written += o.Written
	c.Acknowledged += o.Acknowledged
	c.HandedBack += o.HandedBack
	c.Retried += o.Retried
	c.Throttled += o.Throttled
	c.DuplicatesDropped += o.DuplicatesDropped
	c.Redelivered += o.Redelivered
	c.AckFailed += o.AckFailed
	c.Skipped += o.Skipped
	c.Dropped += o.Dropped
	c.Encoded += o.Encoded
	c.DeadLetteredTotal += o.DeadLetteredTotal
	c.StuckTotal += o.StuckTotal
	if len(o.Stuck) > 0 && c.Stuck == nil {
		c.Stuck = map[string]int64{}
	}
	for k, v := range o.Stuck {
		c.Stuck[k] += v
	}
	if len(o.EnvelopeShed) > 0 && c.EnvelopeShed == nil {
		c.EnvelopeShed = map[string]int64{}
	}
	for k, v := range o.EnvelopeShed {
		c.EnvelopeShed[k] += v
	}
	if len(o.DeadLettered) > 0 && c.DeadLettered == nil {
		c.DeadLettered = map[string]int64{}
	}
	for k, v := range o.DeadLettered {
		c.DeadLettered[k] += v
	}
}

// Done is what progress counts as moved: written, dead-lettered or skipped.
func (c Counts) Done() int64 { return c.Written + c.DeadLetteredTotal + c.Skipped }

// JobReport is one pipeline's migration (or its dead-letter queue's).
type JobReport struct {
	Pipeline string `json:"pipeline"`
	// Queue is "main" or "dead-letter" (-include-dead-letters).
	Queue      string  `json:"queue"`
	SourceKind string  `json:"source_kind"`
	SinkKind   string  `json:"sink_kind"`
	Outcome    Outcome `json:"outcome"`
	Reason     string  `json:"reason,omitempty"`
	Drained    bool    `json:"drained"`
	// DrainedBy says how drained was decided: "count" (the broker's count
	// reached 0 and receives came back empty), "browse" (the browser read
	// to the end), "idle" (nothing arrived for the idle time: brokers that
	// cannot count), "sample" (a dry run's sample was read).
	DrainedBy string `json:"drained_by,omitempty"`
	Counts
	Groups          int             `json:"groups_seen"`
	GroupNames      []string        `json:"groups,omitempty"`
	GroupsTruncated bool            `json:"groups_truncated,omitempty"`
	SourceBefore    *driver.Backlog `json:"source_before"`
	SourceAfter     *driver.Backlog `json:"source_after"`
	SinkBefore      *driver.Backlog `json:"sink_before"`
	SinkAfter       *driver.Backlog `json:"sink_after"`
	// CountErrors says why a count is missing (a broker that cannot count).
	CountErrors map[string]string `json:"count_errors,omitempty"`
	// Verification compares the sink's growth with what was written (nil
	// in a dry run).
	Verification *Verification `json:"verification,omitempty"`
	// LeftBehind counts messages known to stay at the source, by cause
	// ("scheduled": not due yet).
	LeftBehind map[string]int64 `json:"left_behind,omitempty"`
	// Checkpoint is the copy mode's position: every message up to it is
	// written (the state file holds it for a resume).
	Checkpoint  uint64  `json:"checkpoint,omitempty"`
	ResumedFrom uint64  `json:"resumed_from,omitempty"`
	Seconds     float64 `json:"duration_seconds"`
	// ActiveSeconds is the time until the last message was done: Rate is
	// over it, without the idle spell that confirmed the drain.
	ActiveSeconds float64 `json:"active_seconds"`
	Rate          float64 `json:"rate_per_second"`
	// DryRun holds what a dry run found.
	DryRun *DryRunReport `json:"dry_run,omitempty"`
	// Examples holds one dead-lettered message per reason, with the
	// description the engine gave.
	Examples map[string]Example `json:"dead_letter_examples,omitempty"`
	// StuckExamples holds one stuck message per reason (Counts.Stuck),
	// with the refusal's error.
	StuckExamples map[string]Example `json:"stuck_examples,omitempty"`
	// Warnings are what the job logged as a warning before anything
	// moved, about what the sink does with the messages (their order, a
	// limit that drops some): in the summary and the report too, not only
	// in the log (an audit saw an ordering warning scroll past on stderr).
	Warnings []string `json:"warnings,omitempty"`

	browseRefused bool // the broker refused to browse: a dry run samples instead
	// sinkCountable: a count of the sink was tried that its broker could
	// answer (not errors.ErrUnsupported): a verification missing it is
	// news for the first line, not the sink's kind.
	sinkCountable bool
	// redeliveredInWindow: of Redelivered, the messages first delivered
	// within the sink's duplicate window of their write here (an SQS FIFO
	// sink's 5 minutes): none of them is there twice.
	redeliveredInWindow int64
	// sampleAsked is a dry run's -sample, for the summary of a sample
	// that came out smaller (an SQS FIFO queue's: one receive a group).
	sampleAsked int64
	// sinkUncountable says why a sink that was not countable is not,
	// where its adapter can count but is not set up to (the adapter's
	// words: "set management_endpoint to count"); "" where its kind has
	// no count at all (AMQP).
	sinkUncountable string
	// sourceCountable: likewise for the source, whose count before the
	// move may still have failed (warnEmptyUncounted's wording).
	sourceCountable bool
	// rewritable: a resumed copy's positions past its checkpoint that the
	// last run may have written (Verification's allowance for a copy).
	rewritable int64
	// blockedBehind: the drain ended with the source's ready messages
	// queued behind stuck ones (a FIFO group, a session).
	blockedBehind bool
	// duplicatesOfThisRun: of DuplicatesDropped, those the sink tells were
	// of messages this run wrote (driver.RunDuplicateReporter).
	duplicatesOfThisRun int64
	// recopied: messages an earlier copy wrote while they were scheduled,
	// written again now that they are due (Verification's allowance too).
	recopied int64
	// deadLettersIntoSink: what the job dead-lettered went to its sink's
	// entity too (config.Pipeline.DeadLettersIntoSink).
	deadLettersIntoSink bool
	// liveDeadLetters: a dead-letter queue's job of a pipeline without a
	// dead-letter sink, whose dead letters go to its sink (the summary says).
	liveDeadLetters bool
	stuckWhy        string    // why stuck messages stay (job.stuckWhy), for the summary
	started         time.Time // when the job began: its active time is [started, +ActiveSeconds]
	notApplicable   bool      // skipped because there is nothing to run (a dead-letter queue the source lacks)
}

// DryRunReport is what would have happened.
type DryRunReport struct {
	WouldWrite  int64              `json:"would_write"`
	WouldReject map[string]int64   `json:"would_reject"` // by reason code
	WouldDrop   map[string]int64   `json:"would_drop"`   // by "field: reason"
	WouldEncode map[string]int64   `json:"would_encode"` // by "field: how"
	Sampled     bool               `json:"sampled"`      // a bounded sample, not every message
	Examples    map[string]Example `json:"examples"`

	// WouldStick counts rejected messages that would stay at the source
	// (no dead-letter destination, or the dead-letter sink would refuse
	// them too), by the reason code of that refusal; examples under
	// "stuck:"+reason.
	WouldStick map[string]int64 `json:"would_be_stuck,omitempty"`
}

// Example is one message that met an outcome, to show the user.
type Example struct {
	MessageID   string   `json:"message_id,omitempty"`
	Group       string   `json:"group,omitempty"`
	Sequence    string   `json:"sequence,omitempty"`
	Attributes  []string `json:"attributes,omitempty"`
	Body        string   `json:"body_preview,omitempty"`
	Description string   `json:"description,omitempty"`
}

// Name names the message for the user: its id, else its position at the
// source (a JetStream message without Nats-Msg-Id has only its stream
// sequence).
func (e Example) Name() string {
	switch {
	case e.MessageID != "":
		return fmt.Sprintf("message %q", e.MessageID)
	case e.Sequence != "":
		return "the message at sequence " + e.Sequence
	}
	return "a message without an id"
}

// WriteFile writes the report as indented JSON: atomically to a regular
// file, in place to anything else (a pipe, /dev/stdout), which a rename
// would replace with a regular file.
func (r *Report) WriteFile(path string) error {
	b, err := r.json()
	if err != nil {
		return err
	}
	target, stream, err := ResolveLinks(path)
	if err != nil {
		return writeErr(path, err)
	}
	fi, statErr := os.Stat(path)
	if f, ok := ownStdio(target); stream && ok {
		_, err := f.Write(b)
		return writeErr(path, err)
	}
	if stream || statErr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		// Appended: a descriptor sent to a file holds what was written
		// to it before.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return writeErr(path, err)
		}
		_, werr := f.Write(b)
		if err := firstErr(werr, f.Close()); err != nil {
			return writeErr(path, err)
		}
		return nil
	}
	return writeAtomic(target, b)
}

// ResolveLinks follows the symbolic links at path, and in the directories
// above it, to the file they name, which need not exist yet: an atomic
// write replaces that file, where it replaced the link (-report
// /dev/stdout, with standard output sent to a file, made /dev/stdout a
// regular file). stream says path names a file descriptor (/dev/stdout,
// /dev/fd/2, /proc/self/fd/N), written in place. A loop of links is an
// error, as the kernel's ELOOP.
func ResolveLinks(path string) (target string, stream bool, err error) {
	for range 40 { // the kernel's limit on links followed
		if dir, derr := filepath.EvalSymlinks(filepath.Dir(path)); derr == nil {
			path = filepath.Join(dir, filepath.Base(path)) // ".." as the kernel takes it
		}
		if fdPath.MatchString(path) {
			return path, true, nil
		}
		fi, lerr := os.Lstat(path)
		if lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
			return path, false, nil
		}
		to, rerr := os.Readlink(path)
		if rerr != nil {
			return path, false, nil
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return path, false, fmt.Errorf("%s: too many levels of symbolic links", path)
}

// ownStdio is os.Stdout or os.Stderr where path (ResolveLinks's stream)
// names this process's descriptor 1 or 2: written through it, at its
// offset, since opened anew (2>file) the report and the lines after it
// wrote over each other.
func ownStdio(path string) (*os.File, bool) {
	m := fdPath.FindStringSubmatch(path)
	if m == nil || m[1] != "self" && m[1] != "thread-self" && m[1] != strconv.Itoa(os.Getpid()) {
		return nil, false
	}
	switch path[strings.LastIndexByte(path, '/')+1:] {
	case "1":
		return os.Stdout, true
	case "2":
		return os.Stderr, true
	}
	return nil, false
}

// fdPath is a process's file descriptor under /proc (/dev/fd and
// /proc/self resolve to it).
var fdPath = regexp.MustCompile(`^/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/fd/[0-9]+$`)

// WriteJSON writes the report as indented JSON to w (-report -).
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := r.json()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (r *Report) json() ([]byte, error) {
	r.fillEmpty()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	return append(b, '\n'), nil
}

// fillEmpty makes the maps and lists the report always has (those without
// omitempty) empty rather than nil, so that they are {} and [] in JSON, not
// null: a script iterating dead_lettered met null when nothing was
// dead-lettered (a job's counts, the totals, a job that did not run), where
// a dry run's would_* maps were {}.
func (r *Report) fillEmpty() {
	if r.Jobs == nil {
		r.Jobs = []*JobReport{}
	}
	if r.Totals.DeadLettered == nil {
		r.Totals.DeadLettered = map[string]int64{}
	}
	for _, j := range r.Jobs {
		if j.DeadLettered == nil {
			j.DeadLettered = map[string]int64{}
		}
		if d := j.DryRun; d != nil {
			for _, m := range []*map[string]int64{&d.WouldReject, &d.WouldDrop, &d.WouldEncode} {
				if *m == nil {
					*m = map[string]int64{}
				}
			}
			if d.Examples == nil {
				d.Examples = map[string]Example{}
			}
		}
	}
}

// writeAtomic writes path through a temporary file and a rename, so a
// reader (or a resume after kill -9) never sees half a file.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return writeErr(path, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := firstErr(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return writeErr(path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return writeErr(path, err)
	}
	return nil
}

// writeErr says that writing path failed, with the cause alone: the
// *os.PathError's own path is a temporary file's, or path again.
func writeErr(path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	var le *os.LinkError // a rename's
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("write %s: %w", path, err)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// shedLines lists the carry envelope's members messages went (or would
// go) without: the sink had no room for the envelope (SQS: 10 attributes).
func shedLines(w io.Writer, shed map[string]int64, verb string) {
	for _, k := range sortedKeys(shed) {
		fmt.Fprintf(w, "    %s %s without %s (the carry envelope did not fit on the sink, so what its native properties cannot hold is not there)\n",
			messages(shed[k]), verb, k)
	}
}

// where names the job for a reason: "pipeline P", or "pipeline P
// (dead-letter queue)".
func (j *JobReport) where() string {
	if j.Queue != "main" {
		return fmt.Sprintf("pipeline %s (%s queue)", j.Pipeline, j.Queue)
	}
	return "pipeline " + j.Pipeline
}

// headline is the reason the summary's first line gives: the run's, less
// what a pipeline's line below says word for word (an interrupted move's
// reason was on both, and on standard error). A complete run's reason is
// a warning that the first line must carry too (a source that held
// nothing, a sink short of what was written).
func (r *Report) headline() string {
	if r.Outcome == OutcomeComplete || r.Outcome == OutcomeDeadLettered {
		return r.Reason
	}
	for _, j := range r.Jobs {
		if j.Reason == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(r.Reason, j.where()+": "+j.Reason); ok {
			if rest == "" && len(r.Jobs) == 1 {
				return "" // the one pipeline's line says it
			}
			return j.where() + rest
		}
	}
	return r.Reason
}

// ErrorLine is what standard error ends with, after "qbridge migrate: ",
// when the run did not succeed ("" where there is nothing to say): the
// outcome and the reason. An interrupt's reason (what became of the
// messages in flight, how to go on) is the summary's to say; the line names
// where it stopped, for a log or a script.
func (r *Report) ErrorLine() string {
	if r.Outcome != OutcomeInterrupted {
		if r.Reason == "" {
			return ""
		}
		return fmt.Sprintf("%s: %s", r.Outcome, r.Reason)
	}
	var in, notStarted []string
	for _, j := range r.Jobs {
		switch {
		case j.Outcome == OutcomeInterrupted:
			in = append(in, j.where())
		case j.Outcome == OutcomeSkipped && j.Reason == skippedInterrupted:
			notStarted = append(notStarted, j.where())
		}
	}
	line := "interrupted"
	if len(in) > 0 {
		line += " in " + strings.Join(in, ", ")
	}
	if len(notStarted) > 0 {
		line += "; not started: " + strings.Join(notStarted, ", ")
	}
	return line + "; the summary says what was done and what is left"
}

// Summary writes the report for a person.
func (r *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "qbridge migrate (%s): %s in %s", r.Mode, r.Outcome, round(time.Duration(r.Seconds*float64(time.Second))))
	if h := r.headline(); h != "" {
		fmt.Fprintf(w, ": %s", h)
	}
	fmt.Fprintln(w)
	for _, j := range r.Jobs {
		name := j.Pipeline
		if j.Queue != "main" {
			name += " (" + j.Queue + " queue)"
		}
		fmt.Fprintf(w, "  %s: %s → %s, %s", name, j.SourceKind, j.SinkKind, j.Outcome)
		if j.Reason != "" {
			fmt.Fprintf(w, " (%s)", j.Reason)
		}
		fmt.Fprintln(w)
		if j.Outcome == OutcomeSkipped {
			continue // it did not run: no counts to show
		}
		if j.liveDeadLetters {
			fmt.Fprintln(w, "    the pipeline has no dead-letter sink: the source's dead letters go to its sink, beside live messages (each with DeadLetterReason); a dead_letter { sink … } keeps them apart")
		}
		for _, warning := range j.Warnings {
			fmt.Fprintf(w, "    warning: %s\n", warning)
		}
		if d := j.DryRun; d != nil {
			fmt.Fprintf(w, "    read %d; would write %d", j.Read, d.WouldWrite)
			if d.Sampled {
				fmt.Fprint(w, " (a sample)")
				if src := j.SourceBefore; src != nil && src.HasSessions && src.Sessions > int64(j.Groups) {
					// One message per session, from as many sessions as the
					// source holds at once: the rest were not looked at (an
					// audit took read 4 for a verdict on 10 sessions).
					fmt.Fprintf(w, "; %d of the %d sessions sampled (at most sessions.max_concurrent; a message in the others is not looked at)", j.Groups, src.Sessions)
				}
				if src := j.SourceBefore; fifoShortSample(j) {
					// A group's next message waits until the one before
					// is deleted: "read 3 (a sample)" of 60 asked for 40
					// looked like what was asked.
					fmt.Fprintf(w, "; an SQS FIFO queue hands out a group's next message only once the one before it is deleted, and a dry run deletes nothing: "+
						"%s gave %s, not the -sample %d asked for, of the %d at the source", groups(j.Groups), messages(j.Read), j.sampleAsked, src.Pending())
					if src.InFlight > 0 {
						// An audit's dry run read 0 of 300, "complete", with
						// every group's head held by another consumer.
						fmt.Fprintf(w, " (%d of them in flight: received by another consumer, or a run before this one, and not deleted; their groups give nothing until the visibility timeout ends)", src.InFlight)
					}
				}
			}
			if j.Skipped > 0 {
				// A filter that matches nothing shows here, not as a
				// silent "would write 0".
				fmt.Fprintf(w, "; the filters (-since, -until, -where) leave out %d", j.Skipped)
			}
			fmt.Fprintln(w)
			for _, k := range sortedKeys(d.WouldReject) {
				fmt.Fprintf(w, "    would reject %d: %s", d.WouldReject[k], k)
				if ex, ok := d.Examples["reject:"+k]; ok {
					fmt.Fprintf(w, " (e.g. %s)", ex.Description)
				}
				fmt.Fprintln(w)
			}
			for _, k := range sortedKeys(d.WouldStick) {
				fmt.Fprintf(w, "    would be stuck %d: %s", d.WouldStick[k], stuckText(j, k))
				if ex, ok := d.Examples["stuck:"+k]; ok {
					fmt.Fprintf(w, " (e.g. %s: %s)", ex.Name(), ex.Description)
				}
				fmt.Fprintln(w)
			}
			for _, k := range sortedKeys(d.WouldDrop) {
				fmt.Fprintf(w, "    would drop %d: %s\n", d.WouldDrop[k], k)
			}
			for _, k := range sortedKeys(d.WouldEncode) {
				fmt.Fprintf(w, "    would encode %d: %s\n", d.WouldEncode[k], k)
			}
			shedLines(w, j.EnvelopeShed, "would go")
		} else {
			if r.Mode == ModeCopy {
				// A copy settles nothing: "acknowledged" would say it did.
				fmt.Fprintf(w, "    read %d, copied %d, dead-lettered %d, retried %d, throttled %d",
					j.Read, j.Written, j.DeadLetteredTotal, j.Retried, j.Throttled)
			} else {
				fmt.Fprintf(w, "    read %d, written %d, acknowledged %d, dead-lettered %d, retried %d, throttled %d",
					j.Read, j.Written, j.Acknowledged, j.DeadLetteredTotal, j.Retried, j.Throttled)
			}
			if j.Skipped > 0 {
				fmt.Fprintf(w, ", skipped %d", j.Skipped)
			}
			if j.HandedBack > 0 {
				// What balances read against written and acknowledged
				// after an interrupt (or a retry the source redelivers).
				fmt.Fprintf(w, ", handed back %d", j.HandedBack)
			}
			if j.DuplicatesDropped > 0 {
				fmt.Fprintf(w, ", duplicates dropped by the sink %d", j.DuplicatesDropped)
			}
			fmt.Fprintln(w)
			if j.Dropped > 0 || j.Encoded > 0 {
				// Written, but not as they were: a native consumer sees
				// it. The log says which, a dry run lists them by field.
				fmt.Fprintf(w, "    mapping: %d items left out (policy drop), %d encoded to fit the sink (policy encode: into the carry envelope, base64, a schedule sent now); a dry run lists them by field\n", j.Dropped, j.Encoded)
			}
			shedLines(w, j.EnvelopeShed, "went")
			for _, k := range sortedKeys(j.DeadLettered) {
				fmt.Fprintf(w, "    dead-lettered %d: %s", j.DeadLettered[k], k)
				if ex, ok := j.Examples[k]; ok && ex.Description != "" {
					fmt.Fprintf(w, " (e.g. %s)", ex.Description)
				}
				fmt.Fprintln(w)
			}
			for _, k := range sortedKeys(j.Stuck) {
				fmt.Fprintf(w, "    stuck %d: %s", j.Stuck[k], stuckText(j, k))
				if ex, ok := j.StuckExamples[k]; ok {
					fmt.Fprintf(w, " (e.g. %s: %s)", ex.Name(), ex.Description)
				}
				fmt.Fprintln(w)
			}
			if r.Mode == ModeCopy {
				fmt.Fprintln(w, "    the source was only read: nothing was settled or removed there")
			}
		}
		if j.Groups > 0 {
			fmt.Fprintf(w, "    groups seen %d\n", j.Groups)
		}
		fmt.Fprintf(w, "    source %s → %s; sink %s → %s\n",
			backlogText(j.SourceBefore), backlogText(j.SourceAfter), backlogText(j.SinkBefore), backlogText(j.SinkAfter))
		if j.DrainedBy == "idle" && r.Mode == ModeMove && j.SourceAfter == nil {
			// A source that cannot be counted (AMQP): a held message came
			// back after a "complete" that said nothing of it.
			fmt.Fprintln(w, "    drained as nothing more arrived for -idle: the source cannot be counted, so messages another consumer holds, or that come later, are not seen; run the same command again after they are back")
		}
		if v := j.Verification; v != nil {
			switch {
			case v.Verified:
				fmt.Fprintf(w, "    verified: the sink grew by %d, %d written", v.SinkGrowth, j.Written)
				if j.DuplicatesDropped > 0 {
					fmt.Fprintf(w, ", %d of them reported as duplicates by the sink", j.DuplicatesDropped)
				}
				if v.Note != "" {
					fmt.Fprintf(w, " (%s)", v.Note)
				}
				fmt.Fprintln(w)
			case !v.Checked && !j.sinkCountable:
				// Its broker cannot count (AMQP): nothing was found
				// wrong, and nothing could be checked.
				fmt.Fprintf(w, "    not checked: %s\n", v.Note)
			default:
				fmt.Fprintf(w, "    NOT verified: %s\n", v.Note)
			}
		}
		for _, k := range sortedKeys(j.LeftBehind) {
			fmt.Fprintf(w, "    left at the source: %d %s\n", j.LeftBehind[k], k)
		}
		if j.ResumedFrom > 0 {
			fmt.Fprintf(w, "    resumed from: sequence %d (the -state checkpoint)\n", j.ResumedFrom)
		}
		if j.Checkpoint > 0 {
			fmt.Fprintf(w, "    checkpoint: sequence %d\n", j.Checkpoint)
		}
	}
	switch t := r.Totals; {
	case len(r.Jobs) > 1 && r.Mode == ModeDryRun:
		var would int64
		for _, j := range r.Jobs {
			if j.DryRun != nil {
				would += j.DryRun.WouldWrite
			}
		}
		fmt.Fprintf(w, "  total: read %d, would write %d, %s\n", t.Read, would, rateText(r.Rate))
	case len(r.Jobs) > 1:
		fmt.Fprintf(w, "  total: read %d, written %d, dead-lettered %d, %s\n", t.Read, t.Written, t.DeadLetteredTotal, rateText(r.Rate))
	default:
		fmt.Fprintf(w, "  %s\n", rateText(r.Rate))
	}
}

// stuckText says why messages stuck with reason code k stay at the source.
func stuckText(j *JobReport, k string) string {
	why := j.stuckWhy
	if why == "" {
		why = "nothing takes it"
	}
	return fmt.Sprintf("%s (%s)", why, k)
}

func backlogText(b *driver.Backlog) string {
	if b == nil {
		return "?"
	}
	s := fmt.Sprint(b.Pending())
	var extra []string
	if b.InFlight > 0 {
		extra = append(extra, fmt.Sprintf("%d in flight", b.InFlight))
	}
	if b.Scheduled > 0 {
		extra = append(extra, fmt.Sprintf("%d scheduled", b.Scheduled))
	}
	if b.DeadLetter > 0 {
		extra = append(extra, fmt.Sprintf("%d dead-lettered", b.DeadLetter))
	}
	if b.Deferred > 0 {
		extra = append(extra, fmt.Sprintf("%d deferred", b.Deferred))
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// rateText shows a rate; below 10 msg/s with a decimal, so that a slow run
// that moved something does not read "0 msg/s".
func rateText(r float64) string {
	if r > 0 && r < 10 {
		return fmt.Sprintf("%.1f msg/s", r)
	}
	return fmt.Sprintf("%.0f msg/s", r)
}

// fifoShortSample reports a dry run's sample of an SQS FIFO queue that
// came out smaller than -sample and than the queue: the queue hands out
// a group's next message only once the one before it is deleted, so the
// sample is what one receive gave of each group.
func fifoShortSample(j *JobReport) bool {
	src := j.SourceBefore
	return j.DryRun != nil && j.DryRun.Sampled && j.SourceKind == "sqs" && src != nil && src.Ordered &&
		j.Read < j.sampleAsked && j.Read < src.Pending()
}

// groups is "1 group" or "n groups".
func groups(n int) string {
	if n == 1 {
		return "1 group"
	}
	return fmt.Sprintf("%d groups", n)
}
