package migrate

import (
	"context"
	"maps"
	"sync"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// dryRecorder collects what the mapping did to messages on their way to
// the sink (items dropped, encoded) and the sink's duplicate count.
type dryRecorder struct {
	mu      sync.Mutex
	drops   map[string]int64
	encodes map[string]int64
	sinks   []driver.DuplicateReporter
}

func newDryRecorder() *dryRecorder {
	return &dryRecorder{drops: map[string]int64{}, encodes: map[string]int64{}}
}

func (r *dryRecorder) dropped(field, reason string) {
	r.mu.Lock()
	r.drops[field+": "+reason]++
	r.mu.Unlock()
}

func (r *dryRecorder) encoded(field, how string) {
	r.mu.Lock()
	r.encodes[field+": "+how]++
	r.mu.Unlock()
}

func (r *dryRecorder) duplicates() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, s := range r.sinks {
		n += s.Duplicates()
	}
	return n
}

// duplicatesOfThisRun is the part of duplicates that the sinks tell were
// of messages this run wrote (driver.RunDuplicateReporter).
func (r *dryRecorder) duplicatesOfThisRun() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, s := range r.sinks {
		if rd, ok := s.(driver.RunDuplicateReporter); ok {
			n += rd.DuplicatesOfThisRun()
		}
	}
	return n
}

func (r *dryRecorder) report(wouldWrite int64, rejects map[string]int64, examples map[string]Example, sampled bool) *DryRunReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &DryRunReport{
		WouldWrite:  wouldWrite,
		WouldReject: maps.Clone(rejects),
		WouldDrop:   maps.Clone(r.drops),
		WouldEncode: maps.Clone(r.encodes),
		Sampled:     sampled,
		Examples:    map[string]Example{},
	}
	for k, ex := range examples {
		d.Examples["reject:"+k] = ex
	}
	return d
}

// watchSink wraps the sink opener so the mapping's drop callbacks are
// recorded too, and the sink's duplicate count can be read.
func (j *job) watchSink(open bridge.SinkOpener, rec *dryRecorder, tr *tracker) bridge.SinkOpener {
	return func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		s, err := open(ctx, func(field, reason string) {
			if how, ok := mapping.EncodedReport(reason); ok {
				rec.encoded(field, how)
			} else {
				rec.dropped(field, reason)
			}
			if onDrop != nil {
				onDrop(field, reason)
			}
		})
		if err != nil {
			refuseForGood(tr, err)
			return nil, err
		}
		if dr, ok := s.(driver.DuplicateReporter); ok {
			rec.mu.Lock()
			rec.sinks = append(rec.sinks, dr)
			rec.mu.Unlock()
		}
		return s, nil
	}
}

// refuseForGood ends the job on a sink that no retry will open (credentials
// refused): the engine would retry it until -connect-timeout.
func refuseForGood(tr *tracker, err error) {
	if driver.IsPermanent(err) {
		tr.refuse(err)
	}
}

// watchDeadLetters wraps the dead-letter sink so the report can show one
// example per reason, with the description the engine wrote.
func watchDeadLetters(open bridge.SinkOpener, tr *tracker) bridge.SinkOpener {
	return func(ctx context.Context, onDrop func(field, reason string)) (driver.Sink, error) {
		s, err := open(ctx, onDrop)
		if err != nil {
			refuseForGood(tr, err)
			return nil, err
		}
		return &exampleSink{PassSink: driver.PassSink{Sink: s}, tr: tr}, nil
	}
}

type exampleSink struct {
	driver.PassSink // readiness and the rest, as the dead-letter sink's
	tr              *tracker
}

func (s *exampleSink) Send(ctx context.Context, msgs []*mapping.Message) []error {
	errs := s.Sink.Send(ctx, msgs)
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		reason, _ := m.Attr(bridge.AttrDeadLetterReason)
		desc, _ := m.Attr(bridge.AttrDeadLetterDescription)
		s.tr.example(reason.Str(), m, desc.Str())
	}
	return errs
}
