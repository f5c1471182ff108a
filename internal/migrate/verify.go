package migrate

import (
	"fmt"
	"strings"
)

// Verification is migrate's check of its own counts against the brokers':
// the sink must have grown by what migrate wrote to it. Counts that a
// broker gives as approximations (SQS) are read again for a while before a
// shortfall is reported (job.verify).
type Verification struct {
	// Verified: the sink grew by at least Expected.
	Verified bool `json:"verified"`
	// Checked: both sink counts were there to compare.
	Checked bool `json:"checked"`
	// SinkGrowth is the sink's count after, less before (ready, in flight
	// and scheduled).
	SinkGrowth int64 `json:"sink_growth"`
	// Expected is what migrate wrote to the sink, less the duplicates its
	// broker said it dropped, plus what it dead-lettered into the same
	// entity (a dead-letter queue's job).
	Expected int64 `json:"expected"`
	// Note says why it is not verified, or what else the counts show.
	Note string `json:"note,omitempty"`
	// Allowance is the shortfall forgiven as a resume's rewrites (a
	// deduplicating sink, messages the source had delivered before): the
	// summary's first line says so, since a dry run's sample and other
	// consumers raise delivery counts too.
	Allowance int64 `json:"allowance,omitempty"`
	// LeftTheSource counts messages that left the source other than
	// through this migration (another consumer, expiry without
	// dead-lettering, a purge): the source's count before, less what the
	// job settled there, what the broker dead-lettered and what is left.
	// They are not at the sink; the move is then not verified.
	LeftTheSource int64 `json:"left_the_source,omitempty"`
	// Merged counts the messages the sink dropped as duplicates beyond
	// what this run's retries and redeliveries explain: distinct messages
	// that share a deduplication id, the later ones not at the sink, or
	// messages an earlier run wrote there (a copy before a move).
	Merged int64 `json:"merged,omitempty"`
	// MergedInRun is the part of Merged the sink tells were duplicates of
	// messages this run wrote itself (an SQS FIFO queue answers with the
	// first one's id): distinct messages merged, for certain.
	MergedInRun int64 `json:"merged_in_run,omitempty"`
}

// Lost reports a verification that found messages that are at neither
// end: merged away within this run by the sink's duplicate detection, or
// gone from the source other than through the migration. A sink that
// merely holds fewer may have a consumer already (a cut-over), and one
// that dropped duplicates of an earlier run's writes (a copy, then a
// move) holds them: neither is proof.
func (v *Verification) Lost() bool {
	return v != nil && !v.Verified && (v.MergedInRun > 0 || v.LeftTheSource > 0)
}

// Warn reports a verification whose first line must say more than
// "complete": short, forgiven by the allowance, or a source that lost
// messages another way.
func (v *Verification) Warn() bool {
	return v.Short() || (v != nil && (v.Allowance > 0 || v.LeftTheSource > 0))
}

// Short reports whether both counts were there and the sink holds fewer
// than were written (nil: no verification, as in a dry run).
func (v *Verification) Short() bool { return v != nil && v.Checked && !v.Verified }

// addNote adds note after the notes v already has.
func (v *Verification) addNote(note string) {
	if v.Note != "" {
		note = v.Note + "; " + note
	}
	v.Note = note
}

