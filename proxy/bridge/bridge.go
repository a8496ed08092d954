// Package bridge has one job: assemble and run tfsbridge's servers from
// options. It holds the wiring every way of running tfsbridge shares — the
// logger, the metrics registry, the v2 backend client, the session
// configuration, the ext_proc gRPC server, the HTTP reverse proxy, the
// admin server, readiness and graceful shutdown — so that cmd/tfsbridge
// and the end-to-end test suites run the very same assembly instead of
// copies of it.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/extproc"
	"github.com/tfsbridge/tfsbridge/proxy/httpproxy"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// Defaults of the options that no other package defines. They are the
// defaults of cmd/tfsbridge's flags.
const (
	DefaultBackendURL      = "http://127.0.0.1:8000"
	DefaultMetricsAddr     = ":9090"
	DefaultMaxBodyBytes    = 64 << 20
	DefaultShutdownTimeout = 15 * time.Second
	DefaultDrainDelay      = 5 * time.Second
)

// adminDrain bounds the admin server's shutdown: its requests are short,
// and a scrape cut at exit does no harm.
const adminDrain = 2 * time.Second

// Options configure a Bridge. Start from DefaultOptions: a zero duration
// or limit is invalid rather than silently defaulted, so that a flag set
// to 0 is reported instead of ignored.
type Options struct {
	// BackendURL is the v2 inference server's root URL.
	BackendURL string
	// BackendKind is backend.KindAuto (detect with GET /v2), "triton",
	// "kserve" or "mlserver".
	BackendKind string
	// BackendTimeout bounds each metadata, config and readiness call.
	BackendTimeout time.Duration
	// MetadataTTL is how long a model's fetched signature is reused.
	MetadataTTL time.Duration
	// MetadataErrorTTL is how long a failed metadata fetch is remembered;
	// 0 disables remembering failures.
	MetadataErrorTTL time.Duration
	// MaxBodyBytes is the largest request or response body translated.
	MaxBodyBytes int64
	// GRPCMaxRecvBytes is the ext_proc server's gRPC receive limit; 0
	// means extproc.DefaultMaxRecvMsgBytes (none of ours: Envoy's buffer
	// limit bounds what arrives). It may not be below MaxBodyBytes (see
	// extproc.ServerOptions.MaxRecvMsgBytes).
	GRPCMaxRecvBytes int64
	// BodyMode is the ext_proc body mode expected of Envoy's filter
	// (extproc.BodyModeAuto follows what each stream announces).
	BodyMode extproc.BodyMode
	// BodyTimeout bounds a full-duplex ext_proc request body, from its
	// headers to its end (Envoy applies no message timeout there).
	BodyTimeout time.Duration
	// MaxInflightBytes bounds the memory all translated exchanges hold
	// together (see package admission); over it new TF requests get 503.
	// DefaultOptions derives it from the Go memory limit.
	MaxInflightBytes int64
	// MaxJSONDepth is the deepest JSON nesting accepted in a body.
	MaxJSONDepth int
	// MaxElements is the most tensor elements one body may carry.
	MaxElements int64
	// Passthrough is which requests outside TF Serving's API reach the v2
	// server untouched, through either transport (see session.Passthrough).
	Passthrough session.Passthrough
	// ShutdownTimeout is how long in-flight requests and streams may take
	// to finish once serving stops.
	ShutdownTimeout time.Duration
	// Readiness is what /readyz and gRPC health follow: ReadinessTFSBridge
	// (tfsbridge can serve; a down backend is answered per request) or
	// ReadinessBackend (also the v2 server's readiness, for the sidecar
	// layout). "" means ReadinessTFSBridge.
	Readiness string
	// DrainDelay is how long the servers keep serving, reporting not
	// ready, between the shutdown signal and the graceful stop: the time
	// load balancers need to stop sending new requests. 0 stops at once.
	DrainDelay time.Duration
	// DrainEnvoyAdmin, when set, is the admin URL of a sidecar Envoy
	// (http://127.0.0.1:9901) asked to drain its listeners gracefully
	// when the shutdown starts.
	DrainEnvoyAdmin string
	// TLS configures the ext_proc server's and the backend client's TLS.
	TLS TLSOptions
	// Logger receives the servers' logs; nil discards them.
	Logger *slog.Logger
	// Proxy holds the HTTP reverse proxy's timeouts.
	Proxy ProxyOptions
	// ModelMapFile is the model map (YAML); empty maps nothing. It is
	// re-read every ModelMapPollInterval (0: modelmap.DefaultPollInterval)
	// while the bridge serves.
	ModelMapFile         string
	ModelMapPollInterval time.Duration
	// Shadow bounds the shadow comparison of mapped models (shadow.go).
	Shadow ShadowOptions
	// Pprof serves Go's profiles under /debug/pprof/ on the admin server.
	// Off by default: a profile costs CPU while it runs and tells about
	// the process's insides, so it is for whoever can reach the admin port
	// on purpose.
	Pprof bool

	// TFGRPCBackend is the v2 server's gRPC address (host:port, h2c)
	// the TF gRPC listener calls; it is required when that listener
	// serves (Addrs.TFGRPC).
	TFGRPCBackend string
	// TFGRPCTensorContent makes TF gRPC answers carry tensor_content, as
	// TF Serving's --enable_serialization_as_tensor_content does, instead
	// of its default typed fields (float_val, ...).
	TFGRPCTensorContent bool
	// TFGRPCDefaultVersion is the model_spec.version TF gRPC answers
	// carry when neither the request, the model map nor the v2 server
	// names a numeric version (KServe, MLServer: spec §9.1); -1 (the
	// default) leaves it unset, as 0 in TF's protobuf.
	TFGRPCDefaultVersion int64

	// BackendTransport and ProxyTransport, when set, replace the HTTP
	// transports towards the v2 server of the backend client and of the
	// proxy: tests inject them to close idle connections at will.
	BackendTransport http.RoundTripper
	ProxyTransport   http.RoundTripper
}

