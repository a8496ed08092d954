package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/tracing"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfrequest"
)

// Bodies come in one way: chunks with an end flag, to RequestChunk and
// ResponseChunk, and the session hands its output to a Sink in protocol
// order — the held headers' changes once, then the body in pieces of at
// most MaxPiece bytes. ext_proc FULL_DUPLEX_STREAMED and the reverse
// proxy pass chunks as they arrive; ext_proc BUFFERED passes its whole
// body as one chunk with end set, to the Sink Whole, and gets the output
// back as one Action. The TF request text is never held whole: a predict body is
// parsed chunk by chunk straight into the v2 tensors
// (translate.RequestStream), so an exchange holds about its tensors,
// not its JSON (docs/architecture.md, "Streaming").
//
// Bodies that arrive whole (to Whole), and those that cannot be
// parsed as they come — gzip-encoded ones and the tf.Examples of classify
// and regress (small by nature) — are gathered within the body limit and
// translated whole at their end (translateRequest, translateResponse).

// replayBytes is how much of a streamed predict body's text is kept for a
// second look (translate.RequestOptions.ReplayBytes). The decoder answers
// every body itself but four rare constructs (tfrequest.ErrUndecided),
// which the kept text settles; keeping the first 64 KiB does so in the
// small bodies where client mistakes are made, and costs a large body one
// 64 KiB copy instead of the default 1 MiB (which showed as ~10% of the
// full-duplex image path).
const replayBytes = 64 << 10

// MaxPiece bounds each body piece given to a Sink: Envoy recommends
// streamed_response chunks of at most 64 KiB (larger ones are accepted
// but held whole in its buffers).
const MaxPiece = 64 << 10

// Sink receives a streamed exchange's output in protocol order. Its
// errors (the ext_proc stream or the client connection broke) stop the
// exchange; the session returns Reset.
type Sink interface {
	// Headers sends the held headers message on, with a's changes
	// applied (a is a Continue action: Set and Remove). It is called
	// once, before any Body.
	Headers(a Action) error
	// Body sends the next piece of the body; p may be reused once Body
	// returns. end marks the last piece (p may then be empty).
	Body(p []byte, end bool) error
}

// errSink reports that the adapter's Sink failed: the exchange cannot go
// on, and nothing more can be sent.
var errSink = errors.New("session: the streamed output failed")

// Whole is the Sink of an adapter that delivers each body whole and
// answers it with one message (ext_proc BUFFERED): pass the body as one
// chunk with end set. A Whole body is translated whole, and a Continue
// verdict carries the result itself: the header changes and, with
// ReplaceBody, the body. Nothing is ever written to Whole.
var Whole Sink = whole{}

type whole struct{}

func (whole) Headers(Action) error    { return errSink }
func (whole) Body([]byte, bool) error { return errSink }

// requestStream is the state of a request body.
type requestStream struct {
	started  bool
	declared int64 // the request's content-length, -1 if none
	// checkedDeclared: the declared length was held against the budget.
	checkedDeclared bool
	quotes          int64                    // '"' bytes so far, in a body that may hold strings
	n               int64                    // body bytes so far
	dec             *translate.RequestStream // parsed as it comes (predict, identity encoding)
	text            []byte                   // the gathered body otherwise
	v2              translate.V2Request      // the translated body, released at Close
	// held: the adapter holds the whole text (RequestParts), which
	// settles what the decoder cannot and is reserved as whole bodies are.
	held bool
}

// close releases what the request body holds (at Close).
func (rq *requestStream) close() {
	rq.v2.Release()
	if rq.dec != nil {
		// A streamed body that never ended (a failure, a client gone).
		rq.dec.Abort()
		rq.dec = nil
	}
}

// responseStream is the state of a response body: the streamed
// translation (nil when gathered), its inference-header-content-length,
// its output and time spent.
type responseStream struct {
	started      bool
	n            int64  // body bytes so far
	text         []byte // the gathered body, when not translated as it comes
	tr           *translate.ResponseStream
	headerLength int
	out          *pieceWriter // &w once streaming
	w            pieceWriter
	translating  time.Duration
	span         trace.Span
	// reserved is the part of the session's reservation that is the
	// response's (the request's stays held until the exchange ends).
	reserved int64
}

