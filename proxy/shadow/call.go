package shadow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// errNoAnswer wraps the failures that leave a copy without an answer to
// compare (counted as shadow_error).
var errNoAnswer = errors.New("no answer from the shadow server")

// errOverCap is a shadow answer that does not fit the memory cap: the
// copy is dropped, as one that never fit.
var errOverCap = errors.New("the shadow's answer is over the shadow memory cap (--shadow-max-bytes)")

// call sends c to its server and returns the server's TF answer, or,
// when the answer was compared with the primary's on their outputs and
// matched (compareOutputs), that comparison's result and no answer. An
// error means there is no answer to compare.
func (e *Engine) call(ctx context.Context, w *scratch, c *Copy) (tfcompare.Answer, *tfcompare.Result, error) {
	base := c.Target.URL
	if base == nil {
		base = e.o.DefaultURL
	}
	if base == nil {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: server %q has no URL", errNoAnswer, c.Target.Name)
	}
	if c.Target.Kind == KindTFServing {
		a, err := e.callTF(ctx, c, base)
		return a, nil, err
	}
	return e.callV2(ctx, w, c, base)
}

// callTF sends the TF request as it came to a TF Serving server.
func (e *Engine) callTF(ctx context.Context, c *Copy, base *url.URL) (tfcompare.Answer, error) {
	// The answer is kept (it is the shadow's TF answer): not read into
	// the worker's buffer.
	ah, body, err := e.post(ctx, c, nil, base, c.Path, [][]byte{c.Request}, nil, head{contentType: "application/json", headerLength: -1})
	if err != nil {
		return tfcompare.Answer{}, err
	}
	if enc := ah.contentEncoding; enc != "" && !strings.EqualFold(enc, "identity") {
		return tfcompare.Answer{}, fmt.Errorf("%w: content-encoding %q", errNoAnswer, enc)
	}
	return tfcompare.Answer{Status: ah.status, Body: body}, nil
}

