package tfcompare

import (
	"math"
	"slices"
	"testing"
)

func ok200(body string) Answer { return Answer{Status: 200, Body: []byte(body)} }

// want is what a test expects of one output.
type want struct {
	name                 string
	verdict              Verdict
	shapeA, shapeB       []int64
	dtA, dtB             DType
	problem              string
	elements, differ     int
	over                 int
	maxAbs, maxRel       float64
	nonFinite, firstNF   int
	top1Total, top1Agree int
	top1Err              float64
}

func TestCompare(t *testing.T) {
	tol := Tolerance{Abs: 1e-3, Rel: 1e-2}
	for _, tc := range []struct {
		name    string
		a, b    Answer
		verdict Verdict
		kind    Kind
		problem string
		outs    []want
	}{
		{
			name: "identical row format", a: ok200(`{"predictions": [2.5, 3.0, 4.5]}`), b: ok200(`{"predictions":[2.5,3.0,4.5]}`),
			verdict: Identical, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Identical, shapeA: []int64{3}, shapeB: []int64{3}, dtA: Float, dtB: Float, elements: 3, firstNF: -1}},
		},
		{
			name: "abs and rel error within tolerance", a: ok200(`{"predictions": [[1.0, 2.0], [100.0, 0.5]]}`), b: ok200(`{"predictions": [[1.0005, 2.0], [100.5, 0.5]]}`),
			verdict: Within, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Within, shapeA: []int64{2, 2}, shapeB: []int64{2, 2}, dtA: Float, dtB: Float,
				elements: 4, differ: 2, maxAbs: 0.5, maxRel: 0.005, firstNF: -1}},
		},
		{
			name: "over tolerance", a: ok200(`{"outputs": {"y": [1.0, 2.0], "z": [7, 8]}}`), b: ok200(`{"outputs": {"y": [1.0, 2.25], "z": [7, 8]}}`),
			verdict: Mismatch, kind: Outputs,
			outs: []want{
				{name: "y", verdict: Mismatch, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Float, dtB: Float, elements: 2, differ: 1, over: 1, maxAbs: 0.25, maxRel: 0.125, firstNF: -1},
				{name: "z", verdict: Identical, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Int, dtB: Int, elements: 2, firstNF: -1},
			},
		},
		{
			name: "rel error against a zero reference is infinite", a: ok200(`{"outputs": [0.0, 1.0]}`), b: ok200(`{"outputs": [0.0005, 1.0]}`),
			verdict: Within, kind: Outputs,
			outs: []want{{name: "outputs", verdict: Within, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Float, dtB: Float, elements: 2, differ: 1, maxAbs: 0.0005, maxRel: math.Inf(1), firstNF: -1}},
		},
		{
			name: "NaN and Inf positions", a: ok200(`{"predictions": [NaN, 1.0, Infinity, -Infinity, NaN]}`), b: ok200(`{"predictions": [NaN, NaN, Infinity, Infinity, 2.0]}`),
			verdict: Mismatch, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Mismatch, shapeA: []int64{5}, shapeB: []int64{5}, dtA: Float, dtB: Float, elements: 5, differ: 3, over: 3, nonFinite: 3, firstNF: 1}},
		},
		{
			name: "shape mismatch", a: ok200(`{"predictions": [[1.0, 2.0, 3.0]]}`), b: ok200(`{"predictions": [[1.0, 2.0], [3.0, 4.0]]}`),
			verdict: Mismatch, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Mismatch, shapeA: []int64{1, 3}, shapeB: []int64{2, 2}, dtA: Float, dtB: Float, problem: "shape [1 3] vs [2 2]", firstNF: -1}},
		},
		{
			name: "ragged answer", a: ok200(`{"predictions": [[1.0, 2.0], [3.0]]}`), b: ok200(`{"predictions": [[1.0, 2.0], [3.0]]}`),
			verdict: Mismatch, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Mismatch, shapeA: []int64{2, 2}, shapeB: []int64{2, 2}, dtA: Float, dtB: Float, problem: "ragged nesting", firstNF: -1}},
		},
		{
			name: "dtype mismatch, same values", a: ok200(`{"outputs": {"n": [1, 2]}}`), b: ok200(`{"outputs": {"n": [1.0, 2.0]}}`),
			verdict: Mismatch, kind: Outputs,
			outs: []want{{name: "n", verdict: Mismatch, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Int, dtB: Float, problem: "dtype int vs float", elements: 2, differ: 2, firstNF: -1}},
		},
		{
			name: "strings and bytes", a: ok200(`{"predictions": [{"s": "a", "b": {"b64": "AAE="}}, {"s": "b", "b": {"b64": "AAI="}}]}`),
			b:       ok200(`{"predictions": [{"s": "a", "b": {"b64": "AAE="}}, {"s": "c", "b": {"b64": "AAI="}}]}`),
			verdict: Mismatch, kind: Predictions,
			outs: []want{
				{name: "s", verdict: Mismatch, shapeA: []int64{2}, shapeB: []int64{2}, dtA: String, dtB: String, elements: 2, differ: 1, over: 1, firstNF: -1},
				{name: "b", verdict: Identical, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Bytes, dtB: Bytes, elements: 2, firstNF: -1},
			},
		},
		{
			name: "a single bytes output, row and columnar", a: ok200(`{"predictions": [{"b64": "AAE="}, {"b64": "AAI="}]}`), b: ok200(`{"predictions": [{"b64": "AAE="}, {"b64": "AAM="}]}`),
			verdict: Mismatch, kind: Predictions,
			outs: []want{{name: "predictions", verdict: Mismatch, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Bytes, dtB: Bytes, elements: 2, differ: 1, over: 1, firstNF: -1}},
		},
		{
			name: "a scalar bytes output, columnar", a: ok200(`{"outputs": {"b64": "AAE="}}`), b: ok200(`{"outputs": {"b64": "AAE="}}`),
			verdict: Identical, kind: Outputs,
			outs: []want{{name: "outputs", verdict: Identical, dtA: Bytes, dtB: Bytes, elements: 1, firstNF: -1}},
		},
		{
			name: "missing output", a: ok200(`{"outputs": {"y": [1.0], "z": [2.0]}}`), b: ok200(`{"outputs": {"y": [1.0], "w": [2.0]}}`),
			verdict: Mismatch, kind: Outputs,
			outs: []want{
				{name: "y", verdict: Identical, shapeA: []int64{1}, shapeB: []int64{1}, dtA: Float, dtB: Float, elements: 1, firstNF: -1},
				{name: "z", verdict: Mismatch, shapeA: []int64{1}, dtA: Float, problem: "only in A", firstNF: -1},
				{name: "w", verdict: Mismatch, shapeB: []int64{1}, dtB: Float, problem: "only in B", firstNF: -1},
			},
		},
		{
			name:    "classify top-1 agrees, scores within",
			a:       ok200(`{"results": [[["cat", 0.7], ["dog", 0.3]], [["cat", 0.2], ["dog", 0.8]]]}`),
			b:       ok200(`{"results": [[["cat", 0.705], ["dog", 0.3]], [["cat", 0.2], ["dog", 0.8]]]}`),
			verdict: Within, kind: Classify,
			outs: []want{
				{name: "classes", verdict: Identical, shapeA: []int64{2, 2}, shapeB: []int64{2, 2}, dtA: String, dtB: String, elements: 4, firstNF: -1},
				{name: "scores", verdict: Within, shapeA: []int64{2, 2}, shapeB: []int64{2, 2}, dtA: Float, dtB: Float, elements: 4, differ: 1,
					maxAbs: 0.005, maxRel: 0.005 / 0.7, firstNF: -1, top1Total: 2, top1Agree: 2, top1Err: 0.005},
			},
		},
		{
			name:    "classify top-1 disagrees",
			a:       ok200(`{"results": [[["cat", 0.51], ["dog", 0.49]]]}`),
			b:       ok200(`{"results": [[["cat", 0.4995], ["dog", 0.5005]]]}`),
			verdict: Mismatch, kind: Classify,
			outs: []want{
				{name: "classes", verdict: Identical, shapeA: []int64{1, 2}, shapeB: []int64{1, 2}, dtA: String, dtB: String, elements: 2, firstNF: -1},
				{name: "scores", verdict: Mismatch, shapeA: []int64{1, 2}, shapeB: []int64{1, 2}, dtA: Float, dtB: Float, elements: 2, differ: 2, over: 2,
					maxAbs: 0.0105, maxRel: 0.0105 / 0.49, firstNF: -1, top1Total: 1, top1Agree: 0, top1Err: 0.0095},
			},
		},
		{
			name:    "classify labels reordered",
			a:       ok200(`{"results": [[["cat", 0.9], ["dog", 0.1]]]}`),
			b:       ok200(`{"results": [[["dog", 0.9], ["cat", 0.1]]]}`),
			verdict: Mismatch, kind: Classify,
			outs: []want{
				{name: "classes", verdict: Mismatch, shapeA: []int64{1, 2}, shapeB: []int64{1, 2}, dtA: String, dtB: String, elements: 2, differ: 2, over: 2, firstNF: -1},
				{name: "scores", verdict: Mismatch, shapeA: []int64{1, 2}, shapeB: []int64{1, 2}, dtA: Float, dtB: Float, elements: 2, firstNF: -1, top1Total: 1},
			},
		},
		{
			name: "regress", a: ok200(`{"results": [3.5, 4.0]}`), b: ok200(`{"results": [3.5, 4.0004]}`),
			verdict: Within, kind: Regress,
			outs: []want{{name: "results", verdict: Within, shapeA: []int64{2}, shapeB: []int64{2}, dtA: Float, dtB: Float, elements: 2, differ: 1, maxAbs: 0.0004, maxRel: 0.0001, firstNF: -1}},
		},
		{
			name: "errors, same status and text", a: Answer{404, []byte(`{"error": "Servable not found for request: Latest(x)"}`)},
			b: Answer{404, []byte(`{ "error": "Servable not found for request: Latest(x)" }`)}, verdict: Identical, kind: Error,
		},
		{
			name: "errors, same status, other text", a: Answer{400, []byte(`{"error": "a"}`)}, b: Answer{400, []byte(`{"error": "b"}`)},
			verdict: Within, kind: Error,
		},
		{
			name: "errors, different status", a: Answer{404, []byte(`{"error": "a"}`)}, b: Answer{400, []byte(`{"error": "a"}`)},
			verdict: Mismatch, kind: Error, problem: "error 404 vs error 400",
		},
		{
			name: "error vs answer", a: Answer{503, []byte(`upstream connect error`)}, b: ok200(`{"predictions": [1.0]}`),
			verdict: Mismatch, kind: Error, problem: "error 503 vs predictions 200",
		},
		{
			name: "200 with an error body", a: ok200(`{"predictions": [1.0]}`), b: ok200(`{"error": "boom"}`),
			verdict: Mismatch, kind: Predictions, problem: "predictions 200 vs error 200",
		},
		{
			name: "invalid JSON", a: ok200(`{"predictions": [1.0]}`), b: ok200(`{"predictions": [1.0`),
			verdict: Mismatch, kind: Predictions, problem: "predictions 200 vs invalid answer 200",
		},
		{
			name: "forms differ", a: ok200(`{"predictions": [1.0]}`), b: ok200(`{"outputs": [1.0]}`),
			verdict: Mismatch, kind: Predictions, problem: "answer forms differ: predictions vs outputs",
			outs: []want{
				{name: "predictions", verdict: Mismatch, shapeA: []int64{1}, dtA: Float, problem: "only in A", firstNF: -1},
				{name: "outputs", verdict: Mismatch, shapeB: []int64{1}, dtB: Float, problem: "only in B", firstNF: -1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tol)
			for range 2 { // the second run reuses the Comparer's memory
				r := c.Compare(tc.a, tc.b)
				if r.Verdict != tc.verdict || r.KindA != tc.kind || r.Problem != tc.problem {
					t.Fatalf("verdict %v kind %v problem %q, want %v %v %q", r.Verdict, r.KindA, r.Problem, tc.verdict, tc.kind, tc.problem)
				}
				if len(r.Outputs) != len(tc.outs) {
					t.Fatalf("%d outputs, want %d: %+v", len(r.Outputs), len(tc.outs), r.Outputs)
				}
				for i, w := range tc.outs {
					o := r.Outputs[i]
					got := want{name: o.Name, verdict: o.Verdict, shapeA: o.ShapeA, shapeB: o.ShapeB, dtA: o.DTypeA, dtB: o.DTypeB,
						problem: o.Problem, elements: o.Elements, differ: o.Differ, over: o.Over, maxAbs: o.MaxAbs, maxRel: o.MaxRel,
						nonFinite: o.NonFinite, firstNF: o.FirstNonFinite, top1Total: o.Top1Total, top1Agree: o.Top1Agree, top1Err: o.Top1ScoreErr}
					if !near(got.maxAbs, w.maxAbs) || !near(got.maxRel, w.maxRel) || !near(got.top1Err, w.top1Err) {
						t.Errorf("output %d errors abs %g rel %g top1 %g, want %g %g %g", i, got.maxAbs, got.maxRel, got.top1Err, w.maxAbs, w.maxRel, w.top1Err)
					}
					got.maxAbs, got.maxRel, got.top1Err = w.maxAbs, w.maxRel, w.top1Err
					if !equalWant(got, w) {
						t.Errorf("output %d:\n got %+v\nwant %+v", i, got, w)
					}
				}
			}
		})
	}
}