// endSpan ends the streamed answer's span, once.
func (rp *responseStream) endSpan() {
	if rp.span != nil {
		rp.span.End()
		rp.span = nil
	}
}

// RequestChunk handles the next piece of the request body; end marks the
// last one (a trailers message ends a body too: pass nil with end). A
// whole body is one chunk with end set. The verdicts:
//   - Pending: nothing to send yet; feed the next chunk.
//   - Respond: answer the client with the action now (nothing was sent).
//   - Continue: the translated request went to out, headers and body.
//   - PassThrough: the exchange's body is not being translated; the
//     adapter forwards the chunk itself unchanged.
//   - Reset: out failed midway; end the exchange without an answer.
func (s *Session) RequestChunk(ctx context.Context, chunk []byte, end bool, out Sink) Action {
	return s.requestBody(ctx, [][]byte{chunk}, end, out)
}

// requestBody is the one request body path: the next pieces of the body
// (one chunk, or a whole body in the pieces an adapter holds, see
// RequestParts), end set with the last.
func (s *Session) requestBody(ctx context.Context, body [][]byte, end bool, out Sink) Action {
	if s.state != stRequestBody {
		return s.observeRequest(body, end)
	}
	s.shadow.request(body, end)
	rq := &s.req
	n := size(body)
	if !rq.started {
		rq.started = true
		if out == Whole && end {
			return s.translateRequest(ctx, body[0], out)
		}
		// A whole body in pieces the adapter holds is held whole, like
		// a Whole one, however it is read.
		_, rq.held = out.(*partsSink)
		rq.held = rq.held && end
		if s.reqEncoding == "" && out != Whole && s.grpc == nil {
			opt := s.requestOptions()
			opt.ReplayBytes = replayBytes
			rq.dec = s.body.requestStream(s.resolver(ctx), opt)
		}
	}
	rq.n += int64(n)
	if err := s.checkSize("Request", rq.n); err != nil {
		return s.fail(err)
	}
	// The memory a body holds is reserved as its bytes arrive, never for
	// bytes only announced: a client that declares 64 MiB and sends 15
	// bytes holds what 15 bytes cost. A declared length the budget could
	// never take is refused at once, without reserving anything.
	if !rq.checkedDeclared {
		rq.checkedDeclared = true
		if rq.declared > 0 && rq.declared <= s.maxBody() {
			if err := s.cfg.Admission.Fits(rq.declared * s.streamFactor()); err != nil {
				return s.fail(busy(err))
			}
		}
	}
	need := rq.n * s.streamFactor()
	if s.strings() {
		for _, c := range body {
			rq.quotes += int64(bytes.Count(c, quote))
		}
		need += rq.quotes * admission.QuoteCost
	}
	if err := s.reserveUpTo(ctx, need); err != nil {
		return s.fail(err)
	}
	if rq.dec == nil && len(body) > 1 {
		rq.text = grown(rq.text, n)
	}
	for _, c := range body {
		switch {
		case rq.dec == nil:
			rq.text = append(rq.text, c...)
		case len(c) > 0:
			// An error is final and Close returns it again; the rest
			// of the body is still read (and bounded) like any other.
			_ = rq.dec.Write(c)
		}
	}
	if !end {
		return Action{Verdict: Pending}
	}
	if rq.dec == nil {
		text := rq.text
		rq.text = nil
		return s.translateRequest(ctx, text, out) // grows the reservation as needed
	}
	s.cfg.Metrics.BodySize(observe.StageTFRequest, int(rq.n))
	t0 := time.Now()
	_, span := tracing.Start(ctx, tracing.SpanTranslateRequest)
	req, ex, err := rq.dec.Close()
	rq.dec = nil
	if rq.held && errors.Is(err, tfrequest.ErrUndecided) {
		// Settled by the whole text, as a whole body always is.
		req, ex, err = s.body.request(bytes.Join(body, nil), s.resolver(ctx), s.requestOptions())
	}
	span.End()
	s.cfg.Metrics.Translation(observe.DirRequest, time.Since(t0))
	if err != nil {
		return s.fail(err)
	}
	if !rq.held {
		// The body's parts alias the decoder's blocks until the
		// exchange ends (the proxy's upstream request reads them where
		// they are). Parts handed back whole are not released: a
		// transport may still be writing them after Close.
		rq.v2 = req
	}
	// The tensors may come out larger than reserved (integers: "1,"
	// becomes 8 bytes of INT64): count what is really held.
	s.holdAtLeast(int64(req.Len()))
	s.exchange = ex
	if rq.held {
		s.shadow.sentRequest(req, ex, s.requestOptions())
	} else {
		s.shadow.sentPooled(&rq.v2, ex, s.requestOptions())
	}
	a := s.emit(out, s.requestAction(req), req.Chunks())
	if o, ok := out.(*partsSink); ok && rq.held && o.parts != nil {
		// The adapter writes the parts where they lie and gives the
		// decoder's blocks back once written (pooled, not garbage); a
		// shadow copy that sends them too shares the release.
		o.release = s.shadow.shareRelease(req.Release)
	}
	return a
}