// callV2 translates the TF request for a v2 server with translate's
// pipeline of the verb, sends it, and translates the answer back as the
// session would for a client.
func (e *Engine) callV2(ctx context.Context, w *scratch, c *Copy, base *url.URL) (tfcompare.Answer, *tfcompare.Result, error) {
	be := c.Target.Backend
	if be == nil {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: server %q has no backend", errNoAnswer, c.Target.Name)
	}
	tp, ok := translate.For(c.Route.Verb)
	if !ok {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: verb %s is not shadowed", errNoAnswer, c.Route.Verb)
	}
	kind, err := be.Kind(ctx)
	if err != nil {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	res := &w.res
	res.reset(ctx, c, be)
	defer res.done()
	opt := translate.RequestOptions{Kind: kind, ID: c.RequestID, Limits: e.o.Limits, MaxBytes: e.o.MaxBodyBytes}
	var (
		ex      translate.Exchange
		parts   [][]byte
		release func()
		h       head
	)
	sent := e.sameRequest(res, c, opt)
	if sent != nil {
		// The primary's bytes, already counted in c.Reserved.
		ex, parts, release = sent.Exchange, sent.Body, sent.takeRelease()
		h = head{contentType: sent.ContentType, headerLength: sent.HeaderLength}
	} else {
		if r := c.Sent.takeRelease(); r != nil {
			r() // not sent: the copy no longer needs the primary's bytes
		}
		req, rex, err := tp.Request(c.Request, res.fn, opt)
		if err != nil {
			// The request is refused before any server call: that is
			// the shadow's TF answer, compared by status with the
			// primary's.
			return errorAnswer(apierr.As(err)), nil, nil
		}
		n := int64(req.Len())
		if !e.Reserve(n) {
			req.Release()
			return tfcompare.Answer{}, nil, errOverCap
		}
		defer e.Release(n)
		ex, parts, release = rex, req.Chunks(), req.Release
		h = head{contentType: req.ContentType, headerLength: req.HeaderLength}
	}
	// The v2 answer is read into the worker's buffer: only its
	// translation is kept.
	ah, body, err := e.post(ctx, c, w, base, res.wire.V2InferPath(), parts, release, h)
	if err != nil {
		return tfcompare.Answer{}, nil, err
	}
	status := ah.status
	if enc := ah.contentEncoding; enc != "" && !strings.EqualFold(enc, "identity") {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: content-encoding %q", errNoAnswer, enc)
	}
	if status < 200 || status > 299 {
		if status == http.StatusNotFound {
			return errorAnswer(apierr.New(apierr.NotFound, "Servable not found for request: "+c.Route.Servable())), nil, nil
		}
		msg := oip.DecodeError(status, ah.contentType, body)
		return errorAnswer(apierr.New(apierr.FromHTTPStatus(status), msg)), nil, nil
	}
	headerLength := -1
	if ihcl := ah.headerLength; ihcl != "" {
		if headerLength, err = oip.ParseHeaderLength(ihcl, len(body)); err != nil {
			return tfcompare.Answer{}, nil, fmt.Errorf("%w: %w", errNoAnswer, err)
		}
	}
	if sent != nil && e.sameAnswer(sent, body, headerLength) {
		// The primary's v2 answer, byte for byte, after the primary's
		// request: its translation is the primary's TF answer.
		return tfcompare.Answer{Status: http.StatusOK, Body: c.Primary.Body}, nil, nil
	}
	if r, ok := e.compareOutputs(w, c, sent, body, headerLength); ok && r.Verdict != tfcompare.Mismatch {
		return tfcompare.Answer{}, r, nil
	}
	tf, err := tp.Response(body, headerLength, ex, e.o.Limits)
	if err != nil {
		return tfcompare.Answer{}, nil, fmt.Errorf("%w: its answer does not translate: %w", errNoAnswer, err)
	}
	if !e.Reserve(int64(len(tf))) {
		return tfcompare.Answer{}, nil, errOverCap
	}
	c.Reserved += int64(len(tf))
	return tfcompare.Answer{Status: http.StatusOK, Body: tf}, nil, nil
}

// errorAnswer is the TF answer of an error, as the session writes it.
func errorAnswer(e *apierr.Error) tfcompare.Answer {
	return tfcompare.Answer{Status: e.HTTPStatus(), Body: tfresponse.Error(nil, e.Msg)}
}

// unknownSignature is TF Serving's error for a signature_name the model
// lacks, worded per verb as the session does.
func unknownSignature(v route.Verb, name string) error {
	if v == route.Predict {
		return apierr.InvalidArgumentf("Serving signature name: \"%s\" not found in signature def", name)
	}
	return apierr.InvalidArgumentf("No signature was found with the name: %s", name)
}

// tfNotFound gives a not-found error TF's text for the TF route.
func tfNotFound(r route.Route, err error) error {
	if e := apierr.As(err); e.Code == apierr.NotFound {
		return apierr.Wrap(apierr.NotFound, e, "Servable not found for request: "+r.Servable())
	}
	return err
}

// joinMax is the largest request body post sends as one slice: a small
// body is copied once so that net/http writes it with its head in one
// write (a body it cannot tell is in memory gets its head flushed on its
// own first: a second write syscall, and a second read and wakeup on the
// server's side, for every copy).
const joinMax = 64 << 10

// post sends body (in parts) to base+path and reads the answer within
// the body limit, its bytes counted against the memory cap as they
// arrive. release, when not nil, gives the parts back (they are pooled):
// it is called once net/http no longer reads them, or never (the GC
// takes them) when net/http might still.
func (e *Engine) post(ctx context.Context, c *Copy, w *scratch, base *url.URL, path string, parts [][]byte, release func(), h head) (answerHead, []byte, error) {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + pathOnly(path)
	u.RawQuery = ""
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	h.requestID = c.RequestID
	if ts, ok := c.Target.Backend.(tokenSource); ok {
		tok, err := ts.BearerToken()
		if err != nil {
			if release != nil {
				release()
			}
			return answerHead{}, nil, fmt.Errorf("%w: bearer token: %w", errNoAnswer, err)
		}
		h.bearer = tok
	}
	if e.conns != nil && u.Scheme == "http" {
		return e.postDirect(ctx, c, w, &u, parts, release, h)
	}
	var (
		rd   io.Reader
		sent *partsReader
	)
	switch {
	case len(parts) == 1 && release == nil:
		rd = bytes.NewReader(parts[0])
		c.lent = true // net/http may write it after RoundTrip returns
	case n <= joinMax:
		joined := make([]byte, 0, n)
		for _, p := range parts {
			joined = append(joined, p...)
		}
		if release != nil {
			release()
		}
		rd = bytes.NewReader(joined)
	default:
		sent = &partsReader{parts: parts, closed: make(chan struct{})}
		rd = sent
	}
	if sent != nil {
		defer func() {
			select {
			case <-sent.closed: // net/http is done with the parts
				if release != nil {
					release()
				}
			default:
				c.lent = true
			}
		}()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", rd)
	if err != nil {
		return answerHead{}, nil, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	req.URL, req.Host = &u, u.Host
	req.ContentLength = int64(n)
	req.Header = h.header()
	if u.User != nil && h.bearer == "" {
		// As http.Client sends a URL's user info (the transport does not).
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return answerHead{}, nil, fmt.Errorf("%w: POST %s: %w", errNoAnswer, u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := e.readBody(c, w, resp.Body, resp.ContentLength)
	if err != nil {
		return answerHead{}, nil, err
	}
	return headOf(resp.StatusCode, resp.Header), body, nil
}

// head is what a copy's request says besides its method, URL and
// length.
type head struct {
	contentType  string
	headerLength int    // Inference-Header-Content-Length; -1 for none
	requestID    string // X-Request-Id; "" for none
	bearer       string // the server's bearer token; "" for none
}

// header is h as net/http's request header, identity encoding asked
// for.
func (h head) header() http.Header {
	hh := http.Header{"Content-Type": {h.contentType}, "Accept-Encoding": {"identity"}}
	if h.headerLength >= 0 {
		hh["Inference-Header-Content-Length"] = []string{strconv.Itoa(h.headerLength)}
	}
	if h.requestID != "" {
		hh["X-Request-Id"] = []string{h.requestID}
	}
	if h.bearer != "" {
		hh["Authorization"] = []string{"Bearer " + h.bearer}
	}
	return hh
}

// partsReader reads byte slices in turn. net/http sends a request body
// through its WriteTo, which writes the slices as they are: an
// io.MultiReader's would allocate a 32 KiB buffer for every copy. It
// never changes the slices (they may be the translation's pooled
// blocks).
type partsReader struct {
	parts  [][]byte
	i      int           // the slice being read
	off    int           // bytes of parts[i] already read
	closed chan struct{} // closed by Close: net/http is done reading
	once   sync.Once
}

// Close tells the copy that net/http is done with the parts (it closes
// a request's body once written, or on failure, maybe after Do
// returned).
func (r *partsReader) Close() error {
	r.once.Do(func() { close(r.closed) })
	return nil
}

func (r *partsReader) Read(b []byte) (int, error) {
	for r.i < len(r.parts) && r.off == len(r.parts[r.i]) {
		r.i, r.off = r.i+1, 0
	}
	if r.i == len(r.parts) {
		return 0, io.EOF
	}
	n := copy(b, r.parts[r.i][r.off:])
	r.off += n
	return n, nil
}

func (r *partsReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for ; r.i < len(r.parts); r.i, r.off = r.i+1, 0 {
		n, err := w.Write(r.parts[r.i][r.off:])
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pathOnly is a TF request path without its query.
func pathOnly(p string) string {
	p, _, _ = strings.Cut(p, "?")
	return p
}

// readBody reads an answer within MaxBodyBytes, reserving its bytes
// against the memory cap as they come, as part of c's reservation
// (released when the copy ends). An answer of declared length goes into
// w's buffer when w is not nil (the caller keeps no reference to it past
// the copy).
func (e *Engine) readBody(c *Copy, w *scratch, r io.Reader, length int64) ([]byte, error) {
	if length >= 0 && length <= e.o.MaxBodyBytes {
		// A declared length (most answers): read into a slice of that
		// size, reserved at once, one allocation and no copy.
		if !e.Reserve(length) {
			return nil, errOverCap
		}
		var body []byte
		if w != nil {
			body = w.answerBuf(int(length))
		} else {
			body = make([]byte, length)
		}
		if _, err := io.ReadFull(r, body); err != nil {
			e.Release(length)
			return nil, fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		c.Reserved += length
		return body, nil
	}
	var body []byte
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if int64(len(body)+k) > e.o.MaxBodyBytes {
				e.Release(int64(len(body)))
				return nil, fmt.Errorf("%w: its answer is over the body limit of %d bytes", errNoAnswer, e.o.MaxBodyBytes)
			}
			if !e.Reserve(int64(k)) {
				e.Release(int64(len(body)))
				return nil, errOverCap
			}
			body = append(body, buf[:k]...)
		}
		if errors.Is(err, io.EOF) {
			c.Reserved += int64(len(body))
			return body, nil
		}
		if err != nil {
			e.Release(int64(len(body)))
			return nil, fmt.Errorf("%w: %w", errNoAnswer, err)
		}
	}
}
