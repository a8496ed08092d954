// Package session holds the state of one HTTP exchange between a TF
// Serving REST client and a v2 inference server, and answers its four
// events — request headers, request body, response headers, response body
// — with protocol-neutral Actions. The ext_proc adapter turns Actions into
// Envoy replies, the reverse proxy into HTTP; neither knows any TF
// Serving or v2 rule.
//
// What the session decides, event by event:
//   - request headers: route the TF URL. Not under /v1/ → PassThrough.
//     Malformed → TF's 400. A declared content-length over the body limit
//     → 413 before the body is read. POST :predict → fetch the model signature now
//     but keep its error (TF reports JSON syntax errors before
//     "Servable not found", so the error surfaces from the resolver during
//     body translation), rewrite :path to the v2 infer path, Continue.
//     :classify/:regress → the same. GET status/metadata → answered at once.
//   - request body (chunks with an end flag; a buffered body is one
//     chunk): TF JSON → v2 body (binary extension or JSON), with
//     content-type, inference-header-content-length and the exact
//     content-length; gzip request bodies are gunzipped as TF does. Each
//     verb is a pipeline (pipeline.go), chosen once at the request
//     headers: predict's tensors, or the serialized tf.Examples of
//     classify and regress.
//   - response headers: remember status, IHCL, content-type/-encoding.
//     Envoy's own replies (localreply.go) become the reverse proxy's TF
//     errors.
//   - response body (likewise): v2 → TF JSON on 2xx; v2 error body → TF error body
//     with the mapped status otherwise.
//
// GET status and metadata are answered with Respond at request-headers
// time because neither can be produced by rewriting one upstream call: a
// TF status body needs the model's metadata (its versions) and its
// readiness, Triton metadata needs /config too, and the 404 texts depend
// on which call failed. A GET has no body phase to hang the work on, and
// answering immediately saves Envoy a round trip to the upstream.
//
// Changing the status of an upstream response (a v2 error becoming a TF
// error, or a 2xx that is not 200) is done with Respond too: in BUFFERED
// mode Envoy still holds the response headers when the body arrives, and
// ext_proc has no other way to change :status.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/shadow"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// DefaultMaxBodyBytes is the body limit when Config.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 64 << 20

// Backend is what a session needs from the v2 server's control API;
// *backend.Client implements it. Every error must be an *apierr.Error
// with TF's text; a NotFound code means the model (version) is unknown.
type Backend interface {
	Kind(ctx context.Context) (oip.ServerKind, error)
	Signature(ctx context.Context, r route.Route) (*tensor.Signature, error)
	ModelReady(ctx context.Context, r route.Route) (bool, error)
}

// HeaderGetter reads one header by lower-case name, case-insensitively,
// "" when absent. http.Header satisfies it.
type HeaderGetter interface {
	Get(name string) string
}

// Config is shared by all sessions of one server; it must not change
// while sessions use it.
type Config struct {
	Backend Backend
	// Limits bound what the translators build from one body.
	Limits tensor.Limits
	// MaxBodyBytes caps every body the session accepts or produces by
	// decompression. TF Serving has no limit; over it the client gets
	// 413 (apierr.PayloadTooLarge), the status Envoy's own buffer limit
	// answers, so "too large" looks the same whichever layer refused.
	MaxBodyBytes int64
	// Passthrough decides which requests outside TF Serving's API reach
	// the v2 server; the others get a TF-style 404. The zero value is
	// PassthroughInference.
	Passthrough Passthrough
	Metrics     *observe.Metrics
	// Logger receives one line per exchange; nil discards.
	Logger *slog.Logger
	// Admission is the in-flight memory budget all sessions share: each
	// exchange owns one reservation, which grows as its bodies arrive (their
	// bytes times admission.RequestFactor, ResponseFactor or StreamFactor)
	// and is released once, when the exchange ends or is answered; over the
	// budget the client gets TF's 503. nil admits everything.
	Admission *admission.Budget
	// Mapping, when set, returns the model map in force with its
	// servers' backends (nil: no map). Each exchange keeps the one it
	// started with, so a reload never changes a request in flight.
	Mapping func() *Mapping
	// Shadow, when set, runs the shadow comparison of models whose map
	// entry has a shadow block (shadow.go).
	Shadow *shadow.Engine
	// GRPC configures the TF gRPC pipelines (grpc.go).
	GRPC GRPCOptions
}

