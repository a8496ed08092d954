package tfcompare

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/tfsbridge/tfsbridge/translate/jsontext"
)

// Answer is one HTTP answer: its status and body.
type Answer struct {
	Status int
	Body   []byte
}

// Tolerance decides when two numbers match: b is within tolerance of the
// reference a when |a−b| ≤ Abs + Rel·|a| (numpy's allclose rule).
type Tolerance struct {
	Abs, Rel float64
}

// DefaultTolerance is numpy.allclose's: rtol 1e-5, atol 1e-8.
var DefaultTolerance = Tolerance{Abs: 1e-8, Rel: 1e-5}

// Verdict is how two answers, or two outputs, compare.
type Verdict uint8

// The verdicts, from best to worst.
const (
	Identical Verdict = iota // the same values (NaN equal to NaN), or errors with the same status and text
	Within                   // values differ within tolerance, or errors with the same status
	Mismatch                 // anything else
)

var verdictNames = [...]string{"identical", "within", "mismatch"}

func (v Verdict) String() string { return verdictNames[v] }

// Output compares one output of the two answers.
type Output struct {
	Name    string
	Verdict Verdict
	// InA and InB say which answers have the output.
	InA, InB bool
	// Shapes as the JSON nests them (the batch dimension first); nil when
	// absent. DTypes as the JSON tells them.
	ShapeA, ShapeB []int64
	DTypeA, DTypeB DType
	// Problem says why the output cannot be compared element by element
	// or is a mismatch whatever its values (shape, dtype, missing).
	Problem string
	// Elements compared; Differ of them not identical; Over of them
	// beyond tolerance (NonFinite and non-numeric differences included).
	Elements, Differ, Over int
	// MaxAbs and MaxRel are the largest absolute and relative errors of
	// finite numeric elements (relative to A's value; +Inf where A's is 0
	// and B's is not).
	MaxAbs, MaxRel float64
	// Worst is the flat index of the finite numeric element with the
	// largest relative error (the largest absolute one among equals; the
	// first among those), -1 when no such element differs; WorstA and
	// WorstB are its values in A and B.
	Worst          int
	WorstA, WorstB float64
	// NonFinite counts positions where NaN or ±Inf of one answer is not
	// the same in the other; FirstNonFinite is the first (a flat index),
	// -1 when none.
	NonFinite, FirstNonFinite int
	// Abs and Rel are the distributions of the elements' errors (finite
	// numeric elements only).
	Abs, Rel Histogram
	// Classify's "scores" output only: examples compared, examples whose
	// top-1 label agrees, and the largest difference of top-1 scores.
	Top1Total, Top1Agree int
	Top1ScoreErr         float64
}

// Result compares two answers. Its slices belong to the Comparer that made
// it and are valid until its next Compare.
type Result struct {
	Verdict          Verdict
	KindA, KindB     Kind
	StatusA, StatusB int
	// ErrorA and ErrorB are the error texts of error (or invalid) answers.
	ErrorA, ErrorB string
	// Problem says why the answers mismatch as a whole (status, form).
	Problem string
	Outputs []Output
}

// Comparer compares answers with a tolerance, reusing its memory between
// calls. It is not safe for concurrent use: give each goroutine its own.
type Comparer struct {
	Tolerance Tolerance
	// Limits bound the JSON parser (zero: jsontext's defaults).
	Limits jsontext.Limits
	a, b   side
	res    Result
	order  []int // ComparePredict's order of the outputs in the texts
}

// New returns a Comparer with tolerance tol.
func New(tol Tolerance) *Comparer { return &Comparer{Tolerance: tol} }

// Compare compares answer b with the reference a. The result is valid
// until the next call.
func (c *Comparer) Compare(a, b Answer) *Result {
	r := &c.res
	outs := r.Outputs[:0]
	*r = Result{StatusA: a.Status, StatusB: b.Status}
	c.a.load(a, c.Limits)
	c.b.load(b, c.Limits)
	defer c.a.reset()
	defer c.b.reset()
	r.KindA, r.KindB = c.a.kind, c.b.kind
	r.ErrorA, r.ErrorB = c.a.errText, c.b.errText
	switch {
	case c.a.kind == Error || c.b.kind == Error || c.a.kind == Invalid || c.b.kind == Invalid:
		r.Outputs = outs
		c.compareErrors(r, a, b)
		return r
	case c.a.kind != c.b.kind:
		r.Verdict = Mismatch
		r.Problem = fmt.Sprintf("answer forms differ: %s vs %s", c.a.kind, c.b.kind)
	}
	c.compareOutputs(r, outs)
	return r
}

