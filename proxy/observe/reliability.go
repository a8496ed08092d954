package observe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultServer is the server label of the v2 server --backend names (a
// model-map server is labelled with its name in the map).
const DefaultServer = "default"

// Reasons of tfsbridge_upstream_failures_total: why an inference call did
// not get a usable answer from its v2 server.
const (
	// UpstreamConnect: the server could not be reached (refused, no
	// route, unknown host, Envoy's "no healthy upstream" or connect
	// failure).
	UpstreamConnect = "connect_error"
	// UpstreamReset: the connection was reset or closed before an answer.
	UpstreamReset = "reset"
	// UpstreamTimeout: no answer before the deadline (504).
	UpstreamTimeout = "timeout"
	// UpstreamBadResponse: an answer that is not HTTP, or cut short.
	UpstreamBadResponse = "bad_response"
	// UpstreamServerError: the v2 server answered a 5xx of its own.
	UpstreamServerError = "server_error"
)

// UpstreamReasons are every reason label value, created at 0 for the
// default server so that alerts see the series before the first failure.
var UpstreamReasons = []string{UpstreamConnect, UpstreamReset, UpstreamTimeout, UpstreamBadResponse, UpstreamServerError}

// Files of tfsbridge_file_reloads_total.
const (
	FileBearerToken    = "bearer_token"
	FileTLSCertificate = "tls_certificate"
)

// Results of tfsbridge_file_reloads_total.
const (
	ReloadSuccess = "success"
	ReloadFailure = "failure"
)

// reliabilityMetrics are the collectors that make failures visible:
// upstream failures of inference calls, files that could not be re-read,
// TLS handshakes refused and exchanges cut by a shutdown.
type reliabilityMetrics struct {
	upstream   *prometheus.CounterVec
	fileReload *prometheus.CounterVec
	handshakes *prometheus.CounterVec
	cut        *prometheus.CounterVec
}

func newReliabilityMetrics(reg prometheus.Registerer) reliabilityMetrics {
	r := reliabilityMetrics{
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_upstream_failures_total",
			Help: "Inference and pass-through calls whose v2 server gave no usable answer, by server (model-map server name, \"default\" for --backend) and reason (connect_error, reset, timeout, bad_response, server_error).",
		}, []string{"server", "reason"}),
		fileReload: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_file_reloads_total",
			Help: "Re-reads of a changed run-time file (bearer_token, tls_certificate), by result; on failure the last good value stays in use.",
		}, []string{"file", "result"}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_tls_handshake_failures_total",
			Help: "TLS handshakes the ext_proc server refused, by reason (not_tls, no_client_certificate, bad_client_certificate, timeout, closed, other).",
		}, []string{"reason"}),
		cut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfsbridge_shutdown_cut_exchanges_total",
			Help: "Exchanges still in progress when --shutdown-timeout expired, by adapter (extproc, http): answered TF's 503 when their headers had not gone out, else cut.",
		}, []string{"adapter"}),
	}
	reg.MustRegister(r.upstream, r.fileReload, r.handshakes, r.cut)
	for _, reason := range UpstreamReasons {
		r.upstream.WithLabelValues(DefaultServer, reason)
	}
	for _, f := range []string{FileBearerToken, FileTLSCertificate} {
		for _, res := range []string{ReloadSuccess, ReloadFailure} {
			r.fileReload.WithLabelValues(f, res)
		}
	}
	for _, a := range Adapters {
		r.cut.WithLabelValues(a)
	}
	r.handshakes.WithLabelValues("other")
	return r
}

// UpstreamFailure counts one call that got no usable answer from server.
func (m *Metrics) UpstreamFailure(server, reason string) {
	if m == nil {
		return
	}
	if server == "" {
		server = DefaultServer
	}
	m.rel.upstream.WithLabelValues(server, reason).Inc()
}

// FileReload counts one re-read of a changed file by result.
func (m *Metrics) FileReload(file, result string) {
	if m == nil {
		return
	}
	m.rel.fileReload.WithLabelValues(file, result).Inc()
}

// TLSHandshakeFailure counts one refused TLS handshake by reason.
func (m *Metrics) TLSHandshakeFailure(reason string) {
	if m == nil {
		return
	}
	m.rel.handshakes.WithLabelValues(reason).Inc()
}

// ShutdownCut counts n exchanges cut by the end of the shutdown grace
// period on adapter.
func (m *Metrics) ShutdownCut(adapter string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.rel.cut.WithLabelValues(adapter).Add(float64(n))
}
