package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/httpproxy"
)

const proxySummary = `Runs a standalone HTTP reverse proxy (no Envoy): TF Serving REST clients talk to it,
it talks to the v2 inference server. Requests that are not TF Serving REST calls are
passed through untouched.`

// proxyOptions are the flags of "tfsbridge proxy".
type proxyOptions struct {
	bridgeOptions
	httpAddr          string
	requestTimeout    time.Duration
	readTimeout       time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
}

func parseProxy(args []string, env lookupEnv, out io.Writer) (*proxyOptions, error) {
	o := &proxyOptions{}
	f := newFlagSet("proxy", proxySummary, out)
	o.registerProxy(f)
	o.register(f)
	if err := f.parse(args, env); err != nil {
		return nil, err
	}
	return o, o.validateProxy()
}

func (o *proxyOptions) registerProxy(f *flagSet) {
	f.fs.StringVar(&o.httpAddr, "http-addr", ":8501", "Address the HTTP proxy listens on (TF Serving's REST port is 8501).")
	f.fs.DurationVar(&o.requestTimeout, "request-timeout", httpproxy.DefaultRequestTimeout,
		"Deadline of a translated inference call upstream; past it the client gets 504, as from TF Serving's --rest_api_timeout_in_ms.")
	f.fs.DurationVar(&o.readTimeout, "read-timeout", httpproxy.DefaultReadTimeout,
		"Longest a client may take to send a request body, from the end of its headers; a slower or unfinished body is cut (TF requests get 400, others 408) and the connection closed.")
	f.fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", httpproxy.DefaultReadHeaderTimeout,
		"Longest a client may take to send a request's headers before the connection is closed.")
	f.fs.DurationVar(&o.idleTimeout, "idle-timeout", httpproxy.DefaultIdleTimeout,
		"How long an idle keep-alive client connection is kept open.")
}

func (o *proxyOptions) validateProxy() error {
	switch {
	case o.requestTimeout <= 0:
		return errors.New("--request-timeout must be positive")
	case o.readTimeout <= 0:
		return errors.New("--read-timeout must be positive")
	case o.readHeaderTimeout <= 0:
		return errors.New("--read-header-timeout must be positive")
	case o.idleTimeout <= 0:
		return errors.New("--idle-timeout must be positive")
	}
	return o.validate()
}

func (o *proxyOptions) run(ctx context.Context, stderr io.Writer) error {
	b, err := o.build(stderr)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startProxy(ctx, g, o.httpAddr, b, httpproxy.Config{
		RequestTimeout:    o.requestTimeout,
		ReadTimeout:       o.readTimeout,
		ReadHeaderTimeout: o.readHeaderTimeout,
		IdleTimeout:       o.idleTimeout,
	}, o.shutdownTimeout)
	if err != nil {
		return err
	}
	admin, err := startAdmin(ctx, g, o.metricsAddr, b.metrics, b.ready, b.log)
	if err != nil {
		return err
	}
	b.log.Info("tfsbridge proxy serving", "http_addr", addr.String(), "metrics_addr", fmt.Sprint(admin),
		"backend", o.backendURL, "backend_kind", o.backendKind, "max_body_bytes", int64(o.maxBody))
	return g.Wait()
}

// startProxy binds addr and serves the reverse proxy in g until ctx is
// done, then drains in-flight requests for up to drain. cfg holds the
// timeouts (zero ones take httpproxy's defaults); the session and upstream
// come from b.
func startProxy(ctx context.Context, g *errgroup.Group, addr string, b *bridge, cfg httpproxy.Config, drain time.Duration) (net.Addr, error) {
	cfg.Session = b.session
	cfg.Upstream = b.backend.BaseURL()
	p, err := httpproxy.New(cfg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	b.serving.Store(true)
	g.Go(func() error {
		<-ctx.Done()
		b.serving.Store(false)
		return nil
	})
	srv := p.NewServer(slog.NewLogLogger(b.log.Handler(), slog.LevelDebug))
	g.Go(func() error { return serveHTTP(ctx, srv, lis, drain) })
	return lis.Addr(), nil
}
