package comparerun

import (
	"fmt"
	"html/template"
	"io"

	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// The page is self-contained: inline CSS and SVG, no script, nothing
// fetched, so that a CI artifact opens anywhere.
var page = template.Must(template.New("report").Funcs(template.FuncMap{"num": num}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tfsbridge compare: {{if .Passed}}within tolerance{{else}}over tolerance{{end}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f0f0; }
td.name, td.note { text-align: left; }
tr.mismatch td { background: #fde8e8; }
tr.within td { background: #fdf8e0; }
.pass { color: #1a7f37; } .fail { color: #c62828; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; }
figcaption { font-size: 0.9em; }
svg text { font-size: 10px; font-family: sans-serif; }
</style>
</head>
<body>
<h1>tfsbridge compare</h1>
<p>A: <code>{{.NameA}}</code><br>B: <code>{{.NameB}}</code><br>
Tolerance: abs {{.Tolerance.Abs}}, rel {{.Tolerance.Rel}} (|a−b| ≤ abs + rel·|a|)<br>
{{.Requests}} requests, {{.Mismatches}} mismatched:
<strong class="{{if .Passed}}pass{{else}}fail{{end}}">{{if .Passed}}within tolerance{{else}}over tolerance{{end}}</strong></p>
<table id="results">
<thead><tr><th>Model</th><th>Output</th><th>DType</th><th>Requests</th><th>Identical</th><th>Within</th><th>Mismatch</th>
<th>Max abs</th><th>p99 abs</th><th>Max rel</th><th>p99 rel</th><th>Top-1</th><th>Note</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="{{.Class}}"><td class="name">{{.Model}}</td><td class="name">{{.Row.Output}}</td><td class="name">{{.Row.DType}}</td>
<td>{{.Row.Requests}}</td><td>{{.Row.Identical}}</td><td>{{.Row.Within}}</td><td>{{.Row.Mismatch}}</td>
<td>{{num .Row.MaxAbs .Row.Numeric}}</td><td>{{num .Row.P99Abs .Row.Numeric}}</td><td>{{num .Row.MaxRel .Row.Numeric}}</td><td>{{num .Row.P99Rel .Row.Numeric}}</td>
<td>{{.Row.Top1}}</td><td class="note">{{.Row.Problem}}</td></tr>
{{end}}</tbody>
</table>
<h2>Error per output</h2>
<p>Numbers: elements per bucket of |a−b|, on a log scale of the error (four buckets per power of two; exact zeros first; red from the absolute tolerance up). Strings, bytes and bools: elements equal and differing.</p>
{{range .Rows}}{{if .Row.Output | ne "` + ErrorRow + `"}}<figure class="histogram" data-model="{{.Model}}" data-output="{{.Row.Output}}">
<figcaption>{{.Model}} / {{.Row.Output}}: {{.Row.Elements}} elements</figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Hist.Width}}" height="{{.Hist.Height}}" viewBox="0 0 {{.Hist.Width}} {{.Hist.Height}}" role="img" aria-label="absolute error histogram of {{.Model}} {{.Row.Output}}">
<line x1="0" y1="{{.Hist.Base}}" x2="{{.Hist.Width}}" y2="{{.Hist.Base}}" stroke="#888"/>
{{range .Hist.Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Fill}}"><title>{{.Label}}: {{.Count}}</title></rect>
{{end}}{{range .Hist.Ticks}}<text x="{{.X}}" y="{{.Y}}" text-anchor="{{.Anchor}}">{{.Text}}</text>
{{end}}</svg>
</figure>
{{end}}{{end}}
</body>
</html>
`))

type pageRow struct {
	Model string
	Row   *Row
	Class string
	Hist  histogram
}

type histogram struct {
	Width, Height, Base int
	Bars                []bar
	Ticks               []tick
}

type bar struct {
	X, Y, W, H  int
	Fill, Label string
	Count       uint64
}

type tick struct {
	X, Y         int
	Anchor, Text string
}

// WriteHTML writes the report as a self-contained HTML page: the table,
// and an inline SVG histogram of each output's absolute errors.
func (rep *Report) WriteHTML(w io.Writer) error {
	var rows []pageRow
	for _, m := range rep.Models {
		for _, r := range m.Rows {
			class := "identical"
			switch {
			case r.Mismatch > 0:
				class = "mismatch"
			case r.Within > 0:
				class = "within"
			}
			rows = append(rows, pageRow{Model: m.Model, Row: r, Class: class, Hist: histogramOf(r, rep.Tolerance.Abs)})
		}
	}
	return page.Execute(w, struct {
		*Report
		Rows []pageRow
	}{rep, rows})
}

// item is one bar to draw.
type item struct {
	label string
	count uint64
	red   bool
}

// histogramOf is a row's picture: for numbers, the absolute errors from
// zero through the last non-empty bucket, red from the absolute tolerance
// up; for strings, bytes and bools, the elements equal and differing.
func histogramOf(r *Row, absTol float64) histogram {
	if !r.Numeric() {
		return draw([]item{{"equal", uint64(r.Elements - r.Differ), false}, {"differ", uint64(r.Differ), true}}, "equal", "differ", uint64(r.Elements))
	}
	h := &r.Abs
	first, last := -1, -1
	for i, n := range h.Counts {
		if n == 0 || i == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	items := []item{{"0", h.Counts[0], false}}
	lowTick, highTick := "", ""
	if first >= 0 {
		for i := first; i <= last; i++ {
			lo, hi := tfcompare.Bounds(i)
			items = append(items, item{"[" + num(lo, true) + ", " + num(hi, true) + ")", h.Counts[i], lo >= absTol})
		}
		lo, _ := tfcompare.Bounds(first)
		_, hi := tfcompare.Bounds(last)
		lowTick, highTick = num(lo, true), num(hi, true)
	}
	g := draw(items, "0", "", h.Total)
	if first >= 0 {
		bw := g.Bars[0].W + 1
		g.Ticks = append(g.Ticks,
			tick{X: g.Bars[1].X, Y: g.Height - 4, Anchor: "start", Text: lowTick},
			tick{X: g.Bars[len(g.Bars)-1].X + bw, Y: g.Height - 4, Anchor: "end", Text: highTick})
	}
	return g
}

// draw lays out bars scaled to the fullest, with first's label under the
// first bar, last's under the last (when not empty), and the scale.
func draw(items []item, first, last string, total uint64) histogram {
	const width, height, base, barArea = 480, 140, 120, 110
	var top uint64 = 1
	for _, it := range items {
		top = max(top, it.count)
	}
	g := histogram{Width: width, Height: height, Base: base}
	bw := max((width-20)/len(items), 2)
	for k, it := range items {
		hgt := int(it.count * barArea / top)
		if it.count > 0 {
			hgt = max(hgt, 1)
		}
		fill := "#4a7bd0"
		if it.red {
			fill = "#d04a4a"
		}
		g.Bars = append(g.Bars, bar{X: 10 + k*bw, Y: base - hgt, W: max(bw-1, 1), H: hgt, Fill: fill, Label: it.label, Count: it.count})
	}
	g.Ticks = append(g.Ticks, tick{X: 10, Y: height - 4, Anchor: "start", Text: first})
	if last != "" {
		g.Ticks = append(g.Ticks, tick{X: 10 + len(items)*bw, Y: height - 4, Anchor: "end", Text: last})
	}
	g.Ticks = append(g.Ticks, tick{X: width - 4, Y: 12, Anchor: "end", Text: fmt.Sprintf("max %d of %d", top, total)})
	return g
}
