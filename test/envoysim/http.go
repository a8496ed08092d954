package envoysim

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
)

// ServeHTTP plays Envoy's HTTP connection manager for one downstream HTTP/1.1 or HTTP/2
// (h2c) request: header normalisation, an optional buffer filter, the ext_proc filter, the
// router and the encoder path back to the client.
func (e *Envoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !e.enter() {
		http.Error(w, "envoysim: closed", http.StatusServiceUnavailable)
		return
	}
	defer e.inflight.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(e.ctx, cancel)()

	// The body may still be read while a local reply is written, as in Envoy.
	_ = http.NewResponseController(w).EnableFullDuplex()
	x := &exchange{e: e, ctx: ctx, w: w, r: r}
	err := x.serve()
	e.journal.exchange(x.rec)
	if err != nil {
		// Envoy resets the downstream stream; net/http does that for this sentinel.
		panic(http.ErrAbortHandler)
	}
	if !x.bodyRead.Load() && r.ProtoMajor == 1 {
		delayedClose(w, r)
	}
}

// delayedCloseTimeout is the connection manager's delayed_close_timeout
// default.
const delayedCloseTimeout = time.Second

// delayedClose is Envoy's delayed close of an HTTP/1 connection answered
// before its request body was read (the answer says Connection: close):
// the answer is flushed and the socket stays open until the client closes
// or delayed_close_timeout passes, so that a client still writing its
// body reads the answer before the close resets the connection. net/http
// closes at once when the request said Connection: close, and the reset
// could then beat the answer to a client still writing (a flaky 413 seen
// as "connection reset by peer"). The rest of the body is read and thrown
// away here, where Envoy leaves it unread: the client sees the same
// answer, and the connection ends without a reset.
func delayedClose(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || rc.SetReadDeadline(time.Now().Add(delayedCloseTimeout)) != nil {
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
}

// exchange is one downstream request on its way through the simulated Envoy.
type exchange struct {
	e   *Envoy
	ctx context.Context
	w   http.ResponseWriter
	r   *http.Request
	f   *filter
	rec Exchange
	// reqHeaders is the request header map as the filters left it: a local reply to a
	// gRPC request (content-type application/grpc...) is a trailers-only gRPC answer.
	reqHeaders *headerMap
	// upstreamDone releases the upstream request (its timeout context and body).
	upstreamDone []func()
	// route is the upstream request's context: it expires with the route timeout,
	// which runs until the upstream response is complete.
	route context.Context
	// bodyRead reports that the downstream request body was read to its end.
	// A response sent before that closes the connection, as Envoy's HTTP/1
	// codec does: the rest of the body is never read, so the connection
	// cannot carry another request.
	// It is atomic: the upstream transport reads a streamed body on its
	// own goroutine.
	bodyRead atomic.Bool
}

// serve runs the decoder path and hands the result to the encoder path.
func (x *exchange) serve() error {
	e := x.e
	h := requestHeaders(x.r)
	id, _ := h.get("x-request-id")
	x.rec = Exchange{RequestID: id, Method: x.r.Method, Path: requestPath(x.r), Proto: x.r.Proto}
	x.reqHeaders = h
	x.f = newFilter(x.ctx, e, &x.rec)
	x.f.upstream = e.pickRoute(h)
	defer x.f.closeStream()
	defer func() {
		for _, done := range x.upstreamDone {
			done()
		}
	}()

	hasBody := x.r.ContentLength != 0
	x.bodyRead.Store(!hasBody)
	var body []byte
	buffered := false
	limit := e.cfg.BufferLimit
	if e.cfg.BufferFilterMaxBytes > 0 && hasBody {
		// envoy.filters.http.buffer sits before ext_proc: it stops the chain until the
		// whole body is in, so an oversized request is refused before ext_proc saw it.
		b, over, err := readLimited(x.r.Body, e.cfg.BufferFilterMaxBytes, x.r.ContentLength)
		if err != nil {
			return errAborted
		}
		if over {
			return x.localReply(payloadTooLarge(), false)
		}
		body, buffered, limit = b, true, e.cfg.BufferFilterMaxBytes
		x.bodyRead.Store(true)
		if !h.has("content-length") {
			h.set("content-length", strconv.Itoa(len(b)))
		}
	}

	if x.f.dec.duplex() {
		if !buffered {
			body = nil
		}
		return x.serveDuplex(h, hasBody, body)
	}

	var pre *prefetch
	if hasBody && !buffered {
		// Envoy reads the body while the processor looks at the headers; reading it here
		// also lets net/http notice a client that goes away (it watches the connection
		// only once the body is consumed).
		pre = startPrefetch(x.r.Body, limit, x.r.ContentLength)
		defer pre.finish()
	}

	lr, err := x.f.onHeaders(phaseRequestHeaders, h, !hasBody, &body)
	if err != nil {
		return err
	}
	if lr != nil {
		return x.localReply(lr, false)
	}

	up := noBody()
	switch {
	case x.f.dec.replaced:
		up = knownBody(x.f.dec.replacedBody)
	case !hasBody:
	case buffered:
		if x.f.dec.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED && !x.f.complete {
			if lr, err := x.f.onBody(phaseRequestBody, &body); err != nil || lr != nil {
				return x.orLocal(lr, err)
			}
		}
		up = knownBody(body)
	case x.f.dec.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED && !x.f.complete:
		if err := pre.wait(x.ctx); err != nil {
			return err
		}
		if pre.over {
			// The connection manager's local 413 runs the encoder filters, ext_proc
			// included: the processor sees it as response headers and body.
			return x.localReply(payloadTooLarge(), false)
		}
		body = pre.data
		x.bodyRead.Store(true)
		// net/http fills the trailers once the body was read to its end.
		tr := trailerMap(x.r.Trailer)
		if lr, err := x.f.onBufferedBody(phaseRequestBody, &body, tr); err != nil || lr != nil {
			return x.orLocal(lr, err)
		}
		up = knownBody(body)
		up.tr = tr
	default:
		if err := pre.wait(x.ctx); err != nil {
			return err
		}
		up = streamBody(&eofReader{r: io.MultiReader(bytes.NewReader(pre.data), x.r.Body), eof: &x.bodyRead}, x.r.ContentLength)
	}

	resp, lr, err := x.forward(h, up)
	if err != nil {
		return err
	}
	if lr != nil {
		return x.localReply(lr, false)
	}
	x.rec.Details = "via_upstream"
	return x.encode(resp.headers, resp.body)
}

// orLocal returns err, or sends lr as a request-path local reply.
func (x *exchange) orLocal(lr *localReply, err error) error {
	if err != nil {
		return err
	}
	return x.localReply(lr, false)
}

// prefetch reads a request body in the background, keeping at most limit+1 bytes.
type prefetch struct {
	done chan struct{}
	data []byte
	over bool
	err  error
}

func startPrefetch(r io.Reader, limit int, size int64) *prefetch {
	p := &prefetch{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.data, p.over, p.err = readLimited(r, limit, size)
	}()
	return p
}

// wait blocks until the prefetch is done; a read error or a cancelled ctx aborts.
func (p *prefetch) wait(ctx context.Context) error {
	select {
	case <-p.done:
		if p.err != nil {
			return errAborted
		}
		return nil
	case <-ctx.Done():
		return errAborted
	}
}

// finish waits for the reader: net/http forbids touching the body after ServeHTTP
// returns. It ends at the end of the body or when the connection closes.
func (p *prefetch) finish() { <-p.done }

// encode is the encoder path: ext_proc response processing, then the downstream codec.
func (x *exchange) encode(h *headerMap, src bodySource) error {
	f := x.f
	if f.enc.duplex() && !f.complete {
		return x.encodeDuplex(h, src)
	}
	var none []byte
	lr, err := f.onHeaders(phaseResponseHeaders, h, src.empty(), &none)
	if err != nil {
		return err
	}
	if lr != nil {
		return x.localReply(lr, true)
	}
	out := src
	switch {
	case f.enc.replaced:
		out = knownBody(f.enc.replacedBody)
	case src.empty():
	case f.enc.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED && !f.complete:
		b, over, err := src.readAll(x.e.cfg.BufferLimit)
		if err != nil {
			if x.routeTimedOut() {
				// The route timeout passed while ext_proc held the response headers
				// (a slow body): the router's local reply finds response headers in
				// the filter chain but none sent downstream, so the filter manager
				// sends it straight to the codec (sendDirectLocalReply), bypassing
				// ext_proc.
				return x.localReply(upstreamTimeout(), true)
			}
			// The upstream reset mid-body after the headers went into the filter chain.
			return errAborted
		}
		if over {
			return x.localReply(&localReply{status: 500, body: []byte("Internal Server Error"), details: "response_payload_too_large"}, true)
		}
		// The upstream's trailers are known once its body was read to its end.
		tr := src.trailers()
		lr, err := f.onBufferedBody(phaseResponseBody, &b, tr)
		if err != nil {
			return err
		}
		if lr != nil {
			return x.localReply(lr, true)
		}
		out = knownBody(b)
		out.tr = tr
	}
	return x.write(h, out)
}

// routeTimedOut reports that the route timeout has passed.
func (x *exchange) routeTimedOut() bool {
	return x.route != nil && errors.Is(x.route.Err(), context.DeadlineExceeded)
}

// localReply sends a response made by Envoy. On the request path (direct=false) it runs
// through the encoder filters, so ext_proc processes it unless processing is complete; on
// the response path Envoy bypasses the filters (sendDirectLocalReply).
func (x *exchange) localReply(lr *localReply, direct bool) error {
	x.e.stats.localReplies.Add(1)
	x.rec.Details = lr.details
	h, body := x.localReplyHeaders(lr)
	if direct {
		return x.write(h, knownBody(body))
	}
	return x.encode(h, knownBody(body))
}

// localReplyHeaders builds a local reply the way Http::Utility::prepareLocalReply does:
// :status, the processor's header mutation (immediate_response), then content-length and a
// text/plain content-type for a non-empty body.
func (x *exchange) localReplyHeaders(lr *localReply) (*headerMap, []byte) {
	h := &headerMap{}
	h.add(":status", strconv.Itoa(lr.status))
	x.mutateLocalReply(h, lr)
	if isGRPCRequest(x.reqHeaders) {
		return x.grpcLocalReply(h, lr), nil
	}
	if len(lr.body) > 0 {
		h.set("content-length", strconv.Itoa(len(lr.body)))
		if !h.has("content-type") {
			h.set("content-type", "text/plain")
		}
	} else {
		h.del("content-length")
		h.del("content-type")
	}
	return h, lr.body
}

// mutateLocalReply applies immediate_response.headers (prepareLocalReply's modify_headers).
func (x *exchange) mutateLocalReply(h *headerMap, lr *localReply) {
	if lr.headers != nil {
		res, err := applyHeaderMutation(h, lr.headers, false, false)
		x.e.stats.rejectedMutations.Add(uint64(len(res.ignored)))
		for _, s := range res.ignored {
			x.note("immediate_response header mutation rejected: %s", s)
		}
		for _, k := range res.emptied {
			x.violation("immediate_response sets %s with the string `value`, which Envoy ignores: the header is empty", k)
		}
		if err != nil {
			x.violation("immediate_response header mutation failed (%v): Envoy logs it and sends the reply anyway", err)
		}
	}
}

// write is the downstream HTTP/1 codec plus the connection manager's last touches.
func (x *exchange) write(h *headerMap, src bodySource) error {
	sendBody, err := x.writeHead(h, src)
	if err != nil || !sendBody {
		return err
	}
	if src.known {
		if len(src.data) > 0 {
			if _, err := x.w.Write(src.data); err != nil {
				return errAborted
			}
		}
		x.writeTrailers(src.tr)
		return nil
	}
	if src.r != nil {
		// Through a plain Writer: after the flushed headers net/http's ReadFrom
		// would write a small body straight to the socket, so the client could
		// see the whole response before the exchange is in the journal.
		if _, err := io.Copy(struct{ io.Writer }{x.w}, src.r); err != nil {
			return errAborted
		}
		// A body that streamed through (body mode NONE) may end with trailers.
		if tr := src.trailers(); tr != nil {
			lr, err := x.f.onTrailers(phaseResponseTrailers, tr)
			if err != nil || lr != nil {
				// The headers went downstream: Envoy can only reset the stream.
				return errAborted
			}
			x.writeTrailers(tr)
		}
	}
	return nil
}

// writeTrailers ends the response with trailers t (nil: none). net/http sends them as
// HTTP/2 trailers, or as the trailers of a chunked HTTP/1 response.
func (x *exchange) writeTrailers(t *headerMap) {
	if t == nil {
		return
	}
	hdr := x.w.Header()
	for _, e := range t.entries {
		hdr.Add(http.TrailerPrefix+e.key, e.value)
	}
}

// writeHead sends the response headers of a body src (which may still be streaming, with
// no reader yet) and reports whether a body goes on the wire after them.
func (x *exchange) writeHead(h *headerMap, src bodySource) (bool, error) {
	sv, _ := h.get(":status")
	code, err := strconv.Atoi(sv)
	if err != nil || code < 100 || code > 999 {
		x.violation("response :status %q cannot be sent", sv)
		return false, x.writeSimError("envoysim_invalid_status")
	}
	// A body-less message (HEAD, 204, 304, end_stream on the headers) may declare any length.
	if cl, ok := h.get("content-length"); ok && !src.none && src.length() >= 0 {
		if n, err := strconv.ParseInt(cl, 10, 64); err != nil || n != src.length() {
			x.violation("response content-length %q but the body has %d bytes: a real Envoy forwards this broken framing and the client hangs or truncates", cl, src.length())
			return false, x.writeSimError("envoysim_content_length_mismatch")
		}
	}
	hdr := x.w.Header()
	for _, en := range h.entries {
		if !strings.HasPrefix(en.key, ":") {
			hdr.Add(en.key, en.value)
		}
	}
	if !h.has("content-type") {
		hdr["Content-Type"] = nil // no content sniffing: Envoy adds nothing
	}
	hdr.Set("Server", "envoy")
	h2 := x.r.ProtoMajor == 2
	if !x.bodyRead.Load() && !h2 {
		hdr.Set("Connection", "close")
	}
	chunked := false
	switch {
	case h.has("content-length"):
	case h2:
		// Envoy's HTTP/2 codec adds no content-length; net/http would compute one
		// for a body written before the handler returns unless the key is present.
		hdr["Content-Length"] = nil
	case src.length() == 0 && src.tr == nil:
		hdr.Set("Content-Length", "0") // Envoy's HTTP/1 codec does this for end_stream headers
	default:
		chunked = true
	}
	x.w.WriteHeader(code)
	x.rec.Status = code
	if chunked || (!src.known && !src.none) {
		// No content-length: Envoy's HTTP/1 codec uses chunked encoding; flushing the
		// headers first makes net/http do the same instead of computing a length. A
		// streaming body's headers go out at once too, as with Envoy, so a failure
		// mid-body is a reset after them.
		x.flush()
	}
	if x.r.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified {
		return false, nil // no body on the wire; the declared length stays in the headers
	}
	return !src.none, nil
}

// flush pushes what was written downstream onto the wire.
func (x *exchange) flush() {
	if fl, ok := x.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// writeSimError replaces a response the stand-in cannot send faithfully by a 500.
func (x *exchange) writeSimError(details string) error {
	x.f.finish()
	x.rec.Details = details
	h, body := x.localReplyHeaders(&localReply{status: 500, details: details})
	return x.write(h, knownBody(body))
}

func (x *exchange) violation(format string, args ...any) {
	x.e.journal.violation(fmt.Sprintf("%s: %s", x.f.label, fmt.Sprintf(format, args...)))
}

func (x *exchange) note(format string, args ...any) {
	x.e.journal.note("%s: "+format, append([]any{x.f.label}, args...))
}

// payloadTooLarge is the connection manager's reply to a request body over the buffer limit.
func payloadTooLarge() *localReply {
	return &localReply{status: 413, body: []byte("Payload Too Large"), details: "request_payload_too_large"}
}

// requestHeaders builds the header map Envoy's HTTP/1 codec and connection manager hand to
// the filters: pseudo-headers first, lower-cased names, hop-by-hop headers stripped,
// x-forwarded-proto and x-request-id added when missing.
func requestHeaders(r *http.Request) *headerMap {
	h := &headerMap{}
	h.add(":authority", r.Host)
	h.add(":path", requestPath(r))
	h.add(":method", r.Method)
	h.add(":scheme", "http")
	h.appendHTTPHeader(r.Header)
	if r.ContentLength > 0 && !h.has("content-length") {
		h.add("content-length", strconv.FormatInt(r.ContentLength, 10))
	}
	if !h.has("x-forwarded-proto") {
		h.add("x-forwarded-proto", "http")
	}
	if !h.has("x-request-id") {
		h.add("x-request-id", newRequestID())
	}
	return h
}

// requestPath is the request target as the client sent it (Envoy does not normalise
// paths by default).
func requestPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// newRequestID returns a random UUID, the format of Envoy's generated x-request-id.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// bodySource is a message body: absent, fully known, or still streaming from its peer.
type bodySource struct {
	none  bool
	known bool
	data  []byte
	r     io.Reader
	size  int64 // declared size of a streaming body, -1 if unknown
	// trailer gives a streaming body's trailers once r reached its end (net/http fills
	// them in then, over HTTP/2 into a map it creates only at that point); nil when the
	// body cannot have any.
	trailer func() http.Header
	// tr are the trailers that end a known body (after processing); nil when none.
	tr *headerMap
}

func noBody() bodySource                         { return bodySource{none: true} }
func knownBody(b []byte) bodySource              { return bodySource{known: true, data: b} }
func streamBody(r io.Reader, n int64) bodySource { return bodySource{r: r, size: n} }

// trailers returns a streaming body's trailers once it was read to its end (nil: none).
func (b bodySource) trailers() *headerMap {
	if b.trailer == nil {
		return nil
	}
	return trailerMap(b.trailer())
}

// empty reports whether the headers carry end_of_stream (no body and no trailers follow).
func (b bodySource) empty() bool { return b.none || (b.known && len(b.data) == 0 && b.tr == nil) }

// length is the body length, or -1 while it is unknown.
func (b bodySource) length() int64 {
	switch {
	case b.none:
		return 0
	case b.known:
		return int64(len(b.data))
	default:
		return b.size
	}
}

// reader returns the body for an outgoing request (nil when there is none).
func (b bodySource) reader() io.Reader {
	switch {
	case b.none:
		return nil
	case b.known:
		return bytes.NewReader(b.data)
	default:
		return b.r
	}
}

// readAll buffers the body, refusing (over=true) more than limit bytes.
func (b bodySource) readAll(limit int) ([]byte, bool, error) {
	switch {
	case b.none:
		return []byte{}, false, nil
	case b.known:
		return b.data, len(b.data) > limit, nil
	default:
		return readLimited(b.r, limit, -1)
	}
}

// eofReader records in *eof that r was read to its end.
type eofReader struct {
	r   io.Reader
	eof *atomic.Bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof.Store(true)
	}
	return n, err
}

// readLimited reads r to the end but never holds more than limit+1 bytes: one byte over the
// limit is enough to know the body is too large. size, when known (the content-length, -1
// otherwise), sizes the buffer at once: Envoy holds a body in a chain of slices and never
// copies it to grow it, as io.ReadAll's doubling would (for a large body that copying and
// the zeroing of each new buffer were most of the stand-in's own cost per exchange).
func readLimited(r io.Reader, limit int, size int64) ([]byte, bool, error) {
	lr := io.LimitReader(r, int64(limit)+1)
	if size < 0 || size > int64(limit) {
		b, err := io.ReadAll(lr)
		if err != nil {
			return nil, false, err
		}
		return b, len(b) > limit, nil
	}
	// bytes.Buffer grows unless MinRead bytes are free before each read.
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(lr); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), buf.Len() > limit, nil
}

