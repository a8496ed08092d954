package shadow

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The engine's own HTTP/1.1 client for shadow servers reached over plain
// http (https goes through Options.Transport, whose TLS, handshake
// timeout and session cache are worth more than a hand-written client
// would save next to a TLS record's cost). A copy is one request on a
// keep-alive connection taken from a small pool per server address: its
// head and body go out in one writev, its answer is read through the
// connection's own bufio.Reader, within the copy's deadline set on the
// connection (no goroutine, context watcher or timer per copy, where
// net/http's transport runs a reader and a writer goroutine per
// connection and hands every exchange between them over channels). A
// connection that failed, or whose answer was not read to its end, is
// closed, never reused.

// maxIdlePerHost bounds the idle connections kept per shadow server:
// as many as copies of one model may run at once by default, a few more.
const maxIdlePerHost = 16

// idleMax is how long an idle connection is kept: less than the idle
// timeouts servers commonly use (60 s and more), so that a connection
// taken from the pool is rarely one the server is closing.
const idleMax = 30 * time.Second

// maxHeadBytes bounds a shadow answer's head (status line and headers),
// as net/http's transport does (its MaxResponseHeaderBytes default).
const maxHeadBytes = 1 << 20

// clientConn is one keep-alive connection to a shadow server.
type clientConn struct {
	nc    net.Conn
	br    *bufio.Reader
	lr    io.LimitedReader // bounds the head's bytes (br reads through it)
	key   string
	idle  time.Time // when it went back to the pool
	head  []byte    // the request head, rebuilt per copy in place
	parts net.Buffers
	resp  response         // the answer being read, reused per copy
	body  io.LimitedReader // an answer's body of declared length (head.go)
	used  bool             // it carried an exchange before: a failure may be its server's idle close
}

// connPool keeps the idle connections per server address and every open
// one, so that Close can end the copies running.
type connPool struct {
	dialer net.Dialer
	mu     sync.Mutex
	idle   map[string][]*clientConn
	open   map[*clientConn]struct{}
	closed bool
}

func newConnPool() *connPool {
	return &connPool{
		dialer: net.Dialer{KeepAlive: 30 * time.Second},
		idle:   map[string][]*clientConn{}, open: map[*clientConn]struct{}{},
	}
}

// get returns an idle connection to key (host:port), the most recently
// used, or dials one that is done by deadline.
func (p *connPool) get(ctx context.Context, key string, deadline time.Time) (*clientConn, error) {
	now := time.Now()
	p.mu.Lock()
	for cs := p.idle[key]; len(cs) > 0; cs = p.idle[key] {
		c := cs[len(cs)-1]
		p.idle[key] = cs[:len(cs)-1]
		if now.Sub(c.idle) < idleMax {
			p.mu.Unlock()
			return c, nil
		}
		delete(p.open, c)
		_ = c.nc.Close()
	}
	p.mu.Unlock()
	return p.dial(ctx, key, deadline)
}

// dial opens a new connection to key.
func (p *connPool) dial(ctx context.Context, key string, deadline time.Time) (*clientConn, error) {
	d := p.dialer
	d.Deadline = deadline
	nc, err := d.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	c := &clientConn{nc: nc, key: key}
	c.lr.R = nc
	c.br = bufio.NewReaderSize(&c.lr, 16<<10)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	p.open[c] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

// put gives a connection whose exchange was read to its end back to the
// pool, or closes it when the pool for its server is full.
func (p *connPool) put(c *clientConn) {
	c.used = true
	c.idle = time.Now()
	p.mu.Lock()
	if !p.closed && len(p.idle[c.key]) < maxIdlePerHost {
		p.idle[c.key] = append(p.idle[c.key], c)
		p.mu.Unlock()
		return
	}
	delete(p.open, c)
	p.mu.Unlock()
	_ = c.nc.Close()
}

// discard closes a connection that cannot carry another exchange.
func (p *connPool) discard(c *clientConn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	_ = c.nc.Close()
}

// close closes every connection, idle or carrying a copy (whose read or
// write then fails at once), and every one dialled later.
func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.open {
		_ = c.nc.Close()
	}
	clear(p.open)
	clear(p.idle)
}

// exchange is one copy's request to a shadow server over http.
type exchange struct {
	u        *url.URL // the server's URL, its path the request's
	h        head
	parts    [][]byte
	n        int // the body's length
	deadline time.Time
}

// errStale is a reused connection that failed before any byte of the
// answer came: most likely the server closed it while idle. The request
// is sent again once on a new connection (a shadow copy's duplicate
// costs the shadow server a computation, never the client anything).
var errStale = errors.New("stale connection")

