package httpproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// GRPCConfig configures a GRPCProxy.
type GRPCConfig struct {
	// Session is shared by every exchange's session.
	Session *session.Config
	// Upstream is the default v2 server's gRPC address (host:port,
	// plaintext HTTP/2); model-map servers give their own (grpc:).
	Upstream string
	// Transport makes upstream calls; nil means NewGRPCTransport().
	Transport http.RoundTripper
	// RequestTimeout bounds a call whose client named no deadline
	// (grpc-timeout); 0 means DefaultRequestTimeout. A client's deadline
	// is forwarded and bounds the call instead.
	RequestTimeout time.Duration
	// ReadTimeout, ReadHeaderTimeout, IdleTimeout and WriteTimeout are as
	// in Config; 0 means their defaults.
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	WriteTimeout      time.Duration
	// Ready backs the listener's grpc.health.v1.Health: SERVING while it
	// passes (nil: always), NOT_SERVING while it fails (draining).
	Ready func(context.Context) error
}

// GRPCProxy is the TF gRPC listener (h2c): TF Serving's
// PredictionService and ModelService in front of a v2 server's
// GRPCInferenceService. It is a thin adapter over the session, like
// Proxy: one unary call is its request headers, one message, and the
// answer's headers, message and trailers, each handed to the session
// (docs/grpc.md §5). Messages are bounded by the session's body limit
// (--max-body-bytes; TF Serving itself accepts up to 2 GiB), over which
// the call fails RESOURCE_EXHAUSTED as a gRPC server answers a message
// over its cap.
type GRPCProxy struct {
	cfg      GRPCConfig
	log      *slog.Logger
	inflight inflight.Tracker
}

