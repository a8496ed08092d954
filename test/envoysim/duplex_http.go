package envoysim

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// upstreamReadSize bounds one data callback of the response body: each read of the
// upstream connection (normally one flushed write of the upstream) is one callback.
const upstreamReadSize = 64 << 10

// chunk is one data callback: the bytes the codec handed the filter chain at once, the
// end of the message (with its trailers, if any), or why the body could not be read.
type chunk struct {
	data     []byte
	eos      bool
	trailers *headerMap // with eos: the trailers that end the message (nil: none)
	err      error
}

// pump reads a body on its own goroutine and delivers it in data callbacks, so the filter
// can send chunks while it waits for replies, as Envoy's codec keeps dispatching data.
// It holds at most one chunk: a filter that does not take them stops the reading
// (Envoy's watermarks do the same).
type pump struct {
	ch      chan chunk
	quit    chan struct{}
	done    chan struct{}
	unblock func() // makes a pending Read return
	eof     *atomic.Bool
	once    sync.Once
}

// pumpSource is a body to pump: reads of at most size bytes from r; eof (when not nil) is
// set at the end of the body, trailers (when not nil) gives the trailers once r is at its
// end, unblock (when not nil) interrupts a Read when the pump is stopped.
type pumpSource struct {
	r        io.Reader
	size     int
	eof      *atomic.Bool
	trailers func() http.Header
	unblock  func()
}

func startPump(src pumpSource) *pump {
	p := &pump{ch: make(chan chunk), quit: make(chan struct{}), done: make(chan struct{}), unblock: src.unblock, eof: src.eof}
	go p.run(src)
	return p
}

func (p *pump) run(src pumpSource) {
	r, size, eof := src.r, max(src.size, 1), src.eof
	defer close(p.done)
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		c := chunk{data: append([]byte(nil), buf[:n]...)}
		switch {
		case errors.Is(err, io.EOF):
			c.eos = true
			if eof != nil {
				eof.Store(true)
			}
			if src.trailers != nil {
				c.trailers = trailerMap(src.trailers())
			}
		case err != nil:
			c.err = err
		case n == 0:
			continue
		}
		select {
		case p.ch <- c:
		case <-p.quit:
			return
		}
		if c.eos || c.err != nil {
			return
		}
	}
}

// finish stops the pump and waits for its goroutine (net/http forbids touching a request
// body once the handler returned).
func (p *pump) finish() {
	p.once.Do(func() {
		close(p.quit)
		select {
		case <-p.done:
		default:
			// A pump that has read the end of the body is only on its way
			// out: interrupting it would leave the read deadline on a
			// keep-alive connection whose next request would then fail.
			if p.unblock != nil && (p.eof == nil || !p.eof.Load()) {
				p.unblock()
			}
		}
	})
	<-p.done
}

// trailerMap is the trailers t as the codec hands them on: nil when none carries a value.
func trailerMap(t http.Header) *headerMap {
	m := &headerMap{}
	m.appendHTTPHeader(t)
	if len(m.entries) == 0 {
		return nil
	}
	return m
}

// knownPump delivers a body that is already in memory in one data callback (a buffer
// filter before ext_proc, or a local reply).
func knownPump(b []byte) *pump {
	p := &pump{ch: make(chan chunk, 1), quit: make(chan struct{}), done: make(chan struct{})}
	p.ch <- chunk{data: b, eos: true}
	close(p.done)
	return p
}

// serveDuplex is the decoder path when the request body mode is FULL_DUPLEX_STREAMED:
// the request streams through the processor into the upstream request while it arrives.
func (x *exchange) serveDuplex(h *headerMap, hasBody bool, buffered []byte) error {
	var src *pump
	switch {
	case buffered != nil:
		src = knownPump(buffered)
	case hasBody:
		src = startPump(pumpSource{r: x.r.Body, size: x.e.cfg.DownstreamReadSize, eof: &x.bodyRead,
			trailers: func() http.Header { return x.r.Trailer },
			unblock: func() {
				// Stop a read the client may never complete; the connection is
				// closed after the response anyway (the body was not read to its end).
				_ = http.NewResponseController(x.w).SetReadDeadline(time.Now())
			}})
	}
	if src != nil {
		defer src.finish()
	}
	up := &upstreamSink{x: x}
	lr, _, err := x.f.streamDuplex(phaseRequestHeaders, h, src, up)
	var resp *upstreamResponse
	if err == nil && lr == nil {
		resp, lr, err = up.result()
	} else {
		up.abort()
	}
	switch {
	case errors.Is(err, errBodyRead):
		return errAborted // the client went away mid-body
	case err != nil:
		return err
	case lr != nil:
		return x.localReply(lr, false)
	}
	x.rec.Details = "via_upstream"
	return x.encode(resp.headers, resp.body)
}

