package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
)

// mockGRPCDrain bounds how long in-flight gRPC calls may finish at shutdown (model "slow"
// waits seconds; the HTTP side allows the same).
const mockGRPCDrain = 2 * time.Second

// startMockGRPC binds addr and serves the mock's inference.GRPCInferenceService in g until
// ctx is done. The mock holds no state, so this server answers exactly as the HTTP one.
func startMockGRPC(ctx context.Context, g *errgroup.Group, addr string, opt mockv2.Options) (net.Addr, error) {
	srv, err := mockv2.New(opt)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mock gRPC listener: %w", err)
	}
	gs := srv.NewGRPCServer()
	g.Go(func() error {
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			<-ctx.Done()
			t := time.AfterFunc(mockGRPCDrain, gs.Stop)
			gs.GracefulStop()
			t.Stop()
		}()
		err := gs.Serve(lis)
		<-stopped
		return err
	})
	return lis.Addr(), nil
}
