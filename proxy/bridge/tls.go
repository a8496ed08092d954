package bridge

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
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

// handshakeLogInterval is the least time between two log lines about
// refused handshakes of one reason: a peer can cause them at will, and
// tfsbridge_tls_handshake_failures_total counts every one.
const handshakeLogInterval = 10 * time.Second

// tlsEvents reports certificate reloads to the log and to
// tfsbridge_file_reloads_total{file="tls_certificate"}.
func tlsEvents(log *slog.Logger, m *observe.Metrics) tlsconfig.Events {
	return tlsconfig.Events{Logger: log, Reloaded: func(err error) {
		result := observe.ReloadSuccess
		if err != nil {
			result = observe.ReloadFailure
		}
		m.FileReload(observe.FileTLSCertificate, result)
	}}
}

// server loads the ext_proc server's TLS configuration (nil: plaintext).
func (t TLSOptions) server(ev tlsconfig.Events) (*tlsconfig.Loaded, error) {
	l, err := tlsconfig.LoadServer(t.Extproc, ev)
	if err != nil {
		return nil, fmt.Errorf("ext_proc %w", err)
	}
	return l, nil
}

// grpcTLS returns the gRPC server option for l; none for plaintext.
// Refused handshakes, which grpc-go drops without a word, are counted by
// reason and logged at warn, at most once per reason and
// handshakeLogInterval.
func (b *Bridge) grpcTLS(l *tlsconfig.Loaded) []grpc.ServerOption {
	if l == nil {
		return nil
	}
	lim := &observe.LogLimiter{Logger: b.Log, Interval: handshakeLogInterval}
	failed := func(peer net.Addr, err error) {
		reason := tlsconfig.HandshakeReason(err)
		b.Metrics.TLSHandshakeFailure(reason)
		lim.Log(slog.LevelWarn, reason, "ext_proc TLS handshake refused", "reason", reason, "peer", fmt.Sprint(peer), "error", err)
	}
	return []grpc.ServerOption{grpc.Creds(observedCreds{credentials.NewTLS(l.Config), failed})}
}

// observedCreds reports failed server handshakes.
type observedCreds struct {
	credentials.TransportCredentials
	failed func(peer net.Addr, err error)
}

func (c observedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.failed(conn.RemoteAddr(), err)
	}
	return nc, info, err
}

func (c observedCreds) Clone() credentials.TransportCredentials {
	return observedCreds{c.TransportCredentials.Clone(), c.failed}
}

// transports are the HTTP transports towards the v2 server.
type transports struct {
	backend, proxy http.RoundTripper
}

// transports returns the injected transports, or, when backend TLS files
// are set, ones that use them (nil leaves each package's default), and
// the backend TLS files loaded (nil without).
func (o *Options) transports(ev tlsconfig.Events) (transports, *tlsconfig.Loaded, error) {
	tr := transports{backend: o.BackendTransport, proxy: o.ProxyTransport}
	l, err := tlsconfig.LoadClient(o.TLS.Backend, ev)
	if err != nil {
		return tr, nil, fmt.Errorf("backend %w", err)
	}
	if l == nil {
		return tr, nil, nil
	}
	cfg := l.Config
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
	return tr, l, nil
}