// verbRefused is the verb label of requests the pass-through policy
// refused.
const verbRefused = "refused"

// state is where an exchange is.
type state uint8

const (
	stIdle         state = iota // nothing seen yet
	stPassThrough               // not ours
	stRequestBody               // inference: waiting for the request body
	stUpstream                  // request sent on; waiting for response headers
	stResponseBody              // waiting for the response body
	stDone                      // answered (complete) or broken (reset)
)

// Session is the state of one HTTP exchange. It is not safe for
// concurrent use: the adapters call it from one goroutine per exchange.
type Session struct {
	cfg *Config
	// headersSet is the room of the request-headers action's Set (the
	// path rewrite and the target's headers): no allocation of its own.
	headersSet [4]Header
	// rooms holds the header lists of the body events' actions
	// (rooms.go).
	rooms actionRooms
	// log is the exchange's logger (with request_id), built on first use:
	// slog's With costs four allocations, and most exchanges log nothing.
	log   *slog.Logger
	state state
	start time.Time

	requestID string
	verb      string
	// rt is where the exchange goes (target.go), set at the request
	// headers and replaced, never changed, when a signature_name reaches
	// another v2 model.
	rt        target
	confirmed bool // the backend knows the model (metric label)
	finished  bool // complete ran
	span      trace.Span
	// body is the pipeline of a verb with bodies (predict, classify,
	// regress), nil otherwise.
	body bodyPipeline
	// inferPath is the v2 infer path set at request-headers time; the
	// body event rebuilds it only when a signature_name rerouted the
	// exchange (resolveMapped).
	inferPath string
	rerouted  bool

	// grpc is the state of a TF gRPC exchange (grpc.go), nil for REST.
	grpc *grpcState

	// inference (predict, classify, regress)
	sig         *tensor.Signature
	sigErr      error
	kind        oip.ServerKind
	reqEncoding string
	exchange    translate.Exchange

	// upstream response headers
	respStatus   int
	respIHCL     string
	respType     string
	respEncoding string

	// res is the exchange's share of cfg.Admission, opened on first use
	// (nil without a budget) and released by complete, Close or the
	// adapter once the answer has left.
	res *admission.Reservation
	// The bodies' state (body.go).
	req  requestStream
	resp responseStream
	// shadow keeps a sampled exchange's copy (shadow.go); nil otherwise.
	shadow *shadowTee
	tee    shadowTee // shadow's room: a sampled exchange allocates no tee
}

var discard = slog.New(slog.DiscardHandler)

// New returns a session for one exchange.
func New(cfg *Config) *Session {
	return &Session{cfg: cfg, start: time.Now()}
}