// grown is b with room for n more bytes, allocated once to that size
// when it has not (a whole body in pieces is copied once, not grown by
// appends; slices.Grow's is not elided under -race).
func grown(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(make([]byte, 0, len(b)+n), b...)
}

// size is the length of a body in pieces.
func size(body [][]byte) int {
	n := 0
	for _, c := range body {
		n += len(c)
	}
	return n
}

// translateRequest translates a whole request body and hands it to out.
func (s *Session) translateRequest(ctx context.Context, body []byte, out Sink) Action {
	s.cfg.Metrics.BodySize(observe.StageTFRequest, len(body))
	if err := s.checkSize("Request", int64(len(body))); err != nil {
		return s.fail(err)
	}
	if err := s.reserveUpTo(ctx, int64(len(body))*admission.RequestFactor); err != nil {
		return s.fail(err)
	}
	body, err := decodeRequestBody(s.reqEncoding, body, s.maxBody())
	if err != nil {
		return s.fail(s.tooLarge("Decompressed request"))
	}
	if err := s.reserveUpTo(ctx, int64(len(body))*admission.RequestFactor); err != nil {
		return s.fail(err)
	}
	if s.grpc != nil {
		return s.grpcRequest(ctx, body, out)
	}
	t0 := time.Now()
	_, span := tracing.Start(ctx, tracing.SpanTranslateRequest)
	req, ex, err := s.body.request(body, s.resolver(ctx), s.requestOptions())
	span.End()
	s.cfg.Metrics.Translation(observe.DirRequest, time.Since(t0))
	if err != nil {
		return s.fail(err)
	}
	s.exchange = ex
	s.shadow.sentRequest(req, ex, s.requestOptions())
	return s.emit(out, s.requestAction(req), [][]byte{req.Body})
}

// streamFactor is what a streamed request body holds per byte:
// admission.StreamFactor when it is parsed as it comes, RequestFactor
// when it is gathered and translated whole or its text is held whole
// (RequestParts).
func (s *Session) streamFactor() int64 {
	switch {
	case s.req.dec == nil || s.req.held:
		return admission.RequestFactor
	case s.strings():
		return admission.StringStreamFactor
	}
	return admission.StreamFactor
}

// quote is what strings() bodies count.
var quote = []byte{'"'}

// strings reports a streamed body that may hold strings: its signature
// has a BYTES input, or is not known before the body names it (a mapped
// model's other signature).
func (s *Session) strings() bool {
	return s.req.dec != nil && !s.req.held && (s.sig == nil || s.rt.model != nil || hasBytesInput(s.sig))
}

// hasBytesInput reports a signature with a BYTES input.
func hasBytesInput(sig *tensor.Signature) bool {
	for _, in := range sig.Inputs {
		if in.DataType == tensor.Bytes {
			return true
		}
	}
	return false
}

