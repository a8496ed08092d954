package bridge

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

// TLSOptions are the PEM files of tfsbridge's TLS: the ext_proc server's
// (plaintext when no certificate is set) and the backend's, used by the
// metadata calls and the proxy's upstream calls to an https:// v2 server.
type TLSOptions struct {
	// Extproc is the ext_proc server's certificate, reloaded when its
	// files change, and the optional client CA that turns on mTLS.
	Extproc tlsconfig.ServerFiles
	// Backend is the CA that verifies the v2 server (system roots when
	// empty) and the optional client certificate for mTLS.
	Backend tlsconfig.ClientFiles
}

// invalid reports a certificate without its key or the other way round.
func (t TLSOptions) invalid() bool {
	return (t.Extproc.CertFile == "") != (t.Extproc.KeyFile == "") ||
		(t.Backend.CertFile == "") != (t.Backend.KeyFile == "")
}

// server loads the ext_proc server's TLS configuration (nil: plaintext).
func (t TLSOptions) server() (*tls.Config, error) {
	cfg, err := tlsconfig.Server(t.Extproc)
	if err != nil {
		return nil, fmt.Errorf("ext_proc %w", err)
	}
	return cfg, nil
}

// grpcTLS returns the gRPC server option for cfg; none for plaintext.
func grpcTLS(cfg *tls.Config) []grpc.ServerOption {
	if cfg == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg))}
}

// transports are the HTTP transports towards the v2 server.
type transports struct {
	backend, proxy http.RoundTripper
}

// transports returns the injected transports, or, when backend TLS files
// are set, ones that use them (nil leaves each package's default).
func (o *Options) transports() (transports, error) {
	tr := transports{backend: o.BackendTransport, proxy: o.ProxyTransport}
	cfg, err := tlsconfig.Client(o.TLS.Backend)
	if err != nil {
		return tr, fmt.Errorf("backend %w", err)
	}
	if cfg == nil {
		return tr, nil
	}
	if tr.backend == nil {
		t := backend.NewTransport(o.BackendTimeout)
		t.TLSClientConfig = cfg
		tr.backend = t
	}
	if tr.proxy == nil {
		// The same transport httpproxy defaults to, with the backend TLS.
		t := backend.NewTransport(backend.DefaultTimeout)
		t.TLSClientConfig = cfg.Clone()
		tr.proxy = t
	}
	return tr, nil
}
