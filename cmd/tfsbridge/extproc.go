package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/extproc"
)

const extprocSummary = `Runs the Envoy ext_proc gRPC service: TF Serving REST requests arriving at Envoy are
translated to the v2 inference server behind it, and its answers back. Configure the
Envoy filter with headers SEND, bodies BUFFERED, allow_mode_override: true.`

// extprocOptions are the flags of "tfsbridge extproc".
type extprocOptions struct {
	bridgeOptions
	grpcAddr string
}

func parseExtproc(args []string, env lookupEnv, out io.Writer) (*extprocOptions, error) {
	o := &extprocOptions{}
	f := newFlagSet("extproc", extprocSummary, out)
	f.fs.StringVar(&o.grpcAddr, "grpc-addr", ":9002", "Address the ext_proc gRPC server listens on.")
	o.register(f)
	if err := f.parse(args, env); err != nil {
		return nil, err
	}
	return o, o.validate()
}

func (o *extprocOptions) run(ctx context.Context, stderr io.Writer) error {
	b, err := o.build(stderr)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startExtproc(ctx, g, o.grpcAddr, b, o.shutdownTimeout)
	if err != nil {
		return err
	}
	admin, err := startAdmin(ctx, g, o.metricsAddr, b.metrics, b.ready, b.log)
	if err != nil {
		return err
	}
	b.log.Info("tfsbridge extproc serving", "grpc_addr", addr.String(), "metrics_addr", fmt.Sprint(admin),
		"backend", o.backendURL, "backend_kind", o.backendKind, "max_body_bytes", int64(o.maxBody))
	return g.Wait()
}

// startExtproc binds addr and serves the ext_proc gRPC server in g until
// ctx is done, then drains in-flight streams for up to drain.
func startExtproc(ctx context.Context, g *errgroup.Group, addr string, b *bridge, drain time.Duration) (net.Addr, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ext_proc listener: %w", err)
	}
	srv := extproc.NewServer(extproc.NewProcessor(b.session), extproc.ServerOptions{MaxBodyBytes: b.session.MaxBodyBytes})
	b.serving.Store(true)
	g.Go(func() error {
		<-ctx.Done()
		b.serving.Store(false)
		return nil
	})
	g.Go(func() error { return srv.Serve(ctx, lis, drain) })
	return lis.Addr(), nil
}
