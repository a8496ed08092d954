// Package observe holds tfsbridge's observability: Prometheus metrics on a
// private registry, the slog logger and request ids, and the admin HTTP
// endpoints (/metrics, /healthz, /readyz).
//
// Every method of *Metrics is safe on a nil receiver, so packages under
// test can run without a registry.
package observe

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Fixed label values for the model label. Model names come from untrusted
// URLs, so only names the backend confirmed (a signature was fetched) are
// used as label values, and only up to MaxModelLabels of them: a scanner
// probing random model names must not grow the series count.
const (
	// ModelUnknown labels requests whose model the backend did not confirm.
	ModelUnknown = "_unknown"
	// ModelOther labels confirmed models beyond the MaxModelLabels cap.
	ModelOther = "_other"
	// MaxModelLabels is how many distinct confirmed model names are kept.
	MaxModelLabels = 100
	// MaxModelLabelLen is the longest model name used as a label value;
	// longer confirmed names are labelled ModelOther. Real model names are
	// file or Kubernetes names (at most 255 bytes); a permissive v2 server
	// can confirm any name, and a 1 MiB one would bloat every scrape.
	MaxModelLabelLen = 255
)

// Directions and stages used as label values.
const (
	DirRequest  = "request"  // TF request → v2 request
	DirResponse = "response" // v2 response → TF response

	StageTFRequest  = "tf_request"
	StageV2Request  = "v2_request"
	StageV2Response = "v2_response"
	StageTFResponse = "tf_response"
)

// Metrics are tfsbridge's Prometheus collectors, registered on their own
// registry (never the global one) so tests and embedders get clean state.
type Metrics struct {
	// Registry holds every collector below plus the Go and process ones.
	Registry *prometheus.Registry

	requests      *prometheus.CounterVec
	passThrough   prometheus.Counter
	translateDur  *prometheus.HistogramVec
	bodyBytes     *prometheus.HistogramVec
	inflight      *prometheus.GaugeVec
	cacheLookups  *prometheus.CounterVec
	backendErrors *prometheus.CounterVec
	ops           opsMetrics // opsmetrics.go

	mu     sync.Mutex
	models map[string]struct{}
}

// NewMetrics creates the collectors on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_requests_total",
			Help: "TF Serving requests answered, by verb (predict, status, metadata, ...), model and HTTP status code.",
		}, []string{"verb", "model", "code"}),
		passThrough: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfsbridge_passthrough_total",
			Help: "HTTP exchanges that were not TF Serving REST calls and were passed through untouched.",
		}),
		translateDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tfsbridge_translation_duration_seconds",
			Help:    "Time spent translating one body, by direction (request: TF→v2, response: v2→TF).",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10), // 10µs … 2.6s
		}, []string{"direction"}),
		bodyBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tfsbridge_body_size_bytes",
			Help:    "Body sizes by stage: tf_request, v2_request, v2_response, tf_response.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 12), // 64 B … 268 MB
		}, []string{"stage"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tfsbridge_inflight_streams",
			Help: "Exchanges in progress, by adapter (extproc: ext_proc gRPC streams; http: reverse-proxy requests).",
		}, []string{"adapter"}),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_metadata_cache_lookups_total",
			Help: "Model metadata cache lookups, by result (hit, miss).",
		}, []string{"result"}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_backend_errors_total",
			Help: "Failed calls to the v2 server, by kind (unavailable, timeout, bad_gateway, not_found, status).",
		}, []string{"kind"}),
		models: make(map[string]struct{}),
	}
	m.Registry.MustRegister(m.requests, m.passThrough, m.translateDur, m.bodyBytes, m.inflight,
		m.cacheLookups, m.backendErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ops = newOpsMetrics(m.Registry)
	return m
}

// ModelLabel returns the label value for a model name: the name itself when
// the backend confirmed the model and the cap is not reached, ModelOther
// past the cap, ModelUnknown when not confirmed, "" when there is no model
// (e.g. a malformed URL).
func (m *Metrics) ModelLabel(model string, confirmed bool) string {
	switch {
	case model == "":
		return ""
	case !confirmed:
		return ModelUnknown
	case len(model) > MaxModelLabelLen:
		return ModelOther
	case m == nil:
		return model
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.models[model]; ok {
		return model
	}
	if len(m.models) >= MaxModelLabels {
		return ModelOther
	}
	// A copy: the name is usually a substring of a request line, and the
	// label lives as long as the process (regression: 100 labels pinned
	// 100 request lines of up to 1 MiB each).
	model = strings.Clone(model)
	m.models[model] = struct{}{}
	return model
}

// Request counts one answered TF Serving request. model must come from
// ModelLabel.
func (m *Metrics) Request(verb, model string, status int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(verb, model, strconv.Itoa(status)).Inc()
}

// PassThrough counts one exchange that was not ours.
func (m *Metrics) PassThrough() {
	if m == nil {
		return
	}
	m.passThrough.Inc()
}

// Translation records the time one body translation took.
func (m *Metrics) Translation(direction string, d time.Duration) {
	if m == nil {
		return
	}
	m.translateDur.WithLabelValues(direction).Observe(d.Seconds())
}

// BodySize records the size of a body at one stage.
func (m *Metrics) BodySize(stage string, n int) {
	if m == nil {
		return
	}
	m.bodyBytes.WithLabelValues(stage).Observe(float64(n))
}

// StreamStarted counts an exchange in progress on adapter; call the
// returned func when it ends.
func (m *Metrics) StreamStarted(adapter string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.inflight.WithLabelValues(adapter)
	g.Inc()
	return g.Dec
}

// CacheLookup counts a metadata cache hit or miss.
func (m *Metrics) CacheLookup(hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cacheLookups.WithLabelValues("hit").Inc()
	} else {
		m.cacheLookups.WithLabelValues("miss").Inc()
	}
}

// BackendError counts a failed call to the v2 server by kind.
func (m *Metrics) BackendError(kind string) {
	if m == nil {
		return
	}
	m.backendErrors.WithLabelValues(kind).Inc()
}
