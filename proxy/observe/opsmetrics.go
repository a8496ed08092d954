package observe

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
)

// Backend call kinds, the call label of
// tfsbridge_backend_request_duration_seconds.
const (
	CallMetadata = "metadata" // GET /v2/models/{m}[/versions/{v}]
	CallConfig   = "config"   // GET .../config (Triton)
	CallReady    = "ready"    // GET .../ready, GET /v2/health/ready
	CallServer   = "server"   // GET /v2 (server kind detection)
)

// latencyBuckets span a cached metadata answer (sub-millisecond) to a
// slow inference (a minute) on the 1-2.5-5 series, so every bound an SLO
// is usually written against (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 s) is a
// bucket edge and a latency SLI is an exact bucket ratio, not an
// interpolation. 30 s is TF Serving's deadline (--request-timeout).
var latencyBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// opsMetrics are the latency and build collectors an operator alerts on.
type opsMetrics struct {
	requestDur *prometheus.HistogramVec
	backendDur *prometheus.HistogramVec
	buildInfo  *prometheus.GaugeVec
}

func newOpsMetrics(reg prometheus.Registerer) opsMetrics {
	o := opsMetrics{
		requestDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tfsbridge_request_duration_seconds",
			Help:    "Time from a TF Serving request's headers to its answer, by verb and HTTP status code (the v2 server's time included).",
			Buckets: latencyBuckets,
		}, []string{"verb", "code"}),
		backendDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tfsbridge_backend_request_duration_seconds",
			Help:    "Time of tfsbridge's own calls to a v2 server, by server (model-map server name, \"default\" for --backend) and call (metadata, config, ready, server), failures included.",
			Buckets: latencyBuckets,
		}, []string{"server", "call"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tfsbridge_build_info",
			Help: "Always 1; labelled with the running binary's version, VCS revision and Go version.",
		}, []string{"version", "revision", "go_version"}),
	}
	bi := buildinfo.Get()
	o.buildInfo.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	reg.MustRegister(o.requestDur, o.backendDur, o.buildInfo)
	return o
}

// RequestDuration records how long one answered TF Serving request took.
func (m *Metrics) RequestDuration(verb string, status int, d time.Duration) {
	if m == nil {
		return
	}
	// Resolved once per (verb, code), like the request counters: no
	// strconv and no label hashing per exchange.
	k := requestKey{verb: verb, code: status}
	o, ok := m.requestDurs.Load(k)
	if !ok {
		o, _ = m.requestDurs.LoadOrStore(k, m.ops.requestDur.WithLabelValues(verb, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// BackendCall records how long one control call to server ("" is
// DefaultServer) took.
func (m *Metrics) BackendCall(server, call string, d time.Duration) {
	if m == nil {
		return
	}
	if server == "" {
		server = DefaultServer
	}
	m.ops.backendDur.WithLabelValues(server, call).Observe(d.Seconds())
}
