package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/test/mockv2"
)

const mockSummary = `Runs the built-in v2 mock inference server with sample models (half_plus_two,
simple, bytes_echo, ...), imitating Triton, KServe or MLServer, so the proxy can be
tried without a real model server.`

// mockOptions are the flags of "tfsbridge mock".
type mockOptions struct {
	log      logOptions
	httpAddr string
	kind     string
}

func parseMock(args []string, env lookupEnv, out io.Writer) (*mockOptions, error) {
	o := &mockOptions{}
	f := newFlagSet("mock", mockSummary, out)
	f.fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8000", "Address the mock v2 server listens on (Triton's HTTP port is 8000).")
	f.fs.StringVar(&o.kind, "kind", "triton", "Server imitated: triton, kserve or mlserver.")
	o.log.register(f)
	if err := f.parse(args, env); err != nil {
		return nil, err
	}
	return o, validKind(o.kind)
}

func validKind(kind string) error {
	switch strings.ToLower(kind) {
	case "triton", "kserve", "mlserver":
		return nil
	}
	return fmt.Errorf("--kind %q: want triton, kserve or mlserver", kind)
}

func (o *mockOptions) run(ctx context.Context, stderr io.Writer) error {
	log, err := o.log.logger(stderr)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	addr, err := startMock(ctx, g, o.httpAddr, o.kind, log)
	if err != nil {
		return err
	}
	log.Info("tfsbridge mock serving", "http_addr", addr.String(), "kind", o.kind, "models", strings.Join(mockv2.Models(), ","))
	return g.Wait()
}

// startMock binds addr and serves the mock v2 server in g until ctx is done.
func startMock(ctx context.Context, g *errgroup.Group, addr, kind string, log *slog.Logger) (net.Addr, error) {
	srv, err := mockv2.New(mockv2.Options{Kind: kind, Logger: log})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mock listener: %w", err)
	}
	g.Go(func() error { return bridge.ServeHTTP(ctx, bridge.NewHTTPServer(srv, log), lis, 2*time.Second) })
	return lis.Addr(), nil
}