// roundTrip sends x on a pooled connection and returns its answer, the
// connection still attached to the answer's body: the caller reads the
// body, then calls finish.
func (e *Engine) roundTrip(ctx context.Context, x *exchange) (*response, *clientConn, error) {
	key := x.u.Host
	if x.u.Port() == "" {
		key = net.JoinHostPort(x.u.Hostname(), "80")
	}
	for attempt := 0; ; attempt++ {
		c, err := e.conns.get(ctx, key, x.deadline)
		if err != nil {
			return nil, nil, err
		}
		resp, err := c.exchange(x)
		if err == nil {
			return resp, c, nil
		}
		e.conns.discard(c)
		if !errors.Is(err, errStale) || attempt > 0 {
			return nil, nil, err
		}
	}
}

// finish gives c back to the pool when resp's body was read to its end
// and the server keeps the connection open; otherwise it closes c.
func (e *Engine) finish(c *clientConn, resp *response, readAll bool) {
	// A 101 switched the connection to another protocol: never reused.
	if readAll && !resp.close && resp.status != http.StatusSwitchingProtocols && c.br.Buffered() == 0 {
		e.conns.put(c)
		return
	}
	e.conns.discard(c)
}

// exchange writes x's request and reads the answer's head. The caller
// reads the body from resp.Body (which reads c.br).
func (c *clientConn) exchange(x *exchange) (*response, error) {
	if err := c.nc.SetDeadline(x.deadline); err != nil {
		return nil, err
	}
	c.head = appendHead(c.head[:0], x)
	c.parts = append(c.parts[:0], c.head)
	for _, p := range x.parts {
		if len(p) > 0 {
			c.parts = append(c.parts, p)
		}
	}
	// WriteTo consumes the net.Buffers value it is called on, not
	// c.parts's backing array: the slices are reused next copy.
	bufs := c.parts
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return nil, c.staleIf(err, true)
	}
	clear(c.parts) // the body's parts are the translation's pooled memory
	c.lr.N = maxHeadBytes
	// Wait for the answer's first bytes: a reused connection its server
	// closed fails here, before any byte of the answer.
	if _, err := c.br.Peek(1); err != nil {
		return nil, c.staleIf(err, c.lr.N == maxHeadBytes)
	}
	if c.readCommonHead() {
		c.lr.N = 1<<63 - 1
		return &c.resp, nil
	}
	for {
		// net/http's own parser for every answer the common form's does
		// not take (head.go): chunked with trailers, until close, interim
		// answers, a head over the buffer.
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			if c.lr.N == 0 {
				return nil, fmt.Errorf("an answer head over %d bytes", maxHeadBytes)
			}
			return nil, c.staleIf(err, c.lr.N == maxHeadBytes)
		}
		// The body is read past the head's bound (a body's own limit is
		// MaxBodyBytes, applied as it is read).
		c.lr.N = 1<<63 - 1
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			c.lr.N = maxHeadBytes
			continue // an interim answer (none is asked for): the final one follows
		}
		c.resp = response{answerHead: headOf(resp.StatusCode, resp.Header), length: resp.ContentLength, close: resp.Close, body: resp.Body}
		return &c.resp, nil
	}
}

// staleIf marks err as a stale connection's when nothing of the answer
// was read (empty) on a connection that carried an exchange before.
func (c *clientConn) staleIf(err error, empty bool) error {
	if c.used && empty && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

// isReset reports a connection reset or broken pipe: what writing to or
// reading from a connection its server closed gives.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// appendHead appends x's request head to b: the request line, Host,
// Content-Length and x's headers (a value with a control character is
// left out: it could cut the head).
func appendHead(b []byte, x *exchange) []byte {
	b = append(b, "POST "...)
	b = append(b, x.u.EscapedPath()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, x.u.Host...)
	b = append(b, "\r\nUser-Agent: tfsbridge-shadow\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(x.n), 10)
	b = append(b, "\r\nAccept-Encoding: identity\r\n"...)
	b = appendHeader(b, "Content-Type", x.h.contentType)
	if x.h.headerLength >= 0 {
		b = append(b, "Inference-Header-Content-Length: "...)
		b = strconv.AppendInt(b, int64(x.h.headerLength), 10)
		b = append(b, "\r\n"...)
	}
	b = appendHeader(b, "X-Request-Id", x.h.requestID)
	if x.h.bearer != "" {
		b = appendHeader(b, "Authorization", "Bearer "+x.h.bearer)
	} else if x.u.User != nil {
		// As http.Client sends a URL's user info.
		pw, _ := x.u.User.Password()
		cred := x.u.User.Username() + ":" + pw
		b = append(b, "Authorization: Basic "...)
		b = base64.StdEncoding.AppendEncode(b, []byte(cred))
		b = append(b, "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// appendHeader appends a header line when v is not empty and valid.
func appendHeader(b []byte, k, v string) []byte {
	if v == "" || !validHeaderValue(v) {
		return b
	}
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

// validHeaderValue reports a header value without control characters
// other than tab (net/http refuses such a request too).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