// compareOutputs compares the outputs of the two loaded answers, onto
// outs (r.Outputs' memory), and folds their verdicts into r's.
func (c *Comparer) compareOutputs(r *Result, outs []Output) {
	for i := range c.a.outs {
		oa := &c.a.outs[i]
		outs = append(outs, Output{})
		o := &outs[len(outs)-1]
		c.compareOutput(o, oa, c.b.find(oa.name))
	}
	for i := range c.b.outs {
		ob := &c.b.outs[i]
		if c.a.find(ob.name) == nil {
			outs = append(outs, Output{})
			c.compareOutput(&outs[len(outs)-1], nil, ob)
		}
	}
	r.Outputs = outs
	if r.KindA == Classify && r.KindB == Classify {
		c.top1(r)
	}
	for i := range r.Outputs {
		r.Verdict = max(r.Verdict, r.Outputs[i].Verdict)
	}
}

// compareErrors compares answers of which at least one is an error or
// invalid: errors by status, identical when the bodies are too.
func (c *Comparer) compareErrors(r *Result, a, b Answer) {
	switch {
	case c.a.kind != c.b.kind || a.Status != b.Status:
		r.Verdict = Mismatch
		r.Problem = fmt.Sprintf("%s vs %s", describe(c.a.kind, a.Status), describe(c.b.kind, b.Status))
	case c.a.kind == Invalid:
		r.Verdict = Mismatch
		if bytes.Equal(a.Body, b.Body) {
			r.Verdict = Identical
		}
		r.Problem = "invalid answers"
	case c.a.errText == c.b.errText:
		r.Verdict = Identical
	default:
		r.Verdict = Within
	}
}

// describe names an answer in a problem text: "error 404", "answer 200".
func describe(k Kind, status int) string {
	switch k {
	case Error:
		return fmt.Sprintf("error %d", status)
	case Invalid:
		return fmt.Sprintf("invalid answer %d", status)
	}
	return fmt.Sprintf("%s %d", k, status)
}

// compareOutput compares one output present in A, B or both.
func (c *Comparer) compareOutput(o *Output, oa, ob *flatOut) {
	*o = Output{FirstNonFinite: -1, Worst: -1}
	if oa != nil {
		o.Name, o.InA, o.ShapeA, o.DTypeA = oa.name, true, c.a.dims[oa.dimStart:oa.dimEnd:oa.dimEnd], oa.dt
	}
	if ob != nil {
		o.Name, o.InB, o.ShapeB, o.DTypeB = ob.name, true, c.b.dims[ob.dimStart:ob.dimEnd:ob.dimEnd], ob.dt
	}
	switch {
	case oa == nil:
		o.Problem, o.Verdict = "only in B", Mismatch
		return
	case ob == nil:
		o.Problem, o.Verdict = "only in A", Mismatch
		return
	case oa.ragged || ob.ragged:
		o.Problem, o.Verdict = "ragged nesting", Mismatch
		return
	case !slices.Equal(o.ShapeA, o.ShapeB):
		o.Problem, o.Verdict = "shape "+shapeText(o.ShapeA)+" vs "+shapeText(o.ShapeB), Mismatch
		return
	case oa.dt != ob.dt && oa.dt != NoDType && ob.dt != NoDType:
		// Compared all the same: the values say how far apart they are.
		o.Problem, o.Verdict = "dtype "+oa.dt.String()+" vs "+ob.dt.String(), Mismatch
	}
	c.compareValues(o, c.a.vals[oa.start:oa.end], c.b.vals[ob.start:ob.end])
	switch {
	case o.Over > 0 || o.Problem != "":
		o.Verdict = Mismatch
	case o.Differ > 0:
		o.Verdict = Within
	}
}

