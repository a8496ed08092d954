package httpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// Translated bodies stream through the proxy as they do through Envoy in
// full-duplex mode: the client's TF JSON is read in copy-buffer pieces
// and handed to the session as it arrives (never held whole), and the v2
// answer is read the same way and its translation written to the client
// as the session produces it, through a pipe, so a slow client holds
// back the upstream read rather than letting the answer pile up here.

// feed reads body in pieces of the proxy's copy buffers and gives them to
// event until it stops answering Pending. A read error is returned with
// the bytes read so far; the session has seen only those.
func (p *Proxy) feed(body io.Reader, limit int64, event func(chunk []byte, end bool) session.Action) (session.Action, int64, error) {
	bp := p.pool.getPtr()
	defer p.pool.putPtr(bp)
	buf := *bp
	// One byte over the limit is enough for the session to refuse it.
	r := io.LimitReader(body, limit+1)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		end := errors.Is(err, io.EOF)
		if err != nil && !end {
			return session.Action{}, total, err
		}
		if n > 0 || end {
			if a := event(buf[:n], end); a.Verdict != session.Pending || end {
				return a, total, nil
			}
		}
	}
}

// requestSink gathers a streamed translation's upstream request: the
// header changes and the body pieces, which stay valid until the session
// is closed, so the upstream request reads them where they are.
type requestSink struct {
	a     session.Action
	parts net.Buffers
	n     int64
}

func (s *requestSink) Headers(a session.Action) error { s.a = a; return nil }

func (s *requestSink) Body(p []byte, _ bool) error {
	if len(p) > 0 {
		s.parts = append(s.parts, p)
		s.n += int64(len(p))
	}
	return nil
}

// body returns a fresh reader over the gathered pieces (GetBody may ask
// for it again on a retry). A body of one piece (every small request: the
// session gathers small parts into one) is a *bytes.Reader, which
// net/http knows to be in memory: it then writes the request's headers and
// body with one write instead of flushing the headers first (two writes,
// two packets, for each small exchange).
func (s *requestSink) body() io.ReadCloser {
	if len(s.parts) == 1 {
		return io.NopCloser(bytes.NewReader(s.parts[0]))
	}
	parts := append(net.Buffers(nil), s.parts...)
	return io.NopCloser(&parts)
}

// readRequest streams the client's body into the session. It returns the
// action to answer with when the exchange ends here (ok false), else the
// gathered upstream request.
func (p *Proxy) readRequest(ctx context.Context, ex *exchange, r *http.Request) (*requestSink, session.Action, bool) {
	sess := ex.sess
	sink := &requestSink{}
	// A wait for budget inside RequestChunk is bounded by the body's own
	// deadline; an older exchange that needs what this body holds while
	// the client takes its time ends the read at once (giveWayOn).
	bctx := withDeadline(ctx, p.cfg.ReadTimeout)
	defer bctx.stop()
	stop := ex.body.giveWayOn(sess.Admission())
	defer stop()
	a, n, err := p.feed(r.Body, sess.MaxBodyBytes(), func(chunk []byte, end bool) session.Action {
		return sess.RequestChunk(bctx, chunk, end, sink)
	})
	if err != nil {
		msg := "Failed to read the request body"
		switch {
		case inflight.IsCut(ctx):
			// The shutdown's time ran out while the body arrived
			// (Proxy.ServeHTTP's cut lifts the read deadline to now).
			ex.w.Header().Set("Connection", "close")
			return nil, sess.Fail(apierr.Wrap(apierr.Unavailable, err, inflight.MsgShutdown)), false
		case ex.body.GaveWay():
			ex.w.Header().Set("Connection", "close")
			return nil, sess.GiveWay(), false
		case ex.body.TimedOut():
			// Too slow, but perhaps still listening.
			msg = "Timed out reading the request body"
		case ex.body.Truncated():
			// The client ended its body early (a half-closed socket may
			// still read the answer): never a success.
			msg = incompleteBody(r.ContentLength, int(n))
		case ctx.Err() != nil:
			return nil, session.Action{Verdict: session.Reset}, false // gone; Close counts it
		}
		ex.w.Header().Set("Connection", "close")
		return nil, sess.Fail(apierr.Wrap(apierr.InvalidArgument, err, msg)), false
	}
	if a.Verdict != session.Continue {
		return nil, a, false
	}
	return sink, sink.a, true
}

// pumped is what the response pump reports before the answer starts:
// the headers of a translated answer (Continue), an answer of the
// session's own (Respond), or a failure to read the upstream body.
type pumped struct {
	a   session.Action
	err error
}

