package envoysim

import (
	"errors"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// errBodyRead means a body could not be read from its peer (downstream client gone, upstream
// reset mid-body): the exchange is dropped, or answered 504 when the route timeout caused it.
var errBodyRead = errors.New("envoysim: body read failed")

// duplexSink is where a FULL_DUPLEX_STREAMED direction's processed message goes: the
// router (request) or the downstream codec (response).
type duplexSink interface {
	// headers hands on the (mutated) headers; bodyFollows tells whether data will follow.
	headers(h *headerMap, bodyFollows bool) (*localReply, error)
	// data hands on body bytes in order; eos ends the message.
	data(b []byte, eos bool) error
	// trailers ends the message with trailers.
	trailers(t *headerMap) error
}

// duplexRun is one direction of a FULL_DUPLEX_STREAMED exchange: Filter::onHeaders and
// onData in that mode plus ProcessorState's handling of the replies. Envoy sends every
// body chunk the moment it arrives (no buffer, no message timer) and injects the
// processor's streamed_response chunks into the filter chain as they come back.
type duplexRun struct {
	f         *filter
	p, bp, tp phase // headers, body and trailers phase of the direction
	d         *direction
	h         *headerMap
	sink      duplexSink
	src       <-chan chunk
	dirIdx    int // 0 request, 1 response (Stats arrays)

	hasBody bool
	// pending: the headers message is out and its reply not applied yet (Envoy's
	// HeadersCallback state); body chunks still go out meanwhile.
	pending bool
	// gone: the headers went on (to the router, or downstream).
	gone bool
	// sent counts body messages sent; sentEOS: the end of the message is out (a body
	// message with end_of_stream, or the trailers message).
	sent    int
	sentEOS bool
	// trailers are the trailers sent to the processor, held until its trailers reply.
	trailers *headerMap
	// direct: the processor is out of the picture (processing complete, or the body
	// mode became NONE); chunks go straight to the sink, or nowhere once replaced.
	direct bool
	// ended: the message was handed on completely.
	ended bool
}

// streamDuplex runs one FULL_DUPLEX_STREAMED direction whose headers are h and whose body
// arrives from src (nil when the headers carry end_of_stream). It returns a local reply
// when processing fails or the processor answers immediately; gone reports whether the
// headers had already gone on by then.
func (f *filter) streamDuplex(p phase, h *headerMap, src *pump, sink duplexSink) (lr *localReply, gone bool, err error) {
	r := &duplexRun{f: f, p: p, bp: phaseRequestBody, tp: phaseRequestTrailers, d: f.dir(p), h: h, sink: sink, hasBody: src != nil}
	if !p.isRequest() {
		r.bp, r.tp, r.dirIdx = phaseResponseBody, phaseResponseTrailers, 1
	}
	if src != nil {
		r.src = src.ch
	}
	lr, err = r.run()
	return lr, r.gone, err
}

func (r *duplexRun) run() (*localReply, error) {
	f := r.f
	if f.complete {
		r.direct = true
	} else if r.d.sendHeaders {
		if lr, err := r.sendHeaders(); err != nil || lr != nil {
			return lr, err
		}
	} else {
		// decodeHeaders/encodeHeaders: the mode strips content-length even unsent.
		r.h.del("content-length")
	}
	if !r.pending {
		if lr, err := r.release(r.hasBody); err != nil || lr != nil {
			return lr, err
		}
	}
	for !r.ended {
		var inbox chan received
		if !r.direct && f.stream != nil {
			inbox = f.stream.inbox
		}
		select {
		case c := <-r.src:
			if lr, err := r.onChunk(c); err != nil || lr != nil {
				return lr, err
			}
		case rcv := <-inbox:
			if lr, err := r.onReceive(rcv); err != nil || lr != nil {
				return lr, err
			}
		case <-f.ctx.Done():
			return nil, errAborted
		}
	}
	return nil, nil
}

// sendHeaders sends the headers message; Envoy strips content-length right after.
func (r *duplexRun) sendHeaders() (*localReply, error) {
	f := r.f
	if f.stream != nil {
		if lr, done, err := f.checkIdle(r.p); done || err != nil {
			r.direct = true
			return lr, err
		}
	}
	if _, lr, err := f.send(headersMessage(r.p, r.h, !r.hasBody), r.p); err != nil || lr != nil {
		return lr, err
	}
	if f.complete {
		r.direct = true // the stream could not be used: unprocessed (fail open, clean close)
		return nil, nil
	}
	r.h.del("content-length")
	r.pending = true
	return nil, nil
}

// release hands the headers on.
func (r *duplexRun) release(bodyFollows bool) (*localReply, error) {
	r.pending = false
	r.gone = true
	lr, err := r.sink.headers(r.h, bodyFollows)
	if !bodyFollows {
		r.ended = true
	}
	return lr, err
}

// onChunk is onData for one data callback: the chunk goes to the processor, or straight
// on when the processor is out of the picture.
func (r *duplexRun) onChunk(c chunk) (*localReply, error) {
	f := r.f
	if c.err != nil {
		return nil, errBodyRead
	}
	r.d.bodyReceived = true
	if c.eos {
		r.src = nil
	}
	if r.direct || f.complete {
		r.direct = true
		if r.d.replaced {
			// CONTINUE_AND_REPLACE: the rest of the original body (and its trailers,
			// as send_trailers is off) is drained.
			return nil, nil
		}
		if c.eos {
			r.ended = true
		}
		if c.trailers != nil {
			if err := r.sink.data(c.data, false); err != nil {
				return nil, err
			}
			return nil, r.sink.trailers(c.trailers)
		}
		return nil, r.sink.data(c.data, c.eos)
	}
	// With trailers the last data callback is not the end of the stream; the codec
	// hands no empty data before trailers.
	if c.trailers == nil || len(c.data) > 0 {
		r.sentEOS = c.eos && c.trailers == nil
		if _, lr, err := f.send(bodyMessage(r.bp, c.data, r.sentEOS), r.bp); err != nil || lr != nil {
			return lr, err
		}
		r.sent++
		f.e.stats.chunksSent[r.dirIdx].Add(1)
		storeMax(&f.e.stats.largestSent, uint64(len(c.data)))
	}
	if c.trailers != nil && !f.complete {
		// onTrailers: sent at once in this mode, whatever is outstanding.
		r.sentEOS, r.trailers = true, c.trailers
		if _, lr, err := f.send(trailersMessage(r.tp, c.trailers), r.tp); err != nil || lr != nil {
			return lr, err
		}
	}
	if f.complete {
		// The stream broke under the send: what went out is lost, the rest goes on.
		r.sentEOS, r.trailers = c.eos, c.trailers
		return r.unprocessed()
	}
	return nil, nil
}

// onReceive is Filter::onReceiveMessage in this mode.
func (r *duplexRun) onReceive(rcv received) (*localReply, error) {
	f := r.f
	if rcv.err != nil {
		if _, lr, err := f.streamEnded(r.p, rcv.err); err != nil || lr != nil {
			return lr, err
		}
		if r.sent > 0 {
			f.violation(r.bp, "the processor closed the stream after %d body chunk(s) without ending the body: Envoy already drained them, so the message goes on without them", r.sent)
		}
		return r.unprocessed()
	}
	resp := rcv.resp
	if resp.GetOverrideMessageTimeout() != nil {
		f.trace("< override_message_timeout")
		f.e.stats.overrideIgnored.Add(1)
		f.note(r.p, "override_message_timeout ignored: FULL_DUPLEX_STREAMED runs no message timer")
		return nil, nil
	}
	f.trace("< " + replyKind(resp))
	if mo := resp.GetModeOverride(); mo != nil {
		if lr := f.modeOverride(r.p, mo); lr != nil {
			return lr, nil
		}
	}
	var cr *extprocv3.CommonResponse
	var tm *extprocv3.HeaderMutation
	headers, body, trailers := false, false, false
	switch x := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return f.onImmediate(r.p, x.ImmediateResponse), nil
	case *extprocv3.ProcessingResponse_RequestHeaders:
		cr, headers = x.RequestHeaders.GetResponse(), r.p == phaseRequestHeaders
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		cr, headers = x.ResponseHeaders.GetResponse(), r.p == phaseResponseHeaders
	case *extprocv3.ProcessingResponse_RequestBody:
		cr, body = x.RequestBody.GetResponse(), r.bp == phaseRequestBody
	case *extprocv3.ProcessingResponse_ResponseBody:
		cr, body = x.ResponseBody.GetResponse(), r.bp == phaseResponseBody
	case *extprocv3.ProcessingResponse_RequestTrailers:
		tm, trailers = x.RequestTrailers.GetHeaderMutation(), r.tp == phaseRequestTrailers
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		tm, trailers = x.ResponseTrailers.GetHeaderMutation(), r.tp == phaseResponseTrailers
	case nil:
		return r.spurious("unhandled message", "reply with no response set")
	}
	switch {
	case headers && r.pending:
		return r.onHeadersReply(cr)
	case headers:
		return r.spurious("spurious message", "%s reply while no headers message is outstanding", replyKind(resp))
	case body && r.pending:
		return r.spurious("spurious message", "%s reply before the %s reply: replies must come in protocol order, headers first (GIE PR #3033)", replyKind(resp), r.p)
	case body && (r.sent == 0 || r.d.replaced):
		return r.spurious("spurious message", "%s reply while no body chunk is outstanding", replyKind(resp))
	case body:
		return r.onBodyReply(cr)
	case trailers && r.pending:
		// Envoy would even apply it (it takes a trailers reply at any time in this
		// mode); the stand-in holds to the protocol order.
		return r.spurious("spurious message", "%s reply before the %s reply: replies must come in protocol order", replyKind(resp), r.p)
	case trailers && r.trailers == nil:
		return r.spurious("spurious message", "%s reply while no trailers message is outstanding", replyKind(resp))
	case trailers:
		return r.onTrailersReply(tm)
	}
	return r.spurious("spurious message", "%s reply while streaming the %s", replyKind(resp), r.bp)
}

