package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits are a Client's bounds; a zero field takes its default.
type Limits struct {
	// MaxIdlePerHost bounds the idle connections kept per server
	// address (default 16).
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection is kept (default 30 s:
	// less than the idle timeouts servers commonly use, so that a
	// connection taken from the pool is rarely one being closed).
	IdleTimeout time.Duration
	// MaxHeadBytes bounds an answer's head (default 1 MiB, net/http's
	// MaxResponseHeaderBytes default).
	MaxHeadBytes int64
	// ReadBufferSize is each connection's read buffer (default 16 KiB);
	// a head of the common form is parsed without copies when it fits.
	ReadBufferSize int
	// DialTimeout bounds a dial besides the exchange's deadline (default
	// 30 s).
	DialTimeout time.Duration
	// Max1xx is how many interim answers are skipped before the final
	// one (default 5, as net/http's Transport).
	Max1xx int
}

func (l Limits) withDefaults() Limits {
	if l.MaxIdlePerHost <= 0 {
		l.MaxIdlePerHost = 16
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 30 * time.Second
	}
	if l.MaxHeadBytes <= 0 {
		l.MaxHeadBytes = 1 << 20
	}
	if l.ReadBufferSize <= 0 {
		l.ReadBufferSize = 16 << 10
	}
	if l.DialTimeout <= 0 {
		l.DialTimeout = 30 * time.Second
	}
	if l.Max1xx <= 0 {
		l.Max1xx = 5
	}
	return l
}

// IdleChecked reports whether idle connections are checked before reuse
// on this platform (a non-blocking peek). Without it a reused connection
// the server closed fails its exchange, which only a Retry request
// survives.
const IdleChecked = canPeek

// Request is one request's head and how it is sent (its body is Do's
// own argument). The head is the request line, Host, Content-Length
// (the body's total length), Connection: close when Close is set, then
// Header. The Client copies what it needs of it before Do returns.
type Request struct {
	Method string // "" is POST
	Addr   string // host:port to connect to
	Target string // the request target: escaped path and query
	Host   string // the Host header
	// Header is the other header lines, each "Name: value\r\n"
	// (AppendHeader, AppendHTTPHeader): a caller may build them in a
	// buffer on its stack, as the Client copies them into the
	// connection's own.
	Header []byte
	// Deadline bounds the whole exchange, body included, with ctx's
	// own deadline; zero for none besides ctx's.
	Deadline time.Time
	// Close asks the server to close the connection after its answer.
	Close bool
	// Retry lets a request be sent again, once, on a new connection when
	// a reused one failed before any byte of its answer (the server
	// closed it while idle): a duplicate must be harmless. Its idle
	// connection is then taken without the check.
	Retry bool
	// Interim, when set, is given each interim (1xx) answer before the
	// final one, in place of ctx's httptrace Got1xxResponse; its error
	// ends the exchange.
	Interim func(code int, h http.Header) error
	// Unwatched: ctx's cancellation is not watched during the exchange
	// (no context.AfterFunc per exchange); it ends at the deadline or by
	// Client.Close.
	Unwatched bool
}

// Client keeps keep-alive connections per server address. It is safe
// for concurrent use.
type Client struct {
	lim    Limits
	dialer net.Dialer
	mu     sync.Mutex
	idle   map[string][]*conn
	open   map[*conn]struct{}
	closed bool
}

// New returns a Client within l.
func New(l Limits) *Client {
	l = l.withDefaults()
	return &Client{
		lim:    l,
		dialer: net.Dialer{Timeout: l.DialTimeout, KeepAlive: 30 * time.Second},
		idle:   map[string][]*conn{}, open: map[*conn]struct{}{},
	}
}

// conn is one keep-alive connection.
type conn struct {
	cl    *Client
	nc    net.Conn
	br    *bufio.Reader
	lr    io.LimitedReader // bounds the head's bytes (br reads through it)
	key   string
	idle  time.Time // when it went back to the pool
	used  bool      // it carried an exchange before: a failure may be its server's idle close
	peek  *peeker
	cut   func() // ends the I/O in progress (a cancellation), made once
	head  []byte // the request head, rebuilt per exchange in place
	parts net.Buffers
	bufs  net.Buffers // what WriteTo consumes of parts (a field: no escape per exchange)
	resp  Response    // the answer being read, reused per exchange
}

// Close closes every connection, idle or carrying an exchange (whose
// read or write then fails at once), and every one dialled later.
func (cl *Client) Close() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.closed = true
	for c := range cl.open {
		_ = c.nc.Close()
	}
	clear(cl.open)
	clear(cl.idle)
}