// responseSink writes a streamed translation into the pipe the client's
// answer is copied from; Headers releases modifyResponse.
type responseSink struct {
	pw      *io.PipeWriter
	started chan<- pumped
	sent    bool
}

func (s *responseSink) Headers(a session.Action) error {
	s.sent = true
	s.started <- pumped{a: a}
	return nil
}

func (s *responseSink) Body(p []byte, _ bool) error {
	_, err := s.pw.Write(p)
	return err
}

// errResponseBody marks a failure to read the v2 answer's body, after its
// headers: a truncated or malformed answer (502), unlike a failure before
// any header (backend.RoundTripError).
var errResponseBody = errors.New("read v2 response body")

// errAborted cuts a streamed answer that failed after it began: the
// client sees a reset connection, never a truncated success.
var errAborted = errors.New("httpproxy: translated answer failed midway")

// streamResponse translates resp's body as it arrives: a goroutine pumps
// the upstream body through the session into a pipe, and resp is given
// the pipe as its body once the session has decided the answer's headers.
// The exchange waits for the pump before its session closes.
func (p *Proxy) streamResponse(ctx context.Context, ex *exchange, resp *http.Response) error {
	pr, pw := io.Pipe()
	started := make(chan pumped, 1)
	ex.pump = make(chan struct{})
	go func() {
		defer close(ex.pump)
		defer resp.Body.Close()
		sink := &responseSink{pw: pw, started: started}
		res := p.pump(ctx, ex, resp, sink)
		switch {
		case sink.sent && res.err == nil && res.a.Verdict == session.Continue:
			_ = pw.Close()
		case sink.sent:
			_ = pw.CloseWithError(errAborted)
		default:
			started <- res
			_ = pw.Close()
		}
	}()
	res := <-started
	if res.err != nil {
		return fmt.Errorf("%w: %w", errResponseBody, res.err)
	}
	switch res.a.Verdict {
	case session.Continue:
	case session.Respond:
		return p.replaceResponse(ex, resp, res.a)
	default:
		// Neither translated nor answered: never pass on a body the
		// pump already read.
		return p.replaceResponse(ex, resp, ex.sess.Fail(apierr.New(apierr.Internal, "response was not translated")))
	}
	ex.w.deadline(p.cfg.WriteTimeout)
	applyHeaders(resp.Header, res.a)
	resp.Body = pr
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	if v, ok := res.a.Get("content-length"); ok {
		// The whole answer was known before it started: TF Serving
		// always sends its length.
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			resp.ContentLength = n
			resp.Header.Set("Content-Length", v)
		}
	}
	resp.TransferEncoding = nil
	resp.Uncompressed = false
	return nil
}

// smallAnswer is the largest v2 answer translated in place, without the
// pump: one that fits a copy buffer (and the session's first TF piece).
const smallAnswer = copyBufferSize

// wholeResponse translates a small answer of known length where it is,
// before its headers go: the answer streamResponse would give, without
// its goroutine and pipe (two hand-offs in every small exchange).
func (p *Proxy) wholeResponse(ctx context.Context, ex *exchange, resp *http.Response) error {
	bp := p.pool.getPtr()
	defer p.pool.putPtr(bp)
	body := (*bp)[:resp.ContentLength]
	_, err := io.ReadFull(resp.Body, body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%w: %w", errResponseBody, err)
	}
	a, ans := ex.sess.ResponseParts(ctx, body)
	switch a.Verdict {
	case session.Continue, session.Respond:
		err := p.replaceResponse(ex, resp, a)
		if ans.Len() > 0 {
			setAnswer(resp, ans)
		}
		return err
	}
	ans.Release()
	return p.replaceResponse(ex, resp, ex.sess.Fail(apierr.New(apierr.Internal, "response was not translated")))
}

// pump feeds the upstream body to the session; a panic in it answers the
// exchange as the handler's recovery would.
func (p *Proxy) pump(ctx context.Context, ex *exchange, resp *http.Response, sink *responseSink) (res pumped) {
	defer func() {
		if v := recover(); v != nil {
			res = pumped{a: ex.sess.Recover("http", v)}
		}
	}()
	a, _, err := p.feed(resp.Body, ex.sess.MaxBodyBytes(), func(chunk []byte, end bool) session.Action {
		return ex.sess.ResponseChunk(ctx, chunk, end, sink)
	})
	return pumped{a: a, err: err}
}

// waitPump waits for an exchange's response pump, if any, to be done with
// the session.
func (ex *exchange) waitPump() {
	if ex.pump != nil {
		<-ex.pump
	}
}
