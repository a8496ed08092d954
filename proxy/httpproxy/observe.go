package httpproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// observer streams an observed exchange's bodies (session.Action.Observe:
// a sampled exchange forwarded to a TF Serving server, whose shadow copy
// needs the request and the answer) through the session as they pass,
// unchanged: the request as the transport reads it, the answer as
// ReverseProxy copies it to the client. The transport reads the request on
// a goroutine of its own, which may outlive the handler, so every session
// call of the exchange from the request headers on holds mu, and detach
// ends them before the session closes.
type observer struct {
	mu   sync.Mutex
	sess *session.Session
	ctx  context.Context
	off  bool // detached: the handler is done with the session
}

// observe sets r's body up to be observed (a request without one was
// seen whole at the request headers).
func (ex *exchange) observe(ctx context.Context, r *http.Request, noBody bool) {
	ex.obs = &observer{sess: ex.sess, ctx: ctx}
	if !noBody {
		r.Body = &observedBody{ReadCloser: r.Body, o: ex.obs, request: true}
	}
}

// response sets the answer's body up to be observed, once the session
// has its status and headers.
func (o *observer) response(resp *http.Response) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.off {
		return
	}
	a := o.sess.ResponseHeaders(o.ctx, resp.StatusCode, headerGetter(resp.Header), false)
	if a.Observe {
		resp.Body = &observedBody{ReadCloser: resp.Body, o: o}
	}
}

// chunk hands a piece of a body to the session.
func (o *observer) chunk(p []byte, end, request bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.off {
		return
	}
	if request {
		o.sess.RequestChunk(o.ctx, p, end, nil)
	} else {
		o.sess.ResponseChunk(o.ctx, p, end, nil)
	}
}

// detach ends the session calls (nil-safe): a request body the transport
// still reads is no longer seen.
func (o *observer) detach() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.off = true
	o.mu.Unlock()
}

// observedBody is a body that shows each piece read to the session.
type observedBody struct {
	io.ReadCloser
	o       *observer
	request bool
	ended   bool
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	end := errors.Is(err, io.EOF)
	if !b.ended && (n > 0 || end) {
		b.ended = end
		b.o.chunk(p[:n], end, b.request)
	}
	return n, err
}
