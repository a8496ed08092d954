package httpproxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/http1"
)

// A translated exchange's upstream request goes by proxy/internal/http1,
// the proxy's own HTTP/1.1 client, when it is small and goes over plain
// http to the default transport: the handler's goroutine writes it (head
// and body in one write) and reads the answer itself, where net/http's
// Transport hands every exchange between the caller and its per
// connection reader and writer goroutines. A caller's own Transport,
// https, and every pass-through or larger exchange keep net/http's
// Transport, whose TLS, proxying, HTTP/2 and body streaming are worth
// more than what this saves.

// directMaxBody is the largest request body sent by the direct client: it
// goes out in one write into the socket's buffer, so a server that
// answers before reading all of it cannot leave the write hanging.
const directMaxBody = 16 << 10

// newDirect is the direct client, with backend.NewTransport's bounds (idle
// connections per host and their timeout) and net/http's default bound
// on an answer's head; nil where idle connections cannot be checked
// before reuse (a POST is never sent twice).
func newDirect(dialTimeout time.Duration) *http1.Client {
	if !http1.IdleChecked {
		return nil
	}
	return http1.New(http1.Limits{MaxIdlePerHost: 256, IdleTimeout: 90 * time.Second, MaxHeadBytes: 10 << 20,
		ReadBufferSize: 4 << 10, DialTimeout: dialTimeout})
}

// directSuits reports whether req can go by the direct client d: plain
// http, a body in memory and small, and nothing that asks for the
// Transport's extras (it adds Accept-Encoding: gzip and undoes it when
// the request names none; the session always names identity).
func directSuits(d *http1.Client, req *http.Request, body []byte) bool {
	return d != nil && req.URL.Scheme == "http" && req.URL.User == nil && len(body) <= directMaxBody &&
		req.Method == http.MethodPost && len(req.Header["Accept-Encoding"]) > 0 && len(req.Trailer) == 0
}

// directRoundTrip sends req, its body in memory, by d, and returns the
// answer as the Transport would: its body reads the connection, which
// goes back to the pool when it has been read to its end and closed.
func directRoundTrip(d *http1.Client, req *http.Request, body []byte) (*http.Response, error) {
	ctx := req.Context()
	addr := http1.Addr(req.URL)
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	var buf [1 << 10]byte // the header lines, copied into the connection's buffer
	r, err := d.Do(ctx, &http1.Request{Method: req.Method, Addr: addr, Target: req.URL.RequestURI(), Host: host,
		Header: http1.AppendHTTPHeader(buf[:0], req.Header), Close: req.Close}, [][]byte{body})
	if err != nil {
		return nil, err
	}
	return directResponse(ctx, r, req), nil
}

// directResponse is the direct client's answer as the Transport gives
// one: its body reads the connection, which goes back to the pool when it
// has been read to its end and closed.
func directResponse(ctx context.Context, r *http1.Response, req *http.Request) *http.Response {
	return &http.Response{
		Status: statusLine(r.StatusCode), StatusCode: r.StatusCode, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header(), Body: &directBody{r: r, ctx: ctx}, ContentLength: r.ContentLength, Close: r.Closes(),
		Request: req,
	}
}

// statusLine is a status as net/http's Response.Status gives it.
func statusLine(code int) string {
	if code == http.StatusOK {
		return "200 OK"
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// directBody is an answer's body by the direct client, one per exchange
// (the http1.Response is its connection's, reused by the next exchange).
type directBody struct {
	r      *http1.Response
	ctx    context.Context
	closed bool
}

func (b *directBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.r.Read(p)
	return n, http1.ReadErr(b.ctx, err)
}

func (b *directBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	return b.r.Close()
}
