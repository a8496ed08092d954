package main

import (
	"time"

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

func (o *opsOptions) register(f *flagSet) {
	d := bridge.DefaultOptions()
	f.fs.StringVar(&o.readiness, "readiness", d.Readiness, "What /readyz and gRPC health follow: tfsbridge (tfsbridge can serve; a down v2 server is answered per request with TF's 503) or backend (also the v2 server's readiness: the sidecar layout).")
	f.fs.DurationVar(&o.drainDelay, "drain-delay", d.DrainDelay, "On SIGTERM, how long tfsbridge keeps serving while reporting not ready, so that load balancers stop sending, before the graceful stop (--shutdown-timeout).")
	f.fs.StringVar(&o.drainEnvoy, "drain-envoy", "", "Admin URL of a sidecar Envoy (e.g. http://127.0.0.1:9901) that tfsbridge tells, on SIGTERM, to drain its listeners gracefully (POST /drain_listeners?graceful); empty: none.")
	f.fs.StringVar(&o.backendTLS.CAFile, "backend-ca-file", "", "PEM CA bundle that verifies an https:// v2 server (default: the system roots).")
	f.fs.StringVar(&o.backendTLS.CertFile, "backend-cert-file", "", "PEM client certificate for mTLS to the v2 server (with --backend-key-file).")
	f.fs.StringVar(&o.backendTLS.KeyFile, "backend-key-file", "", "PEM key of --backend-cert-file.")
}

func (o *opsOptions) apply(b *bridge.Options) {
	b.Readiness = o.readiness
	b.DrainDelay = o.drainDelay
	b.DrainEnvoyAdmin = o.drainEnvoy
	b.TLS.Backend = o.backendTLS
}

// registerServerTLS registers the ext_proc server's TLS flags.
func registerServerTLS(f *flagSet, t *tlsconfig.ServerFiles) {
	f.fs.StringVar(&t.CertFile, "tls-cert-file", "", "PEM certificate (chain) of the ext_proc gRPC server; with --tls-key-file it serves TLS, reloading both when they change. Empty: plaintext.")
	f.fs.StringVar(&t.KeyFile, "tls-key-file", "", "PEM key of --tls-cert-file.")
	f.fs.StringVar(&t.ClientCAFile, "tls-client-ca-file", "", "PEM CA bundle; when set, ext_proc clients (Envoy) must present a certificate it signed (mTLS).")
}

// setDefault changes a registered flag's default, for a command whose
// defaults differ from the shared ones (the demo's loopback addresses).
func setDefault(f *flagSet, name, value string) {
	fl := f.fs.Lookup(name)
	if err := fl.Value.Set(value); err != nil {
		panic("flag --" + name + ": " + err.Error())
	}
	fl.DefValue = value
}
