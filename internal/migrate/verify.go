package migrate

import "fmt"

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
	// broker said it dropped.
	Expected int64 `json:"expected"`
	// Note says why it is not verified, or what else the counts show.
	Note string `json:"note,omitempty"`
}

// Short reports whether both counts were there and the sink holds fewer
// than were written (nil: no verification, as in a dry run).
func (v *Verification) Short() bool { return v != nil && v.Checked && !v.Verified }

// verification compares j's counts; nil for a dry run, which writes nothing.
func verification(j *JobReport, mode Mode) *Verification {
	if mode == ModeDryRun || j.DryRun != nil {
		return nil
	}
	v := &Verification{Expected: j.Written - j.DuplicatesDropped}
	if j.SinkBefore == nil || j.SinkAfter == nil {
		v.Note = "the sink cannot be counted: nothing to compare with"
		if e := j.CountErrors["sink"]; e != "" {
			v.Note += " (" + e + ")"
		}
		return v
	}
	v.Checked = true
	v.SinkGrowth = j.SinkAfter.Pending() - j.SinkBefore.Pending()
	switch d := v.SinkGrowth - v.Expected; {
	case d >= 0:
		// Up to Written it is what was written: a duplicate the sink
		// reported may be a retry of a send whose first attempt it had
		// stored (an acknowledgement that timed out).
		v.Verified = true
		if extra := v.SinkGrowth - j.Written; extra > 0 {
			v.Note = fmt.Sprintf("the sink grew by %d more than migrate wrote: another producer wrote to it meanwhile", extra)
		}
	case -d <= j.Redelivered && j.SinkAfter.Deduplicates:
		// A resumed move: what an interrupted run wrote and did not
		// acknowledge comes back and is written again, and a
		// deduplicating sink keeps the first copy. Only such a sink: a
		// delivery count also rises when a dry run samples a message, or
		// another consumer failed it, and a sink without duplicate
		// detection grows by every copy.
		v.Verified = true
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote, within the %d messages the source had "+
			"delivered before, which an earlier, interrupted run may have written: the sink's duplicate detection drops such copies", -d, j.Redelivered)
	case j.SinkAfter.Deduplicates:
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote: its broker dropped them as duplicates "+
			"(its duplicate detection: a re-run within the window, or messages sharing a "+
			"deduplication id; see -new-dedup-ids), or another consumer received and deleted them meanwhile", -d)
	default:
		v.Note = fmt.Sprintf("the sink holds %d fewer than migrate wrote, and it does not drop duplicates: "+
			"another consumer received and deleted them meanwhile, or the sink lost them", -d)
	}
	return v
}