// spurious is a reply Envoy refuses (FailedPrecondition): counted, then fail closed, or
// ignore the processor for the rest of the exchange when failing open is still allowed.
func (r *duplexRun) spurious(details, format string, args ...any) (*localReply, error) {
	f := r.f
	f.e.stats.spurious.Add(1)
	f.violation(r.p, format, args...)
	if lr := f.failSpurious(details); lr != nil {
		return lr, nil
	}
	return r.unprocessed()
}

// unprocessed continues after processing ended without a local reply (clean close, fail
// open): the headers go on as they are and the rest of the body passes through. What
// already went to the processor is lost, as in Envoy, which drained it.
func (r *duplexRun) unprocessed() (*localReply, error) {
	r.direct = true
	if r.pending {
		if lr, err := r.release(r.hasBody); err != nil || lr != nil || r.ended {
			return lr, err
		}
	}
	if r.sentEOS && !r.ended {
		r.ended = true
		if r.trailers != nil {
			return nil, r.sink.trailers(r.trailers)
		}
		return nil, r.sink.data(nil, true)
	}
	return nil, nil
}

// onHeadersReply is ProcessorState::handleHeadersResponse in this mode.
func (r *duplexRun) onHeadersReply(cr *extprocv3.CommonResponse) (*localReply, error) {
	f, d := r.f, r.d
	f.e.stats.msgsReceived.Add(1)
	replacing := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if m := cr.GetHeaderMutation(); m != nil {
		if lr := f.mutateHeaders(r.p, r.h, m, replacing, d.removeContentLength()); lr != nil {
			return lr, nil
		}
	}
	f.routeCache(r.p, cr, r.h)
	if cr.GetTrailers() != nil {
		f.note(r.p, "CommonResponse.trailers is not implemented by Envoy: ignored")
	}
	if !replacing {
		if cr.GetBodyMutation() != nil {
			f.violation(r.p, "body_mutation in a CONTINUE headers reply is ignored by Envoy (stream the body in body replies)")
		}
		return r.release(r.hasBody)
	}
	// CONTINUE_AND_REPLACE: the body mode becomes NONE; a body mutation replaces the body
	// and the rest of the original one is drained.
	d.bodyMode = extprocfilterv3.ProcessingMode_NONE
	r.direct = true
	if r.sent > 0 {
		f.violation(r.p, "CONTINUE_AND_REPLACE after %d body chunk(s) went to the processor: Envoy already drained them, they are lost", r.sent)
	}
	bm := cr.GetBodyMutation()
	if bm == nil {
		return r.unprocessed()
	}
	r.h.del("content-length")
	d.replaced = true
	if lr, err := r.release(true); err != nil || lr != nil {
		return lr, err
	}
	r.ended = true
	return nil, r.sink.data(applyBodyMutation(nil, bm), true)
}

