package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	httpAddr       string
	requestTimeout time.Duration
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
}

func (o *proxyOptions) validateProxy() error {
	if o.requestTimeout <= 0 {
		return errors.New("--request-timeout must be positive")
	}
	return o.validate()
}

func (o *proxyOptions) run(ctx context.Context, stderr io.Writer) error {
	b, err := o.build(stderr)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startProxy(ctx, g, o.httpAddr, b, o.requestTimeout, o.shutdownTimeout)
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
// done, then drains in-flight requests for up to drain.
func startProxy(ctx context.Context, g *errgroup.Group, addr string, b *bridge, requestTimeout, drain time.Duration) (net.Addr, error) {
	p, err := httpproxy.New(httpproxy.Config{
		Session:        b.session,
		Upstream:       b.backend.BaseURL(),
		RequestTimeout: requestTimeout,
	})
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
	g.Go(func() error { return serveHTTP(ctx, newHTTPServer(p, b.log), lis, drain) })
	return lis.Addr(), nil
}
