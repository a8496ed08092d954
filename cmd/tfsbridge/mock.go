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

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
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

func newMockOptions() *mockOptions {
	return &mockOptions{log: defaultLog(), httpAddr: "127.0.0.1:8000", kind: "triton"}
}

func (o *mockOptions) bindings() []binding {
	return append([]binding{
		// Not the proxy's listen address: a variable of its own.
		addrFlag(&o.httpAddr, "http-addr", "Address the mock v2 server listens on (Triton's HTTP port is 8000).", false, false).commandEnv(),
		kindFlag(&o.kind),
	}, o.log.bindings()...)
}

func (o *mockOptions) check() error { return nil }

// kindFlag binds --kind, which means the same on mock and demo.
func kindFlag(kind *string) binding {
	return enumFlag(kind, "kind", "Server the mock imitates: triton, kserve or mlserver.", []string{"triton", "kserve", "mlserver"}, nil)
}

func (o *mockOptions) run(ctx context.Context, _, stderr io.Writer) error {
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
