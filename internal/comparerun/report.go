package comparerun

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// ErrorRow is the row of a model's requests that one side or both
// answered with an error (or an answer that is not TF's).
const ErrorRow = "(error)"

// Report aggregates the comparisons of a run.
type Report struct {
	NameA, NameB string
	Tolerance    tfcompare.Tolerance
	Started      time.Time
	Elapsed      time.Duration
	// Requests compared, and those of them whose answers mismatch.
	Requests, Mismatches int
	Models               []*ModelReport // by name
	byModel              map[string]*ModelReport
}

// ModelReport is one model's rows, one per output, in the order the
// answers first gave them.
type ModelReport struct {
	Model    string
	Requests int
	Rows     []*Row
}

// Row aggregates one output of one model over the requests.
type Row struct {
	Output string
	// DType is the output's JSON dtype ("float" or "float/int" when the
	// two sides differ), as first seen.
	DType string
	// Requests whose answers had the output, and how they compared.
	Requests, Identical, Within, Mismatch int
	// Elements compared, Differ of them not identical.
	Elements, Differ     int64
	MaxAbs, MaxRel       float64
	Abs, Rel             tfcompare.Histogram
	NonFinite            int64
	Top1Total, Top1Agree int64
	Top1ScoreErr         float64
	// Problem is the first mismatch's explanation, Problems how many
	// requests had one.
	Problem  string
	Problems int
}

func newReport(o Options) *Report {
	return &Report{NameA: o.NameA, NameB: o.NameB, Tolerance: o.Tolerance, Started: time.Now(), byModel: map[string]*ModelReport{}}
}

func (m *ModelReport) row(name string) *Row {
	for _, r := range m.Rows {
		if r.Output == name {
			return r
		}
	}
	r := &Row{Output: name}
	m.Rows = append(m.Rows, r)
	return r
}

// add counts one comparison.
func (rep *Report) add(req *Request, r *tfcompare.Result) {
	m := rep.byModel[req.Model]
	if m == nil {
		m = &ModelReport{Model: req.Model}
		rep.byModel[req.Model] = m
	}
	m.Requests++
	rep.Requests++
	if r.Verdict == tfcompare.Mismatch {
		rep.Mismatches++
	}
	if len(r.Outputs) == 0 {
		row := m.row(ErrorRow)
		row.count(r.Verdict)
		switch {
		case r.Problem != "":
			row.note(r.Problem + errorTexts(r))
		case r.Verdict == tfcompare.Within:
			row.note(fmt.Sprintf("same status %d, other text: %q vs %q", r.StatusA, r.ErrorA, r.ErrorB))
		}
		return
	}
	for i := range r.Outputs {
		o := &r.Outputs[i]
		row := m.row(o.Name)
		if row.DType == "" {
			row.DType = o.DTypeA.String()
			if o.DTypeA != o.DTypeB {
				row.DType += "/" + o.DTypeB.String()
			}
		}
		row.count(o.Verdict)
		row.Elements += int64(o.Elements)
		row.Differ += int64(o.Differ)
		row.MaxAbs = max(row.MaxAbs, o.MaxAbs)
		row.MaxRel = max(row.MaxRel, o.MaxRel)
		row.Abs.Merge(&o.Abs)
		row.Rel.Merge(&o.Rel)
		row.NonFinite += int64(o.NonFinite)
		row.Top1Total += int64(o.Top1Total)
		row.Top1Agree += int64(o.Top1Agree)
		row.Top1ScoreErr = max(row.Top1ScoreErr, o.Top1ScoreErr)
		switch {
		case r.Problem != "":
			row.note(r.Problem)
		case o.Problem != "":
			row.note(o.Problem)
		case o.NonFinite > 0:
			row.note(fmt.Sprintf("%d NaN/Inf positions differ, the first at flat index %d", o.NonFinite, o.FirstNonFinite))
		case o.Top1Total > o.Top1Agree:
			row.note(fmt.Sprintf("top-1 label differs in %d of %d examples", o.Top1Total-o.Top1Agree, o.Top1Total))
		}
	}
}

// errorTexts adds the error texts of the sides that have one.
func errorTexts(r *tfcompare.Result) string {
	var parts []string
	if r.ErrorA != "" {
		parts = append(parts, "A: "+r.ErrorA)
	}
	if r.ErrorB != "" {
		parts = append(parts, "B: "+r.ErrorB)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func (row *Row) count(v tfcompare.Verdict) {
	row.Requests++
	switch v {
	case tfcompare.Identical:
		row.Identical++
	case tfcompare.Within:
		row.Within++
	default:
		row.Mismatch++
	}
}

func (row *Row) note(p string) {
	row.Problems++
	if row.Problem == "" {
		row.Problem = p
	}
}

// finish orders the models by name.
func (rep *Report) finish() {
	rep.Models = rep.Models[:0]
	for _, m := range rep.byModel {
		rep.Models = append(rep.Models, m)
	}
	slices.SortFunc(rep.Models, func(a, b *ModelReport) int { return strings.Compare(a.Model, b.Model) })
}

// Passed reports whether every answer matched within tolerance.
func (rep *Report) Passed() bool { return rep.Mismatches == 0 }

// P99Abs and P99Rel are upper bounds of the rows' 99th percentile
// errors (see tfcompare.Histogram.Quantile), never above the maximum.
func (row *Row) P99Abs() float64 { return min(row.Abs.Quantile(0.99), row.MaxAbs) }

// P99Rel is P99Abs for the relative error.
func (row *Row) P99Rel() float64 { return min(row.Rel.Quantile(0.99), row.MaxRel) }

// Numeric reports whether the row has numeric errors to show.
func (row *Row) Numeric() bool { return row.Abs.Total > 0 }

// Top1 is "agree/total", "" outside classify.
func (row *Row) Top1() string {
	if row.Top1Total == 0 {
		return ""
	}
	return strconv.FormatInt(row.Top1Agree, 10) + "/" + strconv.FormatInt(row.Top1Total, 10)
}

// num formats an error for the table: 3 significant digits.
func num(x float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case x == 0:
		return "0"
	case math.IsInf(x, 1):
		return "inf"
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// WriteTable prints the per-model, per-output table and a summary line.
func (rep *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "A: %s\nB: %s\ntolerance: abs %g, rel %g (|a-b| <= abs + rel*|a|)\n\n", rep.NameA, rep.NameB, rep.Tolerance.Abs, rep.Tolerance.Rel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tOUTPUT\tDTYPE\tREQUESTS\tIDENTICAL\tWITHIN\tMISMATCH\tMAX ABS\tP99 ABS\tMAX REL\tP99 REL\tTOP-1\tNOTE")
	for _, m := range rep.Models {
		for _, r := range m.Rows {
			top1 := r.Top1()
			if top1 == "" {
				top1 = "-"
			}
			note := r.Problem
			if r.Problems > 1 {
				note += fmt.Sprintf(" (and %d more)", r.Problems-1)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Model, r.Output, orDash(r.DType), r.Requests, r.Identical, r.Within, r.Mismatch,
				num(r.MaxAbs, r.Numeric()), num(r.P99Abs(), r.Numeric()), num(r.MaxRel, r.Numeric()), num(r.P99Rel(), r.Numeric()), top1, note)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "within tolerance"
	if !rep.Passed() {
		verdict = "OVER TOLERANCE"
	}
	_, err := fmt.Fprintf(w, "\n%d requests in %s, %d mismatched: %s\n", rep.Requests, rep.Elapsed.Round(time.Millisecond), rep.Mismatches, verdict)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
