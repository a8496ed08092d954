package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/tfsbridge/tfsbridge/internal/mocktf"
)

// startMockTF binds addr and serves TF Serving's REST API there in g
// until ctx is done: tfsbridge's translation in front of the mock v2
// server listening on v2 (mock --tf-addr), with the model map mapFile
// ("" for none).
func startMockTF(ctx context.Context, g *errgroup.Group, addr string, v2 net.Addr, kind, mapFile string, log *slog.Logger) (net.Addr, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mock TF Serving listener: %w", err)
	}
	g.Go(func() error {
		return mocktf.Serve(ctx, lis, mocktf.Options{V2URL: "http://" + dialable(v2), Kind: kind, Logger: log, ModelMapFile: mapFile})
	})
	return lis.Addr(), nil
}

// dialable is a listener's address as a client reaches it: a wildcard
// host (":8000" binds every interface) becomes the loopback.
func dialable(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && (ta.IP == nil || ta.IP.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return a.String()
}
