package session

import (
	"context"
	"net/url"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// HeaderServer is the request header that names the v2 server a mapped
// model lives on (not set for the default server), so an Envoy route can
// pick that server's cluster. A client's own value is always removed.
const HeaderServer = "x-tfsbridge-server"

const hdrAuthorization = "authorization"

// Mapping is a model map together with the backends of its servers,
// published as one value so an exchange never sees a map whose servers
// are not set up yet. It is immutable.
type Mapping struct {
	Map *modelmap.Map
	// Backends are the map's servers' backends by name (the default
	// server is Config.Backend).
	Backends map[string]Backend
	// URLs are the map's servers' root URLs by name, for the proxy.
	URLs map[string]*url.URL
}

// tokenSource is implemented by backends that carry a bearer token
// (*backend.Client); the session forwards it on inference calls.
type tokenSource interface {
	BearerToken() (string, error)
}

// target is where an exchange goes: the TF route as the client named it
// (a map label resolved to its version), the v2 route on the wire, the
// model's v2 server and the header changes that steer the request there.
// It is a value: made once at the request headers (resolveTarget), and
// replaced whole — never changed in place — when a signature_name reaches
// another v2 model (mappedSignature). The shared Config is never copied
// for it: the target itself speaks to the server in TF names.
type target struct {
	tf   route.Route // the TF route; labels of mapped models resolved
	wire route.Route // the v2 route: tf with the mapped model's v2 name
	// model is the model map's entry, nil when the model is not mapped.
	model *modelmap.Model
	// server is the backend of the model's v2 server, in v2 names.
	server Backend
	url    *url.URL // the server's root URL for the proxy; nil: the default
	// srv is the model-map server the exchange goes to, picked once
	// (split.go); "" for an unmapped model.
	srv string
	// forward: srv is a TF Serving server, which gets the request as the
	// client sent it (split.go).
	forward bool
	// Routing header changes for the upstream request.
	set        []Header
	remove     []string
	clearRoute bool
}

// resolveTarget looks r's model up in the model map in force: it picks
// the model's server (by its split's weights, once per exchange), resolves
// a known label to its version for a v2 server (status keeps TF's rule of
// ignoring labels; a TF Serving server resolves its own) and prepares the
// header changes that route the request upstream (HeaderServer, a bearer
// token). An unknown
// label is left in the TF route for the verbs to report as TF does. On an
// error the target is still the exchange's, for its logs and metrics.
func resolveTarget(cfg *Config, r route.Route, h HeaderGetter) (target, error) {
	return resolveTargetIn(cfg, cfg.mapping(), r, h)
}

// mapping returns the model map in force, nil for none.
func (cfg *Config) mapping() *Mapping {
	if cfg.Mapping == nil {
		return nil
	}
	return cfg.Mapping()
}

// resolveTargetIn is resolveTarget in the model map mp (nil: no map): a
// gRPC exchange reads the map at its request headers and resolves its
// model at its body.
func resolveTargetIn(cfg *Config, mp *Mapping, r route.Route, h HeaderGetter) (target, error) {
	t := target{tf: r, wire: r, server: cfg.Backend}
	if hasHeader(h, HeaderServer) {
		// Only tfsbridge decides which server a model is on: every copy
		// of a client's header goes, empty ones included.
		t.remove, t.clearRoute = []string{HeaderServer}, true
	}
	if mp == nil {
		return t, nil
	}
	mm := mp.Map.Model(r.Model)
	if mm == nil {
		return t, nil
	}
	t.model, t.srv = mm, pickServer(cfg, mm, h)
	t.url = mp.URLs[t.srv]
	if t.forward = mp.Map.Server(t.srv).TFServing(); !t.forward {
		if r.Label != "" && r.Verb != route.Status {
			if v, ok := mm.Version(r.Label); ok {
				t.tf.Label, t.tf.Version, t.tf.HasVersion = "", v, true
			}
		}
		t.wire = t.tf
		t.wire.Model = mm.Default.Model
	}
	if t.srv == modelmap.DefaultServer {
		return t, nil
	}
	be, ok := mp.Backends[t.srv]
	if !ok {
		return t, apierr.Errorf(apierr.Internal, "model map server %q has no backend", t.srv)
	}
	t.server = be
	t.remove = nil
	t.set, t.clearRoute = []Header{{HeaderServer, t.srv}}, true
	if ts, ok := be.(tokenSource); ok {
		tok, err := ts.BearerToken()
		if err != nil {
			return t, apierr.Wrap(apierr.Unavailable, err, "The v2 inference server's bearer token is unavailable")
		}
		if tok != "" {
			t.set = append(t.set, Header{hdrAuthorization, "Bearer " + tok})
		}
	}
	return t, nil
}

// serverName is the name of the v2 server the exchange goes to: its
// model-map server, or observe.DefaultServer.
func (t *target) serverName() string {
	if t.model == nil || t.srv == modelmap.DefaultServer {
		return observe.DefaultServer
	}
	return t.srv
}

// kind asks the model's server which v2 server it is.
func (t *target) kind(ctx context.Context) (oip.ServerKind, error) { return t.server.Kind(ctx) }

// signature returns the TF view of r's signature (serving_default for a
// mapped model), unless no v2 path can name r's model safely ("..", see
// route.Route.V2Safe): such a name is no servable's, and its paths must
// never be sent, whatever Backend says. Every verb looks the signature up
// first, so this one guard keeps the name away from the v2 server for
// predict, status and metadata alike.
func (t *target) signature(ctx context.Context, r route.Route) (*tensor.Signature, error) {
	if !r.V2Safe() {
		return nil, apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
	}
	if t.model == nil {
		return t.server.Signature(ctx, r)
	}
	sig, _, err := t.mappedSignature(ctx, "")
	return sig, err
}

// modelReady asks the model's server whether r (a TF route) is ready.
func (t *target) modelReady(ctx context.Context, r route.Route) (bool, error) {
	if t.model == nil {
		return t.server.ModelReady(ctx, r)
	}
	r.Model = t.model.Default.Model
	ok, err := t.server.ModelReady(ctx, r)
	return ok, t.tfNotFound(err)
}

// tfNotFound gives a not-found error TF's text for the TF route: the
// server's names the v2 model, which the client never used.
func (t *target) tfNotFound(err error) error {
	if err == nil {
		return nil
	}
	if e := apierr.As(err); e.Code == apierr.NotFound {
		return apierr.Wrap(apierr.NotFound, e, "Servable not found for request: "+t.tf.Servable())
	}
	return err
}

// mappedSignature returns the TF view of the named signature of a mapped
// model and the target that reaches its v2 model. An unknown
// signature_name is TF's 400. The server's metadata is always read (it
// says whether the model exists and which versions it has); when the map
// declares the tensors, a server that cannot describe them (KServe's
// built-in predictors publish none, some answer with an error) does not
// matter.
func (t *target) mappedSignature(ctx context.Context, name string) (*tensor.Signature, target, error) {
	ms, ok := t.model.Signature(name)
	if !ok {
		return nil, *t, apierr.InvalidArgumentf("Serving signature name: \"%s\" not found in signature def", name)
	}
	next := *t
	next.wire.Model, next.wire.Label = ms.Model, ""
	wire, err := t.server.Signature(ctx, next.wire)
	if err != nil {
		if e := apierr.As(err); e.Code == apierr.NotFound || ms.Metadata == nil {
			return nil, *t, t.tfNotFound(err)
		}
		wire = nil // the map's metadata stands in for what the server cannot say
	}
	return ms.TFSignature(wire, t.tf.Model), next, nil
}

// hasHeader reports whether h holds name at all, even with an empty
// value: a client can send "x-tfsbridge-server:" before a real one, and
// Get, which returns the first value, would miss it. Adapters whose
// headers have several values implement Values (http.Header) or Has.
func hasHeader(h HeaderGetter, name string) bool {
	switch hv := h.(type) {
	case interface{ Has(string) bool }:
		return hv.Has(name)
	case interface{ Values(string) []string }:
		return len(hv.Values(name)) > 0
	}
	return h.Get(name) != ""
}

// routed adds the target's routing header changes to a Continue action
// of the request headers.
func (t *target) routed(a Action) Action {
	if a.Verdict != Continue {
		return a
	}
	a.Set = append(a.Set, t.set...)
	a.Remove = append(a.Remove, t.remove...)
	a.ClearRouteCache = a.ClearRouteCache || t.clearRoute
	return a
}
