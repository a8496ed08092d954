package session

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
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

// mapped is the model map's part of one exchange.
type mapped struct {
	mapping *Mapping
	model   *modelmap.Model // nil: the model is not mapped
	// server is the backend of the model's v2 server, as it publishes
	// (v2 names); the session's Config.Backend is a mappedBackend over it.
	server Backend
	// ctx is RequestBody's, for the signature lookups the request
	// parser asks for (the resolver has no context of its own).
	ctx context.Context
	// wire is the v2 route of the signature the exchange uses: the v2
	// model name and the version a label resolved to.
	wire route.Route
	// Routing header changes for the upstream request.
	set        []Header
	remove     []string
	clearRoute bool
}

// wireRoute is s.route with the v2 model of the signature the exchange
// reached (the TF route itself when the model is not mapped).
func (s *Session) wireRoute() route.Route {
	if s.m.model == nil {
		return s.route
	}
	return s.m.wire
}

// UpstreamURL returns the root URL of the v2 server this exchange goes
// to, nil for the default server. The reverse proxy sends it there.
func (s *Session) UpstreamURL() *url.URL {
	if s.m.model == nil || s.m.mapping == nil {
		return nil
	}
	return s.m.mapping.URLs[s.m.model.Server]
}

// applyMap looks the request's model up in the model map: it resolves a
// known label to its version (status keeps TF's rule of ignoring labels),
// gives the exchange its own copy of the Config whose Backend is the
// model's server seen through the map (mappedBackend: TF names in, TF
// names out), and prepares the header changes that route the request
// upstream (HeaderServer, a bearer token). An unknown label is left in
// s.route for the verbs to report as TF does.
func (s *Session) applyMap(h HeaderGetter) error {
	if hasHeader(h, HeaderServer) {
		// Only tfsbridge decides which server a model is on: every copy
		// of a client's header goes, empty ones included.
		s.m.remove, s.m.clearRoute = []string{HeaderServer}, true
	}
	if s.cfg.Mapping == nil {
		return nil
	}
	mp := s.cfg.Mapping()
	if mp == nil {
		return nil
	}
	s.m.mapping = mp
	mm := mp.Map.Model(s.route.Model)
	if mm == nil {
		return nil
	}
	s.m.model = mm
	if s.route.Label != "" && s.route.Verb != route.Status {
		if v, ok := mm.Version(s.route.Label); ok {
			s.route.Label, s.route.Version, s.route.HasVersion = "", v, true
		}
	}
	s.m.wire = s.route
	s.m.wire.Model = mm.Default.Model
	s.m.server = s.cfg.Backend
	if mm.Server != modelmap.DefaultServer {
		be, ok := mp.Backends[mm.Server]
		if !ok {
			return apierr.Errorf(apierr.Internal, "model map server %q has no backend", mm.Server)
		}
		s.m.server = be
	}
	cfg := *s.cfg
	cfg.Backend = mappedBackend{s: s}
	s.cfg = &cfg
	if mm.Server == modelmap.DefaultServer {
		return nil
	}
	be := s.m.server
	s.m.remove = nil
	s.m.set, s.m.clearRoute = []Header{{HeaderServer, mm.Server}}, true
	if ts, ok := be.(tokenSource); ok {
		tok, err := ts.BearerToken()
		if err != nil {
			return apierr.Wrap(apierr.Unavailable, err, "The v2 inference server's bearer token is unavailable")
		}
		if tok != "" {
			s.m.set = append(s.m.set, Header{hdrAuthorization, "Bearer " + tok})
		}
	}
	return nil
}