func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

func equalWant(a, b want) bool {
	return a.name == b.name && a.verdict == b.verdict && slices.Equal(a.shapeA, b.shapeA) && slices.Equal(a.shapeB, b.shapeB) &&
		a.dtA == b.dtA && a.dtB == b.dtB && a.problem == b.problem && a.elements == b.elements && a.differ == b.differ &&
		a.over == b.over && a.nonFinite == b.nonFinite && a.firstNF == b.firstNF && a.top1Total == b.top1Total && a.top1Agree == b.top1Agree
}

func TestHistogram(t *testing.T) {
	for _, tc := range []struct {
		x      float64
		lo, hi float64
	}{
		{0, 0, 0},
		{1, 1, 1.25},
		{1.3, 1.25, 1.5},
		{0.001, 0.0009765625, 0.001220703125},
		{1e-20, 0, math.Ldexp(1, MinExp)},
		{1e9, math.Ldexp(1, MaxExp), math.Inf(1)},
		{math.Inf(1), math.Ldexp(1, MaxExp), math.Inf(1)},
	} {
		lo, hi := Bounds(Bucket(tc.x))
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("Bucket(%g) has bounds [%g, %g), want [%g, %g)", tc.x, lo, hi, tc.lo, tc.hi)
		}
	}
	var h Histogram
	for range 98 {
		h.Add(0)
	}
	h.Add(0.3)
	h.Add(7)
	if q := h.Quantile(0.5); q != 0 {
		t.Errorf("p50 = %g, want 0", q)
	}
	if q := h.Quantile(0.99); q != 0.3125 {
		t.Errorf("p99 = %g, want 0.3125 (the upper bound of 0.3's bucket)", q)
	}
	if q := h.Quantile(1); q != 8 {
		t.Errorf("p100 = %g, want 8", q)
	}
	var m Histogram
	m.Merge(&h)
	m.Merge(&h)
	if m.Total != 200 || m.Counts[Bucket(7)] != 2 {
		t.Errorf("merged total %d, bucket of 7 %d; want 200, 2", m.Total, m.Counts[Bucket(7)])
	}
}

