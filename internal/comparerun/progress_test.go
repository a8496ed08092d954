package comparerun

import (
	"bytes"
	"strings"
	"testing"
)

// The bar redraws only when a cell fills, and ends its line when done.
func TestBar(t *testing.T) {
	var out bytes.Buffer
	b := NewBar(&out)
	for i := 1; i <= 80; i++ {
		b.Update(i, 80)
	}
	frames := strings.Split(out.String(), "\r")[1:]
	if len(frames) != barWidth+1 { // the empty bar, then one per cell
		t.Fatalf("%d frames for 80 steps of a %d-cell bar, want %d", len(frames), barWidth, barWidth+1)
	}
	if frames[0] != "["+strings.Repeat(" ", barWidth)+"] 1/80" || frames[1] != "["+strings.Repeat("=", 1)+strings.Repeat(" ", barWidth-1)+"] 2/80" {
		t.Errorf("first frame %q", frames[0])
	}
	if last := frames[len(frames)-1]; last != "["+strings.Repeat("=", barWidth)+"] 80/80\n" {
		t.Errorf("last frame %q", last)
	}
}
