package migrate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/mpb/v8"
)

// term is a terminal cols wide for mpb (mpb.WithConsoleWriter): it keeps
// each frame, what one Flush writes.
type term struct {
	bytes.Buffer // what mpb writes until it flushes
	cols         int
	mu           sync.Mutex
	frames       []string
}

func (t *term) IsTerminal() bool               { return true }
func (t *term) GetTermSize() (int, int, error) { return t.cols, 30, nil }

func (t *term) Flush(int) error {
	t.mu.Lock()
	t.frames = append(t.frames, t.String())
	t.mu.Unlock()
	t.Reset()
	return nil
}

func (t *term) Frames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.frames...)
}

func newTermBar(cols int) (*BarProgress, *term) {
	tm := &term{cols: cols}
	return newBarProgress(io.Discard, mpb.WithConsoleWriter(tm)), tm
}

// lastFrame is the bar's last drawn line.
func lastFrame(out string) string {
	lines := strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "job") {
			return lines[i]
		}
	}
	return ""
}

// The bar's last frame is the end of the job: a source that grew past the
// count at the start completed the bar there, and mpb drew nothing after
// ("1000 / 300 99 %"); an interrupted job of unknown total read
// "405 / 405 101 %".
func TestBarLastFrame(t *testing.T) {
	for _, tc := range []struct {
		name          string
		total         int64
		updates       []int64
		done          int64
		outcome       Outcome
		want, wantNot string
	}{
		{"grown and complete", 300, []int64{100, 300, 400}, 1000, OutcomeComplete, "1000 / 1000", "/ 300"},
		{"unknown and interrupted", -1, []int64{100, 405}, 405, OutcomeInterrupted, "405 / ?", "%"},
		{"known and interrupted", 500, []int64{100, 297}, 297, OutcomeInterrupted, "297 / 500", "100 %"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bar, tm := newTermBar(110)
			bar.Start("job", tc.total)
			for _, d := range tc.updates {
				bar.Update("job", Figures{Done: d, Total: tc.total})
			}
			// mpb completed a bar at the total it was created with, and
			// drew nothing after.
			if bar.state("job").bar.Completed() {
				t.Error("the bar completed before the job finished")
			}
			bar.Finish("job", Figures{Done: tc.done, Total: tc.total}, tc.outcome)
			bar.Close()
			frame := lastFrame(strings.Join(tm.Frames(), ""))
			if !strings.Contains(frame, tc.want) || strings.Contains(frame, tc.wantNot) {
				t.Errorf("last frame %q: want %q, not %q", frame, tc.want, tc.wantNot)
			}
		})
	}
}