// emit hands a translated body, given in parts, with the headers action
// a to out: for Whole, a itself carries the body; for RequestParts' sink
// a carries one part and the sink keeps several; any other Sink gets
// both through streamOut.
func (s *Session) emit(out Sink, a Action, parts [][]byte) Action {
	switch o := out.(type) {
	case whole:
		a.Body, a.ReplaceBody = parts[0], true
		for _, p := range parts[1:] {
			a.Body = append(a.Body[:len(a.Body):len(a.Body)], p...)
		}
		return a
	case *partsSink:
		a.ReplaceBody = true
		if a.Body = parts[0]; len(parts) > 1 {
			a.Body, o.parts = nil, parts
		}
		return a
	}
	return s.streamOut(out, a, parts)
}

// streamOut hands a translated body, given in parts, to out: the headers
// action, then the body in pieces of at most MaxPiece bytes. A part of at
// least MaxPiece goes out where it lies; smaller ones (the v2 JSON header,
// small tensors) are gathered into one piece, so that a small request is
// one message. A gathered piece is fresh memory: request pieces must stay
// valid until the exchange ends (see Sink).
func (s *Session) streamOut(out Sink, a Action, parts [][]byte) Action {
	a.Body, a.ReplaceBody = nil, false
	if err := out.Headers(a); err != nil {
		return s.reset(err)
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	sent := 0
	emit := func(p []byte) error {
		sent += len(p)
		return out.Body(p, sent == total)
	}
	if total == 0 {
		if err := emit(nil); err != nil {
			return s.reset(err)
		}
		return Action{Verdict: Continue}
	}
	var pend []byte
	for _, body := range parts {
		for len(body) > 0 {
			if len(pend) == 0 && len(body) >= MaxPiece {
				if err := emit(body[:MaxPiece]); err != nil {
					return s.reset(err)
				}
				body = body[MaxPiece:]
				continue
			}
			if pend == nil {
				pend = make([]byte, 0, min(MaxPiece, total-sent))
			}
			k := min(cap(pend)-len(pend), len(body))
			pend, body = append(pend, body[:k]...), body[k:]
			if len(pend) == cap(pend) {
				if err := emit(pend); err != nil {
					return s.reset(err)
				}
				pend = nil
			}
		}
	}
	return Action{Verdict: Continue}
}

// reset ends an exchange whose output broke midway: nobody is answered,
// and Close completes it as abandoned.
func (s *Session) reset(err error) Action {
	s.state = stDone
	if s.logs(slog.LevelDebug) {
		s.Logger().Debug("streamed output failed", "route", s.rt.tf.String(), "error", err)
	}
	return Action{Verdict: Reset}
}

// ResponseChunk handles the next piece of the upstream response body,
// with RequestChunk's verdicts. A successful binary v2 answer is
// translated as it arrives (translate.ResponseStream) and its TF body
// handed to out as soon as its bytes are known; anything else — an error
// answer, a compressed one, a 2xx other than 200, a body that arrives
// whole — is gathered within the body limit and answered whole at its
// end.
func (s *Session) ResponseChunk(ctx context.Context, chunk []byte, end bool, out Sink) Action {
	if s.state != stResponseBody {
		return s.observeResponse(chunk, end)
	}
	if s.grpc != nil {
		return s.grpcResponseChunk(ctx, chunk, end, out)
	}
	rp := &s.resp
	if !rp.started {
		rp.started = true
		if out == Whole && end {
			return s.translateResponse(ctx, chunk, out)
		}
		if out != Whole {
			if err := s.startResponseStream(ctx, out); err != nil {
				return s.fail(err)
			}
		}
	}
	rp.n += int64(len(chunk))
	if err := s.checkSize("Response", rp.n); err != nil {
		return s.fail(err)
	}
	if rp.tr == nil {
		rp.text = append(rp.text, chunk...)
		if !end {
			return Action{Verdict: Pending}
		}
		text := rp.text
		rp.text = nil
		return s.translateResponse(ctx, text, out)
	}
	if err := s.admitResponse(ctx, rp.n); err != nil {
		return s.fail(err)
	}
	s.shadow.v2Answer(chunk, rp.headerLength, s.cfg.Limits)
	t0 := time.Now()
	err := rp.tr.Write(chunk)
	if err == nil && end {
		if rp.n < int64(rp.headerLength) {
			// Exactly the whole path's complaint.
			_, err = oip.ParseHeaderLength(s.respIHCL, int(rp.n))
		} else {
			err = rp.tr.Close()
		}
	}
	rp.translating += time.Since(t0)
	if err == nil && rp.out.err != nil {
		err = rp.out.err
	}
	if err != nil || end {
		rp.endSpan()
	}
	switch {
	case err != nil && rp.out.started:
		// Part of the answer is out: it can only be cut.
		s.logDone(http.StatusBadGateway, apierr.As(err))
		return s.reset(err)
	case err != nil:
		return s.fail(err)
	case !end:
		return Action{Verdict: Pending}
	}
	if err := rp.out.finish(); err != nil {
		return s.reset(err)
	}
	s.cfg.Metrics.Translation(observe.DirResponse, rp.translating)
	s.cfg.Metrics.BodySize(observe.StageV2Response, int(rp.n))
	s.cfg.Metrics.BodySize(observe.StageTFResponse, int(rp.tr.Emitted()))
	s.complete(http.StatusOK, nil)
	return Action{Verdict: Continue}
}

// translateResponse answers a whole upstream response body: a successful
// one translated to out, an error one as the TF error.
func (s *Session) translateResponse(ctx context.Context, body []byte, out Sink) Action {
	s.cfg.Metrics.BodySize(observe.StageV2Response, len(body))
	if err := s.checkSize("Response", int64(len(body))); err != nil {
		return s.fail(err)
	}
	body, err := decodeResponseBody(s.respEncoding, body, s.maxBody())
	if errors.Is(err, errTooLarge) {
		return s.fail(s.tooLarge("Decompressed response"))
	}
	if err != nil {
		return s.fail(apierr.Wrap(apierr.BadGateway, err, "Invalid response from the v2 inference server: "+err.Error()))
	}
	if s.respStatus < 200 || s.respStatus > 299 {
		return s.fail(s.upstreamError(body))
	}
	// Only a successful answer is translated, and amplified: a v2 error
	// body just yields its message.
	if err := s.grow(ctx, int64(len(body))*admission.ResponseFactor); err != nil {
		return s.fail(err)
	}
	headerLength := -1
	if s.respIHCL != "" {
		if headerLength, err = oip.ParseHeaderLength(s.respIHCL, len(body)); err != nil {
			return s.fail(asBadGateway(err))
		}
	}
	t0 := time.Now()
	_, span := tracing.Start(ctx, tracing.SpanTranslateResponse)
	tf, err := s.body.response(body, headerLength, s.exchange, s.cfg.Limits)
	span.End()
	s.cfg.Metrics.Translation(observe.DirResponse, time.Since(t0))
	if err != nil {
		return s.fail(err)
	}
	// The answer stays in memory until the client has read it: new
	// requests must see it even when it outgrew the reservation.
	s.holdAtLeast(int64(tf.Len()))
	s.cfg.Metrics.BodySize(observe.StageTFResponse, tf.Len())
	s.complete(http.StatusOK, nil)
	if s.respStatus != http.StatusOK {
		// TF Serving answers 200; changing :status needs a Respond.
		a := jsonResponse(http.StatusOK, tf.AppendTo(nil), "tfsbridge_ok")
		tf.Release()
		return a
	}
	a := Action{
		Verdict: Continue,
		Set: append(s.rooms.responseSet[:0],
			Header{hdrContentType, contentTypeJSON},
			Header{hdrContentLength, s.rooms.itoa(tf.Len())},
		),
		Remove: append(s.rooms.responseRemove[:0], hdrIHCL),
	}
	if s.respEncoding != "" {
		a.Remove = append(a.Remove, hdrContentEnc)
	}
	return s.emitAnswer(out, a, &tf)
}

// startResponseStream decides, at the first chunk of a response, whether
// it is translated as it streams: a 200 with a binary body in identity
// encoding (the common answer) is; the rest is gathered.
func (s *Session) startResponseStream(ctx context.Context, out Sink) error {
	rp := &s.resp
	enc := strings.ToLower(strings.TrimSpace(s.respEncoding))
	if s.respStatus != http.StatusOK || s.respIHCL == "" || (enc != "" && enc != "identity") {
		return nil
	}
	hl, err := oip.ParseHeaderLength(s.respIHCL, math.MaxInt)
	if err != nil {
		return err
	}
	rp.headerLength = hl
	rp.w = pieceWriter{sink: out, headers: s.streamedResponseHeaders()}
	rp.out = &rp.w
	rp.tr = s.body.responseStream(hl, s.exchange, s.cfg.Limits, rp.out.write)
	// The span covers the whole streamed answer, upstream waits included.
	_, rp.span = tracing.Start(ctx, tracing.SpanTranslateResponse)
	return nil
}

// admitResponse reserves what a streamed binary answer holds: its v2
// tensor data (StreamFactor per byte), never the TF body, which leaves in
// pieces.
func (s *Session) admitResponse(ctx context.Context, n int64) error {
	rp := &s.resp
	need := n * admission.StreamFactor
	if need <= rp.reserved {
		return nil
	}
	if err := s.grow(ctx, need-rp.reserved); err != nil {
		return err
	}
	rp.reserved = need
	return nil
}

// streamedResponseHeaders are the header changes of a translated answer
// whose length is not known when it starts.
func (s *Session) streamedResponseHeaders() Action {
	a := Action{
		Verdict: Continue,
		Set:     append(s.rooms.responseSet[:0], Header{hdrContentType, contentTypeJSON}),
		Remove:  append(s.rooms.responseRemove[:0], hdrContentLength, hdrIHCL),
	}
	if s.respEncoding != "" {
		a.Remove = append(a.Remove, hdrContentEnc)
	}
	return a
}

// pieceWriter passes a streamed TF body to a Sink. It keeps the first
// piece back: an answer that turns out to be one piece long (most are)
// then goes out with its exact content-length, as TF Serving sends it.
type pieceWriter struct {
	sink    Sink
	headers Action
	first   []byte // the first piece, until a second one comes
	started bool   // headers sent
	err     error  // the sink's first error
	// set and remove are the room of finish's headers (the streamed
	// headers' and a content-length).
	set    [2]Header
	remove [3]string
}

// write is the ResponseStream's out.
func (w *pieceWriter) write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	if !w.started && w.first == nil {
		w.first = append(make([]byte, 0, len(p)), p...)
		return nil
	}
	if !w.started {
		w.started = true
		if w.err = w.sink.Headers(w.headers); w.err == nil {
			w.err = w.sink.Body(w.first, false)
		}
		w.first = nil
		if w.err != nil {
			return w.err
		}
	}
	w.err = w.sink.Body(p, false)
	return w.err
}

