package bridge

import (
	"log/slog"
	"net/http"

	"github.com/tfsbridge/tfsbridge/proxy/extproc"
	"github.com/tfsbridge/tfsbridge/proxy/httpproxy"
)

// newExtprocServer builds the ext_proc gRPC server, its health service
// answering from Ready.
func (b *Bridge) newExtprocServer() *extproc.Server {
	return extproc.NewServer(extproc.NewProcessor(b.Session, extproc.Options{BodyMode: b.opts.BodyMode, BodyTimeout: b.opts.BodyTimeout, WriteTimeout: b.opts.Proxy.WriteTimeout}), extproc.ServerOptions{
		MaxBodyBytes:    b.Session.MaxBodyBytes,
		MaxRecvMsgBytes: b.opts.GRPCMaxRecvBytes,
		Ready:           b.Ready,
		GRPCOptions:     b.grpcTLS(b.extprocTLS),
	})
}

// newProxyServer builds the reverse proxy's HTTP server: every exchange
// is traced and every answer carries X-Request-Id.
func (b *Bridge) newProxyServer() *http.Server {
	srv := b.proxy.NewServer(slog.NewLogLogger(b.Log.Handler(), slog.LevelDebug))
	srv.Handler = httpproxy.WithRequestID(httpproxy.WithTracing(srv.Handler))
	return srv
}
