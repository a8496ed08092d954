// Package httpproxy is tfsbridge without Envoy: a reverse proxy in front
// of a v2 server that drives the same session as the ext_proc adapter.
// Translated exchanges (TF Serving predict, classify, regress) stream
// through the session's chunk events (stream.go): the TF JSON is parsed
// as it arrives and never held whole, the v2 answer is translated as it
// comes back. Everything else — native v2 calls, health checks — is
// streamed through untouched by httputil.ReverseProxy, which also handles
// hop-by-hop headers.
package httpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/internal/http1"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// DefaultRequestTimeout bounds a translated exchange's upstream round
// trip, like TF Serving's --rest_api_timeout_in_ms default (30 s): past
// it the client gets 504 DEADLINE_EXCEEDED, as from TF Serving.
const DefaultRequestTimeout = 30 * time.Second

// Config configures a Proxy.
type Config struct {
	// Session is shared by every exchange's session.
	Session *session.Config
	// Upstream is the v2 server's root URL.
	Upstream *url.URL
	// Transport makes upstream calls; nil means backend.NewTransport.
	Transport http.RoundTripper
	// RequestTimeout bounds a translated exchange upstream; 0 means
	// DefaultRequestTimeout. Pass-through exchanges are not bounded
	// (they may stream).
	RequestTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a request
	// body, from the end of its headers; 0 means DefaultReadTimeout.
	// ReadHeaderTimeout bounds the headers and IdleTimeout a keep-alive
	// connection between requests (NewServer's); 0 means their defaults.
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// WriteTimeout bounds how long the client may take to take in a
	// translated answer (a TF response or error, a status or metadata
	// body), from the moment it is ready; 0 means DefaultWriteTimeout.
	// Pass-through answers are not bounded (they may stream).
	WriteTimeout time.Duration
}

// Proxy is an http.Handler.
type Proxy struct {
	cfg  Config
	rp   *httputil.ReverseProxy
	log  *slog.Logger
	pool *bufferPool
	// direct sends small translated requests over plain http (direct.go);
	// nil when the caller gave its own Transport.
	direct *http1.Client
	// inflight tracks the exchanges in progress for a graceful stop.
	inflight inflight.Tracker
	// noSmall sends every exchange through ReverseProxy (tests compare
	// serveSmall with it).
	noSmall bool
}

// Inflight returns the tracker of the exchanges in progress: a graceful
// stop drains them and, when its time is up, cuts the rest (Cut cancels
// their upstream calls, which are then answered TF's 503 when their
// headers have not gone out).
func (p *Proxy) Inflight() *inflight.Tracker { return &p.inflight }

// New returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Session == nil || cfg.Upstream == nil {
		return nil, errors.New("httpproxy: Session and Upstream are required")
	}
	var direct *http1.Client
	if cfg.Transport == nil {
		cfg.Transport = backend.NewTransport(backend.DefaultTimeout)
		direct = newDirect(backend.DefaultTimeout)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	log := cfg.Session.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, log: log, pool: newBufferPool(), direct: direct}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      connectionKeeper{RoundTripper: cfg.Transport, direct: direct},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BufferPool:     p.pool,
	}
	return p, nil
}

