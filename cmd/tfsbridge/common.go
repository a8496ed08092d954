package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// Defaults shared by the serving commands.
const (
	defaultBackend      = "http://127.0.0.1:8000"
	defaultMetricsAddr  = ":9090"
	defaultMaxBodyBytes = 64 << 20
	defaultShutdown     = 15 * time.Second
)

// logOptions are the logging flags every command has.
type logOptions struct {
	level, format string
}

func (o *logOptions) register(f *flagSet) {
	f.fs.StringVar(&o.level, "log-level", "info", "Log level: debug, info, warn or error.")
	f.fs.StringVar(&o.format, "log-format", "text", "Log format: text or json.")
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	return observe.NewLogger(w, o.level, o.format)
}

// bridgeOptions are the flags shared by extproc and proxy: the backend,
// the limits, metrics and shutdown.
type bridgeOptions struct {
	log              logOptions
	backendURL       string
	backendKind      string
	backendTimeout   time.Duration
	metadataTTL      time.Duration
	metadataErrorTTL time.Duration
	maxBody          byteSize
	maxDepth         int
	maxElements      int64
	metricsAddr      string
	shutdownTimeout  time.Duration
}

func (o *bridgeOptions) register(f *flagSet) {
	f.fs.StringVar(&o.backendURL, "backend", defaultBackend, "Root URL of the v2 inference server (Triton, KServe, MLServer).")
	f.fs.StringVar(&o.backendKind, "backend-kind", backend.KindAuto, "v2 server kind: auto (detect with GET /v2), triton, kserve or mlserver.")
	o.registerServing(f)
}

// registerServing registers every shared flag but the backend's: the demo
// brings its own backend, so offering --backend there would only mislead.
func (o *bridgeOptions) registerServing(f *flagSet) {
	o.log.register(f)
	f.fs.DurationVar(&o.backendTimeout, "backend-timeout", backend.DefaultTimeout, "Timeout of each metadata, config and readiness call to the v2 server.")
	f.fs.DurationVar(&o.metadataTTL, "metadata-ttl", backend.DefaultMetadataTTL, "How long a model's fetched signature is reused.")
	f.fs.DurationVar(&o.metadataErrorTTL, "metadata-error-ttl", backend.DefaultErrorTTL, "How long a failed metadata fetch (unknown model, backend down) is remembered; 0 disables.")
	o.maxBody = defaultMaxBodyBytes
	f.fs.Var(&o.maxBody, "max-body-bytes", "Largest request or response body translated, a `size` such as 64MiB or 1048576; larger ones get 413.")
	f.fs.IntVar(&o.maxDepth, "max-json-depth", tensor.DefaultLimits.MaxDepth, "Deepest JSON nesting accepted in a body.")
	f.fs.Int64Var(&o.maxElements, "max-elements", tensor.DefaultLimits.MaxElements, "Most tensor elements one body may carry.")
	f.fs.StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr, "Address of the admin server (/metrics, /healthz, /readyz); empty disables it.")
	f.fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", defaultShutdown, "On SIGTERM, how long in-flight requests may take to finish.")
}

func (o *bridgeOptions) validate() error {
	switch {
	case o.backendTimeout <= 0:
		return errors.New("--backend-timeout must be positive")
	case o.metadataTTL <= 0:
		return errors.New("--metadata-ttl must be positive")
	case o.metadataErrorTTL < 0:
		return errors.New("--metadata-error-ttl must not be negative")
	case o.maxDepth <= 0:
		return errors.New("--max-json-depth must be positive")
	case o.maxElements <= 0:
		return errors.New("--max-elements must be positive")
	case o.shutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	}
	return nil
}

// bridge is what extproc and proxy share at run time.
type bridge struct {
	log     *slog.Logger
	metrics *observe.Metrics
	backend *backend.Client
	session *session.Config
	// serving is set while the command's main listener serves; /readyz
	// reports not ready outside that window (startup, draining).
	serving atomic.Bool
}

func (o *bridgeOptions) build(stderr io.Writer) (*bridge, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	log, err := o.log.logger(stderr)
	if err != nil {
		return nil, err
	}
	m := observe.NewMetrics()
	errTTL := o.metadataErrorTTL
	if errTTL == 0 {
		errTTL = -1 // backend.Config: negative means "do not cache failures"
	}
	be, err := backend.New(backend.Config{
		BaseURL:     o.backendURL,
		Kind:        o.backendKind,
		Timeout:     o.backendTimeout,
		MetadataTTL: o.metadataTTL,
		ErrorTTL:    errTTL,
		Metrics:     m,
	})
	if err != nil {
		return nil, err
	}
	return &bridge{
		log:     log,
		metrics: m,
		backend: be,
		session: &session.Config{
			Backend:      be,
			Limits:       tensor.Limits{MaxDepth: o.maxDepth, MaxElements: o.maxElements},
			MaxBodyBytes: int64(o.maxBody),
			Metrics:      m,
			Logger:       log,
		},
	}, nil
}

// ready backs /readyz: our listener serves and the v2 server is ready.
func (b *bridge) ready(ctx context.Context) error {
	if !b.serving.Load() {
		return errors.New("not serving")
	}
	return b.backend.Health(ctx)
}

// startAdmin binds addr and serves the admin endpoints in g until ctx is
// done; an empty addr disables them (nil address).
func startAdmin(ctx context.Context, g *errgroup.Group, addr string, m *observe.Metrics,
	ready func(context.Context) error, log *slog.Logger) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	srv := newHTTPServer(observe.AdminHandler(m, ready), log)
	g.Go(func() error { return serveHTTP(ctx, srv, lis, 2*time.Second) })
	return lis.Addr(), nil
}

// newHTTPServer returns an http.Server with header and idle timeouts. No
// write timeout: a large translated response may take a while to send.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// serveHTTP serves on lis until ctx is done, then shuts down gracefully
// within drain.
func serveHTTP(ctx context.Context, srv *http.Server, lis net.Listener, drain time.Duration) error {
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
