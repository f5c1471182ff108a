package migrate

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Figures are a job's progress at one moment.
type Figures struct {
	Done         int64 // written, dead-lettered or skipped (dry run: read)
	Total        int64 // the source's count at the start; -1 unknown
	Written      int64
	DeadLettered int64
	Retried      int64
	Throttled    int64
	Skipped      int64
	Stuck        int64   // messages nothing takes: they stay at the source
	Rate         float64 // messages per second since the start
	ETA          time.Duration
	DryRun       bool // Done counts what was read: nothing moved
}

// Progress shows a migration's progress.
type Progress interface {
	Start(job string, total int64)
	Update(job string, f Figures)
	Finish(job string, f Figures, o Outcome)
	// Close ends the display; call it before printing anything else.
	Close()
}

// NoProgress shows nothing.
type NoProgress struct{}

func (NoProgress) Start(string, int64)             {}
func (NoProgress) Update(string, Figures)          {}
func (NoProgress) Finish(string, Figures, Outcome) {}
func (NoProgress) Close()                          {}

// LogProgress writes one structured log line per job every Every, and one
// when a job finishes: for CI logs and Kubernetes Jobs.
type LogProgress struct {
	Log   *slog.Logger
	Every time.Duration

	mu   sync.Mutex
	last map[string]time.Time
}

func (l *LogProgress) Start(job string, total int64) {
	if total < 0 {
		l.Log.Info("migration started", "pipeline", job) // no total, as in the progress lines
		return
	}
	l.Log.Info("migration started", "pipeline", job, "total", total)
}

func (l *LogProgress) Update(job string, f Figures) {
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	now := time.Now()
	if t, ok := l.last[job]; ok && now.Sub(t) < l.Every {
		l.mu.Unlock()
		return
	}
	if _, ok := l.last[job]; !ok {
		// The first line after one interval, not at once.
		l.last[job] = now
		l.mu.Unlock()
		return
	}
	l.last[job] = now
	l.mu.Unlock()
	l.Log.Info("migration progress", figureAttrs(job, f)...)
}

func (l *LogProgress) Finish(job string, f Figures, o Outcome) {
	l.Log.Info("migration finished", append(figureAttrs(job, f), "outcome", string(o))...)
}

func (l *LogProgress) Close() {}

func figureAttrs(job string, f Figures) []any {
	done := "moved"
	if f.DryRun {
		done = "read" // a dry run's progress said "moved=20"
	}
	a := []any{"pipeline", job, done, f.Done}
	if f.Total >= 0 {
		a = append(a, "total", f.Total)
		if f.Total > 0 {
			// In whole tenths, rounded down: rounded to the nearest, 1,999
			// of 2,000 read "percent=100.0" with a message left.
			tenths := min(f.Done, f.Total) * 1000 / f.Total
			a = append(a, "percent", percentValue(float64(tenths)/10))
		}
	}
	a = append(a, "rate", rateValue(f.Rate))
	if f.ETA > 0 {
		a = append(a, "eta", etaValue(f.ETA.Round(time.Second)))
	}
	a = append(a, "written", f.Written, "dead_lettered", f.DeadLettered,
		"retried", f.Retried, "throttled", f.Throttled, "skipped", f.Skipped)
	if f.Stuck > 0 {
		a = append(a, "stuck", f.Stuck)
	}
	return a
}

// BarProgress draws a live progress bar per job on a terminal.
type BarProgress struct {
	p    *mpb.Progress
	mu   sync.Mutex
	bars map[string]*barState
}

type barState struct {
	bar *mpb.Bar
	mu  sync.Mutex
	f   Figures
}

// NewBarProgress draws on w, which should be a terminal.
func NewBarProgress(w io.Writer) *BarProgress { return newBarProgress(w) }

// newBarProgress takes more of mpb's options (tests draw to a buffer with
// mpb.WithAutoRefresh).
func newBarProgress(w io.Writer, opts ...mpb.ContainerOption) *BarProgress {
	return &BarProgress{
		p:    mpb.New(append([]mpb.ContainerOption{mpb.WithOutput(w), mpb.WithWidth(32), mpb.WithRefreshRate(150 * time.Millisecond)}, opts...)...),
		bars: map[string]*barState{},
	}
}

// Above returns a writer for log lines: above the live bars while they
// run (mpb prints them there and draws the bars again below), to fallback
// once they are done. Written past the bars, a log line left a stale bar
// above it and lost its last row to the bar's next redraw.
func (b *BarProgress) Above(fallback io.Writer) io.Writer {
	return aboveBars{p: b.p, fallback: fallback}
}

type aboveBars struct {
	p        *mpb.Progress
	fallback io.Writer
}

func (a aboveBars) Write(p []byte) (int, error) {
	n, err := a.p.Write(p)
	var done mpb.ErrDone[*mpb.Progress]
	if errors.As(err, &done) {
		return a.fallback.Write(p)
	}
	return n, err
}

