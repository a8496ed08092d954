package httpproxy

import (
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"

	"github.com/tfsbridge/tfsbridge/proxy/internal/http1"
)

// A small translated exchange that goes by the direct client (direct.go)
// and whose answer is small and of known length — nearly every predict —
// is served here without httputil.ReverseProxy, which for each exchange
// deep-copies the request, builds its header map and a client trace, and
// wraps the context and body: about a quarter of the proxy's allocations
// per exchange. What it does to the request and to the answer is done
// here the same way, step for step (TestSmallPathSameAsReverseProxy
// compares both, byte for byte, both ways): the upstream request has the
// header ReverseProxy and rewrite would give it, the answer is
// translated by the same translateAnswer, and its header and body reach
// the client as ReverseProxy copies them. Anything else — an upgrade, a
// chunked request with trailers, an answer that streams (no length, or
// over a copy buffer) or switches protocols — is handed, as received, to
// ReverseProxy (exchange.fetched).

// upHeader is the header of a small exchange's upstream request, pooled
// with room for the values tfsbridge sets, so that building it allocates
// nothing.
type upHeader struct {
	h    http.Header
	vals [8]string
	n    int
}

var upHeaders = sync.Pool{New: func() any { return &upHeader{h: make(http.Header, 16)} }}

func (u *upHeader) set(k, v string) {
	if u.n == len(u.vals) {
		u.h[k] = []string{v}
		return
	}
	u.vals[u.n] = v
	u.h[k] = u.vals[u.n : u.n+1 : u.n+1]
	u.n++
}

func (u *upHeader) release() {
	clear(u.h)
	clear(u.vals[:])
	u.n = 0
	upHeaders.Put(u)
}

// hopHeaders are the hop-by-hop headers ReverseProxy removes from both
// the request and the answer besides the ones a Connection header names
// (RFC 9110 7.6.1, and RFC 2616's list for the older senders).
var hopHeaders = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop removes h's hop-by-hop headers, as ReverseProxy does.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				delete(h, canonicalName(sf))
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// smallHeader fills u with the upstream request header of r's translated
// exchange as ReverseProxy and rewrite build it: r's header without its
// hop-by-hop and forwarding headers, Content-Length and Expect (which
// ServeHTTP drops), "Te: trailers" when the client offered trailers, the
// session's changes, X-Forwarded-For, -Host and -Proto, and the request
// id.
func smallHeader(u *upHeader, r *http.Request, ex *exchange) {
	h := u.h
	for k, v := range r.Header {
		h[k] = v // the values are replaced, never changed in place
	}
	delete(h, "Content-Length")
	delete(h, "Expect")
	removeHopByHop(h)
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		u.set("Te", "trailers")
	}
	for _, k := range [...]string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		delete(h, k)
	}
	for _, k := range ex.set.Remove {
		delete(h, canonicalName(k))
	}
	for _, kv := range ex.set.Set {
		if strings.HasPrefix(kv.Key, ":") || strings.EqualFold(kv.Key, "content-length") {
			continue
		}
		u.set(canonicalName(kv.Key), kv.Value)
	}
	// httputil.ProxyRequest.SetXForwarded's header.
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		u.set("X-Forwarded-For", ip)
	} else {
		delete(h, "X-Forwarded-For")
	}
	u.set("X-Forwarded-Host", r.Host)
	if r.TLS == nil {
		u.set("X-Forwarded-Proto", "http")
	} else {
		u.set("X-Forwarded-Proto", "https")
	}
	if id := ex.sess.RequestID(); id != "" && (len(h["X-Request-Id"]) == 0 || h["X-Request-Id"][0] == "") {
		u.set("X-Request-Id", id)
	}
	// A missing User-Agent stays missing (ReverseProxy sets it empty,
	// which is not sent).
}

