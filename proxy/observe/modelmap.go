package observe

import "github.com/prometheus/client_golang/prometheus"

// ModelMapReloads registers tfsbridge_model_map_reloads_total on m's
// registry and returns the function that counts one reload by result
// ("success" or "failure"). Both series exist from the start, so an alert
// on failures sees 0 before the first one. Nil-safe: a nil m counts
// nothing.
func (m *Metrics) ModelMapReloads() func(result string) {
	if m == nil {
		return func(string) {}
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfsbridge_model_map_reloads_total",
		Help: "Re-reads of the --model-map file after it changed, by result (success: the new map is in force; failure: the previous map stays).",
	}, []string{"result"})
	m.Registry.MustRegister(c)
	for _, r := range []string{"success", "failure"} {
		c.WithLabelValues(r)
	}
	return func(result string) { c.WithLabelValues(result).Inc() }
}