// finish ends the body.
func (w *pieceWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	if !w.started {
		w.started = true
		h := w.headers
		h.Remove = slices.DeleteFunc(append(w.remove[:0], h.Remove...), func(k string) bool { return k == hdrContentLength })
		h.Set = append(append(w.set[:0], h.Set...), Header{hdrContentLength, strconv.Itoa(len(w.first))})
		if w.err = w.sink.Headers(h); w.err != nil {
			return w.err
		}
	}
	w.err = w.sink.Body(w.first, true)
	w.first = nil
	return w.err
}

// Then returns a followed by b: the header changes of both, b's winning
// where they touch the same header. A streamed exchange sends its held
// headers message once, with both the headers' and the body's changes.
func (a Action) Then(b Action) Action {
	out := b
	out.Set, out.Remove = nil, nil
	// A few headers each: a scan costs less than a set.
	touched := func(k string) bool {
		for _, h := range b.Set {
			if h.Key == k {
				return true
			}
		}
		return slices.Contains(b.Remove, k)
	}
	if n := len(a.Set) + len(b.Set); n > 0 {
		out.Set = make([]Header, 0, n)
	}
	for _, h := range a.Set {
		if !touched(h.Key) {
			out.Set = append(out.Set, h)
		}
	}
	out.Set = append(out.Set, b.Set...)
	if n := len(a.Remove) + len(b.Remove); n > 0 {
		out.Remove = make([]string, 0, n)
	}
	for _, k := range a.Remove {
		if !touched(k) {
			out.Remove = append(out.Remove, k)
		}
	}
	out.Remove = append(out.Remove, b.Remove...)
	out.ClearRouteCache = a.ClearRouteCache || b.ClearRouteCache
	return out
}