// NewGRPC returns a GRPCProxy.
func NewGRPC(cfg GRPCConfig) (*GRPCProxy, error) {
	if cfg.Session == nil || cfg.Upstream == "" {
		return nil, errors.New("httpproxy: Session and Upstream are required for the gRPC listener")
	}
	if _, _, err := net.SplitHostPort(cfg.Upstream); err != nil {
		return nil, errors.New("httpproxy: the v2 gRPC address must be host:port: " + err.Error())
	}
	if cfg.Transport == nil {
		cfg.Transport = NewGRPCTransport()
	}
	cfg.RequestTimeout = orDefault(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.ReadHeaderTimeout = orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	log := cfg.Session.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GRPCProxy{cfg: cfg, log: log}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// SetReady sets GRPCConfig.Ready; call it before serving.
func (p *GRPCProxy) SetReady(ready func(context.Context) error) { p.cfg.Ready = ready }

// Inflight returns the tracker of the calls in progress (see
// Proxy.Inflight).
func (p *GRPCProxy) Inflight() *inflight.Tracker { return &p.inflight }

// NewGRPCTransport returns the transport to v2 gRPC servers: HTTP/2 over
// plaintext TCP with prior knowledge (h2c), as gRPC servers without TLS
// speak it.
func NewGRPCTransport() *http.Transport {
	var prot http.Protocols
	prot.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Protocols:           &prot,
		DialContext:         (&net.Dialer{Timeout: backend.DefaultTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NewServer returns the h2c http.Server that serves p, with its request
// ids, spans, access lines and health service (grpc_ops.go).
func (p *GRPCProxy) NewServer(errorLog *log.Logger) *http.Server {
	var prot http.Protocols
	prot.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           p.handler(),
		Protocols:         &prot,
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		ErrorLog:          errorLog,
	}
}

// grpcRequestHeaders is a gRPC request's headers as the session reads
// them: http.Header plus the :path pseudo-header.
type grpcRequestHeaders struct {
	http.Header
	path string
}

func (h grpcRequestHeaders) Get(name string) string {
	if name == ":path" {
		return h.path
	}
	return h.Header.Get(name)
}

// ServeHTTP runs one unary call.
func (p *GRPCProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.health(w, r) {
		return
	}
	defer p.cfg.Session.Metrics.StreamStarted("grpc")()
	sess := session.New(p.cfg.Session)
	defer sess.Close()
	aw := &answerWriter{ResponseWriter: w, rc: http.NewResponseController(w), metrics: p.cfg.Session.Metrics}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http itself does
				panic(v) // a forwarded answer cut midway (relay)
			}
			a := sess.Recover("grpc", v)
			if aw.started {
				panic(http.ErrAbortHandler)
			}
			p.respond(aw, a)
		}
	}()
	body := watchBody(aw, r, p.cfg.ReadTimeout)
	ctx, done := p.inflight.Start(r.Context(), body.cut)
	defer done()

	a := sess.RequestHeaders(ctx, r.Method, r.URL.Path, grpcRequestHeaders{r.Header, r.URL.Path}, false)
	switch {
	case !sess.GRPC():
		// Not a TF Serving gRPC call: this listener serves nothing else.
		p.respond(aw, unimplemented(r.URL.Path))
		return
	case a.Verdict == session.Respond:
		p.respond(aw, a)
		return
	}
	msg, err := io.ReadAll(io.LimitReader(r.Body, sess.MaxBodyBytes()+1))
	if err != nil {
		if body.TimedOut() || body.Truncated() {
			p.respond(aw, sess.Fail(apierr.Wrap(apierr.Internal, err, "Incomplete request message: "+err.Error())))
		}
		return // the client went away
	}
	a = sess.RequestChunk(ctx, msg, true, session.Whole)
	if a.Verdict != session.Continue {
		p.respond(aw, a)
		return
	}
	addr := sess.UpstreamGRPC()
	if addr == "" && sess.UpstreamURL() != nil {
		p.respond(aw, sess.Fail(apierr.Errorf(apierr.Unavailable,
			"The model map's server %q has no grpc address: tfsbridge cannot call it over gRPC", sess.ServerName())))
		return
	}
	if addr == "" {
		addr = p.cfg.Upstream
	}
	p.call(ctx, aw, r, sess, addr, a, msg)
}

// call makes the upstream call with the translated message and answers
// the client with the translated answer. A call the session forwards to
// a TF Serving server (GRPCForward) goes there as the client made it —
// its message (msg), :path and grpc-encoding — and its answer comes back
// as that server gives it (relay).
func (p *GRPCProxy) call(ctx context.Context, w *answerWriter, r *http.Request, sess *session.Session, addr string, a session.Action, msg []byte) {
	timeout := p.cfg.RequestTimeout
	if d, ok := parseGRPCTimeout(r.Header.Get("grpc-timeout")); ok {
		timeout = d
	}
	uctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	forward := sess.GRPCForward()
	path, body := r.URL.Path, msg
	if !forward {
		path, _ = a.Get(":path")
		body = a.Body
	}
	out, err := http.NewRequestWithContext(uctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		p.respond(w, sess.Fail(apierr.Wrap(apierr.Internal, err, "Invalid gRPC address "+addr)))
		return
	}
	out.ContentLength = int64(len(body))
	for k, vs := range r.Header {
		if forwardedMetadata(k) || (forward && messageEncoding(k)) {
			out.Header[k] = vs
		}
	}
	out.Header.Set("Te", "trailers")
	if d, ok := uctx.Deadline(); ok {
		// The remaining deadline, as gRPC forwards it.
		out.Header.Set("Grpc-Timeout", formatGRPCTimeout(time.Until(d)))
	}
	if out.Header.Get("X-Request-Id") == "" && sess.RequestID() != "" {
		out.Header.Set("X-Request-Id", sess.RequestID())
	}
	applyHeaders(out.Header, a)
	resp, err := p.cfg.Transport.RoundTrip(out)
	if err != nil {
		if inflight.IsCut(ctx) {
			// The shutdown's time ran out: UNAVAILABLE, retry elsewhere.
			p.respond(w, sess.Fail(apierr.Wrap(apierr.Unavailable, err, inflight.MsgShutdown)))
			return
		}
		if r.Context().Err() != nil {
			return // the client went away
		}
		e, reason := backend.RoundTripError(err)
		if reason != "" {
			p.cfg.Session.Metrics.UpstreamFailure(sess.ServerName(), reason)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			e = apierr.Wrap(apierr.DeadlineExceeded, err, "Deadline Exceeded")
		}
		p.respond(w, sess.Fail(e))
		return
	}
	defer resp.Body.Close()
	if forward {
		p.relay(w, resp)
		return
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, sess.MaxBodyBytes()+6))
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		e, _ := backend.RoundTripError(err)
		if errors.Is(err, context.DeadlineExceeded) {
			e = apierr.Wrap(apierr.DeadlineExceeded, err, "Deadline Exceeded")
		}
		p.respond(w, sess.Fail(e))
		return
	}
	trailersOnly := len(answer) == 0 && resp.Header.Get("Grpc-Status") != ""
	ha := sess.ResponseHeaders(ctx, resp.StatusCode, resp.Header, trailersOnly)
	if ha.Verdict == session.Respond {
		p.respond(w, ha)
		return
	}
	header := w.Header()
	for k, vs := range resp.Header {
		if !hopHeader(k) {
			header[k] = vs
		}
	}
	applyHeaders(header, ha)
	if trailersOnly {
		w.deadline(p.cfg.WriteTimeout)
		w.WriteHeader(http.StatusOK)
		return
	}
	ba := sess.ResponseChunk(ctx, answer, false, session.Whole)
	switch ba.Verdict {
	case session.Respond:
		clear(header)
		p.respond(w, ba)
		return
	case session.Continue:
		if ba.ReplaceBody {
			answer = ba.Body
		}
	}
	ta := sess.ResponseTrailers(ctx, resp.Trailer)
	trailer := resp.Trailer.Clone()
	if trailer == nil {
		trailer = http.Header{}
	}
	applyHeaders(trailer, ta)
	w.deadline(p.cfg.WriteTimeout)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	for k, vs := range trailer {
		header[http.TrailerPrefix+k] = vs
	}
}

