package observe

import "github.com/prometheus/client_golang/prometheus"

// splitMetrics is tfsbridge_split_requests_total: the exchanges of the
// model map's split models, by the server each was assigned. Both labels
// come from the model map, never from a request, so the series are as
// many as the map's split shares.
type splitMetrics struct {
	requests *prometheus.CounterVec
}

func newSplitMetrics(reg prometheus.Registerer) splitMetrics {
	sm := splitMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tfsbridge_split_requests_total",
		Help: "Exchanges of models the model map splits between servers (split:), by model (its TF name) and the server each was assigned (\"default\" for --backend), counted at the request headers.",
	}, []string{"model", "server"})}
	reg.MustRegister(sm.requests)
	return sm
}

// SplitRequest counts one exchange of a split model assigned to server.
func (m *Metrics) SplitRequest(model, server string) {
	if m == nil {
		return
	}
	m.split.requests.WithLabelValues(model, server).Inc()
}

// SplitDeclared creates the series of one share of a split model, at 0,
// when a model map that declares it is applied.
func (m *Metrics) SplitDeclared(model, server string) {
	if m == nil {
		return
	}
	m.split.requests.WithLabelValues(model, server)
}
