package session

import (
	"context"
	"log/slog"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

// pickServer returns the model-map server an exchange for mm goes to:
// its server, or for a split model the split's choice, made here once, at
// the request headers, and kept for the whole exchange (the target is a
// value and the map immutable, so a reload that changes the weights
// never moves an exchange in flight). The choice is sticky on the
// split's key header when the request carries it.
func pickServer(cfg *Config, mm *modelmap.Model, h HeaderGetter) string {
	if mm.Split == nil {
		return mm.Server
	}
	var key string
	if mm.Split.Key != "" {
		key = h.Get(mm.Split.Key)
	}
	srv := mm.Split.Pick(key)
	cfg.Metrics.SplitRequest(mm.Name, srv)
	return srv
}

// forward passes an exchange whose model a TF Serving server serves (a
// kind: tfserving server of the map) through untranslated: the path, the
// body and the answer are the client's and the server's own; only the
// upstream changes (x-tfsbridge-server and a clear route cache behind
// Envoy, the server's URL for the reverse proxy, its bearer token). Its
// status and metadata calls, too, reach TF Serving's own API there. The
// exchange is then not ours: like any pass-through it is not counted in
// tfsbridge_requests_total (behind Envoy tfsbridge never sees its
// answer); tfsbridge_split_requests_total counts split models' share.
func (s *Session) forward() Action {
	s.state = stPassThrough
	if s.logs(slog.LevelDebug) {
		s.Logger().Debug("tf request forwarded to a TF Serving server", "route", s.rt.tf.String(), "server", s.rt.srv)
	}
	return Action{Verdict: PassThrough, Set: s.rt.set, Remove: s.rt.remove, ClearRouteCache: s.rt.clearRoute}
}

// forwardPipeline is the way of an exchange whose server is TF Serving
// (target.forward): passed through at the request headers, whatever its
// verb. A sampled exchange of a shadowed model is observed instead
// (observedForward, shadow.go).
type forwardPipeline struct {
	// inference: the verb has bodies (predict, classify, regress), the
	// exchanges a shadow copies.
	inference bool
}

func (forwardPipeline) start(_ context.Context, s *Session, _ HeaderGetter, _ bool) Action {
	return s.forward()
}

// via returns the pipeline of an exchange going to t whose verb's
// pipeline is p: p itself, or the forward pipeline when t is a TF
// Serving server.
func (t *target) via(p pipeline) pipeline {
	if !t.forward {
		return p
	}
	_, inference := p.(*inferencePipeline)
	return forwardPipeline{inference: inference}
}