// relay answers a forwarded call with its server's answer as it comes:
// headers, message and trailers unchanged. An answer cut midway aborts
// the client's stream (a truncated message with OK trailers would read
// as a success).
func (p *GRPCProxy) relay(w *answerWriter, resp *http.Response) {
	header := w.Header()
	for k, vs := range resp.Header {
		if !hopHeader(k) {
			header[k] = vs
		}
	}
	w.deadline(p.cfg.WriteTimeout)
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		panic(http.ErrAbortHandler)
	}
	for k, vs := range resp.Trailer {
		header[http.TrailerPrefix+k] = vs
	}
}

// respond writes a Respond action: a gRPC refusal goes trailers-only
// (its status in the headers, no body).
func (p *GRPCProxy) respond(w *answerWriter, a session.Action) {
	w.deadline(p.cfg.WriteTimeout)
	h := w.Header()
	for _, kv := range a.Set {
		if !strings.HasPrefix(kv.Key, ":") {
			h.Set(kv.Key, kv.Value)
		}
	}
	if len(a.Body) > 0 {
		h.Set("Content-Length", strconv.Itoa(len(a.Body)))
	}
	w.WriteHeader(a.Status)
	if len(a.Body) > 0 {
		_, _ = w.Write(a.Body)
	}
}

// unimplemented is gRPC's answer to a method no service here has.
func unimplemented(path string) session.Action {
	return session.Action{Verdict: session.Respond, Status: http.StatusOK, Set: []session.Header{
		{Key: "content-type", Value: "application/grpc"},
		{Key: "grpc-status", Value: "12"},
		{Key: "grpc-message", Value: session.EncodeGRPCMessage("unknown service or method " + path)},
	}}
}

// forwardedMetadata reports a client header that goes on to the v2
// server as call metadata: everything but the transport's own headers
// and the ones the session decides (message encoding, length).
func forwardedMetadata(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Content-Length", "Grpc-Encoding", "Grpc-Accept-Encoding", "Grpc-Timeout", "Te", "Host", "Connection",
		"Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", http.CanonicalHeaderKey(session.HeaderServer):
		return false
	}
	return true
}

// messageEncoding reports the headers about the message's compression,
// which a forwarded call keeps as the client sent them (its message is
// the client's own).
func messageEncoding(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Grpc-Encoding", "Grpc-Accept-Encoding":
		return true
	}
	return false
}

// hopHeader reports a response header that does not go back to the
// client as it is.
func hopHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade":
		return true
	}
	return false
}

// parseGRPCTimeout reads a grpc-timeout header: at most 8 digits and a
// unit (H, M, S, m, u, n).
func parseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	units := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
		'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
	u, ok := units[v[len(v)-1]]
	if !ok {
		return 0, false
	}
	return time.Duration(n) * u, true
}

// formatGRPCTimeout writes d as a grpc-timeout value (at most 8 digits),
// in the finest unit that fits.
func formatGRPCTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		unit string
		d    time.Duration
	}{{"n", time.Nanosecond}, {"u", time.Microsecond}, {"m", time.Millisecond}, {"S", time.Second}, {"M", time.Minute}} {
		if d/u.d < 1e8 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.unit
		}
	}
	return strconv.FormatInt(int64(d/time.Hour), 10) + "H"
}