// Open is how many connections are open, idle or carrying an exchange.
func (cl *Client) Open() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.open)
}

// get returns an idle connection to key, the most recently used, still
// open at the server's end when check asks (a peek), or dials one.
func (cl *Client) get(ctx context.Context, key string, deadline time.Time, fresh, check bool) (*conn, error) {
	if !fresh {
		now := time.Now()
		cl.mu.Lock()
		for cs := cl.idle[key]; len(cs) > 0; cs = cl.idle[key] {
			c := cs[len(cs)-1]
			cs[len(cs)-1] = nil
			cl.idle[c.key] = cs[:len(cs)-1] // c.key: key itself stays the caller's
			cl.mu.Unlock()
			if now.Sub(c.idle) < cl.lim.IdleTimeout && (!check || !canPeek || c.peek.idleAlive()) {
				return c, nil
			}
			cl.discard(c)
			cl.mu.Lock()
		}
		cl.mu.Unlock()
	}
	// The conn keeps its own copy of key: the caller's Request, and its
	// header lines, then stay on the caller's stack.
	addr := strings.Clone(key)
	d := cl.dialer
	d.Deadline = deadline
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{cl: cl, nc: nc, key: addr, peek: newPeeker(nc)}
	c.cut = func() { _ = c.nc.SetDeadline(aLongTimeAgo) }
	c.lr.R = nc
	c.br = bufio.NewReaderSize(&c.lr, cl.lim.ReadBufferSize)
	c.resp.c = c
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		_ = nc.Close()
		return nil, net.ErrClosed
	}
	cl.open[c] = struct{}{}
	cl.mu.Unlock()
	return c, nil
}

// put keeps c for another exchange, or closes it when the pool for its
// server is full.
func (cl *Client) put(c *conn) {
	// The exchange's deadline would fail the peek, or the next exchange.
	if c.nc.SetDeadline(time.Time{}) != nil {
		cl.discard(c)
		return
	}
	c.used = true
	c.idle = time.Now()
	cl.mu.Lock()
	if !cl.closed && len(cl.idle[c.key]) < cl.lim.MaxIdlePerHost {
		cl.idle[c.key] = append(cl.idle[c.key], c)
		cl.mu.Unlock()
		return
	}
	delete(cl.open, c)
	cl.mu.Unlock()
	_ = c.nc.Close()
}

// discard closes a connection that cannot carry another exchange.
func (cl *Client) discard(c *conn) {
	cl.mu.Lock()
	delete(cl.open, c)
	cl.mu.Unlock()
	_ = c.nc.Close()
}

// aLongTimeAgo is a deadline in the past: it ends any I/O in progress.
var aLongTimeAgo = time.Unix(1, 0)

// errStale is a reused connection that failed before any byte of the
// answer came: most likely the server closed it while idle.
var errStale = errors.New("stale connection")

// Do sends req's head and body (its slices after the head in one
// writev, as they are; referred to only until Do returns) and reads the
// answer's head. The answer's body is read
// from the Response, which belongs to the connection: the caller reads
// it, then calls its Close (always), after which the Response is not to
// be used. ctx's deadline and, unless req.Unwatched, its cancellation
// end the exchange; its error is then context.Cause(ctx).
func (cl *Client) Do(ctx context.Context, req *Request, body [][]byte) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	deadline := detached(req.Deadline)
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	for attempt := 0; ; attempt++ {
		// A request that may be sent again skips the idle check: a stale
		// connection costs it a resend, rarer than a syscall per exchange.
		c, err := cl.get(ctx, req.Addr, deadline, attempt > 0, !req.Retry)
		if err != nil {
			return nil, cl.ctxErr(ctx, err)
		}
		resp, err := c.exchange(ctx, req, body, deadline)
		if err == nil {
			return resp, nil
		}
		cl.discard(c)
		if !req.Retry || attempt > 0 || !errors.Is(err, errStale) || ctx.Err() != nil {
			return nil, cl.ctxErr(ctx, err)
		}
	}
}