// ProxyOptions are the HTTP reverse proxy's timeouts (see httpproxy.Config).
type ProxyOptions struct {
	// RequestTimeout is the deadline of a translated inference call.
	RequestTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a body.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long an idle keep-alive connection is kept.
	IdleTimeout time.Duration
	// WriteTimeout bounds how long a client may take to read a translated
	// answer; the ext_proc server applies it too (extproc.Options).
	WriteTimeout time.Duration
}

// DefaultOptions returns the options "tfsbridge extproc" and "tfsbridge
// proxy" run with when no flag is given.
func DefaultOptions() Options {
	return Options{
		BackendURL:       DefaultBackendURL,
		BackendKind:      backend.KindAuto,
		BackendTimeout:   backend.DefaultTimeout,
		MetadataTTL:      backend.DefaultMetadataTTL,
		MetadataErrorTTL: backend.DefaultErrorTTL,
		MaxBodyBytes:     DefaultMaxBodyBytes,
		MaxInflightBytes: admission.DefaultLimit(),
		BodyTimeout:      extproc.DefaultBodyTimeout,
		MaxJSONDepth:     tensor.DefaultLimits.MaxDepth,
		MaxElements:      tensor.DefaultLimits.MaxElements,
		Passthrough:      session.PassthroughInference,
		ShutdownTimeout:  DefaultShutdownTimeout,
		Readiness:        ReadinessTFSBridge,
		DrainDelay:       DefaultDrainDelay,
		Shadow:           defaultShadowOptions(),
		// Unset: a version tfsbridge cannot know is not invented.
		TFGRPCDefaultVersion: -1,
		Proxy: ProxyOptions{
			RequestTimeout:    httpproxy.DefaultRequestTimeout,
			ReadTimeout:       httpproxy.DefaultReadTimeout,
			ReadHeaderTimeout: httpproxy.DefaultReadHeaderTimeout,
			IdleTimeout:       httpproxy.DefaultIdleTimeout,
			WriteTimeout:      httpproxy.DefaultWriteTimeout,
		},
	}
}

