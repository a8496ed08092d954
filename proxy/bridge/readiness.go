package bridge

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/extproc"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// Readiness modes (Options.Readiness, --readiness).
const (
	// ReadinessTFSBridge reports ready while tfsbridge itself serves. A
	// v2 server that is down is answered per request (TF's 503 JSON),
	// which is what a shared ext_proc service must do: taking every
	// tfsbridge pod out of rotation when one model server restarts would
	// make Envoy answer a bare 500 for every TF request instead.
	ReadinessTFSBridge = "tfsbridge"
	// ReadinessBackend also requires the v2 server to answer GET
	// /v2/health/ready: for the sidecar layout, where the model server
	// and tfsbridge share the pod and should leave rotation together.
	ReadinessBackend = "backend"
)

// healthPoll is how often, in ReadinessBackend mode, the v2 server's
// readiness is polled for gRPC health watchers (Check asks live).
const healthPoll = time.Second

func validReadiness(mode string) bool {
	return mode == "" || mode == ReadinessTFSBridge || mode == ReadinessBackend
}

// Ready backs /readyz and the ext_proc server's gRPC health: a main
// listener serves and is not draining, and in ReadinessBackend mode the
// v2 server is ready too.
func (b *Bridge) Ready(ctx context.Context) error {
	if !b.serving.Load() {
		return errors.New("not serving")
	}
	if b.opts.Readiness == ReadinessBackend {
		return b.Backend.Health(ctx)
	}
	return nil
}

// drain is the first step of a shutdown: readiness fails (gRPC health
// watchers are told at once), the proxy stops keeping connections alive,
// and, when the shutdown was asked for (ctx done) rather than caused by
// a failed server, a sidecar Envoy is told to drain (DrainEnvoyAdmin) and
// the servers keep serving for DrainDelay.
func (b *Bridge) drain(ctx context.Context, ext *extproc.Server, prx *http.Server) {
	b.serving.Store(false)
	if ext != nil {
		ext.Health.Shutdown()
	}
	if prx != nil {
		// Each answer now says "Connection: close": clients reconnect,
		// through their load balancer, to a pod that stays.
		prx.SetKeepAlivesEnabled(false)
	}
	if ctx.Err() == nil {
		return
	}
	if b.opts.DrainEnvoyAdmin != "" {
		if err := drainEnvoy(context.WithoutCancel(ctx), http.DefaultClient, b.opts.DrainEnvoyAdmin); err != nil {
			b.Log.Warn("could not drain the sidecar Envoy", "admin", b.opts.DrainEnvoyAdmin, "error", err)
		} else {
			b.Log.Info("sidecar Envoy draining its listeners", "admin", b.opts.DrainEnvoyAdmin)
		}
	}
	if b.opts.DrainDelay <= 0 {
		return
	}
	b.Log.Info("draining: not ready, still serving", observe.DurationMS("drain_delay", b.opts.DrainDelay))
	t := time.NewTimer(b.opts.DrainDelay)
	defer t.Stop()
	<-t.C
}

// followReadiness keeps the ext_proc server's gRPC health status in step
// with the v2 server's readiness until ctx is done, for Watch streams
// (Envoy's gRPC health checks use Check, which asks Ready live).
func (b *Bridge) followReadiness(ctx context.Context, ext *extproc.Server) {
	t := time.NewTicker(healthPoll)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, healthPoll)
		err := b.Ready(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ext.SetServing(err == nil)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
