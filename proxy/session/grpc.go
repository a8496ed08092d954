package session

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/grpcmap"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// TF Serving's gRPC clients (tensorflow.serving.PredictionService and
// ModelService) are more pipelines (grpcPipeline), chosen at the request
// headers like the REST verbs. What differs from REST:
//
//   - The model is named only inside the message, so the route (model
//     map: names, labels, signatures, renames, servers) is resolved at the
//     request body, and the routing header changes (HeaderServer,
//     clear_route_cache) ride on the body's action.
//   - The body is one length-prefixed message (docs/grpc.md §5): a flag
//     byte (1: compressed with the grpc-encoding), a 4-byte big-endian
//     length, the message. The request body goes through the session's
//     body path (RequestChunk: size limit, admission, gathering) and is
//     translated whole (grpcRequest); the response message is re-buffered
//     until it is complete, whatever the chunks (grpcResponseChunk).
//   - The status is not the HTTP status but grpc-status/grpc-message, in
//     the trailers or in the headers of a trailers-only answer: a v2
//     error is rewritten where it is (ResponseTrailers, or
//     ResponseHeaders with end of stream) into TF Serving's
//     (grpcmap.BackendError), and tfsbridge's own refusals are
//     trailers-only answers (grpcErrorResponse): HTTP 200,
//     content-type application/grpc, grpc-status and grpc-message.
//   - Answers go uncompressed (a client must accept identity), and the v2
//     server is asked for identity too; a compressed message either way
//     is inflated (docs/grpc.md §5, spec §5.5).

// gRPC header names and values.
const (
	hdrGRPCStatus         = "grpc-status"
	hdrGRPCMessage        = "grpc-message"
	hdrGRPCDetails        = "grpc-status-details-bin"
	hdrGRPCEncoding       = "grpc-encoding"
	hdrGRPCAcceptEncoding = "grpc-accept-encoding"
	contentTypeGRPC       = "application/grpc"
	// grpcEncodings are the message encodings tfsbridge inflates.
	grpcEncodings = "identity,deflate,gzip"
	// grpcPrefix is the length of a message's prefix: the compressed
	// flag and the big-endian length.
	grpcPrefix = 5
)

// tfServingPrefix starts every TF Serving gRPC path.
const tfServingPrefix = "/tensorflow.serving."

// GRPCOptions configure the TF gRPC pipelines.
type GRPCOptions struct {
	// Encoding is how PredictResponse tensors are written: TF Serving's
	// default typed fields, or tensor_content (its
	// --enable_serialization_as_tensor_content).
	Encoding tfgrpc.Encoding
	// DefaultVersion is the model_spec.version answers carry when
	// neither the request, the model map nor the v2 server names a
	// numeric version (KServe, MLServer), when HasDefaultVersion.
	DefaultVersion    int64
	HasDefaultVersion bool
}

// grpcState is what a gRPC exchange keeps besides the session's state.
type grpcState struct {
	method grpcmap.Method
	path   string // the TF gRPC path, for UNIMPLEMENTED's text
	// reqEncoding and respEncoding are the grpc-encoding headers.
	reqEncoding, respEncoding string
	// serverHeader: the client sent HeaderServer (always removed).
	serverHeader bool
	// acceptEncoding is the client's grpc-accept-encoding, which a call
	// forwarded to TF Serving gets back (the v2 server is asked for
	// identity).
	acceptEncoding string
	// mp is the model map in force at the request headers: the model is
	// resolved in it at the body, which names the model.
	mp *Mapping
	// keys are the request's values of the map's split_key headers
	// (modelmap.Map.SplitKeys), kept for the split's pick at the body.
	keys []Header
	// forwarded: the model's server is a TF Serving server, which gets
	// the call unchanged at upstream (grpcForward).
	forwarded bool
	ex        *grpcmap.Exchange
	opt       grpcmap.Options
	// routeErr and kindErr are the route's failures, reported by the
	// resolver when grpcmap asks, which is TF Serving's order.
	routeErr, kindErr error
	// upstream is the gRPC address of the model-map server the exchange
	// goes to ("" for the default server): a v2 server's, or for a
	// forwarded call TF Serving's own.
	upstream string
	// answered: the response message was translated and sent on; the
	// status still comes (trailers).
	answered bool
}

// grpcPipeline is one TF Serving gRPC method.
type grpcPipeline struct {
	method grpcmap.Method // 0: a path of the TF services with no method
}

func (p grpcPipeline) start(ctx context.Context, s *Session, h HeaderGetter, eos bool) Action {
	return s.grpcStart(ctx, p.method, h, eos)
}