// FieldError is an invalid option. Field is the Options field's name
// (ProxyOptions fields are prefixed "Proxy."), so that a caller such as
// the command line can name the flag that set it instead.
type FieldError struct {
	Field   string
	Problem string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Validate reports the first invalid option as a *FieldError. The proxy's
// timeouts come first, as the proxy command has always reported them.
func (o *Options) Validate() error {
	for _, c := range []struct {
		field string
		bad   bool
		want  string
	}{
		{"Proxy.RequestTimeout", o.Proxy.RequestTimeout <= 0, "must be positive"},
		{"Proxy.ReadTimeout", o.Proxy.ReadTimeout <= 0, "must be positive"},
		{"Proxy.ReadHeaderTimeout", o.Proxy.ReadHeaderTimeout <= 0, "must be positive"},
		{"Proxy.IdleTimeout", o.Proxy.IdleTimeout <= 0, "must be positive"},
		{"Proxy.WriteTimeout", o.Proxy.WriteTimeout <= 0, "must be positive"},
		{"BackendTimeout", o.BackendTimeout <= 0, "must be positive"},
		{"BodyTimeout", o.BodyTimeout <= 0, "must be positive"},
		{"MetadataTTL", o.MetadataTTL <= 0, "must be positive"},
		{"MetadataErrorTTL", o.MetadataErrorTTL < 0, "must not be negative"},
		{"MaxJSONDepth", o.MaxJSONDepth <= 0, "must be positive"},
		{"MaxElements", o.MaxElements <= 0, "must be positive"},
		{"ShutdownTimeout", o.ShutdownTimeout <= 0, "must be positive"},
		{"DrainDelay", o.DrainDelay < 0, "must not be negative"},
		{"Readiness", !validReadiness(o.Readiness), "must be tfsbridge or backend"},
		{"DrainEnvoyAdmin", !validAdminURL(o.DrainEnvoyAdmin), "must be empty or an http:// URL"},
		// A certificate and its key go together; the missing one is named.
		{"TLS.Extproc.KeyFile", o.TLS.Extproc.CertFile != "" && o.TLS.Extproc.KeyFile == "", "must be set with the certificate file"},
		{"TLS.Extproc.CertFile", o.TLS.Extproc.CertFile == "" && o.TLS.Extproc.KeyFile != "", "must be set with the key file"},
		{"TLS.Backend.KeyFile", o.TLS.Backend.CertFile != "" && o.TLS.Backend.KeyFile == "", "must be set with the certificate file"},
		{"TLS.Backend.CertFile", o.TLS.Backend.CertFile == "" && o.TLS.Backend.KeyFile != "", "must be set with the key file"},
		{"TLS", o.TLS.invalid(), "must name both a certificate and its key file"},
		{"MaxBodyBytes", o.MaxBodyBytes <= 0, "must be positive"},
		{"MaxInflightBytes", o.MaxInflightBytes <= 0, "must be positive"},
		{"GRPCMaxRecvBytes", o.GRPCMaxRecvBytes < 0 || (o.GRPCMaxRecvBytes > 0 && o.GRPCMaxRecvBytes < o.MaxBodyBytes),
			"must be 0 (no limit of ours) or at least the body limit"},
		{"BackendURL", !validBackendURL(o.BackendURL), "must be an http:// or https:// URL with a host and no query or fragment"},
		{"BackendKind", !validBackendKind(o.BackendKind), "must be auto, triton, kserve or mlserver"},
		{o.Shadow.invalid(), o.Shadow.invalid() != "", "must be positive"},
		{"TFGRPCBackend", !validGRPCAddr(o.TFGRPCBackend), "must be empty or host:port"},
		{"TFGRPCDefaultVersion", o.TFGRPCDefaultVersion < -1, "must be -1 (unset) or a version, at least 0"},
	} {
		if c.bad {
			return &FieldError{Field: c.field, Problem: c.want}
		}
	}
	return nil
}

// validBackendURL accepts what backend.New does, so that a bad URL is an
// invalid option rather than a failure to build.
func validBackendURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == ""
}

func validBackendKind(kind string) bool {
	if kind == "" || kind == backend.KindAuto {
		return true
	}
	_, err := oip.ParseServerKind(kind)
	return err == nil
}

// Bridge is one assembled tfsbridge: the parts its servers share. The
// ext_proc server and the proxy share one backend client, one session
// configuration and one metrics registry, so that a signature fetched for
// one is reused by the other and /metrics counts both.
type Bridge struct {
	// Log, Metrics, Backend and Session are exported for callers that log
	// alongside the servers or inspect the backend (tests ask it for
	// signatures); they must not be replaced. Tests may wrap
	// Session.Backend before Serve to inject faults into both adapters.
	Log     *slog.Logger
	Metrics *observe.Metrics
	Backend *backend.Client
	Session *session.Config

	opts  Options
	proxy *httpproxy.Proxy
	maps  *mapState // nil without a model map
	// grpc is the TF gRPC listener's handler, nil without TFGRPCBackend.
	grpc *httpproxy.GRPCProxy
	// serving is set while a main listener (ext_proc or proxy) serves;
	// /readyz reports not ready outside that window (startup, draining).
	serving atomic.Bool
	// extprocTLS is the ext_proc server's TLS configuration, nil for
	// plaintext; backendTLS the backend client's, nil without TLS files.
	// SIGHUP reloads their key pairs.
	extprocTLS, backendTLS *tlsconfig.Loaded
}

