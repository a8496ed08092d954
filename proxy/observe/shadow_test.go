package observe

import "testing"

// A model's resolved series count into the same series as the labelled
// calls do, each result into its own; nil records nothing.
func TestShadowModel(t *testing.T) {
	m := NewMetrics()
	sm := m.Shadow()
	mm := sm.Model("mnist")
	for i, r := range []string{ShadowMatch, ShadowMismatch, ShadowError, ShadowDropped} {
		for range i + 1 {
			mm.Comparison(r)
		}
	}
	sm.Comparison("mnist", ShadowDropped)
	mm.Comparison("no such result")
	mm.WorstRelative(0.5)
	for r, want := range map[string]float64{ShadowMatch: 1, ShadowMismatch: 2, ShadowError: 3, ShadowDropped: 5} {
		if got := m.Value("tfsbridge_shadow_comparisons_total", "model", "mnist", "result", r); got != want {
			t.Errorf("%s = %v, want %v", r, got, want)
		}
	}
	var none *ShadowMetrics
	none.Model("mnist").Comparison(ShadowMatch) // nil-safe
	none.Model("mnist").WorstRelative(1)
}