// isGRPCRequest is Grpc::Common::hasGrpcContentType on the request headers: content-type
// application/grpc, or application/grpc+<codec> / application/grpc;<params>.
func isGRPCRequest(h *headerMap) bool {
	if h == nil {
		return false
	}
	ct, _ := h.get("content-type")
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// grpcLocalReply turns local reply headers h into the trailers-only gRPC answer
// Utility::prepareLocalReply makes for a gRPC request: :status 200, content-type
// application/grpc, grpc-status (kept when the processor's mutation set it, else
// immediate_response.grpc_status, else derived from the HTTP status), the body as a
// percent-encoded grpc-message, no content-length, and no body.
func (x *exchange) grpcLocalReply(h *headerMap, lr *localReply) *headerMap {
	h.set(":status", "200")
	h.set("content-type", "application/grpc")
	if v, _ := h.get("grpc-status"); v == "" {
		code := httpToGRPCStatus(lr.status)
		if lr.grpcStatus != nil {
			code = *lr.grpcStatus
		}
		h.set("grpc-status", strconv.FormatUint(uint64(code), 10))
	}
	if len(lr.body) > 0 && x.r.Method != http.MethodHead {
		h.set("grpc-message", percentEncode(lr.body))
	}
	h.del("content-length")
	return h
}

// httpToGRPCStatus is Grpc::Utility::httpToGrpcStatus.
func httpToGRPCStatus(code int) uint32 {
	switch code {
	case 400:
		return 13 // INTERNAL
	case 401:
		return 16 // UNAUTHENTICATED
	case 403:
		return 7 // PERMISSION_DENIED
	case 404:
		return 12 // UNIMPLEMENTED
	case 429, 502, 503, 504:
		return 14 // UNAVAILABLE
	default:
		return 2 // UNKNOWN
	}
}

// percentEncode is Envoy's PercentEncoding::encode(value, "%") for grpc-message: '%' and
// every byte outside printable ASCII become %XX.
func percentEncode(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&sb, "%%%02X", c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}
