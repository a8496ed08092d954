package shadow

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/http1"
)

// Shadow servers reached over plain http get the copies through
// proxy/internal/http1, the proxy's own HTTP/1.1 client (https goes
// through Options.Transport, whose TLS, handshake timeout and session
// cache are worth more than a hand-written client would save next to a
// TLS record's cost): a copy's head and body go out in one writev on a
// pooled keep-alive connection, its answer is read within the copy's
// deadline set on the connection, with no goroutine, context watcher or
// timer per copy.

// newClient is the engine's HTTP/1.1 client: as many idle connections
// per server as copies of one model may run at once by default, a few
// more; a head bounded as net/http's transport bounds it.
func newClient() *http1.Client {
	return http1.New(http1.Limits{MaxIdlePerHost: 16, IdleTimeout: 30 * time.Second, MaxHeadBytes: 1 << 20, ReadBufferSize: 16 << 10})
}

// answerHead is what a copy uses of its answer's head.
type answerHead struct {
	status          int
	contentType     string
	contentEncoding string
	headerLength    string // Inference-Header-Content-Length
}

// headGetter is an answer's header: net/http's, or http1's.
type headGetter interface{ Get(string) string }

// headOf is what a copy uses of an answer's head.
func headOf(status int, h headGetter) answerHead {
	return answerHead{
		status: status, contentType: h.Get("Content-Type"), contentEncoding: h.Get("Content-Encoding"),
		headerLength: h.Get("Inference-Header-Content-Length"),
	}
}

// postDirect is post over the engine's own client: the head and the
// parts in one writev, the answer read on the pooled connection. A copy
// may be sent twice when a reused connection failed before its answer
// (its duplicate costs the shadow server a computation, never the
// client anything).
func (e *Engine) postDirect(ctx context.Context, c *Copy, w *scratch, u *url.URL, parts [][]byte, release func(), h head) (answerHead, []byte, error) {
	addr := http1.Addr(u)
	var buf [512]byte // the header lines, copied into the connection's buffer
	resp, err := e.conns.Do(ctx, &http1.Request{
		Addr: addr, Target: u.EscapedPath(), Host: u.Host, Header: appendCopyHeader(buf[:0], u, &h),
		Deadline: c.deadline, Retry: true,
		Unwatched: true, // Close cuts every connection, the deadline is on the connection
	}, parts)
	if release != nil {
		release() // written (or failed): nothing refers to the parts any more
	}
	if err != nil {
		return answerHead{}, nil, fmt.Errorf("%w: POST %s: %w", errNoAnswer, u.Redacted(), err)
	}
	defer resp.Close()
	body, err := e.readBody(c, w, resp, resp.ContentLength)
	if err != nil {
		return answerHead{}, nil, err
	}
	return headOf(resp.StatusCode, resp), body, nil
}

// appendCopyHeader appends a copy's request header lines to b: what
// net/http would send of h, the URL's user info as http.Client sends it
// unless the server has a bearer token.
func appendCopyHeader(b []byte, u *url.URL, h *head) []byte {
	b = append(b, "User-Agent: tfsbridge-shadow\r\nAccept-Encoding: identity\r\n"...)
	b = http1.AppendHeader(b, "Content-Type", h.contentType)
	if h.headerLength >= 0 {
		b = append(b, "Inference-Header-Content-Length: "...)
		b = strconv.AppendInt(b, int64(h.headerLength), 10)
		b = append(b, "\r\n"...)
	}
	b = http1.AppendHeader(b, "X-Request-Id", h.requestID)
	if h.bearer != "" {
		b = http1.AppendHeader(b, "Authorization", "Bearer "+h.bearer)
	} else if u.User != nil {
		pw, _ := u.User.Password()
		cred := u.User.Username() + ":" + pw
		b = append(b, "Authorization: Basic "...)
		b = base64.StdEncoding.AppendEncode(b, []byte(cred))
		b = append(b, "\r\n"...)
	}
	return b
}