// At 80 and 110 columns the bar keeps barMinWidth, whatever the name: a
// long one (sqs-fifo-to-servicebus-sessions) and the counters left it
// "[-]", then "[]", then nothing. The name stays whole (on a line of its
// own where it must), no line is wider than the terminal, and what the
// counters give up first is what says least. Counters that are 0 go
// before the bar narrows at all: on 100 columns they took 40 and left the
// bar its 20 (18 to draw in).
func TestBarKeepsItsWidth(t *testing.T) {
	const long = "sqs-fifo-to-servicebus-sessions"
	quiet := Figures{Done: 450, Total: 1500, Written: 450, Rate: 298, ETA: 4 * time.Second}
	busy := quiet
	busy.DeadLettered, busy.Retried, busy.Throttled, busy.Stuck = 2, 7, 5, 1
	for _, tc := range []struct {
		cols    int
		name    string
		f       Figures
		inline  bool     // the name on the bar's line
		want    []string // on the bar's line
		wantNot []string
		full    bool // the bar barMaxWidth wide
	}{
		{100, "mig", quiet, true, []string{"450 / 1500", "30 %", "298 msg/s ETA 4s"}, []string{"dead-lettered", "retried"}, true},
		{100, "orders", Figures{Done: 4100, Total: 12000, Written: 4098, DeadLettered: 2, Rate: 812, ETA: 10 * time.Second}, true,
			[]string{"4100 / 12000", "812 msg/s ETA 10s", "dead-lettered 2"}, []string{"retried"}, true},
		{110, "orders", quiet, true, []string{"450 / 1500", "30 %", "298 msg/s ETA 4s"}, []string{"dead-lettered 0"}, true},
		{120, "orders", quiet, true, []string{"450 / 1500", "30 %", "298 msg/s ETA 4s", "dead-lettered 0  retried 0  throttled 0"}, nil, true},
		{110, long, quiet, true, []string{"450 / 1500", "298 msg/s ETA 4s"}, []string{"dead-lettered"}, false},
		{110, long, busy, true, []string{"450 / 1500", "ETA 4s", "dead-lettered 2  stuck 1"}, []string{"msg/s", "retried"}, false},
		{80, "orders", quiet, true, []string{"450 / 1500", "30 %", "298 msg/s ETA 4s"}, []string{"dead-lettered"}, false},
		{80, "orders", busy, true, []string{"450 / 1500", "ETA 4s", "stuck 1"}, nil, false},
		{80, long, quiet, false, []string{"450 / 1500", "30 %", "298 msg/s ETA 4s"}, nil, false},
		{80, long, busy, false, []string{"450 / 1500", "ETA 4s", "stuck 1"}, nil, false},
		// under a second left: "ETA 0s" read as done
		{110, "orders", Figures{Done: 1480, Total: 1500, Written: 1480, Rate: 298, ETA: 70 * time.Millisecond}, true, []string{"298 msg/s ETA <1s"}, []string{"ETA 0s"}, false},
	} {
		t.Run(fmt.Sprintf("%d %s %d", tc.cols, tc.name, tc.f.Stuck), func(t *testing.T) {
			bar, tm := newTermBar(tc.cols)
			bar.Start(tc.name, tc.f.Total)
			bar.Update(tc.name, tc.f)
			bar.Close()
			frames := tm.Frames()
			if len(frames) == 0 {
				t.Fatal("nothing drawn")
			}
			frame := frames[len(frames)-1]
			lines := strings.Split(strings.TrimSuffix(frame, "\n"), "\n")
			for _, l := range lines {
				if w := runewidth.StringWidth(l); w > tc.cols {
					t.Errorf("a line of %d columns on a terminal of %d: %q", w, tc.cols, l)
				}
			}
			line := lines[len(lines)-1]
			t.Logf("%d columns:\n%s", tc.cols, frame)
			if wantLines := map[bool]int{true: 1, false: 2}[tc.inline]; len(lines) != wantLines || !strings.Contains(lines[0], tc.name) {
				t.Fatalf("frame %q: want the whole name on %d line(s)", frame, wantLines)
			}
			open, shut := strings.Index(line, "["), strings.Index(line, "]")
			if open < 0 || shut < open || shut-open+1 < barMinWidth {
				t.Errorf("the bar is narrower than %d columns: %q", barMinWidth, line)
			}
			if tc.full && shut-open+1 != barMaxWidth {
				t.Errorf("the bar is %d columns, want its full %d: %q", shut-open+1, barMaxWidth, line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(line, w) {
					t.Errorf("line %q has %q", line, w)
				}
			}
		})
	}
}

// A frame is drawn when the figures change, once: mpb's ticker (150 ms)
// drew each of the job's updates (about every 300 ms) twice, and the same
// frame over and over while they stood still. The bubble's clock runs a
// second between updates, and the same figures come twice.
func TestBarDrawsAFrameAnUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bar, tm := newTermBar(110)
		bar.Start("job", 100)
		synctest.Wait()
		for _, done := range []int64{10, 10, 20} {
			bar.Update("job", Figures{Done: done, Total: 100})
			synctest.Wait()
			time.Sleep(time.Second) // the bubble's clock: mpb's ticker would draw meanwhile
			synctest.Wait()
		}
		frames := tm.Frames()
		bar.Close()
		var shown []string
		for _, f := range frames {
			_, counts, _ := strings.Cut(f, "job")
			counts, _, _ = strings.Cut(counts, "[")
			shown = append(shown, strings.TrimSpace(counts))
		}
		if want := []string{"0 / 100", "10 / 100", "20 / 100"}; strings.Join(shown, ", ") != strings.Join(want, ", ") {
			t.Errorf("%d frames showing %q, want one each of %q", len(frames), shown, want)
		}
	})
}

// figureLog keeps the figures a job shows.
type figureLog struct {
	NoProgress
	updates []Figures
	final   Figures
}