// detached is t without its location: the same instant, nothing of the
// caller's Request kept by reference (a deadline goes into the dialer and
// the connection), so that it stays on the caller's stack.
func detached(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(0, t.UnixNano())
}

// ctxErr is err, or ctx's cause when ctx ended (what ended the I/O).
func (cl *Client) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// exchange writes req and reads the answer's head on c.
func (c *conn) exchange(ctx context.Context, req *Request, body [][]byte, deadline time.Time) (*Response, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	r := &c.resp
	r.reset()
	if !req.Unwatched && ctx.Done() != nil {
		r.stop = context.AfterFunc(ctx, c.cut)
	}
	n := 0
	for _, p := range body {
		n += len(p)
	}
	c.head = appendRequestHead(c.head[:0], req, n)
	c.parts = append(c.parts[:0], c.head)
	for _, p := range body {
		if len(p) > 0 {
			c.parts = append(c.parts, p)
		}
	}
	// WriteTo consumes the net.Buffers value it is called on, not
	// c.parts's backing array: the slices are reused next exchange.
	c.bufs = c.parts
	err := c.peek.send(&c.bufs, c.nc)
	c.bufs = nil
	clear(c.parts) // the body's parts are the caller's memory
	if err != nil {
		return nil, r.fail(c.staleIf(err, true))
	}
	maxHead := c.cl.lim.MaxHeadBytes
	for n1xx := 0; ; n1xx++ {
		c.lr.N = maxHead
		// Wait for the answer's first bytes: a reused connection its
		// server closed fails here, before any byte of the answer.
		if _, err := c.br.Peek(1); err != nil {
			return nil, r.fail(c.staleIf(err, n1xx == 0 && c.lr.N == maxHead))
		}
		if c.readCommonHead() {
			c.lr.N = 1<<63 - 1
			r.close = r.close || req.Close
			return r, nil
		}
		hr, err := http.ReadResponse(c.br, nil)
		if err != nil {
			if c.lr.N == 0 {
				err = fmt.Errorf("an answer head over %d bytes", maxHead)
			}
			return nil, r.fail(c.staleIf(err, n1xx == 0 && c.lr.N == maxHead))
		}
		// The body is read past the head's bound (its own limit is the
		// caller's, applied as it is read).
		c.lr.N = 1<<63 - 1
		if hr.StatusCode >= 100 && hr.StatusCode < 200 && hr.StatusCode != http.StatusSwitchingProtocols {
			if n1xx == c.cl.lim.Max1xx {
				return nil, r.fail(errors.New("too many 1xx informational responses"))
			}
			// An interim answer (a ReverseProxy's trace passes it on, as
			// with the Transport): the final one follows.
			if req.Interim != nil {
				if err := req.Interim(hr.StatusCode, hr.Header); err != nil {
					return nil, r.fail(err)
				}
			} else if t := httptrace.ContextClientTrace(ctx); t != nil && t.Got1xxResponse != nil {
				if err := t.Got1xxResponse(hr.StatusCode, textproto.MIMEHeader(hr.Header)); err != nil {
					return nil, r.fail(err)
				}
			}
			continue
		}
		r.StatusCode, r.ContentLength, r.header = hr.StatusCode, hr.ContentLength, hr.Header
		// A 101 switched the connection to another protocol: never reused.
		r.close = hr.Close || req.Close || hr.StatusCode == http.StatusSwitchingProtocols
		r.body = hr.Body
		return r, nil
	}
}

// staleIf marks err as a stale connection's when nothing of the answer
// was read (empty) on a connection that carried an exchange before.
func (c *conn) staleIf(err error, empty bool) error {
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

// appendRequestHead appends req's head to b, its body n bytes long.
func appendRequestHead(b []byte, req *Request, n int) []byte {
	m := req.Method
	if m == "" {
		m = http.MethodPost
	}
	b = append(b, m...)
	b = append(b, ' ')
	if req.Target == "" {
		b = append(b, '/')
	}
	b = append(b, req.Target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, req.Host...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n"...)
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, req.Header...)
	return append(b, "\r\n"...)
}