// grpcPipelineFor returns the pipeline of a gRPC call to TF Serving's
// services: a POST under /tensorflow.serving. with a gRPC content-type
// (application/grpc, +proto, never grpc-web).
func grpcPipelineFor(method, path string, h HeaderGetter) (pipeline, bool) {
	if method != http.MethodPost || !strings.HasPrefix(path, tfServingPrefix) || !isGRPC(h.Get(hdrContentType)) {
		return nil, false
	}
	m, _ := grpcmap.ParseMethod(path)
	return grpcPipeline{method: m}, true
}

// v2GRPCInference are the methods of the v2 gRPC service that the
// "inference" pass-through policy lets through, as it lets the same REST
// endpoints through: health, metadata, readiness and inference, never
// Triton's repository, shared-memory, trace, log or statistics methods.
var v2GRPCInference = map[string]bool{
	"/inference.GRPCInferenceService/ServerLive":     true,
	"/inference.GRPCInferenceService/ServerReady":    true,
	"/inference.GRPCInferenceService/ServerMetadata": true,
	"/inference.GRPCInferenceService/ModelReady":     true,
	"/inference.GRPCInferenceService/ModelMetadata":  true,
	"/inference.GRPCInferenceService/ModelInfer":     true,
}

// grpcOther handles a gRPC call that is not TF Serving's: a native v2
// call passes through as the pass-through policy says its REST twin
// would; anything refused is answered UNIMPLEMENTED trailers-only (a gRPC
// client cannot read a JSON 404).
func (s *Session) grpcOther(method, path string, h HeaderGetter) (Action, bool) {
	if method != http.MethodPost || strings.HasPrefix(path, tfServingPrefix) || !isGRPC(h.Get(hdrContentType)) {
		return Action{}, false
	}
	p := s.cfg.Passthrough
	if p == PassthroughAll || (p == PassthroughInference && v2GRPCInference[path]) {
		s.state = stPassThrough
		s.cfg.Metrics.PassThrough()
		a := Action{Verdict: PassThrough}
		if hasHeader(h, HeaderServer) {
			a.Remove, a.ClearRouteCache = []string{HeaderServer}, true
		}
		return a, true
	}
	s.grpc = &grpcState{path: path}
	s.verb = verbRefused
	return s.fail(apierr.New(apierr.Unimplemented, "unknown service or method "+path)), true
}

// isGRPC reports a gRPC content-type.
func isGRPC(ct string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(ct), contentTypeGRPC)
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// GRPC reports an exchange of a TF gRPC client: its bodies are
// length-prefixed messages and its status comes in trailers.
func (s *Session) GRPC() bool { return s.grpc != nil }

// UpstreamGRPC returns the v2 gRPC address (host:port) of the model-map
// server the exchange goes to, "" for the default server. It is known
// once the request body is translated.
func (s *Session) UpstreamGRPC() string {
	if s.grpc == nil {
		return ""
	}
	return s.grpc.upstream
}

// grpcVerb is the verb label of a gRPC method.
func grpcVerb(m grpcmap.Method) string {
	if m == 0 {
		return "grpc_unknown"
	}
	return "grpc_" + strings.ToLower(m.String())
}