func (l *figureLog) Update(_ string, f Figures)            { l.updates = append(l.updates, f) }
func (l *figureLog) Finish(_ string, f Figures, _ Outcome) { l.final = f }

// A move whose source grows during the run shows the new total, recounted:
// it kept the count at the start ("moved=430 total=300 percent=100.0",
// without an ETA, while hundreds were left).
func TestMoveRecountsAGrowingSource(t *testing.T) {
	defer func(d time.Duration) { totalRecountEvery = d }(totalRecountEvery)
	totalRecountEvery = 0
	b, pipes := setup(t, moveHCL)
	b.put("in", msgs(10, 0)...)
	b.growAfter, b.growInto, b.grow = 5, "in", msgs(20, 0)
	prog := &figureLog{}
	rep := Run(context.Background(), pipes, fastOptions(ModeMove), prog)
	if rep.Outcome != OutcomeComplete || rep.Jobs[0].Written != 30 {
		t.Fatalf("outcome %s, written %d: %s", rep.Outcome, rep.Jobs[0].Written, rep.Reason)
	}
	for _, f := range prog.updates {
		if f.Done > f.Total {
			t.Errorf("shown %d of %d", f.Done, f.Total)
		}
	}
	if prog.final.Done != 30 || prog.final.Total != 30 {
		t.Errorf("finished at %d of %d, want 30 of 30", prog.final.Done, prog.final.Total)
	}
}

// The last line of a run says no ETA (an interrupted move said eta=14s),
// and a dry run's total is what it read, not its sample cap ("moved=20
// total=100 percent=20.0").
func TestFinalFigures(t *testing.T) {
	for _, tc := range []struct {
		mode     Mode
		in, want Figures
	}{
		{ModeMove, Figures{Done: 60, Total: 100, ETA: 14 * time.Second}, Figures{Done: 60, Total: 100}},
		{ModeDryRun, Figures{Done: 20, Total: 100, ETA: 22 * time.Second}, Figures{Done: 20, Total: 20}},
		{ModeDryRun, Figures{Done: 20, Total: -1}, Figures{Done: 20, Total: -1}},
	} {
		if got := finalFigures(tc.in, tc.mode); got != tc.want {
			t.Errorf("%s %+v: %+v, want %+v", tc.mode, tc.in, got, tc.want)
		}
	}
}

// A progress line's percent is never 100.0 before everything is done, and
// reads as the share done otherwise.
func TestProgressPercent(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		want        string
	}{
		{1999, 2000, "99.9"},
		{19999, 20000, "99.9"},
		{2000, 2000, "100.0"},
		{2100, 2000, "100.0"}, // a source that grew: never above 100
		{342, 1000, "34.2"},
		{1, 3, "33.3"},
		{0, 5, "0.0"},
	} {
		attrs := figureAttrs("job", Figures{Done: tc.done, Total: tc.total})
		got := ""
		for i := 0; i+1 < len(attrs); i += 2 {
			if attrs[i] == "percent" {
				b, err := attrs[i+1].(percentValue).MarshalText()
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
		}
		if got != tc.want {
			t.Errorf("%d of %d: percent %q, want %q", tc.done, tc.total, got, tc.want)
		}
	}
}

// A slow move's progress rate is not rounded to 0 or 1 (a move at -rate
// 0.5 logged "rate=0/s"): below 10 msg/s it has a decimal, in text and
// JSON, as the summary's.
func TestProgressRate(t *testing.T) {
	for _, tc := range []struct {
		rate       float64
		text, json string
	}{
		{0, "0/s", "0"},
		{0.2, "0.2/s", "0.2"},
		{0.46, "0.5/s", "0.5"},
		{1, "1/s", "1"},
		{9.94, "9.9/s", "9.9"},
		{20.4, "20/s", "20"},
		{812.6, "813/s", "813"},
	} {
		text, _ := rateValue(tc.rate).MarshalText()
		js, _ := rateValue(tc.rate).MarshalJSON()
		if string(text) != tc.text || string(js) != tc.json {
			t.Errorf("rate %v: text %q, JSON %s; want %q, %s", tc.rate, text, js, tc.text, tc.json)
		}
	}
}