func (b *BarProgress) Start(job string, total int64) {
	st := &barState{f: Figures{Total: total}}
	opts := []mpb.BarOption{
		mpb.PrependDecorators(
			decor.Name(job, decor.WCSyncSpaceR),
			decor.Any(func(decor.Statistics) string {
				st.mu.Lock()
				defer st.mu.Unlock()
				if st.f.Total < 0 {
					return fmt.Sprintf("%d / ?", st.f.Done)
				}
				return fmt.Sprintf("%d / %d", st.f.Done, st.f.Total)
			}, decor.WCSyncSpace),
		),
		mpb.AppendDecorators(
			decor.Any(func(s decor.Statistics) string {
				st.mu.Lock()
				defer st.mu.Unlock()
				if st.f.Total < 0 && !s.Completed {
					return "" // no total: a percentage would mean nothing
				}
				return fmt.Sprintf("%d %%", int64(100*float64(s.Current)/float64(max(s.Total, 1))))
			}, decor.WCSyncSpace),
			decor.Any(func(decor.Statistics) string {
				st.mu.Lock()
				defer st.mu.Unlock()
				s := rateText(st.f.Rate)
				if st.f.ETA > 0 {
					s += " ETA " + st.f.ETA.Round(time.Second).String()
				}
				s += fmt.Sprintf("  dead-lettered %d  retried %d  throttled %d",
					st.f.DeadLettered, st.f.Retried, st.f.Throttled)
				if st.f.Stuck > 0 {
					s += fmt.Sprintf("  stuck %d", st.f.Stuck)
				}
				return s
			}, decor.WCSyncSpace),
		),
	}
	// Created with no total, so that mpb never completes a bar on its
	// own: with the count at the start as its total, a source that grew
	// during the run completed it there, and mpb drew nothing after (the
	// last frame said "1000 / 300 99 %"). The total shown is set apart;
	// Finish completes the bar.
	if total < 0 {
		// Unknown: a spinner. A bar whose total followed what was read
		// stood near full all the time.
		st.bar = b.p.New(0, mpb.SpinnerStyle(), opts...)
	} else {
		st.bar = b.p.New(0, mpb.BarStyle(), opts...)
		st.bar.SetTotal(total, false)
	}
	b.mu.Lock()
	b.bars[job] = st
	b.mu.Unlock()
}

func (b *BarProgress) state(job string) *barState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bars[job]
}

func (b *BarProgress) Update(job string, f Figures) {
	st := b.state(job)
	if st == nil {
		return
	}
	st.mu.Lock()
	st.f = f
	st.mu.Unlock()
	if f.Total < 0 || f.Done > f.Total {
		st.bar.SetTotal(f.Done+1, false)
	} else {
		st.bar.SetTotal(f.Total, false) // the job recounts a source that grows
	}
	st.bar.SetCurrent(f.Done)
}

func (b *BarProgress) Finish(job string, f Figures, o Outcome) {
	st := b.state(job)
	if st == nil {
		return
	}
	// A drained source completes the bar at 100 % of what was moved; any
	// other ending leaves it where it stood, with a total still unknown
	// if it was (an interrupted AMQP move read "405 / 405 101 %").
	complete := o == OutcomeComplete || o == OutcomeDeadLettered
	st.mu.Lock()
	if complete || f.Total >= 0 && f.Done > f.Total {
		f.Total = f.Done
	}
	st.f = f
	st.mu.Unlock()
	st.bar.SetCurrent(f.Done)
	if complete {
		st.bar.SetTotal(f.Done, true)
	} else {
		st.bar.Abort(false)
	}
}

func (b *BarProgress) Close() {
	b.mu.Lock()
	for _, st := range b.bars {
		if !st.bar.Completed() {
			st.bar.Abort(false)
		}
	}
	b.mu.Unlock()
	b.p.Wait()
}

// The progress figures read well in text ("percent=34.2 rate=812/s
// eta=10s") and are numbers in JSON logs, for whatever reads them there
// (percent, messages per second, seconds): slog's text handler writes
// an encoding.TextMarshaler's text, its JSON handler the json.Marshaler's.
type (
	percentValue float64
	rateValue    float64
	etaValue     time.Duration
)

func (p percentValue) MarshalText() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(p), 'f', 1, 64), nil
}
func (p percentValue) MarshalJSON() ([]byte, error) { return p.MarshalText() }

// Below 10 msg/s with a decimal, as the summary's rateText: a move at
// -rate 0.5 logged "rate=0/s" or "rate=1/s" all along.
func (r rateValue) MarshalText() ([]byte, error) {
	return append(r.number(), "/s"...), nil
}
func (r rateValue) MarshalJSON() ([]byte, error) { return r.number(), nil }

func (r rateValue) number() []byte {
	if v := float64(r); v > 0 && v < 10 {
		return strconv.AppendFloat(nil, math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.AppendFloat(nil, math.Round(float64(r)), 'f', 0, 64)
}

func (e etaValue) MarshalText() ([]byte, error) { return []byte(time.Duration(e).String()), nil }
func (e etaValue) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(e).Seconds(), 'f', -1, 64), nil
}
