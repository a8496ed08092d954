package tfcompare

import (
	"testing"
)

// Whatever two servers answer, Compare neither panics nor calls two
// byte-identical successful answers a mismatch unless they are not TF's.
func FuzzCompare(f *testing.F) {
	for _, s := range []string{
		`{"predictions": [[1.0, NaN], [Infinity, -2]]}`,
		`{"predictions": [{"a": [1, 2], "b": {"b64": "AA=="}}, {"a": [3, 4], "b": {"b64": "AQ=="}}]}`,
		`{"outputs": {"y": [[1.5]], "z": "s"}}`,
		`{"outputs": [[], [1]]}`,
		`{"results": [[["a", 0.5], ["b", 0.5]], [["a", 1]]]}`,
		`{"results": [1.0, [2.0]]}`,
		`{"error": "x"}`,
		`[1, 2]`,
		`{"predictions": [[[[[[1]]]]]]}`,
		`{"outputs": {"y": [1.0], "y": [2.0]}}`,
		`{"predictions": [{"y": 1, "y": 2}]}`,
	} {
		f.Add(200, []byte(s), 200, []byte(s))
	}
	f.Add(404, []byte(`{"error": "a"}`), 200, []byte(`{"predictions": []}`))
	c := New(DefaultTolerance)
	f.Fuzz(func(t *testing.T, sa int, a []byte, sb int, b []byte) {
		r := c.Compare(Answer{sa, a}, Answer{sb, b})
		for _, o := range r.Outputs {
			if o.Over > o.Elements || o.Differ > o.Elements || o.NonFinite > o.Over || o.Top1Agree > o.Top1Total {
				t.Fatalf("inconsistent output %+v", o)
			}
		}
		self := c.Compare(Answer{sa, a}, Answer{sa, a})
		if self.Verdict == Identical || self.KindA == Invalid {
			return
		}
		for _, o := range self.Outputs {
			if o.Problem == "ragged nesting" {
				return
			}
		}
		t.Fatalf("an answer is not identical to itself: %+v", self)
	})
}