// verification compares j's counts; nil for a dry run, which writes nothing.
func verification(j *JobReport, mode Mode) *Verification {
	if mode == ModeDryRun || j.DryRun != nil {
		return nil
	}
	// A duplicate the sink reported is a rewrite of something it holds
	// when this run retried the send (the first attempt was stored, its
	// answer lost), an acknowledgement failed (the source delivers the
	// message again), or the source had delivered the message before (a
	// resume). Beyond those, the sink merged distinct messages that share
	// a deduplication id, and the later ones are not there.
	// A delivery before this run is no proof of a write: a consumer that
	// failed the messages, or a dry run's sample, raises the same counts.
	// What only it forgives is the resume allowance, said on the first
	// line.
	byRun := min(j.DuplicatesDropped, j.Retried+j.AckFailed)
	byDelivery := min(j.DuplicatesDropped-byRun, j.Redelivered)
	forgiven := byRun + byDelivery
	// A copy resumes where the last one left a state: after a checkpoint,
	// or from the start when it was stopped before its first checkpoint
	// (saved once a second) but after its lease said what it may write.
	resumed := mode == ModeCopy && (j.ResumedFrom > 0 || j.rewritable > 0 || j.recopied > 0)
	// What a resumed copy writes again: what the last run wrote past its
	// checkpoint, as far as its state file says it may have written
	// (rewritable; browsing raises no delivery count to tell which), and
	// the messages an earlier copy wrote while scheduled, enqueued anew
	// once due (recopied, by id). An incremental copy whose new messages
	// reuse ids must not pass.
	again := j.rewritable + j.recopied
	// byRewrite is what only the lease explains: the last run may have
	// written those positions, or not (a recopied message is known by its
	// id and scheduled time). Relied on, it is the resume allowance.
	var byRewrite int64
	if resumed {
		exact := min(j.DuplicatesDropped, j.Retried+j.AckFailed+j.recopied)
		byRun = min(j.DuplicatesDropped, j.Retried+j.AckFailed+again)
		forgiven, byDelivery, byRewrite = byRun, 0, byRun-exact
	}
	merged := j.DuplicatesDropped - forgiven
	// What this run put there: the messages it wrote, and the dead
	// letters when they went where the messages did (a dead-letter queue's
	// job writes to the dead-letter sink) — growth of its own, not another
	// producer's.
	put := j.Written
	if j.deadLettersIntoSink {
		put += j.DeadLetteredTotal
	}
	v := &Verification{Expected: put - forgiven}
	if j.SinkBefore == nil || j.SinkAfter == nil {
		if !j.sinkCountable {
			// Its broker has no count to give (an AMQP queue): the Go
			// error ("unsupported operation") tells a user nothing more.
			// An adapter that could count, set up otherwise, says why
			// (no management_endpoint), and so does the note.
			why := "its broker offers no message count for this sink"
			if j.sinkUncountable != "" {
				why = j.sinkUncountable
			}
			v.Note = "the sink cannot be counted: " + why + ", so the verification could not be done"
			if n := min(j.Redelivered, j.Written); n > 0 && mode == ModeMove {
				// Uncounted, the sink still got them again: a resume into
				// RabbitMQ lost the note a counted sink gives.
				v.addNote(deliveredBeforeNote(n, "and the sink is not known to drop duplicates"))
			}
			return v
		}
		v.Note = "the sink cannot be counted: nothing to compare with"
		if e := j.CountErrors["sink"]; e != "" {
			v.Note += " (" + e + ")"
		}
		return v
	}
	v.Checked = true
	v.SinkGrowth = j.SinkAfter.Pending() - j.SinkBefore.Pending()
	switch d := v.SinkGrowth - v.Expected; {
	case merged > 0 && d < 0:
		v.Merged = merged
		// Beyond the retries, a duplicate of this run's own writes is two
		// messages that share an id.
		v.MergedInRun = min(merged, max(0, j.duplicatesOfThisRun-(j.Retried+j.AckFailed)))
		v.Note = fmt.Sprintf("the sink dropped %d messages as duplicates of others it holds (more than this run's retries and redeliveries explain): "+
			"distinct messages that share a deduplication id (Nats-Msg-Id, MessageDeduplicationId, MessageId) were merged, and the later ones are not at the sink; "+
			"-new-dedup-ids NAME gives each message an id of its own", merged)
	case d >= 0:
		// Up to Written it is what was written: a duplicate the sink
		// reported may be a retry of a send whose first attempt it had
		// stored (an acknowledgement that timed out).
		v.Verified = true
		switch {
		case byRewrite > 0 && d < byRewrite:
			// Verified only because some duplicates count as rewrites of
			// what an interrupted copy may have written.
			v.Allowance = byRewrite - d
			v.Note = fmt.Sprintf("%d of the duplicates the sink reported are taken for rewrites of what the interrupted copy may have written past its checkpoint (up to %d positions, as its state file says; "+
				"if it wrote less, distinct messages sharing a deduplication id may have been merged; see -new-dedup-ids)", v.Allowance, j.rewritable)
		case byDelivery > 0 && d < byDelivery:
			// Verified only because some duplicates count as rewrites of
			// messages delivered before.
			v.Allowance = byDelivery - d
			v.Note = fmt.Sprintf("%d of the duplicates the sink reported are taken for rewrites of messages the source had delivered before, "+
				"which an earlier, interrupted run may have written (a dry run's sample and other consumers raise delivery counts too: "+
				"if no move was interrupted, distinct messages sharing a deduplication id may have been merged; see -new-dedup-ids)", v.Allowance)
		default:
			if extra := v.SinkGrowth - put; extra > 0 {
				v.Note = fmt.Sprintf("the sink grew by %d more than migrate wrote: another producer wrote to it meanwhile", extra)
			}
		}
		// A resume writes again what the interrupted run wrote and did not
		// settle (a move), or wrote past its checkpoint (a copy). A sink
		// that deduplicates drops only the copies that carry an id it
		// knows: a JetStream message without Nats-Msg-Id goes to a
		// JetStream stream without one, and an audit found 90 of 500 there
		// twice under a plain "verified". The sink grew by all it was
		// given here, so what it did not drop may be there twice, whatever
		// its duplicate detection.
		// A sink whose window is known (SQS FIFO) dropped the copy of any
		// such message first delivered within it: those are not there
		// twice either (an audit saw the note after a resume into a FIFO
		// queue a minute later).
		if n := min(j.Redelivered, j.Written) - max(byDelivery, j.redeliveredInWindow); n > 0 && mode == ModeMove {
			// A dry run's sample raises the same counts: said, and never
			// more than this run wrote.
			why := "and the sink did not drop them as duplicates"
			if w := j.SinkAfter.DedupWindow; j.SinkAfter.Deduplicates && w > 0 {
				why = fmt.Sprintf("and the sink drops a copy only within its duplicate window (%s) of the first, which the source does not show them to be in", w)
			}
			v.addNote(deliveredBeforeNote(n, why))
		}
		if src := j.SourceBefore; mode == ModeMove && src != nil && src.ForgetsRecentAcks && (src.InFlight > 0 || j.Redelivered > 0) && !(j.SinkAfter.Deduplicates && j.DuplicatesDropped > 0) {
			// An audit found 256 there twice after a kill -9, with "up to
			// 128" said.
			v.addNote("more may be there twice than any count shows: the source's server ran in the interrupted qbridge process and writes a consumer's acknowledgements to disk at most ten times a second, so those of its last moments were lost with it and their messages came again as first deliveries")
		}
		if n := min(j.rewritable, j.Written) - byRewrite; resumed && n > 0 {
			v.addNote(fmt.Sprintf("up to %d of the messages may be there twice: the interrupted copy may have written them past its checkpoint (its state file says), and the sink did not drop them as duplicates", n))
		}
	case resumed && -d <= again && j.SinkAfter.Deduplicates:
		// A resumed copy: what the last run wrote past its checkpoint (it
		// is saved once a second), and scheduled messages it wrote before
		// they were due, are written again, and a deduplicating sink keeps
		// the first copy.
		v.Verified = true
		// A recopied message is known (its id and scheduled time): only
		// the rest relies on the lease.
		v.Allowance = max(0, -d-j.recopied)
		var within []string
		if j.rewritable > 0 {
			within = append(within, fmt.Sprintf("the %d positions the interrupted copy may have written past its checkpoint", j.rewritable))
		}
		if j.recopied > 0 {
			within = append(within, fmt.Sprintf("the %d scheduled messages an earlier copy wrote before they were due, read again once due", j.recopied))
		}
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote, within %s: the sink's duplicate detection drops such copies", -d, strings.Join(within, " and "))
	case -d <= j.Redelivered && j.SinkAfter.Deduplicates:
		// A resumed move: what an interrupted run wrote and did not
		// acknowledge comes back and is written again, and a
		// deduplicating sink keeps the first copy. Only such a sink: a
		// delivery count also rises when a dry run samples a message, or
		// another consumer failed it, and a sink without duplicate
		// detection grows by every copy.
		v.Verified = true
		v.Allowance = -d
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote, within the %d messages the source had "+
			"delivered before, which an earlier, interrupted run may have written: the sink's duplicate detection drops such copies "+
			"(a dry run's sample and other consumers raise delivery counts too: check the sink if no move was interrupted)", -d, j.Redelivered)
	case atCap(j.SinkAfter) && v.Expected <= j.SinkAfter.KeepsAtMost:
		// A stream at its cap (discard old), as the job warned before it
		// moved anything: what it wrote pushed out as many of the oldest
		// messages, and being the newest, what it wrote is kept. The
		// counts cannot tell it from another producer's writes pushing out
		// some of this run's too.
		v.Verified = true
		v.Note = fmt.Sprintf("the sink is at its limit (%s): it pushed out %d of its oldest messages to keep the %d newest, as warned before the migration; "+
			"they include the %d migrate wrote, unless another producer wrote to it meanwhile", j.SinkAfter.Limits, -d, j.SinkAfter.KeepsAtMost, v.Expected)
	case j.SinkAfter.Limits != "":
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote: its limits (%s) dropped them, most likely, "+
			"or another consumer removed them meanwhile", -d, j.SinkAfter.Limits)
	case j.SinkAfter.Deduplicates:
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote: its broker dropped them as duplicates "+
			"(its duplicate detection: a re-run within the window, or messages sharing a "+
			"deduplication id; see -new-dedup-ids), or another consumer received and deleted them meanwhile, or they expired there (a time to live)", -d)
	default:
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote, and it does not drop duplicates: "+
			"another consumer received and deleted them meanwhile, they expired there (a time to live), or the sink lost them", -d)
	}
	return v
}