// New validates o and builds the shared parts; nothing listens yet.
func New(o Options) (*Bridge, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := observe.NewMetrics()
	errTTL := o.MetadataErrorTTL
	if errTTL == 0 {
		errTTL = -1 // backend.Config: negative means "do not cache failures"
	}
	tlsEv := tlsEvents(log, m)
	tr, backendTLS, err := o.transports(tlsEv)
	if err != nil {
		return nil, err
	}
	clientConfig := func() backend.Config {
		return backend.Config{
			BaseURL:     o.BackendURL,
			Kind:        o.BackendKind,
			Timeout:     o.BackendTimeout,
			MetadataTTL: o.MetadataTTL,
			ErrorTTL:    errTTL,
			Transport:   tr.backend,
			Metrics:     m,
			Logger:      log,
			// Metadata is a body too: never more than the body limit.
			MaxMetadataBytes: min(backend.DefaultMaxMetadataBytes, o.MaxBodyBytes),
		}
	}
	be, err := backend.New(clientConfig())
	if err != nil {
		return nil, err
	}
	maps, err := newMapState(o, clientConfig, m)
	if err != nil {
		return nil, err
	}
	if need := o.MaxBodyBytes * admission.ResponseFactor; need > o.MaxInflightBytes {
		log.Warn("the in-flight memory budget is smaller than one exchange at the body limit may need: such exchanges will get 503",
			"max_inflight_bytes", o.MaxInflightBytes, "max_body_bytes", o.MaxBodyBytes, "needed", need)
	}
	// A translated answer may expand, within a bound the body limit sets.
	limits := tensor.Limits{MaxDepth: o.MaxJSONDepth, MaxElements: o.MaxElements,
		MaxOutputBytes: session.OutputExpansion * o.MaxBodyBytes}
	sess := &session.Config{
		Backend:      be,
		Limits:       limits,
		MaxBodyBytes: o.MaxBodyBytes,
		Passthrough:  o.Passthrough,
		Metrics:      m,
		Logger:       log,
		Admission:    admission.New(o.MaxInflightBytes, m),
	}
	if maps != nil {
		sess.Mapping = maps.mapping
		sess.Shadow = newShadow(o, tr.backend, be.BaseURL(), limits, m, log)
	}
	if o.TFGRPCTensorContent {
		sess.GRPC.Encoding = tfgrpc.TensorContent
	}
	if o.TFGRPCDefaultVersion >= 0 {
		sess.GRPC.DefaultVersion, sess.GRPC.HasDefaultVersion = o.TFGRPCDefaultVersion, true
	}
	p, err := httpproxy.New(httpproxy.Config{
		Session:           sess,
		Upstream:          be.BaseURL(),
		Transport:         tr.proxy,
		RequestTimeout:    o.Proxy.RequestTimeout,
		ReadTimeout:       o.Proxy.ReadTimeout,
		ReadHeaderTimeout: o.Proxy.ReadHeaderTimeout,
		IdleTimeout:       o.Proxy.IdleTimeout,
		WriteTimeout:      o.Proxy.WriteTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	gp, err := o.tfGRPCProxy(sess)
	if err != nil {
		return nil, err
	}
	srvTLS, err := o.TLS.server(tlsEv)
	if err != nil {
		return nil, err
	}
	return &Bridge{Log: log, Metrics: m, Backend: be, Session: sess, opts: o, proxy: p, grpc: gp, maps: maps,
		extprocTLS: srvTLS, backendTLS: backendTLS}, nil
}

// Addrs are the addresses Listen binds; an empty one skips its server.
type Addrs struct {
	Extproc, Proxy, Admin string
	// TFGRPC is the TF gRPC listener's (TF Serving's port 8500).
	TFGRPC string
}

// Listeners are what Serve serves on; a nil one skips its server. Tests
// pass their own (127.0.0.1:0, or wrapped to inject faults).
type Listeners struct {
	Extproc, Proxy, Admin net.Listener
	TFGRPC                net.Listener
}

// Listen binds every non-empty address of a. On failure it closes the
// listeners it already bound.
func Listen(a Addrs) (Listeners, error) {
	var l Listeners
	for _, x := range []struct {
		addr, name string
		lis        *net.Listener
	}{
		{a.Extproc, "ext_proc", &l.Extproc},
		{a.Proxy, "proxy", &l.Proxy},
		{a.Admin, "metrics", &l.Admin},
		{a.TFGRPC, "TF gRPC", &l.TFGRPC},
	} {
		if x.addr == "" {
			continue
		}
		lis, err := listen(x.addr)
		if err != nil {
			l.Close()
			return Listeners{}, fmt.Errorf("%s listener: %w", x.name, err)
		}
		*x.lis = lis
	}
	return l, nil
}

// Close closes every listener; Serve does so itself, this is for a caller
// that gives up before serving.
func (l Listeners) Close() {
	for _, lis := range []net.Listener{l.Extproc, l.Proxy, l.Admin, l.TFGRPC} {
		if lis != nil {
			_ = lis.Close()
		}
	}
}

// Addr returns lis's address, or nil for a skipped server: a nil
// net.Addr prints as <nil> in logs, which says "disabled" well enough.
func Addr(lis net.Listener) net.Addr {
	if lis == nil {
		return nil
	}
	return lis.Addr()
}

// Serve serves the ext_proc gRPC server, the HTTP proxy and the admin
// server on the non-nil listeners of l until ctx is done or one of them
// fails, then shuts them down gracefully: readiness (/readyz and gRPC
// health) turns false first, the servers keep serving for DrainDelay so
// that load balancers and Envoy stop sending (skipped when a server
// failed), and in-flight requests and streams then get ShutdownTimeout to
// finish. It returns nil after a shutdown asked for by ctx.
//
// Readiness turns true before any server starts, so a caller that bound
// the listeners may announce them before calling Serve: connections wait
// in the listen backlog and find the bridge ready.
func (b *Bridge) Serve(ctx context.Context, l Listeners) error {
	if l.Extproc == nil && l.Proxy == nil && l.Admin == nil && l.TFGRPC == nil {
		return errors.New("bridge: no listener to serve")
	}
	if l.TFGRPC != nil && b.grpc == nil {
		l.Close()
		return errors.New("bridge: the TF gRPC listener needs the v2 server's gRPC address (--backend-grpc)")
	}
	g, gctx := errgroup.WithContext(ctx)
	// stop ends serving: DrainDelay after ctx is done (the servers keep
	// serving meanwhile, reporting not ready), at once when a server
	// failed.
	stop, stopNow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNow()
	var ext *extproc.Server
	if l.Extproc != nil {
		ext = b.newExtprocServer()
	}
	var prx *http.Server
	if l.Proxy != nil {
		prx = b.newProxyServer()
	}
	if l.Extproc != nil || l.Proxy != nil || l.TFGRPC != nil {
		b.serving.Store(true)
	}
	if b.maps != nil {
		g.Go(func() error { b.maps.watcher.Run(stop); return nil })
	}
	g.Go(func() error { b.serveReloads(ctx, stop); return nil })
	g.Go(func() error {
		<-gctx.Done()
		b.drain(ctx, ext, prx)
		stopNow()
		return nil
	})
	if ext != nil && b.opts.Readiness == ReadinessBackend {
		g.Go(func() error { b.followReadiness(stop, ext); return nil })
	}
	grace := b.opts.ShutdownTimeout
	var extStats, prxStats stopStats
	if ext != nil {
		g.Go(func() error {
			err := ext.Serve(stop, l.Extproc, grace)
			s := ext.Stats()
			extStats = stopStats{drained: s.Drained, cut: s.Cut}
			return wrap("ext_proc server", err)
		})
	}
	if prx != nil {
		g.Go(func() error {
			return wrap("proxy server", serveProxy(stop, prx, l.Proxy, grace, b.proxy.Inflight(), &prxStats))
		})
	}
	var grpcStats stopStats
	if l.TFGRPC != nil {
		srv := b.newTFGRPCServer()
		g.Go(func() error {
			return wrap("TF gRPC server", serveProxy(stop, srv, l.TFGRPC, grace, b.grpc.Inflight(), &grpcStats))
		})
	}
	if l.Admin != nil {
		h := observe.AdminHandler(b.Metrics, b.Ready)
		if b.opts.Pprof {
			h = observe.WithPprof(h)
		}
		srv := NewHTTPServer(h, b.Log)
		g.Go(func() error { return wrap("admin server", ServeHTTP(stop, srv, l.Admin, adminDrain)) })
	}
	err := g.Wait()
	b.Session.Shadow.Close() // the copies still running are cut
	if ext == nil && prx == nil && l.TFGRPC == nil {
		return err
	}
	prxStats.drained += grpcStats.drained
	prxStats.cut += grpcStats.cut
	return b.stopped(&extStats, &prxStats, err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// NewHTTPServer returns an http.Server with header and idle timeouts, for
// the admin server and the demo's mock. No write timeout: a large
// translated response may take a while to send.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// ServeHTTP serves srv on lis until ctx is done, then shuts it down
// gracefully within drain and closes what is left.
func ServeHTTP(ctx context.Context, srv *http.Server, lis net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
