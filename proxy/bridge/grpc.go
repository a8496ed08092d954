package bridge

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/tfsbridge/tfsbridge/proxy/httpproxy"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// validGRPCAddr accepts an empty address (no TF gRPC listener) or
// host:port.
func validGRPCAddr(s string) bool {
	if s == "" {
		return true
	}
	_, port, err := net.SplitHostPort(s)
	return err == nil && port != ""
}

// tfGRPCProxy builds the TF gRPC listener's handler, nil when no v2 gRPC
// address is configured. It shares the session configuration (model
// map, admission, metrics) with the other servers; its timeouts are the
// proxy's.
func (o *Options) tfGRPCProxy(sess *session.Config) (*httpproxy.GRPCProxy, error) {
	if o.TFGRPCBackend == "" {
		return nil, nil
	}
	gp, err := httpproxy.NewGRPC(httpproxy.GRPCConfig{
		Session:           sess,
		Upstream:          o.TFGRPCBackend,
		RequestTimeout:    o.Proxy.RequestTimeout,
		ReadTimeout:       o.Proxy.ReadTimeout,
		ReadHeaderTimeout: o.Proxy.ReadHeaderTimeout,
		IdleTimeout:       o.Proxy.IdleTimeout,
		WriteTimeout:      o.Proxy.WriteTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("TF gRPC listener: %w", err)
	}
	return gp, nil
}

// newTFGRPCServer builds the TF gRPC listener's h2c server, its
// grpc.health.v1 answering from Ready, as the ext_proc server's does.
func (b *Bridge) newTFGRPCServer() *http.Server {
	b.grpc.SetReady(b.Ready)
	return b.grpc.NewServer(slog.NewLogLogger(b.Log.Handler(), slog.LevelDebug))
}