// upstreamSink is the router for a streamed request: the upstream request starts when the
// headers go on and its body is fed through a pipe as streamed_response chunks arrive.
type upstreamSink struct {
	x   *exchange
	pw  *io.PipeWriter
	res chan upstreamResult
	// trailer is the upstream request's Trailer map: net/http sends what it holds when
	// the body ends.
	trailer http.Header
}

type upstreamResult struct {
	resp *upstreamResponse
	lr   *localReply
	err  error
}

func (u *upstreamSink) headers(h *headerMap, bodyFollows bool) (*localReply, error) {
	body := noBody()
	var pr *io.PipeReader
	if bodyFollows {
		pr, u.pw = io.Pipe()
		body = streamBody(pr, -1)
	}
	req, lr := u.x.upstreamRequest(h, body)
	if lr != nil {
		u.abort()
		return lr, nil
	}
	if bodyFollows {
		u.trailer = http.Header{}
		req.Trailer = u.trailer
	}
	u.res = make(chan upstreamResult, 1)
	go func() {
		resp, lr, err := u.x.roundTrip(req)
		if pr != nil && resp == nil {
			// The request failed: later writes of the body must not block.
			_ = pr.CloseWithError(errAborted)
		}
		u.res <- upstreamResult{resp, lr, err}
	}()
	return nil, nil
}

func (u *upstreamSink) data(b []byte, eos bool) error {
	if u.pw == nil {
		return nil
	}
	if len(b) > 0 {
		if _, err := u.pw.Write(b); err != nil {
			// The upstream stopped reading (it answered, or failed): the rest of the
			// body has nowhere to go; the answer is what counts.
			u.pw = nil
			return nil
		}
	}
	if eos {
		_ = u.pw.Close()
		u.pw = nil
	}
	return nil
}

func (u *upstreamSink) trailers(t *headerMap) error {
	if u.pw == nil {
		return nil
	}
	for _, e := range t.entries {
		u.trailer.Add(e.key, e.value)
	}
	return u.data(nil, true)
}

// result waits for the upstream's answer to a request whose body was handed on whole.
func (u *upstreamSink) result() (*upstreamResponse, *localReply, error) {
	if u.res == nil {
		return nil, nil, errors.New("envoysim: full-duplex request ended before its headers went upstream")
	}
	r := <-u.res
	u.res = nil
	return r.resp, r.lr, r.err
}

// abort resets the upstream request (a local reply or a reset of the exchange) and waits
// for it to be gone.
func (u *upstreamSink) abort() {
	if u.pw != nil {
		_ = u.pw.CloseWithError(errAborted)
		u.pw = nil
	}
	if u.res != nil {
		<-u.res
		u.res = nil
	}
}

// encodeDuplex is the encoder path when the response body mode is FULL_DUPLEX_STREAMED:
// the response streams through the processor to the client while the upstream sends it.
func (x *exchange) encodeDuplex(h *headerMap, src bodySource) error {
	var p *pump
	switch {
	case src.empty():
	case src.known:
		p = knownPump(src.data)
	default:
		var unblock func()
		if c, ok := src.r.(io.Closer); ok {
			unblock = func() { _ = c.Close() }
		}
		p = startPump(pumpSource{r: src.r, size: upstreamReadSize, trailers: src.trailer, unblock: unblock})
	}
	if p != nil {
		defer p.finish()
	}
	down := &downstreamSink{x: x}
	lr, gone, err := x.f.streamDuplex(phaseResponseHeaders, h, p, down)
	switch {
	case errors.Is(err, errBodyRead) && !gone && x.routeTimedOut():
		// As in BUFFERED: the route timeout passed while ext_proc held the headers.
		return x.localReply(upstreamTimeout(), true)
	case err != nil:
		return errAborted
	case lr != nil && gone:
		// The headers are already downstream: Envoy can only reset the stream.
		x.rec.Details = lr.details
		x.note("local reply %d (%s) after the response headers went downstream: the stream is reset", lr.status, lr.details)
		return errAborted
	case lr != nil:
		return x.localReply(lr, true)
	}
	return nil
}

// downstreamSink is the downstream codec for a streamed response: the headers go out
// when the processor's headers reply is applied, then every chunk as it comes.
type downstreamSink struct {
	x    *exchange
	send bool
}

func (s *downstreamSink) headers(h *headerMap, bodyFollows bool) (*localReply, error) {
	src := noBody()
	if bodyFollows {
		src = streamBody(nil, -1)
	}
	send, err := s.x.writeHead(h, src)
	s.send = send
	return nil, err
}

func (s *downstreamSink) data(b []byte, _ bool) error {
	if !s.send || len(b) == 0 {
		return nil
	}
	if _, err := s.x.w.Write(b); err != nil {
		return errAborted
	}
	s.x.flush()
	return nil
}

func (s *downstreamSink) trailers(t *headerMap) error {
	if !s.send {
		return nil
	}
	// net/http sends these as the trailers of the chunked response when the handler ends.
	hdr := s.x.w.Header()
	for _, e := range t.entries {
		hdr.Add(http.TrailerPrefix+e.key, e.value)
	}
	return nil
}
