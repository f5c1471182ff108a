package migrate

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-runewidth"
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
//
// A frame is drawn when the figures change (Update), not on mpb's own
// ticker: the job updates every 250 ms or so and the ticker ran every
// 150 ms, so each frame was drawn twice, or more while the figures stood
// still.
//
// The line is "[name] done / total [bar] percent rate ETA counters". mpb
// gives the bar what the decorators leave, at most barMaxWidth: a long
// pipeline name and the counters took all of it on a 110-column terminal
// ("[]"). So the name goes on a line of its own where it would leave the
// rest too little, and the decorators right of the bar each take the
// fullest of their forms that leaves the bar barMinWidth.
type BarProgress struct {
	p       *mpb.Progress
	refresh chan any
	mu      sync.Mutex
	bars    map[string]*barState
	// nameWidth is the widest name of the jobs started: every bar puts its
	// name on the same side of that choice, so that their columns align.
	nameWidth atomic.Int64
}

const (
	barMinWidth = 20 // columns, brackets included
	barMaxWidth = 32
	// lineMinWidth is what a bar's line needs besides the name: counts,
	// a barMinWidth bar, the percentage and an ETA.
	lineMinWidth = 56
)

type barState struct {
	bar *mpb.Bar
	mu  sync.Mutex
	f   Figures
}

// NewBarProgress draws on w, which should be a terminal.
func NewBarProgress(w io.Writer) *BarProgress { return newBarProgress(w) }

// newBarProgress takes more of mpb's options (tests draw to a terminal of
// their own with mpb.WithConsoleWriter).
func newBarProgress(w io.Writer, opts ...mpb.ContainerOption) *BarProgress {
	// Room for one request: a frame asked for while another waits is drawn
	// by that one, which reads the figures when it draws.
	refresh := make(chan any, 1)
	return &BarProgress{
		p:       mpb.New(append([]mpb.ContainerOption{mpb.WithOutput(w), mpb.WithManualRefresh(refresh)}, opts...)...),
		refresh: refresh,
		bars:    map[string]*barState{},
	}
}

// draw asks mpb for a frame, without waiting: after Close nothing reads
// the channel.
func (b *BarProgress) draw() {
	select {
	case b.refresh <- struct{}{}:
	default:
	}
}

// Above returns a writer for log lines: above the live bars while they
// run (mpb prints them there and draws the bars again below), to fallback
// once they are done. Written past the bars, a log line left a stale bar
// above it and lost its last row to the bar's next redraw.
func (b *BarProgress) Above(fallback io.Writer) io.Writer {
	return aboveBars{b: b, fallback: fallback}
}

type aboveBars struct {
	b        *BarProgress
	fallback io.Writer
}

func (a aboveBars) Write(p []byte) (int, error) {
	n, err := a.b.p.Write(p)
	var done mpb.ErrDone[*mpb.Progress]
	if errors.As(err, &done) {
		return a.fallback.Write(p)
	}
	// mpb prints it with the next frame: now, not at the next update
	// (none comes while a job counts its brokers).
	a.b.draw()
	return n, err
}

// inline reports whether the name goes on the bar's line in a terminal of
// width columns.
func (b *BarProgress) inline(width int) bool {
	return int(b.nameWidth.Load())+1+lineMinWidth <= width
}

// fits reports whether text, after pad spaces, leaves the bar barMinWidth
// and reserve more of what the decorators before it left (s.AvailableWidth,
// less the space mpb puts on each side of the bar).
func fits(s decor.Statistics, pad, reserve int, text string) bool {
	return pad+runewidth.StringWidth(text)+reserve+barMinWidth+2 <= s.AvailableWidth
}

// What the line gives up first, as it narrows: the counters that are 0
// (before the bar narrows below barMaxWidth), then retried, throttled,
// the rate, dead-lettered, stuck, the ETA (before it narrows below
// barMinWidth).

// rateForms is the rate and ETA decorator's text: the fullest of its forms
// that leaves the counters that tell most (dead-lettered, stuck) their
// room; where none does, they do not fit either way, and it is the fullest
// that fits.
func rateForms(s decor.Statistics, f Figures) string {
	rate := rateText(f.Rate)
	forms := []string{rate, ""} // "": the rate gives way
	if f.ETA > 0 {
		eta := "ETA " + f.ETA.Round(time.Second).String()
		if f.ETA < time.Second {
			eta = "ETA <1s" // "0s" read as done while messages were left
		}
		forms = []string{rate + " " + eta, eta}
	}
	for _, reserve := range []int{telling(f), 0} {
		for _, t := range forms {
			if fits(s, 1, reserve, t) {
				return t
			}
		}
	}
	return ""
}