func (s *Session) maxBody() int64 {
	if s.cfg.MaxBodyBytes > 0 {
		return s.cfg.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

// RequestID returns the exchange's id: the request's x-request-id, or a
// generated one. It is "" before RequestHeaders.
func (s *Session) RequestID() string { return s.requestID }

// AwaitingBody reports that the next body event will be translated (a
// inference request body, or the response body of a translated exchange),
// so the adapter must deliver it whole.
func (s *Session) AwaitingBody() bool {
	return s.state == stRequestBody || s.state == stResponseBody
}

// Logger returns the exchange's logger (with request_id); it discards
// before RequestHeaders.
func (s *Session) Logger() *slog.Logger {
	if s.log != nil {
		return s.log
	}
	if s.cfg.Logger == nil || s.requestID == "" {
		return discard
	}
	s.log = s.cfg.Logger.With("request_id", s.requestID)
	return s.log
}

// logs reports whether the exchange's logger writes level: the attributes
// of a line nobody reads are not worth building.
func (s *Session) logs(level slog.Level) bool {
	return s.cfg.Logger != nil && s.cfg.Logger.Enabled(context.Background(), level)
}

// UpstreamURL returns the root URL of the v2 server this exchange goes
// to, nil for the default server. The reverse proxy sends it there.
func (s *Session) UpstreamURL() *url.URL { return s.rt.url }

// ServerName returns the name of the v2 server the exchange goes to: its
// model-map server, or observe.DefaultServer.
func (s *Session) ServerName() string { return s.rt.serverName() }

// RequestHeaders handles the request headers. method and path are the
// request line (Envoy's :method and :path, path including "?query");
// endOfStream reports a request without a body. It resolves the route
// and picks the verb's pipeline, once.
func (s *Session) RequestHeaders(ctx context.Context, method, path string, h HeaderGetter, endOfStream bool) Action {
	if s.state != stIdle {
		return Action{Verdict: Continue}
	}
	s.requestID = observe.RequestID(h.Get(hdrRequestID))
	s.span = trace.SpanFromContext(ctx)
	if p, ok := grpcPipelineFor(method, path, h); ok {
		return p.start(ctx, s, h, endOfStream) // a TF gRPC client (grpc.go)
	}
	if a, ok := s.grpcOther(method, path, h); ok {
		return a
	}
	r, err := route.Parse(method, path)
	if errors.Is(err, route.ErrNotTFServing) {
		if !s.cfg.Passthrough.allows(method, path) {
			s.verb = verbRefused
			return s.fail(s.cfg.Passthrough.refused(method, path))
		}
		s.state = stPassThrough
		s.cfg.Metrics.PassThrough()
		a := Action{Verdict: PassThrough}
		if hasHeader(h, HeaderServer) {
			// Only tfsbridge picks a model's server: a client's own
			// header would steer a native v2 call to another cluster.
			a.Remove, a.ClearRouteCache = []string{HeaderServer}, true
		}
		return a
	}
	if method == http.MethodOptions {
		s.verb = "options"
		return s.preflight(h)
	}
	if err != nil {
		s.verb = "invalid"
		return s.fail(err)
	}
	s.verb = r.Verb.String()
	s.rt, err = resolveTarget(s.cfg, r, h)
	if err != nil {
		return s.fail(err)
	}
	p := s.rt.via(pipelineFor(r.Verb))
	if p == nil {
		return s.fail(apierr.Errorf(apierr.Internal, "unhandled route %s", r))
	}
	p = s.shadowed(p, path)
	return p.start(ctx, s, h, endOfStream)
}

// preflight answers an OPTIONS request under /v1/ as TF Serving's HTTP
// server does before any handler runs: 200 with an empty body when the
// Origin names an http(s) origin, else 400 with an empty body.
func (s *Session) preflight(h HeaderGetter) Action {
	origin := h.Get(hdrOrigin)
	status := http.StatusBadRequest
	if strings.Contains(origin, "http://") || strings.Contains(origin, "https://") {
		status = http.StatusOK
	}
	s.complete(status, nil)
	return Action{Verdict: Respond, Status: status, Reason: "tfsbridge_preflight"}
}

// awaitBody is the request-headers step of a verb with bodies (p): it
// fetches the model's signature now but keeps its error for the body's
// translation, and rewrites :path to the v2 infer path.
func (s *Session) awaitBody(ctx context.Context, p bodyPipeline, h HeaderGetter, endOfStream bool) Action {
	s.body = p
	r := s.rt.tf
	if s.declaredOver(h) {
		// Refused before a byte of the body is read: behind Envoy it is
		// never buffered, and no model lookup is spent on it.
		return s.fail(s.tooLarge("Request"))
	}
	s.reqEncoding = h.Get(hdrContentEnc)
	s.req.declared = declaredLength(h)
	if r.Label != "" {
		// v2 has no version labels, so every label is unknown to us.
		s.sigErr = apierr.InvalidArgumentf("Unrecognized servable version label: %s", r.Label)
	} else {
		s.sig, s.sigErr = s.rt.signature(ctx, r)
		if s.sigErr == nil {
			s.confirmed = true
			s.kind, s.sigErr = s.rt.kind(ctx)
		}
	}
	s.state = stRequestBody
	s.inferPath = s.rt.wire.V2InferPath()
	rewrite := Header{hdrPath, s.inferPath}
	if endOfStream {
		// No body will ever come: translate the empty one now (TF says
		// "JSON Parse error: The document is empty").
		a := s.RequestChunk(ctx, nil, true, Whole)
		if a.Verdict == Continue {
			a.Set = append(a.Set, rewrite)
		}
		return s.rt.routed(a)
	}
	// The headers go in room of the session's own (routed may add the
	// target's): the action is read before the next event.
	return s.rt.routed(Action{Verdict: Continue, Set: append(s.headersSet[:0], rewrite)})
}

// resolver is the tfrequest.Resolver of an inference body: it reports
// the signature lookup's outcome only when the request parser asks, after
// the JSON syntax checks, which is TF Serving's order. ctx is the body's,
// for the lookups a mapped model's other signatures need.
func (s *Session) resolver(ctx context.Context) func(string) (*tensor.Signature, error) {
	return func(signatureName string) (*tensor.Signature, error) {
		s.shadow.resolving(signatureName)
		if s.rt.model != nil && s.rt.tf.Label == "" {
			return s.resolveMapped(ctx, signatureName)
		}
		if s.sigErr != nil {
			return nil, s.sigErr
		}
		if signatureName != "" && signatureName != "serving_default" {
			// v2 models have exactly one signature; TF's default is its name.
			return nil, s.body.unknownSignature(signatureName)
		}
		return s.sig, nil
	}
}

// resolveMapped is the resolver for a mapped model: serving_default was
// fetched at request-headers time; another mapped signature is fetched
// now, from its own v2 model, and the exchange's target becomes the one
// that reaches it.
func (s *Session) resolveMapped(ctx context.Context, name string) (*tensor.Signature, error) {
	ms, ok := s.rt.model.Signature(name)
	switch {
	case !ok && s.sigErr != nil:
		return nil, s.sigErr // TF finds the servable before the signature
	case !ok:
		return nil, s.body.unknownSignature(name)
	case ms == s.rt.model.Default:
		return s.sig, s.sigErr
	}
	sig, rt, err := s.rt.mappedSignature(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.kind, err = rt.kind(ctx); err != nil {
		return nil, err
	}
	s.confirmed = true
	s.rt, s.rerouted = rt, true
	return sig, nil
}

// requestOptions are the translators' options for this exchange's
// request.
func (s *Session) requestOptions() translate.RequestOptions {
	return translate.RequestOptions{Kind: s.kind, ID: s.requestID, Limits: s.cfg.Limits, MaxBytes: s.maxBody()}
}

// requestAction is the Continue action that sends a translated request
// upstream: its headers (the body is the caller's to attach or stream).
func (s *Session) requestAction(req translate.V2Request) Action {
	n := req.Len()
	s.cfg.Metrics.BodySize(observe.StageV2Request, n)
	a := Action{
		Verdict: Continue,
		Set: append(s.rooms.requestSet[:0],
			Header{hdrContentType, req.ContentType},
			Header{hdrContentLength, s.rooms.itoa(n)},
			// An ext_proc filter sees upstream bytes as sent: ask for
			// an uncompressed answer.
			Header{hdrAcceptEnc, "identity"},
		),
	}
	if req.HeaderLength >= 0 {
		a.Set = append(a.Set, Header{hdrIHCL, s.rooms.itoa(req.HeaderLength)})
	} else {
		a.Remove = append(a.Remove, hdrIHCL)
	}
	if s.reqEncoding != "" {
		a.Remove = append(a.Remove, hdrContentEnc)
	}
	if s.rerouted {
		if p := s.rt.wire.V2InferPath(); p != s.inferPath {
			// The request's signature_name reached another v2 model.
			a.Set = append(a.Set, Header{hdrPath, p})
		}
	}
	// The model map's routing again, for the reverse proxy, which applies
	// the body action's headers to the upstream request.
	a.Set = append(a.Set, s.rt.set...)
	a.Remove = append(a.Remove, s.rt.remove...)
	s.state = stUpstream
	return a
}

// ResponseHeaders handles the upstream response headers. endOfStream
// reports a response without a body.
func (s *Session) ResponseHeaders(ctx context.Context, status int, h HeaderGetter, endOfStream bool) Action {
	switch s.state {
	case stUpstream:
	case stRequestBody:
		return s.localReplyBeforeBody(status)
	case stIdle:
		// A stream that starts here is the local reply of a filter
		// before ext_proc (a buffer filter's 413): no request of ours.
		s.state = stPassThrough
		return Action{Verdict: PassThrough}
	case stPassThrough:
		return s.observeResponseHeaders(status, h, endOfStream)
	default:
		return Action{Verdict: PassThrough}
	}
	if s.grpc != nil {
		return s.grpcResponseHeaders(status, h, endOfStream)
	}
	s.respStatus = status
	s.respIHCL = h.Get(hdrIHCL)
	s.respType = h.Get(hdrContentType)
	s.respEncoding = h.Get(hdrContentEnc)
	s.state = stResponseBody
	if s.declaredOver(h) {
		// Refused before a byte of it is buffered: behind Envoy the
		// client would otherwise get Envoy's bare 500 for a response over
		// its buffer limit instead of a TF error.
		return s.fail(s.tooLarge("Response"))
	}
	if endOfStream {
		a := s.ResponseChunk(ctx, nil, true, Whole)
		if a.Verdict == Continue && a.ReplaceBody {
			// Only a Respond can attach a body to a body-less response
			// portably; the status is the upstream's 200.
			return jsonResponse(http.StatusOK, a.Body, "tfsbridge_ok")
		}
		return a
	}
	return Action{Verdict: Continue}
}

// upstreamError turns a non-2xx v2 answer into the TF error: the v2
// message with the status mapped to the nearest TF code (Triton's 400
// stays 400, FastAPI's 422 becomes 400, 500/503 stay), except that a 404
// means the model went away since its metadata was fetched and gets TF's
// own not-found text, and a transport failure reported by a gateway
// (Envoy's router) gets the reverse proxy's text (transportError).
func (s *Session) upstreamError(body []byte) *apierr.Error {
	if e, reason := transportError(s.respStatus, body); e != nil {
		s.cfg.Metrics.UpstreamFailure(s.ServerName(), reason)
		return e
	}
	if s.respStatus >= 500 {
		s.cfg.Metrics.UpstreamFailure(s.ServerName(), observe.UpstreamServerError)
	}
	msg := oip.DecodeError(s.respStatus, s.respType, body)
	if s.respStatus == http.StatusNotFound {
		return apierr.Wrap(apierr.NotFound, errors.New(msg), "Servable not found for request: "+s.rt.tf.Servable())
	}
	return apierr.New(apierr.FromHTTPStatus(s.respStatus), msg)
}

// TooLarge answers the exchange with the body-size error of the body it
// awaits. The reverse proxy uses it when a declared Content-Length is
// already over the limit, so the body need not be read at all.
func (s *Session) TooLarge() Action {
	what := "Request"
	if s.state == stResponseBody {
		what = "Response"
	}
	return s.fail(s.tooLarge(what))
}

// OutputExpansion is the multiple of the body limit at which the
// binaries cap a translated TF answer, by its size bound
// (tensor.Limits.MaxOutputBytes): a v2 answer may expand, but not without
// a bound the operator controls. The bound assumes the longest text of
// every value: a JSON v2 answer of one-digit numbers ("0,") or a binary
// BOOL one bounds at 20–27 bytes per byte of body while it really prints
// 6–16, so 32 lets every real answer at the body limit through.
const OutputExpansion = 32

// MaxBodyBytes returns the body limit in force.
func (s *Session) MaxBodyBytes() int64 { return s.maxBody() }

// Fail answers the exchange with err as a TF error. Adapters use it for
// failures the session cannot see (the reverse proxy's upstream round
// trip); a non-*apierr.Error becomes a 500.
func (s *Session) Fail(err error) Action { return s.fail(err) }

// Close ends the exchange and returns its memory reservation. An exchange
// that was routed as ours but never answered (Envoy or the client went
// away, or its streamed answer broke midway) is completed with status 499.
func (s *Session) Close() {
	s.resp.endSpan()
	s.shadow.takePooledAtClose() // before the request's memory goes back
	s.req.close()
	s.ReleaseAdmission()
	if s.state != stIdle && s.state != stPassThrough {
		// Nobody was answered: no error to report, the status says why.
		s.complete(statusAbandoned, nil)
	}
	s.shadow.handOff() // a copy made, if the adapter did not say the answer left
	s.shadow.abandon() // an observed forward's copy that never got its answer
	s.state = stDone
}

// fail answers the exchange with err as a TF error.
func (s *Session) fail(err error) Action {
	e := apierr.As(err)
	s.complete(e.HTTPStatus(), e)
	if s.grpc != nil {
		return grpcErrorResponse(e)
	}
	return errorResponse(e)
}

// statusAbandoned is the status an exchange nobody answered is counted
// with (nginx's 499, "client closed request").
var statusAbandoned = apierr.Cancelled.HTTPStatus()

// complete ends the exchange with the status of its answer, once: the
// exchange is done, counted, traced and logged. e is the error answered
// (nil for a success, or for an exchange nobody was answered): an
// exchange answered with an error needs no more memory, so what it held
// goes back to the others now, not when the adapter ends it; a success
// still holds its answer until the adapter has sent it
// (ReleaseAdmission) or Close.
func (s *Session) complete(status int, e *apierr.Error) {
	if s.settle(status, e) {
		s.logDone(status, e)
	}
}

// settle is complete without the log line (Recover writes its own): it
// reports whether the exchange was not settled before.
func (s *Session) settle(status int, e *apierr.Error) bool {
	s.state = stDone
	if e != nil {
		s.ReleaseAdmission()
	}
	if s.finished {
		return false
	}
	s.finished = true
	s.shadow.done(s, status, e)
	s.cfg.Metrics.Request(s.verb, s.cfg.Metrics.ModelLabel(s.rt.tf.Model, s.confirmed), status)
	s.cfg.Metrics.RequestDuration(s.verb, status, time.Since(s.start))
	if s.span != nil {
		tracing.Answered(s.span, s.verb, s.rt.tf.Model, status)
	}
	return true
}

// logDone writes the exchange's line: debug for a success or an exchange
// nobody waits for any more, info for a client's error, warn for ours or
// the server's.
func (s *Session) logDone(status int, e *apierr.Error) {
	level, msg := slog.LevelDebug, "tf request done"
	switch {
	case e == nil && status == statusAbandoned:
		msg = "exchange abandoned"
	case e == nil:
	case status >= 500:
		level, msg = slog.LevelWarn, "tf request failed"
	default:
		// Info, not debug: a client's 4xx is what its owner asks about.
		level, msg = slog.LevelInfo, "tf request rejected"
	}
	if !s.logs(level) {
		return
	}
	attrs := []any{"route", s.rt.tf.String(), "status", status, observe.DurationMS("elapsed", time.Since(s.start))}
	if s.rt.tf.Model != "" {
		// Where the exchange went: which v2 server, under which name.
		attrs = append(attrs, "server", s.ServerName(), "v2_model", s.rt.wire.Model)
	}
	if e != nil {
		attrs = append(attrs, "error", e.Error())
	}
	s.Logger().Log(context.Background(), level, msg, attrs...)
}

// reservation returns the exchange's reservation, opened on first use
// (nil without a budget).
func (s *Session) reservation() *admission.Reservation {
	if s.res == nil {
		s.res = s.cfg.Admission.Open()
	}
	return s.res
}

// grow reserves n more bytes of the in-flight budget, waiting at most
// until ctx is done where the budget's age rules let it wait. Over the
// budget the client gets TF's 503: the bridge is busy, not the request
// wrong, and a retry may pass.
func (s *Session) grow(ctx context.Context, n int64) error {
	if err := s.reservation().Grow(ctx, n); err != nil {
		return busy(err)
	}
	return nil
}

// reserveUpTo grows the reservation to total bytes.
func (s *Session) reserveUpTo(ctx context.Context, total int64) error {
	return s.grow(ctx, total-s.res.Held())
}

// holdAtLeast makes the reservation at least n bytes, even over the
// budget: for memory the exchange already holds.
func (s *Session) holdAtLeast(n int64) {
	if h := s.res.Held(); n > h {
		s.reservation().Hold(n - h)
	}
}

// busy is TF's 503 for a refused reservation.
func busy(err error) error {
	return apierr.Wrap(apierr.Unavailable, err,
		"tfsbridge is over its in-flight memory budget (--max-inflight-bytes); retry later: this body "+err.Error())
}

// ReleaseAdmission returns what the exchange holds of the in-flight
// budget, once. The session calls it when the exchange fails and at
// Close; an adapter calls it as soon as the answer has left it (ext_proc,
// once its last reply is sent). Like every Session method it is for the
// exchange's goroutine; a watchdog on another one uses Admission().
func (s *Session) ReleaseAdmission() {
	s.res.Release()
	s.shadow.handOff() // the answer has left: its shadow copy may run
}

// Answered reports that the exchange has its final answer (counted).
func (s *Session) Answered() bool { return s.finished }

// Admission returns the exchange's reservation (nil without a budget),
// for an adapter's watchdog: Release and Wounded are safe from any
// goroutine.
func (s *Session) Admission() *admission.Reservation { return s.reservation() }

// GiveWay answers an exchange that an older one wounded (see package
// admission) with TF's 503, releasing what it holds: for an adapter that
// saw Admission().Wounded() while waiting for the client.
func (s *Session) GiveWay() Action {
	return s.fail(busy(&admission.Exhausted{Need: s.res.Held(), Limit: s.cfg.Admission.Limit(), Wounded: true}))
}

func (s *Session) checkSize(what string, n int64) error {
	if n > s.maxBody() {
		return s.tooLarge(what)
	}
	return nil
}

// tooLarge is 413 for the client's own body and 502 once the upstream
// has answered: a response too large to translate is the v2 server's
// doing, not the client's (Envoy, likewise, answers 500, not 413, when a
// buffered response overflows).
func (s *Session) tooLarge(what string) *apierr.Error {
	code := apierr.PayloadTooLarge
	if s.state >= stUpstream {
		code = apierr.BadGateway
	}
	return apierr.Errorf(code, "%s body exceeds the limit of %d bytes", what, s.maxBody())
}

// asBadGateway keeps an *apierr.Error and turns anything else into a 502:
// it is for failures to understand the v2 server's answer.
func asBadGateway(err error) *apierr.Error {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e
	}
	return apierr.Wrap(apierr.BadGateway, err, fmt.Sprintf("Invalid response from the v2 inference server: %v", err))
}
