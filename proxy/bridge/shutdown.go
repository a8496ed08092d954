package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
)

// cutAnswerGrace is how long, once the shutdown timeout has cut the
// proxy's exchanges in progress, their handlers get to write TF's 503
// before the remaining connections are closed.
const cutAnswerGrace = 2 * time.Second

// ErrCut is wrapped by Serve's error when a shutdown had to cut exchanges
// still in progress after ShutdownTimeout: the command exits non-zero, so
// that a rollout that loses requests does not look clean.
var ErrCut = errors.New("exchanges cut by the shutdown")

// stopStats are what one server's graceful stop did.
type stopStats struct {
	drained, cut int
}

// serveProxy is ServeHTTP for the reverse proxy: once ctx is done it
// waits up to grace for the exchanges in progress, then cuts the rest
// (their upstream calls are cancelled and answered TF's 503 when their
// headers have not gone out), gives those answers cutAnswerGrace to be
// written, and closes what is left. Idle keep-alive connections are
// closed by Shutdown as they go idle, with a FIN, never a reset.
func serveProxy(ctx context.Context, srv *http.Server, lis net.Listener, grace time.Duration, tr *inflight.Tracker, st *stopStats) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	tr.Drain()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	err := srv.Shutdown(sctx)
	cancel()
	if err != nil {
		st.cut = tr.Cut()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cutAnswerGrace)
		if srv.Shutdown(actx) != nil {
			_ = srv.Close()
		}
		cancel()
	}
	st.drained = tr.Drained()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// stopped logs the one line that says how serving ended, counts the cut
// exchanges, and turns cuts into Serve's error.
func (b *Bridge) stopped(ext, prx *stopStats, serveErr error) error {
	drained, cut := ext.drained+prx.drained, ext.cut+prx.cut
	b.Metrics.ShutdownCut("extproc", ext.cut)
	b.Metrics.ShutdownCut("http", prx.cut)
	attrs := []any{"drained", drained, "cut", cut, "shutdown_timeout", b.opts.ShutdownTimeout}
	if cut > 0 {
		attrs = append(attrs, "cut_extproc", ext.cut, "cut_http", prx.cut)
		b.Log.Warn("serving stopped: exchanges still in progress at the shutdown timeout were cut", attrs...)
	} else {
		b.Log.Info("serving stopped", attrs...)
	}
	if cut > 0 && serveErr == nil {
		return fmt.Errorf("%w: %d still in progress after --shutdown-timeout %v (%d finished while draining)",
			ErrCut, cut, b.opts.ShutdownTimeout, drained)
	}
	return serveErr
}