// exchange is what the ReverseProxy hooks need to know about the request
// they serve; it travels in the request context.
type exchange struct {
	sess *session.Session
	// w is the client's ResponseWriter, to set the write deadline on.
	w *answerWriter
	// client is the client request's own context, to tell a client that
	// went away from an upstream timeout.
	client context.Context
	// upstream is the v2 server of a model the model map puts on another
	// server, nil for the default upstream.
	upstream *url.URL
	// forward is the TF Serving server (a model map server of kind
	// tfserving) a pass-through exchange goes to, nil for the default
	// upstream.
	forward *url.URL
	// path is the rewritten request target of a translated exchange, ""
	// for a pass-through one.
	path string
	// set is the session's header changes for the upstream request of a
	// translated exchange. They are applied in rewrite, after
	// ReverseProxy has removed the hop-by-hop headers: a client naming
	// Content-Type or Inference-Header-Content-Length in its Connection
	// header must not strip what tfsbridge sets.
	set session.Action
	// respHeader is the v2 response's header as the server sent it,
	// before ReverseProxy removed the hop-by-hop ones; kept only when it
	// has a Connection header (see connectionKeeper).
	respHeader http.Header
	// body is the client's body (nil if none).
	body *clientBody
	// sent is the translated upstream request body, nil for a
	// pass-through exchange.
	sent *requestSink
	// obs streams an observed exchange's bodies through the session
	// (observe.go), nil for any other.
	obs *observer
	// fetched is the answer of an exchange serveSmall sent but hands to
	// ReverseProxy, which connectionKeeper gives it as the round trip's.
	fetched *http.Response
	// pump is closed when the goroutine translating the answer
	// (streamResponse) is done with the session; nil without one.
	pump chan struct{}
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// ServeHTTP runs one exchange. A panic in it answers TF's 500 (or, when
// the answer has already begun, aborts the connection) and is logged at
// error level with the request id; net/http's own recovery would log it
// at the server's error-log level only and leave the client without an
// answer.
func (p *Proxy) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	defer p.cfg.Session.Metrics.StreamStarted("http")()
	sess := session.New(p.cfg.Session)
	defer sess.Close()
	w := &answerWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), metrics: p.cfg.Session.Metrics}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http itself does
				panic(v) // ReverseProxy's way to cut a failed copy
			}
			a := sess.Recover("http", v)
			if w.started {
				panic(http.ErrAbortHandler)
			}
			p.respond(w, a)
		}
	}()
	noBody := r.Body == nil || r.Body == http.NoBody
	var body *clientBody
	if !noBody {
		body = watchBody(w, r, p.cfg.ReadTimeout)
	}
	// A cut (the shutdown's time ran out) cancels the upstream call and
	// ends a body read in progress, so that both are answered TF's 503.
	ctx, done := p.inflight.Start(r.Context(), body.cut)
	defer done()
	ex := &exchange{sess: sess, client: r.Context(), w: w, body: body}
	defer ex.waitPump()

	a := sess.RequestHeaders(ctx, r.Method, requestTarget(r), headerGetter(r.Header), noBody)
	switch a.Verdict {
	case session.Respond:
		p.respond(w, a)
		return
	case session.PassThrough:
		for _, k := range a.Remove {
			r.Header.Del(k)
		}
		if u := sess.UpstreamURL(); u != nil {
			ex.forward, ex.set = u, a // untranslated, to another server
		}
		if a.Observe {
			ex.observe(ctx, r, noBody)
			defer ex.obs.detach() // before the session closes
		}
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, exchangeKey{}, ex)))
		return
	}
	ex.path, _ = a.Get(":path")
	ex.upstream = sess.UpstreamURL()

	if noBody {
		// The session answered the empty body at the request headers.
		p.respond(w, sess.Fail(apierr.New(apierr.Internal, "request was not translated")))
		return
	}
	// A declared Content-Length over the limit was refused by the
	// session at the request headers (net/http keeps that header).
	upstream, a, ok := p.readRequest(ctx, ex, r)
	if !ok {
		switch a.Verdict {
		case session.Respond:
			p.respond(w, a)
		case session.Reset:
			// The client went away: nobody to answer.
		default:
			p.respond(w, sess.Fail(apierr.New(apierr.Internal, "request was not translated")))
		}
		return
	}
	if p, ok := a.Get(":path"); ok {
		ex.path = p // signature_name chose another v2 model
	}

	uctx := withDeadline(context.WithValue(ctx, exchangeKey{}, ex), p.cfg.RequestTimeout)
	defer uctx.stop()
	ex.set = a
	ex.sent = upstream
	if p.serveSmall(uctx, w, r, ex) {
		return
	}
	p.rp.ServeHTTP(w, p.outRequest(uctx, r, ex))
}

// incompleteBody describes a request body that ended before its end.
func incompleteBody(declared int64, got int) string {
	if declared > 0 {
		return fmt.Sprintf("Incomplete request body: received %d of the %d bytes of its Content-Length", got, declared)
	}
	return "Incomplete request body: the chunked body ended early"
}

// requestTarget returns the request target as the client sent it (path
// and query, still percent-encoded), which is what TF Serving matches.
func requestTarget(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI() // absolute-form or a synthetic request
}