func TestWorstElement(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b       string
		worst      int
		worstA, wB float64
	}{
		{"largest relative error", `{"outputs": [[10.0, 0.5], [100.0, 2.0]]}`, `{"outputs": [[10.1, 0.6], [101.0, 2.0]]}`, 1, 0.5, 0.6},
		{"equal relative errors: the larger absolute one", `{"outputs": [1.0, 10.0]}`, `{"outputs": [1.5, 15.0]}`, 1, 10, 15},
		{"a zero reference is the worst", `{"outputs": [5.0, 0.0]}`, `{"outputs": [6.0, 0.001]}`, 1, 0, 0.001},
		{"integers", `{"outputs": [7, 8, 9]}`, `{"outputs": [7, 9, 9]}`, 1, 8, 9},
		{"nothing differs", `{"outputs": [1.0]}`, `{"outputs": [1.0]}`, -1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compare(ok200(tc.a), ok200(tc.b), DefaultTolerance)
			o := r.Outputs[0]
			if o.Worst != tc.worst || o.WorstA != tc.worstA || o.WorstB != tc.wB {
				t.Errorf("worst = %d (%v vs %v), want %d (%v vs %v)", o.Worst, o.WorstA, o.WorstB, tc.worst, tc.worstA, tc.wB)
			}
		})
	}
}