// serveSmall serves r's translated exchange, its upstream call under
// ctx, when it is small (see above), and reports whether it did; when it
// did not, nothing has happened yet and the exchange is ReverseProxy's.
func (p *Proxy) serveSmall(ctx *deadlineCtx, w *answerWriter, r *http.Request, ex *exchange) bool {
	if p.direct == nil || p.noSmall || len(ex.sent.parts) != 1 || len(r.Trailer) > 0 || r.Method != http.MethodPost ||
		httpguts.HeaderValuesContainsToken(r.Header["Connection"], "Upgrade") {
		return false
	}
	body := ex.sent.parts[0]
	base := ex.upstreamOr(p.cfg.Upstream)
	if base.Scheme != "http" || base.User != nil || len(body) > directMaxBody {
		return false
	}
	u := upHeaders.Get().(*upHeader)
	defer u.release()
	smallHeader(u, r, ex)
	if len(u.h["Accept-Encoding"]) == 0 {
		return false // the Transport's gzip dance: directSuits
	}
	var buf [1 << 10]byte // the header lines, copied into the connection's buffer
	// The client watches the parent's cancellation (the client gone, the
	// shutdown's cut) and bounds its I/O by the deadline itself: ctx's
	// timer is not needed, and is not made (deadlineCtx).
	ans, err := p.direct.Do(ctx.parent, &http1.Request{Method: http.MethodPost, Addr: http1.Addr(base),
		Target: requestURI(base, ex.path), Host: base.Host, Header: http1.AppendHTTPHeader(buf[:0], u.h),
		Interim: w.interim, Deadline: ctx.deadline}, [][]byte{body})
	if err != nil && ctx.Err() != nil {
		err = context.Cause(ctx) // the deadline passed: what the client says of ctx's end
	}
	if err != nil {
		p.errorHandler(w, r.WithContext(ctx), err)
		return true
	}
	resp := directResponse(ctx, ans, nil)
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.ContentLength <= 0 || resp.ContentLength > smallAnswer {
		// Rare or streamed: ReverseProxy takes the answer as it is.
		ex.fetched = resp
		p.rp.ServeHTTP(w, p.outRequest(ctx, r, ex))
		return true
	}
	// The answer's own body is closed however the exchange ends, a panic
	// in the translation included, so that its connection is not left
	// open (closing it twice is nothing).
	defer resp.Body.Close()
	if _, ok := resp.Header["Connection"]; ok {
		ex.respHeader = resp.Header.Clone() // connectionKeeper's
	}
	removeHopByHop(resp.Header)
	if err := p.translateAnswer(ctx, ex, resp); err != nil {
		_ = resp.Body.Close()
		p.errorHandler(w, r.WithContext(ctx), err)
		return true
	}
	h := w.Header()
	for k, vv := range resp.Header {
		// ReverseProxy's copyHeader: Add, one value at a time. The answer's
		// header is not used again: its values are taken as they are.
		if len(vv) == 0 {
			continue
		}
		if k = canonicalName(k); len(h[k]) == 0 {
			h[k] = vv[:len(vv):len(vv)]
		} else {
			h[k] = append(h[k], vv...)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if err := p.copyAnswer(w, resp); err != nil {
		_ = resp.Body.Close()
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler) // ReverseProxy's way to cut a failed copy
		}
		return true
	}
	if len(h["Content-Length"]) > 0 {
		// The whole answer, of declared length, is written: it goes out
		// now, in the one write net/http would make after the handler
		// returns, and the exchange's bookkeeping (the session's close,
		// its metrics, the contexts, the tracing span) runs after the
		// client has it rather than before. The bytes are the same: a
		// declared length is all net/http's last flush would add.
		w.flush()
	}
	_ = resp.Body.Close()
	return true
}

// requestURI is upstreamURL(base, target).RequestURI(), without the URL
// and its escaping round trip when the joined path is plain (letters,
// digits and "-._~/:", as a v2 path is) and base adds nothing to it:
// the path is then its own escaping.
func requestURI(base *url.URL, target string) string {
	path, query, hasQuery := strings.Cut(target, "?")
	root := strings.TrimSuffix(base.EscapedPath(), "/")
	if base.Opaque != "" || base.ForceQuery || !plainPath(root) || !plainPath(path) || root+path == "" {
		return upstreamURL(base, target).RequestURI()
	}
	if hasQuery && query != "" {
		return root + path + "?" + query
	}
	return root + path
}

// plainPath reports a path whose every byte is one url.URL neither
// escapes nor unescapes.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' || c == ':') {
			return false
		}
	}
	return true
}

// interim passes an interim (1xx) answer on to the client, as
// ReverseProxy's client trace does.
func (w *answerWriter) interim(code int, header http.Header) error {
	h := w.Header()
	for k, vv := range header {
		h[k] = append(h[k], vv...)
	}
	w.WriteHeader(code)
	// WriteHeader does not clear the header after a 1xx.
	clear(h)
	return nil
}

// copyAnswer writes resp's body to w as ReverseProxy's copy does: a
// translated answer's parts where they are, anything else through a copy
// buffer; flushed after each write for an event stream.
func (p *Proxy) copyAnswer(w *answerWriter, resp *http.Response) error {
	flush := false
	if ct := resp.Header.Get("Content-Type"); len(ct) >= len("text/event-stream") && !strings.HasPrefix(ct, "application/") {
		// Parsed only when it might be one (ParseMediaType allocates).
		base, _, _ := mime.ParseMediaType(ct)
		flush = base == "text/event-stream"
	}
	if b, ok := resp.Body.(*answerBody); ok && !flush {
		for _, part := range b.rest {
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
		return nil
	}
	bp := p.pool.getPtr()
	defer p.pool.putPtr(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if rerr != nil && rerr != io.EOF && !errors.Is(rerr, context.Canceled) {
			p.rp.ErrorLog.Printf("httputil: ReverseProxy read error during body copy: %v", rerr)
		}
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flush {
				_ = w.rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// outRequest is the upstream request ServeHTTP gives ReverseProxy for a
// translated exchange: r with ctx and the translated body.
func (p *Proxy) outRequest(ctx context.Context, r *http.Request, ex *exchange) *http.Request {
	// A shallow copy: ReverseProxy makes its own deep one, and r's header
	// is not read again once translated.
	out := r.WithContext(ctx)
	out.Body = ex.sent.body()
	out.ContentLength = ex.sent.n
	out.TransferEncoding = nil
	out.GetBody = func() (io.ReadCloser, error) { return ex.sent.body(), nil }
	out.Header.Del("Content-Length")
	// The whole body is here: no 100-continue dance upstream.
	out.Header.Del("Expect")
	return out
}