// rewrite points the outbound request at the v2 server: the translated
// v2 path for a predict, the original path for a pass-through.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeFrom(pr.In.Context())
	if ex != nil && ex.path != "" {
		pr.Out.URL = upstreamURL(ex.upstreamOr(p.cfg.Upstream), ex.path)
		pr.Out.Host = ""
		applyHeaders(pr.Out.Header, ex.set)
	} else if ex != nil && ex.forward != nil {
		pr.SetURL(ex.forward)
		applyHeaders(pr.Out.Header, ex.set)
	} else {
		pr.SetURL(p.cfg.Upstream)
	}
	pr.SetXForwarded()
	if ex != nil && pr.Out.Header.Get("X-Request-Id") == "" && ex.sess.RequestID() != "" {
		// Let the v2 server's logs be correlated with ours.
		pr.Out.Header.Set("X-Request-Id", ex.sess.RequestID())
	}
}

// upstreamOr returns the model map's server for this exchange, or def.
func (ex *exchange) upstreamOr(def *url.URL) *url.URL {
	if ex.upstream != nil {
		return ex.upstream
	}
	return def
}

// upstreamURL joins the upstream root and an escaped request target.
func upstreamURL(base *url.URL, target string) *url.URL {
	u := *base
	path, query, _ := strings.Cut(target, "?")
	raw := strings.TrimSuffix(base.EscapedPath(), "/") + path
	u.RawPath = raw
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path = p
	} else {
		u.Path, u.RawPath = raw, ""
	}
	u.RawQuery = query
	return &u
}

// connectionKeeper keeps, for a translated exchange, the response header
// as the v2 server sent it when it has a Connection header: ReverseProxy
// removes the headers a Connection header names before ModifyResponse
// runs, and a v2 server naming Inference-Header-Content-Length there would
// otherwise have its binary body read as JSON. Envoy does not remove
// them either.
//
// It also sends a small translated request by the direct client
// (direct.go) when there is one.
type connectionKeeper struct {
	http.RoundTripper
	direct *http1.Client
}

func (c connectionKeeper) RoundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	if ex := exchangeFrom(req.Context()); ex != nil && ex.fetched != nil {
		resp, ex.fetched = ex.fetched, nil
		resp.Request = req
	} else if ex != nil && ex.sent != nil && len(ex.sent.parts) == 1 && req.Body != nil {
		// ReverseProxy hands over the body in a wrapper of its own, which
		// net/http cannot tell is in memory: it would flush the headers
		// before the body, two writes for every small request. The body
		// itself (a *bytes.Reader) goes out with the headers in one.
		r := *req
		r.Body = ex.sent.body()
		req = &r
		if directSuits(c.direct, req, ex.sent.parts[0]) {
			resp, err = directRoundTrip(c.direct, req, ex.sent.parts[0])
		} else {
			resp, err = c.RoundTripper.RoundTrip(req)
		}
	} else {
		resp, err = c.RoundTripper.RoundTrip(req)
	}
	if err != nil {
		return resp, err
	}
	if ex := exchangeFrom(req.Context()); ex != nil && ex.path != "" {
		if _, ok := resp.Header["Connection"]; ok {
			ex.respHeader = resp.Header.Clone()
		}
	}
	return resp, nil
}

// modifyResponse translates the upstream response of a translated
// exchange; pass-through responses are left to stream.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	ctx := resp.Request.Context()
	ex := exchangeFrom(ctx)
	if ex == nil || ex.path == "" {
		if ex != nil && ex.obs != nil {
			ex.obs.response(resp)
		}
		return nil
	}
	return p.translateAnswer(ctx, ex, resp)
}

// translateAnswer translates the upstream response of a translated
// exchange, whose upstream call runs under ctx.
func (p *Proxy) translateAnswer(ctx context.Context, ex *exchange, resp *http.Response) error {
	h := resp.Header
	if ex.respHeader != nil {
		// The translated response is ours to read, as Envoy would
		// hand it over: with the headers its Connection header named.
		h = ex.respHeader
	}
	a := ex.sess.ResponseHeaders(ctx, resp.StatusCode, headerGetter(h), false)
	switch a.Verdict {
	case session.PassThrough:
		return nil
	case session.Respond:
		_ = resp.Body.Close()
		return p.replaceResponse(ex, resp, a)
	}
	if resp.ContentLength > ex.sess.MaxBodyBytes() {
		_ = resp.Body.Close()
		return p.replaceResponse(ex, resp, ex.sess.TooLarge())
	}
	if resp.ContentLength > 0 && resp.ContentLength <= smallAnswer {
		return p.wholeResponse(ctx, ex, resp)
	}
	return p.streamResponse(ctx, ex, resp)
}

