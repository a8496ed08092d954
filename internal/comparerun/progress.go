package comparerun

import (
	"fmt"
	"io"
	"strings"
)

// Bar draws a one-line progress bar, redrawn in place with a carriage
// return: for a terminal only (a log file would get every frame).
type Bar struct {
	w     io.Writer
	drawn int // filled cells last drawn, -1 before the first frame
}

// barWidth is the bar's cells.
const barWidth = 40

// NewBar returns a bar drawing on w.
func NewBar(w io.Writer) *Bar { return &Bar{w: w, drawn: -1} }

// Update redraws the bar when a cell fills, and ends the line when done
// reaches total. It fits Options.Progress.
func (b *Bar) Update(done, total int) {
	cells := barWidth
	if total > 0 {
		cells = done * barWidth / total
	}
	if cells == b.drawn && done != total {
		return
	}
	b.drawn = cells
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d", strings.Repeat("=", cells), strings.Repeat(" ", barWidth-cells), done, total)
	if done == total {
		fmt.Fprintln(b.w)
	}
}
