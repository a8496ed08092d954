package observe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Results of a shadow comparison (the result label of
// tfsbridge_shadow_comparisons_total).
const (
	ShadowMatch    = "match"        // within tolerance (or errors of the same status)
	ShadowMismatch = "mismatch"     // over tolerance, another shape/dtype/status
	ShadowError    = "shadow_error" // the shadow server gave no usable answer
	ShadowDropped  = "dropped"      // sampled but not sent: max_inflight or the memory cap
)

// ShadowMetrics are the series of shadow comparison (package
// proxy/shadow). Models are model-map names, bounded by the map.
type ShadowMetrics struct {
	comparisons *prometheus.CounterVec
	worstRel    *prometheus.HistogramVec
}

// Shadow registers the shadow comparison series on m's registry:
//
//   - tfsbridge_shadow_comparisons_total{model,result}: result is match,
//     mismatch, shadow_error or dropped;
//   - tfsbridge_shadow_worst_relative_error{model}: the largest relative
//     error of one comparison's numeric outputs (+Inf where the primary's
//     value is 0 and the shadow's is not).
//
// Call it once per registry. Nil-safe: a nil m gives a *ShadowMetrics
// that records nothing.
func (m *Metrics) Shadow() *ShadowMetrics {
	if m == nil {
		return nil
	}
	sm := &ShadowMetrics{
		comparisons: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_shadow_comparisons_total",
			Help: "Shadow copies of TF requests, by model and result: match (the shadow's answer within the model's tolerance), mismatch, shadow_error (no usable answer from the shadow server), dropped (sampled but not sent: max_inflight copies running, or over the shadow memory cap).",
		}, []string{"model", "result"}),
		worstRel: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tfsbridge_shadow_worst_relative_error",
			Help:    "Per shadow comparison with numeric outputs, the largest relative error |primary−shadow|/|primary| of any element, by model.",
			Buckets: prometheus.ExponentialBuckets(1e-9, 10, 13), // 1e-9 … 1e3
		}, []string{"model"}),
	}
	m.Registry.MustRegister(sm.comparisons, sm.worstRel)
	return sm
}

// Comparison counts one shadow copy's result.
func (sm *ShadowMetrics) Comparison(model, result string) {
	if sm == nil {
		return
	}
	sm.comparisons.WithLabelValues(model, result).Inc()
}

// WorstRelative records one comparison's worst relative error.
func (sm *ShadowMetrics) WorstRelative(model string, rel float64) {
	if sm == nil {
		return
	}
	sm.worstRel.WithLabelValues(model).Observe(rel)
}

// ShadowModel is one model's shadow series, their labels resolved once:
// an engine keeps it per model so that a copy's result costs no label
// look-up. Nil-safe.
type ShadowModel struct {
	results [4]prometheus.Counter // match, mismatch, shadow_error, dropped
	worst   prometheus.Observer
}

// Model resolves model's series (nil from a nil sm).
func (sm *ShadowMetrics) Model(model string) *ShadowModel {
	if sm == nil {
		return nil
	}
	m := &ShadowModel{worst: sm.worstRel.WithLabelValues(model)}
	for i, r := range []string{ShadowMatch, ShadowMismatch, ShadowError, ShadowDropped} {
		m.results[i] = sm.comparisons.WithLabelValues(model, r)
	}
	return m
}

// Comparison counts one copy's result (one of the Shadow* results).
func (m *ShadowModel) Comparison(result string) {
	if m == nil {
		return
	}
	i := 0
	switch result {
	case ShadowMatch:
	case ShadowMismatch:
		i = 1
	case ShadowError:
		i = 2
	case ShadowDropped:
		i = 3
	default:
		return
	}
	m.results[i].Inc()
}

// WorstRelative records one comparison's worst relative error.
func (m *ShadowModel) WorstRelative(rel float64) {
	if m != nil {
		m.worst.Observe(rel)
	}
}