// ServerName returns the name of the v2 server the exchange goes to: its
// model-map server, or observe.DefaultServer.
func (s *Session) ServerName() string {
	if s.m.model == nil || s.m.model.Server == modelmap.DefaultServer {
		return observe.DefaultServer
	}
	return s.m.model.Server
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

// routed adds the model map's routing header changes to a Continue
// action of the request headers.
func (s *Session) routed(a Action) Action {
	if a.Verdict != Continue {
		return a
	}
	a.Set = append(a.Set, s.m.set...)
	a.Remove = append(a.Remove, s.m.remove...)
	a.ClearRouteCache = a.ClearRouteCache || s.m.clearRoute
	return a
}

// mappedBackend is the Backend a mapped exchange sees: the model's v2
// server in TF names. It takes TF routes (a label already resolved to its
// version) and answers for the model's serving_default signature, so the
// session's verbs work unchanged on mapped models.
type mappedBackend struct{ s *Session }

func (b mappedBackend) Kind(ctx context.Context) (oip.ServerKind, error) {
	return b.s.m.server.Kind(ctx)
}

func (b mappedBackend) Signature(ctx context.Context, _ route.Route) (*tensor.Signature, error) {
	sig, _, err := b.s.mappedSignature(ctx, "")
	return sig, err
}

func (b mappedBackend) ModelReady(ctx context.Context, r route.Route) (bool, error) {
	r.Model = b.s.m.model.Default.Model
	ok, err := b.s.m.server.ModelReady(ctx, r)
	return ok, b.s.tfNotFound(err)
}

// tfNotFound gives a not-found error TF's text for the TF route: the
// server's names the v2 model, which the client never used.
func (s *Session) tfNotFound(err error) error {
	if err == nil {
		return nil
	}
	if e := apierr.As(err); e.Code == apierr.NotFound {
		return apierr.Wrap(apierr.NotFound, e, "Servable not found for request: "+s.route.Servable())
	}
	return err
}

// resolveMapped is resolve for a mapped model: serving_default was
// fetched at request-headers time; another mapped signature is fetched
// now, from its own v2 model.
func (s *Session) resolveMapped(name string) (*tensor.Signature, error) {
	ctx := s.m.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ms, ok := s.m.model.Signature(name)
	switch {
	case !ok && s.sigErr != nil:
		return nil, s.sigErr // TF finds the servable before the signature
	case !ok:
		return nil, s.unknownSignature(name)
	case ms == s.m.model.Default:
		return s.sig, s.sigErr
	}
	sig, wr, err := s.mappedSignature(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.kind, err = s.m.server.Kind(ctx); err != nil {
		return nil, err
	}
	s.confirmed = true
	s.m.wire = wr
	return sig, nil
}

// mappedSignature returns the TF view of the named signature of a mapped
// model and the v2 route it reaches. An unknown signature_name is TF's
// 400. The server's metadata is always read (it says whether the model
// exists and which versions it has); when the map declares the tensors,
// a server that cannot describe them (KServe's built-in predictors
// publish none, some answer with an error) does not matter.
func (s *Session) mappedSignature(ctx context.Context, name string) (*tensor.Signature, route.Route, error) {
	ms, ok := s.m.model.Signature(name)
	if !ok {
		return nil, route.Route{}, apierr.InvalidArgumentf("Serving signature name: \"%s\" not found in signature def", name)
	}
	wr := s.m.wire
	wr.Model = ms.Model
	wr.Label = ""
	wire, err := s.m.server.Signature(ctx, wr)
	if err != nil {
		if e := apierr.As(err); e.Code == apierr.NotFound || ms.Metadata == nil {
			return nil, wr, s.tfNotFound(err)
		}
		wire = nil // the map's metadata stands in for what the server cannot say
	}
	return ms.TFSignature(wire, s.route.Model), wr, nil
}

// mappedMetadata answers GET …/metadata for a mapped model: one
// signature_def per mapped signature, in TF names.
func (s *Session) mappedMetadata(ctx context.Context) Action {
	names := s.m.model.SignatureNames()
	defs := make([]tfresponse.SignatureDef, 0, len(names))
	var versions []string
	for i, name := range names {
		sig, _, err := s.mappedSignature(ctx, name)
		if err != nil {
			return s.fail(err)
		}
		if i == 0 {
			s.confirmed = true
			versions = sig.Versions
		}
		defs = append(defs, tfresponse.SignatureDef{Name: name, Signature: sig})
	}
	version := ""
	if s.route.HasVersion {
		version = strconv.FormatInt(s.route.Version, 10)
	} else if vs := sortVersionsDesc(versions); len(vs) > 0 {
		version = vs[0]
	}
	s.state = stDone
	s.finish(http.StatusOK)
	s.logDone(http.StatusOK, nil)
	return jsonResponse(http.StatusOK, tfresponse.MetadataDefs(nil, s.route.Model, version, defs), "tfsbridge_metadata")
}