// grpcStart is the request-headers step of a TF gRPC call.
func (s *Session) grpcStart(ctx context.Context, m grpcmap.Method, h HeaderGetter, endOfStream bool) Action {
	g := &grpcState{method: m, path: h.Get(hdrPath), reqEncoding: h.Get(hdrGRPCEncoding), serverHeader: hasHeader(h, HeaderServer),
		acceptEncoding: h.Get(hdrGRPCAcceptEncoding), mp: s.cfg.mapping()}
	if g.mp != nil {
		for _, k := range g.mp.Map.SplitKeys {
			if v := h.Get(k); v != "" {
				g.keys = append(g.keys, Header{k, v})
			}
		}
	}
	s.grpc = g
	s.verb = grpcVerb(m)
	s.rt = target{server: s.cfg.Backend}
	switch m {
	case 0:
		// gRPC's own answer for a method the service does not have.
		return s.fail(apierr.New(apierr.Unimplemented, "unknown method "+strings.TrimPrefix(g.path, tfServingPrefix)))
	case grpcmap.MultiInference, grpcmap.HandleReloadConfigRequest:
		return s.fail(grpcmap.Unimplemented(m))
	}
	if !knownGRPCEncoding(g.reqEncoding) {
		a := s.fail(apierr.Errorf(apierr.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", g.reqEncoding))
		a.Set = append(a.Set, Header{hdrGRPCAcceptEncoding, grpcEncodings})
		return a
	}
	if s.declaredOver(h) {
		return s.fail(s.tooLarge("Request"))
	}
	s.req.declared = declaredLength(h)
	s.state = stRequestBody
	if endOfStream {
		return s.RequestChunk(ctx, nil, true, Whole)
	}
	a := Action{Verdict: Continue, Set: []Header{{hdrGRPCAcceptEncoding, "identity"}}}
	if g.serverHeader {
		// Only tfsbridge picks a model's server (target.go).
		a.Remove, a.ClearRouteCache = []string{HeaderServer}, true
	}
	return a
}

// knownGRPCEncoding reports a grpc-encoding tfsbridge can inflate.
func knownGRPCEncoding(enc string) bool {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity", "gzip", "deflate":
		return true
	}
	return false
}

// grpcMessage returns the one message of a unary gRPC body, inflated
// when its flag says so (the flag, not the header, decides: spec §5.5).
// A body that is not exactly one message is INTERNAL, as gRPC answers.
func (s *Session) grpcMessage(body []byte, encoding, what string) ([]byte, error) {
	if len(body) < grpcPrefix {
		return nil, apierr.Errorf(apierr.Internal, "%s has no complete gRPC message (%d bytes)", what, len(body))
	}
	n := int64(binary.BigEndian.Uint32(body[1:grpcPrefix]))
	if got := int64(len(body) - grpcPrefix); got != n {
		return nil, apierr.Errorf(apierr.Internal, "%s is not one gRPC message: its prefix announces %d bytes, the body holds %d", what, n, got)
	}
	msg := body[grpcPrefix:]
	switch body[0] {
	case 0:
		return msg, nil
	case 1:
	default:
		return nil, apierr.Errorf(apierr.Internal, "%s message has compressed flag %d", what, body[0])
	}
	enc := strings.ToLower(strings.TrimSpace(encoding))
	if enc == "" || enc == "identity" {
		return nil, apierr.Errorf(apierr.Internal, "%s message is compressed but no grpc-encoding was given", what)
	}
	out, err := decodeResponseBody(enc, msg, s.maxBody())
	switch {
	case errors.Is(err, errTooLarge):
		return nil, s.tooLarge("Decompressed " + strings.ToLower(what[:1]) + what[1:])
	case err != nil:
		return nil, apierr.Wrap(apierr.Internal, err, "Failed to decompress the "+what+" message: "+err.Error())
	}
	return out, nil
}

// prefixed returns dst with a 5-byte uncompressed message prefix for the
// message appended after it.
func prefixed(b []byte) []byte {
	binary.BigEndian.PutUint32(b[1:grpcPrefix], uint32(len(b)-grpcPrefix))
	b[0] = 0
	return b
}

// grpcRequest translates a whole TF gRPC request body (the session's body
// path gathered it within the limits and the budget) and hands the v2
// message to out.
func (s *Session) grpcRequest(ctx context.Context, body []byte, out Sink) Action {
	g := s.grpc
	msg, err := s.grpcMessage(body, g.reqEncoding, "Request")
	if err != nil {
		return s.fail(err)
	}
	if err := s.reserveUpTo(ctx, int64(len(msg))*admission.RequestFactor); err != nil {
		return s.fail(err)
	}
	s.grpcRoute(ctx, msg)
	if s.rt.forward {
		return s.grpcForward(body, out)
	}
	g.opt = grpcmap.Options{
		Kind: s.kind, Encoding: s.cfg.GRPC.Encoding, Limits: s.cfg.Limits, MaxBytes: s.maxBody(), ID: s.requestID,
		DefaultVersion: s.cfg.GRPC.DefaultVersion, HasDefaultVersion: s.cfg.GRPC.HasDefaultVersion,
	}
	t0 := time.Now()
	_, span := tracing.Start(ctx, tracing.SpanTranslateRequest)
	v2, ex, err := grpcmap.Request(make([]byte, grpcPrefix, grpcPrefix+len(msg)+64), g.method, msg, s.grpcResolver(ctx), g.opt)
	span.End()
	s.cfg.Metrics.Translation(observe.DirRequest, time.Since(t0))
	if err != nil {
		return s.fail(err)
	}
	v2 = prefixed(v2)
	g.ex = ex
	s.cfg.Metrics.BodySize(observe.StageV2Request, len(v2))
	s.holdAtLeast(int64(len(v2)))
	a := Action{
		Verdict: Continue,
		Set: []Header{
			{hdrPath, ex.V2Path},
			{hdrContentType, contentTypeGRPC},
			{hdrGRPCAcceptEncoding, "identity"},
		},
		Remove: []string{hdrContentLength, hdrGRPCEncoding},
	}
	a = s.rt.routed(a)
	// Envoy picks the route again only for a model on another server
	// (the client's own header went at the request headers).
	a.ClearRouteCache = s.rt.set != nil
	s.state = stUpstream
	return s.emit(out, a, [][]byte{v2})
}

// grpcRoute resolves the model a TF message names (its model_spec, field
// 1 in every TF Serving request) before the message is translated: the
// model map's target (for a split, the picked server, sticky on the
// split_key metadata kept at the request headers) and, for Predict, the
// server's kind, which the translation needs (BF16). Failures are kept
// for the resolver: TF Serving checks the request's form first.
func (s *Session) grpcRoute(ctx context.Context, msg []byte) {
	g := s.grpc
	spec, ok := messageSpec(msg)
	if !ok || spec.Name == "" {
		return
	}
	r := route.Route{Verb: grpcRouteVerb(g.method), Model: spec.Name, Version: spec.Version, HasVersion: spec.HasVersion, Label: spec.VersionLabel}
	if r.Verb == route.Status {
		r.Label = "" // TF's status ignores labels
	}
	s.rt, g.routeErr = resolveTargetIn(s.cfg, g.mp, r, keptHeaders{g})
	if g.routeErr != nil {
		return
	}
	if g.mp != nil {
		// The picked server (Map.Server: nil for the default one).
		if srv := g.mp.Map.Server(s.rt.srv); srv != nil {
			g.upstream = srv.GRPC
		}
	}
	if g.method == grpcmap.Predict && !s.rt.forward {
		s.kind, g.kindErr = s.rt.kind(ctx)
	}
}

// messageSpec decodes field 1 (model_spec) of a TF request message.
func messageSpec(msg []byte) (tfgrpc.ModelSpec, bool) {
	var spec []byte
	found := false
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return tfgrpc.ModelSpec{}, false
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return tfgrpc.ModelSpec{}, false
			}
			// A repeated message field merges; the last name wins, which
			// is enough for routing (grpcmap decodes it properly).
			spec, found = append(spec, v...), true
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg)
		if m < 0 {
			return tfgrpc.ModelSpec{}, false
		}
		msg = msg[m:]
	}
	if !found {
		return tfgrpc.ModelSpec{}, false
	}
	s, err := tfgrpc.DecodeModelSpec(spec)
	return s, err == nil
}