// replaceResponse applies a translated answer to the upstream response
// and starts its write deadline: ReverseProxy writes it next.
func (p *Proxy) replaceResponse(ex *exchange, resp *http.Response, a session.Action) error {
	ex.w.deadline(p.cfg.WriteTimeout)
	return replaceResponse(resp, a)
}

// replaceResponse applies an action to the upstream response.
func replaceResponse(resp *http.Response, a session.Action) error {
	switch a.Verdict {
	case session.Respond:
		resp.StatusCode = a.Status
		resp.Status = strconv.Itoa(a.Status) + " " + http.StatusText(a.Status)
		resp.Header = make(http.Header, len(a.Set)+1)
		resp.Trailer = nil
		setBody(resp, a.Body)
		applyHeaders(resp.Header, a)
	case session.Continue:
		applyHeaders(resp.Header, a)
		if a.ReplaceBody {
			setBody(resp, a.Body)
		}
	}
	return nil
}

func setBody(resp *http.Response, body []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.TransferEncoding = nil
	resp.Uncompressed = false
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// errorHandler answers upstream failures: a TF error (503 when the v2
// server failed before answering — refused, closed, reset, not HTTP —,
// 504 timeout, 502 a broken body) for TF exchanges, the bare status
// otherwise.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeFrom(r.Context())
	timedOut := ex != nil && ex.body.TimedOut()
	if ex != nil && ex.client.Err() != nil && !timedOut && !ex.body.Truncated() {
		// The client hung up and the upstream call was cancelled with it.
		return
	}
	if inflight.IsCut(r.Context()) {
		// The shutdown's time ran out before the v2 server answered: a
		// TF client gets TF's 503 (retry elsewhere), never a bare reset.
		w.Header().Set("Connection", "close")
		if ex == nil || ex.path == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		p.respond(ex.w, ex.sess.Fail(apierr.Wrap(apierr.Unavailable, err, inflight.MsgShutdown)))
		return
	}
	e, reason := backend.RoundTripError(err)
	if errors.Is(err, errResponseBody) {
		e, reason = backend.TransportError(err), backend.FailureReason(err)
	}
	if ex != nil && ex.path != "" && !timedOut && !ex.body.Truncated() && reason != "" {
		// A translated exchange the v2 server failed: counted as ext_proc
		// counts Envoy's local reply for the same fault.
		p.cfg.Session.Metrics.UpstreamFailure(ex.sess.ServerName(), reason)
	}
	if ex == nil || ex.path == "" {
		p.log.Debug("pass-through upstream error", "error", err)
		status := e.HTTPStatus()
		switch {
		case timedOut:
			// The client did not send its body in time.
			status = http.StatusRequestTimeout
		case ex != nil && ex.body.Truncated():
			// The client ended its body early: its fault, not the
			// upstream's, and never a success.
			status = http.StatusBadRequest
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(status)
		return
	}
	p.respond(ex.w, ex.sess.Fail(e))
}

// respond writes a translated answer under the write deadline.
func (p *Proxy) respond(w *answerWriter, a session.Action) {
	w.deadline(p.cfg.WriteTimeout)
	writeResponse(w, a)
}

// writeResponse writes a Respond action.
func writeResponse(w http.ResponseWriter, a session.Action) {
	h := w.Header()
	for _, kv := range a.Set {
		if !strings.HasPrefix(kv.Key, ":") {
			h.Set(kv.Key, kv.Value)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// applyHeaders applies an action's header changes to h. Pseudo-headers
// and Content-Length are carried by the request/response fields instead.
func applyHeaders(h http.Header, a session.Action) {
	for _, k := range a.Remove {
		delete(h, canonicalName(k))
	}
	for _, kv := range a.Set {
		if strings.HasPrefix(kv.Key, ":") || strings.EqualFold(kv.Key, "content-length") {
			continue
		}
		h[canonicalName(kv.Key)] = []string{kv.Value}
	}
}
