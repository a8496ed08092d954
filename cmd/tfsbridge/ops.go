package main

import (
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

// opsBindings are the operational flags every serving command has:
// readiness, the shutdown's drain and the backend's TLS files.
func opsBindings(o *bridge.Options) []binding {
	return []binding{
		enumFlag(&o.Readiness, "readiness", "What /readyz and gRPC health follow: tfsbridge (tfsbridge can serve; a down v2 server is answered per request with TF's 503) or backend (also the v2 server's readiness: the sidecar layout).",
			[]string{bridge.ReadinessTFSBridge, bridge.ReadinessBackend}, nil),
		durationFlag(&o.DrainDelay, "drain-delay", "On SIGTERM, how long tfsbridge keeps serving while reporting not ready, so that load balancers and Envoys stop sending, before the graceful stop (--shutdown-timeout)."),
		urlFlag(&o.DrainEnvoyAdmin, "drain-envoy", "Admin URL of a sidecar Envoy (e.g. http://127.0.0.1:9901) that tfsbridge tells, on SIGTERM, to drain its listeners gracefully (POST /drain_listeners?graceful); empty: none.", true),
		fileFlag(&o.TLS.Backend.CAFile, "backend-ca-file", "PEM CA bundle that verifies an https:// v2 server, for the metadata calls and the proxy's upstream calls (default: the system roots)."),
		fileFlag(&o.TLS.Backend.CertFile, "backend-cert-file", "PEM client certificate for mTLS to the v2 server (with --backend-key-file), reloaded when the files change."),
		fileFlag(&o.TLS.Backend.KeyFile, "backend-key-file", "PEM key of --backend-cert-file."),
	}
}

// serverTLSBindings are the ext_proc server's TLS flags.
func serverTLSBindings(t *tlsconfig.ServerFiles) []binding {
	return []binding{
		fileFlag(&t.CertFile, "tls-cert-file", "PEM certificate (chain) of the ext_proc gRPC server; with --tls-key-file it serves TLS, reloading both when they change (checked at most once a second, on handshakes). Empty: plaintext."),
		fileFlag(&t.KeyFile, "tls-key-file", "PEM key of --tls-cert-file."),
		fileFlag(&t.ClientCAFile, "tls-client-ca-file", "PEM CA bundle; when set, ext_proc clients (Envoy) must present a certificate it signed (mTLS)."),
	}
}
