package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/floe-dev/floe/engine"
)

// progressLine draws one status line on a terminal. It never writes more
// than width-1 columns, so the terminal never wraps it and a redraw
// ("\r", the line, erase to end of line) replaces it completely: no stale
// wrapped lines, whatever was drawn before. Log lines written through it
// (it is an io.Writer) clear the line first and redraw it after.
type progressLine struct {
	mu      sync.Mutex
	w       io.Writer
	width   func() int // terminal columns
	trigger time.Duration
	now     func() time.Time
	last    engine.Progress
	have    bool
	at      time.Time // when last arrived
	shown   bool      // a line is on the screen
	stop    chan struct{}
	done    chan struct{}
}

// newProgressLine draws on w, asking width for the columns at every redraw
// (so a resized terminal is followed). trigger > 0 is --trigger mode: once
// caught up, a waiting line is shown and refreshed every second.
func newProgressLine(w io.Writer, width func() int, trigger time.Duration) *progressLine {
	return &progressLine{w: w, width: width, trigger: trigger, now: time.Now}
}

// terminalWidth returns the columns of the terminal f is, or 80.
func terminalWidth(f *os.File) func() int {
	return func() int {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
		return 80
	}
}

// startTicker refreshes the waiting line every second until finish.
func (p *progressLine) startTicker() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
}

// update records a progress snapshot and redraws.
func (p *progressLine) update(pr engine.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.have, p.at = pr, true, p.now()
	p.draw()
}

// text is the line for the last snapshot, before fitting it to the width.
func (p *progressLine) text() string {
	if !p.have {
		return fmt.Sprintf("running: no epoch committed by this run yet (new files are looked for every %s)", p.trigger)
	}
	pr := p.last
	wm := engine.FormatWatermark(pr.Watermark)
	if pr.FilesDone >= pr.FilesPending && p.trigger > 0 {
		return fmt.Sprintf("epoch %d  caught up, idle %s  files %d  rows %s  wm %s",
			pr.Epoch, p.now().Sub(p.at).Round(time.Second), pr.FilesDone, count(pr.RowsDone), wm)
	}
	el := p.now().Sub(pr.Started).Seconds()
	return fmt.Sprintf("epoch %d  files %d/%d  rows %s (%s/s)  wm %s",
		pr.Epoch, pr.FilesDone, pr.FilesPending, count(pr.RowsDone), count(int64(float64(pr.RowsDone)/max(el, 1e-3))), wm)
}

// draw replaces the line on the screen. The caller holds mu.
func (p *progressLine) draw() {
	fmt.Fprint(p.w, "\r"+fit(p.text(), p.width()-1)+"\x1b[K")
	p.shown = true
}

// clear erases the line. The caller holds mu.
func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// Write writes a log line above the progress line.
func (p *progressLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	n, err := p.w.Write(b)
	if p.have {
		p.draw()
	}
	return n, err
}

// finish stops the ticker and erases the line, leaving the cursor at the
// start of an empty line for what the command prints next.
func (p *progressLine) finish() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.have = false
}

// fit cuts s to at most n runes, marking a cut with "…".
func fit(s string, n int) string {
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// count renders a row count compactly: 999, 12.3k, 4.56M.
func count(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
}
