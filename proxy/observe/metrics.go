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
	"unicode/utf8"

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
	panics        *prometheus.CounterVec
	admissionRej  prometheus.Counter
	inflightBytes prometheus.Gauge
	writeTimeouts prometheus.Counter
	ops           opsMetrics         // opsmetrics.go
	rel           reliabilityMetrics // reliability.go
	split         splitMetrics       // split.go

	mu     sync.Mutex
	models map[string]struct{}

	// Children resolved once, so that an exchange's counts cost no label
	// hashing and no allocation: the fixed label sets at construction,
	// requests (verb × bounded model label × code) on first use.
	requestCounters sync.Map // requestKey → prometheus.Counter
	requestDurs     sync.Map // requestKey (model "") → prometheus.Observer
	translateObs    map[string]prometheus.Observer
	bodyObs         map[string]prometheus.Observer
	inflightGauges  map[string]prometheus.Gauge
	cacheHit        prometheus.Counter
	cacheMiss       prometheus.Counter
}

// requestKey is one series of tfsbridge_requests_total.
type requestKey struct {
	verb, model string
	code        int
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
			Help: "Failed control calls (metadata, config, readiness, kind detection) to a v2 server, by server (model-map server name, \"default\" for --backend) and kind (unavailable, timeout, bad_gateway, not_found, status). Failed inference calls are tfsbridge_upstream_failures_total.",
		}, []string{"server", "kind"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_panics_total",
			Help: "Panics recovered while handling one exchange, by adapter (extproc, http); the exchange got a 500 and the others went on.",
		}, []string{"adapter"}),
		admissionRej: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfsbridge_admission_rejections_total",
			Help: "TF requests answered 503 because the in-flight memory budget (--max-inflight-bytes) was spent.",
		}),
		inflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfsbridge_inflight_bytes",
			Help: "Bytes reserved by the exchanges in progress against --max-inflight-bytes (body sizes times their amplification factors).",
		}),
		writeTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfsbridge_response_write_timeouts_total",
			Help: "Translated answers the reverse proxy cut because the client did not read them within --write-timeout.",
		}),
		models: make(map[string]struct{}),
	}
	m.Registry.MustRegister(m.requests, m.passThrough, m.translateDur, m.bodyBytes, m.inflight,
		m.cacheLookups, m.backendErrors, m.panics, m.admissionRej, m.inflightBytes, m.writeTimeouts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Both adapters' panic counters exist from the start, at 0, so that
	// rate() and alerts see them before the first panic.
	for _, adapter := range Adapters {
		m.panics.WithLabelValues(adapter)
	}
	m.translateObs = map[string]prometheus.Observer{}
	for _, d := range []string{DirRequest, DirResponse} {
		m.translateObs[d] = m.translateDur.WithLabelValues(d)
	}
	m.bodyObs = map[string]prometheus.Observer{}
	for _, st := range []string{StageTFRequest, StageV2Request, StageV2Response, StageTFResponse} {
		m.bodyObs[st] = m.bodyBytes.WithLabelValues(st)
	}
	m.inflightGauges = map[string]prometheus.Gauge{}
	for _, adapter := range Adapters {
		m.inflightGauges[adapter] = m.inflight.WithLabelValues(adapter)
	}
	m.cacheHit = m.cacheLookups.WithLabelValues("hit")
	m.cacheMiss = m.cacheLookups.WithLabelValues("miss")
	m.ops = newOpsMetrics(m.Registry)
	m.rel = newReliabilityMetrics(m.Registry)
	m.split = newSplitMetrics(m.Registry)
	return m
}

// Adapters are the adapter label values: the ext_proc server's streams and
// the reverse proxy's requests.
var Adapters = []string{"extproc", "http"}

// ModelLabel returns the label value for a model name: the name itself when
// the backend confirmed the model and the cap is not reached, ModelOther
// past the cap, ModelUnknown when not confirmed, "" when there is no model
// (e.g. a malformed URL). Invalid UTF-8 (a percent-encoded name such as
// %FF%FE) is replaced by U+FFFD: Prometheus panics on a label value that
// is not UTF-8.
func (m *Metrics) ModelLabel(model string, confirmed bool) string {
	switch {
	case model == "":
		return ""
	case !confirmed:
		return ModelUnknown
	case len(model) > MaxModelLabelLen:
		return ModelOther
	}
	if !utf8.ValidString(model) {
		model = strings.ToValidUTF8(model, "\uFFFD")
	}
	if m == nil {
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
	k := requestKey{verb, model, status}
	c, ok := m.requestCounters.Load(k)
	if !ok {
		// Bounded like the series themselves: verbs and codes are few,
		// model labels capped by ModelLabel.
		c, _ = m.requestCounters.LoadOrStore(k, m.requests.WithLabelValues(verb, model, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
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
	o, ok := m.translateObs[direction]
	if !ok {
		o = m.translateDur.WithLabelValues(direction)
	}
	o.Observe(d.Seconds())
}

// BodySize records the size of a body at one stage.
func (m *Metrics) BodySize(stage string, n int) {
	if m == nil {
		return
	}
	o, ok := m.bodyObs[stage]
	if !ok {
		o = m.bodyBytes.WithLabelValues(stage)
	}
	o.Observe(float64(n))
}

// StreamStarted counts an exchange in progress on adapter; call the
// returned func when it ends.
func (m *Metrics) StreamStarted(adapter string) (done func()) {
	if m == nil {
		return func() {}
	}
	g, ok := m.inflightGauges[adapter]
	if !ok {
		g = m.inflight.WithLabelValues(adapter)
	}
	g.Inc()
	return g.Dec
}

// CacheLookup counts a metadata cache hit or miss.
func (m *Metrics) CacheLookup(hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cacheHit.Inc()
	} else {
		m.cacheMiss.Inc()
	}
}

// BackendError counts a failed control call to server ("" is
// DefaultServer) by kind.
func (m *Metrics) BackendError(server, kind string) {
	if m == nil {
		return
	}
	if server == "" {
		server = DefaultServer
	}
	m.backendErrors.WithLabelValues(server, kind).Inc()
}

// Panic counts one panic recovered while handling an exchange on adapter.
func (m *Metrics) Panic(adapter string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(adapter).Inc()
}

// AdmissionRejected counts one TF request refused for lack of in-flight
// memory budget.
func (m *Metrics) AdmissionRejected() {
	if m == nil {
		return
	}
	m.admissionRej.Inc()
}

// InflightBytes sets the bytes reserved by exchanges in progress.
func (m *Metrics) InflightBytes(n int64) {
	if m == nil {
		return
	}
	m.inflightBytes.Set(float64(n))
}

// WriteTimeout counts one translated answer cut by the write deadline.
func (m *Metrics) WriteTimeout() {
	if m == nil {
		return
	}
	m.writeTimeouts.Inc()
}

// Value returns the current value of the counter or gauge name whose
// labels include the given name, value pairs (0 when there is none): for
// tests and diagnostics, which would otherwise each walk Gather's output.
func (m *Metrics) Value(name string, labelPairs ...string) float64 {
	if m == nil {
		return 0
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, metric := range mf.GetMetric() {
			for i := 0; i+1 < len(labelPairs); i += 2 {
				found := false
				for _, lp := range metric.GetLabel() {
					if lp.GetName() == labelPairs[i] && lp.GetValue() == labelPairs[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if c := metric.GetCounter(); c != nil {
				return c.GetValue()
			}
			return metric.GetGauge().GetValue()
		}
	}
	return 0
}