// compareValues is the hot loop: element by element, same lengths.
func (c *Comparer) compareValues(o *Output, va, vb []leaf) {
	tol := c.Tolerance
	o.Elements = len(va)
	for i := range va {
		a, b := &va[i], &vb[i]
		if !a.dt.numeric() || !b.dt.numeric() {
			if !sameLeaf(a, b) {
				o.Differ++
				o.Over++
			}
			continue
		}
		x, y := a.f, b.f
		d := math.Abs(x - y)
		if a.dt == Int && b.dt == Int {
			if a.i == b.i {
				o.Abs.Add(0)
				o.Rel.Add(0)
				continue
			}
			d = math.Abs(float64(a.i) - float64(b.i))
		} else if isNonFinite(x) || isNonFinite(y) {
			if x != y && !(x != x && y != y) {
				o.Differ++
				o.Over++
				if o.NonFinite == 0 {
					o.FirstNonFinite = i
				}
				o.NonFinite++
			} else if a.dt != b.dt {
				o.Differ++
			}
			continue // NaN and Inf have no error to count
		} else if d == 0 && a.dt == b.dt {
			o.Abs.Add(0)
			o.Rel.Add(0)
			continue
		}
		rel := 0.0
		if d != 0 {
			rel = d / math.Abs(x) // +Inf when x is 0
		}
		o.Abs.Add(d)
		o.Rel.Add(rel)
		if o.Worst < 0 || rel > o.MaxRel || (rel == o.MaxRel && d > o.MaxAbs) {
			o.Worst, o.WorstA, o.WorstB = i, x, y
		}
		o.MaxAbs = max(o.MaxAbs, d)
		o.MaxRel = max(o.MaxRel, rel)
		o.Differ++
		if !(d <= tol.Abs+tol.Rel*math.Abs(x)) {
			o.Over++
		}
	}
}

func isNonFinite(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

// top1 compares classify's top-1 labels and scores, example by example,
// onto the "scores" output.
func (c *Comparer) top1(r *Result) {
	ca, sa := c.a.find("classes"), c.a.find("scores")
	cb, sb := c.b.find("classes"), c.b.find("scores")
	if ca == nil || sa == nil || cb == nil || sb == nil || sa.ragged || sb.ragged || ca.ragged || cb.ragged {
		return
	}
	var o *Output
	for i := range r.Outputs {
		if r.Outputs[i].Name == "scores" {
			o = &r.Outputs[i]
		}
	}
	na, nb := c.a.dims[sa.dimStart], c.b.dims[sb.dimStart]
	wa, wb := int(c.a.dims[sa.dimStart+1]), int(c.b.dims[sb.dimStart+1])
	for ex := range int(min(na, nb)) {
		o.Top1Total++
		la, scoreA := argmax(c.a.vals[ca.start+ex*wa:][:wa], c.a.vals[sa.start+ex*wa:][:wa])
		lb, scoreB := argmax(c.b.vals[cb.start+ex*wb:][:wb], c.b.vals[sb.start+ex*wb:][:wb])
		if la != nil && lb != nil && sameLeaf(la, lb) {
			o.Top1Agree++
		} else if la != nil || lb != nil {
			o.Verdict = Mismatch
			r.Verdict = Mismatch
		}
		if d := math.Abs(scoreA - scoreB); d > o.Top1ScoreErr || d != d {
			o.Top1ScoreErr = d
		}
	}
	if na != nb {
		o.Verdict = Mismatch
	}
}

// argmax returns the label with the highest score (the first of ties) and
// that score; nil for an example without classes.
func argmax(labels, scores []leaf) (*leaf, float64) {
	best := -1
	for i := range scores {
		if best < 0 || scores[i].f > scores[best].f {
			best = i
		}
	}
	if best < 0 {
		return nil, 0
	}
	return &labels[best], scores[best].f
}

// Compare compares answer b with the reference a once, with a Comparer
// of its own: the result owns its memory.
func Compare(a, b Answer, tol Tolerance) Result {
	return *New(tol).Compare(a, b)
}