// deliveredBeforeNote says that up to n messages the source had delivered
// before this run may be at the sink twice; why: what the sink did about it.
func deliveredBeforeNote(n int64, why string) string {
	return fmt.Sprintf("up to %d of the messages may be there twice: the source had delivered them before (an interrupted run may have written them; a dry run's sample or another consumer raises the same count), %s", n, why)
}

// leftTheSource is how many messages left the source during a move other
// than through it: its count before, less what the job acknowledged or
// dead-lettered there, what its broker dead-lettered, and what is left.
// Arrivals during the move only lower the figure (a lower bound). SQS
// counts are approximate: a difference within 1 % (at least 2) is not
// taken for one, and is returned as slack, for a note.
//
// An acknowledgement that failed may have been applied all the same (one
// that timed out while the broker was away, as JetStream's did): such a
// message left the source through the move, after the sink had it. Up to
// AckFailed of the shortfall is taken for those and returned as
// ackedAnyway, for a note; an audit saw "20 messages left the source other
// than through this migration", exit 5, after an outage in which nothing
// was lost.
func leftTheSource(j *JobReport, nativeDL, brokerDL int64, approximate bool) (left, slack, ackedAnyway int64) {
	if j.SourceBefore == nil || j.SourceAfter == nil {
		return 0, 0, 0
	}
	left = j.SourceBefore.Pending() - j.Acknowledged - nativeDL - brokerDL - j.SourceAfter.Pending()
	ackedAnyway = max(0, min(left, j.AckFailed))
	left -= ackedAnyway
	if approximate && left <= max(2, j.SourceBefore.Pending()/100) {
		return 0, max(0, left), ackedAnyway
	}
	return max(0, left), 0, ackedAnyway
}
