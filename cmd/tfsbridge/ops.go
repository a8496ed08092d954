package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

// opsOptions are the operational flags every serving command has:
// readiness, the shutdown's drain delay and the backend's TLS files.
type opsOptions struct {
	readiness  string
	drainDelay time.Duration
	drainEnvoy string
	backendTLS tlsconfig.ClientFiles
}

func (o *opsOptions) register(fs *pflag.FlagSet) {
	d := bridge.DefaultOptions()
	fs.StringVar(&o.readiness, "readiness", d.Readiness, "What /readyz and gRPC health follow: tfsbridge (tfsbridge can serve; a down v2 server is answered per request with TF's 503) or backend (also the v2 server's readiness: the sidecar layout).")
	fs.DurationVar(&o.drainDelay, "drain-delay", d.DrainDelay, "On SIGTERM, how long tfsbridge keeps serving while reporting not ready, so that load balancers stop sending, before the graceful stop (--shutdown-timeout).")
	fs.StringVar(&o.drainEnvoy, "drain-envoy", "", "Admin URL of a sidecar Envoy (e.g. http://127.0.0.1:9901) that tfsbridge tells, on SIGTERM, to drain its listeners gracefully (POST /drain_listeners?graceful); empty: none.")
	fs.StringVar(&o.backendTLS.CAFile, "backend-ca-file", "", "PEM CA bundle that verifies an https:// v2 server (default: the system roots).")
	fs.StringVar(&o.backendTLS.CertFile, "backend-cert-file", "", "PEM client certificate for mTLS to the v2 server (with --backend-key-file).")
	fs.StringVar(&o.backendTLS.KeyFile, "backend-key-file", "", "PEM key of --backend-cert-file.")
}

func (o *opsOptions) apply(b *bridge.Options) {
	b.Readiness = o.readiness
	b.DrainDelay = o.drainDelay
	b.DrainEnvoyAdmin = o.drainEnvoy
	b.TLS.Backend = o.backendTLS
}

// registerServerTLS registers the ext_proc server's TLS flags.
func registerServerTLS(fs *pflag.FlagSet, t *tlsconfig.ServerFiles) {
	fs.StringVar(&t.CertFile, "tls-cert-file", "", "PEM certificate (chain) of the ext_proc gRPC server; with --tls-key-file it serves TLS, reloading both when they change. Empty: plaintext.")
	fs.StringVar(&t.KeyFile, "tls-key-file", "", "PEM key of --tls-cert-file.")
	fs.StringVar(&t.ClientCAFile, "tls-client-ca-file", "", "PEM CA bundle; when set, ext_proc clients (Envoy) must present a certificate it signed (mTLS).")
}
