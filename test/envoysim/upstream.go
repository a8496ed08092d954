package envoysim

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// upstreamResponse is what the router hands to the encoder filters.
type upstreamResponse struct {
	headers *headerMap
	body    bodySource
}

// forward is the router: it sends the (mutated) request to the single upstream cluster and
// turns transport failures into Envoy's local replies.
func (x *exchange) forward(h *headerMap, body bodySource) (*upstreamResponse, *localReply, error) {
	req, lr := x.upstreamRequest(h, body)
	if lr != nil {
		return nil, lr, nil
	}
	return x.roundTrip(req)
}

// upstreamRequest builds the request the router sends upstream, or the local reply for
// a request that cannot be sent. It runs on the exchange's goroutine.
func (x *exchange) upstreamRequest(h *headerMap, body bodySource) (*http.Request, *localReply) {
	e := x.e
	path, _ := h.get(":path")
	method, _ := h.get(":method")
	authority, _ := h.get(":authority")
	if !validRequestTarget(path) {
		x.violation("the :path %q cannot be sent upstream", path)
		x.f.finish()
		return nil, &localReply{status: 500, details: "envoysim_invalid_path"}
	}
	contentLength := int64(-1)
	if cl, ok := h.get("content-length"); ok && !body.none {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || (body.length() >= 0 && n != body.length()) {
			x.violation("request content-length %q but the body sent upstream has %d bytes: a real Envoy forwards this broken framing", cl, body.length())
			x.f.finish()
			return nil, &localReply{status: 500, details: "envoysim_content_length_mismatch"}
		}
		contentLength = n
	}

	ctx := x.ctx
	if e.cfg.UpstreamTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.UpstreamTimeout)
		x.upstreamDone = append(x.upstreamDone, cancel)
	}
	x.route = ctx
	req, err := http.NewRequestWithContext(ctx, method, e.upstream.String(), body.reader())
	if err != nil {
		x.violation("the :method %q cannot be sent upstream: %v", method, err)
		x.f.finish()
		return nil, &localReply{status: 500, details: "envoysim_invalid_method"}
	}
	// Opaque carries the request target verbatim, query included, as Envoy forwards it.
	up := x.f.routed(e.upstream) // the route cache's cluster
	req.URL = &url.URL{Scheme: up.Scheme, Host: up.Host, Opaque: path}
	req.Host = authority
	req.Header = h.httpHeader()
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // net/http would add its own; Envoy adds none
	}
	if e.cfg.UpstreamTimeout > 0 {
		req.Header.Set("X-Envoy-Expected-Rq-Timeout-Ms", strconv.FormatInt(e.cfg.UpstreamTimeout.Milliseconds(), 10))
	}
	switch {
	case body.none:
		req.Body, req.ContentLength = nil, 0
	default:
		// Without a content-length net/http, like Envoy's HTTP/1 codec, sends chunked
		// (over HTTP/2: DATA frames and no content-length, as Envoy's HTTP/2 codec).
		req.ContentLength = contentLength
	}
	if body.tr != nil {
		// The request's trailers go on after its body (HTTP/2 trailers, or the
		// trailers of a chunked HTTP/1 request).
		req.Trailer = body.tr.httpHeader()
	}
	return req, nil
}

// roundTrip sends req and turns the answer into what the encoder filters see. In full
// duplex it runs beside the exchange's goroutine, which streams the request body, so it
// touches nothing but upstreamDone (read only after roundTrip returned).
func (x *exchange) roundTrip(req *http.Request) (*upstreamResponse, *localReply, error) {
	e := x.e
	ctx := req.Context()
	method := req.Method
	start := time.Now()
	resp, err := e.httpClient.Do(req)
	if err != nil {
		if x.ctx.Err() != nil {
			return nil, nil, errAborted
		}
		return nil, upstreamReply(ctx, err), nil
	}
	x.upstreamDone = append(x.upstreamDone, func() { _ = resp.Body.Close() })
	rh := &headerMap{}
	rh.add(":status", strconv.Itoa(resp.StatusCode))
	rh.appendHTTPHeader(resp.Header)
	bodyless := method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	// net/http's HTTP/1 client may drop the header it read the length from; HTTP/2 has
	// ContentLength 0 for a headers-only (trailers-only) answer that carried none.
	if resp.ProtoMajor == 1 && resp.ContentLength >= 0 && !bodyless && !rh.has("content-length") {
		rh.add("content-length", strconv.FormatInt(resp.ContentLength, 10))
	}
	// The router stamps this before the encoder filters run, so the processor sees it.
	rh.add("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
	src := streamBody(resp.Body, resp.ContentLength)
	src.trailer = func() http.Header { return resp.Trailer }
	if bodyless || resp.ContentLength == 0 {
		src = noBody()
	}
	return &upstreamResponse{headers: rh, body: src}, nil, nil
}

// upstreamReply maps a failed upstream request to the router's local reply (the texts are
// those of recent Envoy releases without a retry policy).
func upstreamReply(ctx context.Context, err error) *localReply {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return upstreamTimeout()
	case errors.Is(err, syscall.ECONNREFUSED):
		return &localReply{
			status:  503,
			body:    []byte("upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused"),
			details: "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}",
		}
	default:
		return &localReply{
			status:  503,
			body:    []byte("upstream connect error or disconnect/reset before headers. reset reason: connection termination"),
			details: "upstream_reset_before_response_started{connection_termination}",
		}
	}
}

// upstreamTimeout is the router's local reply when the route timeout passes
// (onResponseTimeout).
func upstreamTimeout() *localReply {
	return &localReply{status: 504, body: []byte("upstream request timeout"), details: "upstream_response_timeout"}
}

// validRequestTarget accepts what an HTTP/1 request line can carry: an origin-form target
// without spaces or control characters.
func validRequestTarget(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] == 0x7f {
			return false
		}
	}
	return true
}