// onTrailersReply is ProcessorState::handleTrailersResponse: the mutated trailers go on and
// end the message.
func (r *duplexRun) onTrailersReply(m *extprocv3.HeaderMutation) (*localReply, error) {
	f := r.f
	f.e.stats.msgsReceived.Add(1)
	if m != nil {
		if lr := f.mutateHeaders(r.tp, r.trailers, m, false, false); lr != nil {
			return lr, nil
		}
	}
	r.ended = true
	return nil, r.sink.trailers(r.trailers)
}

// onBodyReply is ProcessorState::handleDuplexStreamedBodyResponse: only streamed_response
// is accepted; its bytes go on in order and end_of_stream ends the body.
func (r *duplexRun) onBodyReply(cr *extprocv3.CommonResponse) (*localReply, error) {
	f := r.f
	bm := cr.GetBodyMutation()
	sr, ok := bm.GetMutation().(*extprocv3.BodyMutation_StreamedResponse)
	if !ok {
		what := "a body reply without body_mutation.streamed_response (an empty CommonResponse makes Envoy fail the stream, GIE PR #3028)"
		switch bm.GetMutation().(type) {
		case *extprocv3.BodyMutation_Body:
			what = "body_mutation.body in FULL_DUPLEX_STREAMED (only streamed_response is accepted)"
		case *extprocv3.BodyMutation_ClearBody:
			what = "body_mutation.clear_body in FULL_DUPLEX_STREAMED (only streamed_response is accepted)"
		}
		return r.spurious("spurious message", "%s", what)
	}
	f.e.stats.msgsReceived.Add(1)
	if cr.GetHeaderMutation() != nil {
		f.e.stats.bodyHeaderMutationsIgnored.Add(1)
		f.note(r.bp, "header mutation in a streamed body reply ignored: the headers already went on")
	}
	f.routeCache(r.bp, cr, nil)
	b, eos := sr.StreamedResponse.GetBody(), sr.StreamedResponse.GetEndOfStream()
	f.e.stats.chunksReceived[r.dirIdx].Add(1)
	storeMax(&f.e.stats.largestReceived, uint64(len(b)))
	if limit := f.e.cfg.MaxStreamedChunk; len(b) > limit {
		f.violation(r.bp, "streamed_response chunk of %d bytes exceeds %d bytes (keep each body reply within ~64 KiB)", len(b), limit)
	}
	if eos && r.trailers != nil {
		f.violation(r.bp, "streamed_response end_of_stream on a message that ends with trailers: Envoy would end the stream before the trailers (end it with the trailers reply)")
		return f.fail("envoysim_streamed_body_ended_before_trailers"), nil
	}
	if eos && !r.sentEOS {
		f.violation(r.bp, "streamed_response end_of_stream before Envoy sent the end of the body (%d chunk(s) sent so far): the rest would be injected after the end of the stream", r.sent)
		return f.fail("envoysim_streamed_body_ended_early"), nil
	}
	if eos {
		r.ended = true
	}
	if err := r.sink.data(b, eos); err != nil {
		return nil, err
	}
	return nil, nil
}