// grpcRouteVerb is the REST verb whose route a gRPC method resolves like.
func grpcRouteVerb(m grpcmap.Method) route.Verb {
	switch m {
	case grpcmap.Classify:
		return route.Classify
	case grpcmap.Regress:
		return route.Regress
	case grpcmap.GetModelMetadata:
		return route.Metadata
	case grpcmap.GetModelStatus:
		return route.Status
	}
	return route.Predict
}

// keptHeaders is the HeaderGetter of a gRPC exchange at its body: what
// resolveTarget asks of the request headers, kept at the request headers
// (whether the client sent HeaderServer, the split_key values).
type keptHeaders struct{ g *grpcState }

func (h keptHeaders) Get(name string) string {
	if name == HeaderServer {
		if h.g.serverHeader {
			return "1"
		}
		return ""
	}
	for _, kv := range h.g.keys {
		if kv.Key == name {
			return kv.Value
		}
	}
	return ""
}

// grpcForward passes a call whose model a TF Serving server serves (a
// kind: tfserving server of the map, picked by a split or not) on as the
// client sent it to that server's gRPC port (its grpc: address): the
// message (body, as it came, compressed or not), :path and
// grpc-encoding are the client's; only the route changes
// (HeaderServer and a clear route cache behind Envoy, the address for
// the TF gRPC listener). The answer is TF Serving's own: the session
// lets its events pass untouched, and, as a forwarded REST request, the
// call is not counted in tfsbridge_requests_total (its split share is).
func (s *Session) grpcForward(body []byte, out Sink) Action {
	g := s.grpc
	if g.routeErr != nil {
		return s.fail(g.routeErr)
	}
	if g.upstream == "" {
		return s.fail(apierr.Errorf(apierr.Unavailable,
			"The model map's server %q is a TF Serving server without a grpc address (TF Serving's gRPC port, 8500): tfsbridge cannot pass gRPC calls to it", s.rt.srv))
	}
	g.forwarded = true
	s.state = stPassThrough
	if s.logs(slog.LevelDebug) {
		s.Logger().Debug("tf gRPC call forwarded to a TF Serving server", "route", s.rt.tf.String(), "server", s.rt.srv, "grpc", g.upstream)
	}
	a := Action{Verdict: Continue, Set: s.rt.set, Remove: s.rt.remove, ClearRouteCache: true}
	// The client's grpc-accept-encoding again (the request headers asked
	// for identity, for a v2 server's answer tfsbridge reads).
	if g.acceptEncoding != "" {
		a.Set = append(a.Set[:len(a.Set):len(a.Set)], Header{hdrGRPCAcceptEncoding, g.acceptEncoding})
	} else {
		a.Remove = append(a.Remove[:len(a.Remove):len(a.Remove)], hdrGRPCAcceptEncoding)
	}
	if _, parts := out.(*partsSink); parts || out == Whole {
		// The body goes on as it is: nothing to replace. (Its
		// reservation stays until the exchange ends: an adapter may hold
		// it while the call is out.)
		return a
	}
	return s.emit(out, a, [][]byte{body})
}