// telling is the width of the counters that tell most (dead-lettered and
// stuck, where not 0), their two spaces before them included: what the
// rate leaves them.
func telling(f Figures) int {
	var parts []string
	if f.DeadLettered != 0 {
		parts = append(parts, fmt.Sprintf("dead-lettered %d", f.DeadLettered))
	}
	if f.Stuck > 0 {
		parts = append(parts, fmt.Sprintf("stuck %d", f.Stuck))
	}
	if len(parts) == 0 {
		return 0
	}
	return 2 + runewidth.StringWidth(strings.Join(parts, "  "))
}

// counterForms are the counters' texts from the fullest to the shortest:
// all of them; those that are not 0; then, one at a time, less of those,
// the least telling first (retried, throttled, dead-lettered): stuck goes
// last.
func counterForms(f Figures) []string {
	type counter struct {
		name string
		n    int64
	}
	shown := []counter{{"dead-lettered", f.DeadLettered}, {"retried", f.Retried}, {"throttled", f.Throttled}}
	if f.Stuck > 0 {
		shown = append(shown, counter{"stuck", f.Stuck})
	}
	text := func(cs []counter) string {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = fmt.Sprintf("%s %d", c.name, c.n)
		}
		return strings.Join(parts, "  ")
	}
	forms := []string{text(shown)}
	nonZero := slices.DeleteFunc(shown, func(c counter) bool { return c.n == 0 })
	for _, drop := range []string{"", "retried", "throttled", "dead-lettered"} {
		nonZero = slices.DeleteFunc(nonZero, func(c counter) bool { return c.name == drop })
		if t := text(nonZero); t != "" && t != forms[len(forms)-1] {
			forms = append(forms, t)
		}
	}
	return forms
}

// counterText is the fullest of counterForms that fits, with two spaces
// before it, or "". Counters that are 0 say least: they are shown only
// where the bar keeps its full barMaxWidth beside them. Shown wherever
// they left the bar barMinWidth, they took 40 columns of a 100-column
// terminal and left it 18 to draw in.
func counterText(s decor.Statistics, f Figures) string {
	for i, c := range counterForms(f) {
		reserve := 0
		if i == 0 && (f.DeadLettered == 0 || f.Retried == 0 || f.Throttled == 0) {
			reserve = barMaxWidth - barMinWidth // the form with the 0s
		}
		if fits(s, 2, reserve, c) {
			return "  " + c
		}
	}
	return ""
}

func (b *BarProgress) Start(job string, total int64) {
	st := &barState{f: Figures{Total: total}}
	for w := int64(runewidth.StringWidth(job)); ; {
		old := b.nameWidth.Load()
		if w <= old || b.nameWidth.CompareAndSwap(old, w) {
			break
		}
	}
	opts := []mpb.BarOption{
		mpb.BarWidth(barMaxWidth),
		// The name's own line, when it does not go on the bar's; a row
		// that writes nothing is no line to mpb.
		mpb.BarTopExtender(mpb.BarFillerFunc(func(w io.Writer, s decor.Statistics) error {
			if b.inline(s.AvailableWidth) {
				return nil
			}
			_, err := io.WriteString(w, runewidth.Truncate(job, s.AvailableWidth, "…")+"\n")
			return err
		})),
		mpb.PrependDecorators(
			decor.Any(func(s decor.Statistics) string {
				if b.inline(s.AvailableWidth) {
					return job + " "
				}
				return "  " // under the name
			}, decor.WC{C: decor.DSyncWidthR}),
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
			decor.Any(func(s decor.Statistics) string {
				st.mu.Lock()
				defer st.mu.Unlock()
				return rateForms(s, st.f)
			}, decor.WCSyncSpace),
			decor.Any(func(s decor.Statistics) string {
				st.mu.Lock()
				defer st.mu.Unlock()
				return counterText(s, st.f)
			}, decor.WCSyncWidthR),
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
	b.draw()
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
	same := st.f == f
	st.f = f
	st.mu.Unlock()
	if same && f.Total >= 0 {
		// Nothing to draw anew (a spinner turns at each frame: it shows
		// the job is alive while the figures stand still).
		return
	}
	if f.Total < 0 || f.Done > f.Total {
		st.bar.SetTotal(f.Done+1, false)
	} else {
		st.bar.SetTotal(f.Total, false) // the job recounts a source that grows
	}
	st.bar.SetCurrent(f.Done)
	b.draw()
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
	// mpb draws the last bar's end itself; another's (-parallel) comes
	// with the next frame of those still running.
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