// GRPCForward reports a TF gRPC call passed unchanged to a TF Serving
// server's gRPC address (UpstreamGRPC): its answer goes back as that
// server gives it, without the session.
func (s *Session) GRPCForward() bool { return s.grpc != nil && s.grpc.forwarded }

// grpcResolver is grpcmap's Resolver for this exchange: the target
// grpcRoute found, a label the map does not know refused as TF does, and
// the signature the method needs (for a mapped model's other signature,
// the target that reaches its v2 model).
// signatureDefs is every signature of a mapped model in TF names, in
// the map's order (serving_default first), for GetModelMetadata.
func (t *target) signatureDefs(ctx context.Context) ([]tfgrpc.SignatureDef, error) {
	names := t.model.SignatureNames()
	defs := make([]tfgrpc.SignatureDef, 0, len(names))
	for _, name := range names {
		sig, _, err := t.mappedSignature(ctx, name)
		if err != nil {
			return nil, err
		}
		defs = append(defs, tfgrpc.SignatureDef{Name: name, Signature: sig})
	}
	return defs, nil
}

func (s *Session) grpcResolver(ctx context.Context) grpcmap.Resolver {
	return func(r route.Route, sigName string) (grpcmap.Target, error) {
		g := s.grpc
		if g.routeErr != nil {
			return grpcmap.Target{}, g.routeErr
		}
		rt := s.rt
		if rt.tf.Label != "" && r.Verb != route.Status {
			return grpcmap.Target{}, apierr.InvalidArgumentf("Unrecognized servable version label: %s", rt.tf.Label)
		}
		var t grpcmap.Target
		if rt.tf.HasVersion && !r.HasVersion {
			// A map label: v2 is called with, and TF answers, its version.
			t.Served, t.HasServed = rt.tf.Version, true
			t.Version = strconv.FormatInt(rt.tf.Version, 10)
		}
		if rt.model != nil {
			t.Model = rt.wire.Model
		}
		switch r.Verb {
		case route.Status:
			return t, nil
		case route.Metadata:
			if rt.model == nil {
				return t, nil // the v2 call itself says whether the model exists
			}
			// The map's renames and declared tensors apply to the answer.
			sig, err := rt.signature(ctx, rt.tf)
			t.Signature = sig
			if err == nil && len(rt.model.Signatures) > 0 {
				// Every signature the map declares, as REST's metadata
				// lists them (mappedMetadata).
				t.Signatures, err = rt.signatureDefs(ctx)
			}
			return t, err
		}
		if g.kindErr != nil {
			return grpcmap.Target{}, g.kindErr
		}
		if rt.model != nil && sigName != grpcmap.DefaultSignature {
			ms, ok := rt.model.Signature(sigName)
			if !ok {
				// TF finds the servable before the signature.
				if _, err := rt.signature(ctx, rt.tf); err != nil {
					return grpcmap.Target{}, err
				}
				return grpcmap.Target{}, grpcmap.ErrUnknownSignature
			}
			if ms != rt.model.Default {
				sig, next, err := rt.mappedSignature(ctx, sigName)
				if err != nil {
					return grpcmap.Target{}, err
				}
				s.rt, s.confirmed = next, true
				t.Model, t.Signature = next.wire.Model, sig
				return t, nil
			}
		}
		sig, err := rt.signature(ctx, rt.tf)
		if err != nil {
			return grpcmap.Target{}, err
		}
		s.confirmed = true
		if rt.model == nil && sigName != grpcmap.DefaultSignature {
			// v2 models have exactly one signature: serving_default.
			return grpcmap.Target{}, grpcmap.ErrUnknownSignature
		}
		t.Signature = sig
		return t, nil
	}
}
