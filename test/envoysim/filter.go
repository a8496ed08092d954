package envoysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errAborted means the downstream request went away (client cancel or Close): the exchange
// is dropped without a response, as Envoy resets the stream.
var errAborted = errors.New("envoysim: downstream request aborted")

// phase is the kind of message Envoy sends the processor.
type phase uint8

const (
	phaseRequestHeaders phase = iota
	phaseRequestBody
	phaseResponseHeaders
	phaseResponseBody
	// Trailers are sent with trailer mode SEND when the message has any.
	phaseRequestTrailers
	phaseResponseTrailers
)

func (p phase) String() string {
	switch p {
	case phaseRequestHeaders:
		return "request_headers"
	case phaseRequestBody:
		return "request_body"
	case phaseResponseHeaders:
		return "response_headers"
	case phaseRequestTrailers:
		return "request_trailers"
	case phaseResponseTrailers:
		return "response_trailers"
	default:
		return "response_body"
	}
}

func (p phase) isHeaders() bool { return p == phaseRequestHeaders || p == phaseResponseHeaders }
func (p phase) isRequest() bool {
	return p == phaseRequestHeaders || p == phaseRequestBody || p == phaseRequestTrailers
}

// direction is Envoy's ProcessorState for one direction (decoding = request, encoding =
// response), reduced to what the modelled modes need.
type direction struct {
	sendHeaders  bool
	sendTrailers bool
	bodyMode     extprocfilterv3.ProcessingMode_BodySendMode
	// held is the header map Envoy keeps paused while a BUFFERED body is collected, so that
	// a body reply may still mutate it; nil once the headers have moved on.
	held *headerMap
	// replaced is set by CONTINUE_AND_REPLACE with a body: later downstream data is
	// drained and replacedBody is used instead.
	replaced     bool
	replacedBody []byte
	// bodyReceived is ProcessorState::bodyReceived: a body chunk reached the filter in
	// this direction (in FULL_DUPLEX_STREAMED it ends fail-open, envoy PR #41276).
	bodyReceived bool
}

func (d *direction) setMode(headers extprocfilterv3.ProcessingMode_HeaderSendMode, body extprocfilterv3.ProcessingMode_BodySendMode, trailers extprocfilterv3.ProcessingMode_HeaderSendMode) {
	d.sendHeaders = headers != extprocfilterv3.ProcessingMode_SKIP
	d.bodyMode = body
	// Trailer modes default to SKIP (processing_mode.proto), header modes to SEND.
	d.sendTrailers = trailers == extprocfilterv3.ProcessingMode_SEND
}

// removeContentLength is ProcessorState::shouldRemoveContentLength for the modelled modes:
// BUFFERED with headers SKIP (the processor could not fix the length) and
// FULL_DUPLEX_STREAMED (the body is rewritten after the headers went on). Envoy then also
// drops a content-length the processor sets (envoy#38291, #39035; the opt-out of envoy
// PR #39067 was never merged).
func (d *direction) removeContentLength() bool {
	return (d.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED && !d.sendHeaders) || d.duplex()
}

// duplex reports whether this direction streams its body in FULL_DUPLEX_STREAMED.
func (d *direction) duplex() bool {
	return d.bodyMode == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// localReply is a response Envoy makes itself (sendLocalReply).
type localReply struct {
	status  int
	body    []byte
	headers *extprocv3.HeaderMutation // immediate_response.headers
	details string
	// grpcStatus is immediate_response.grpc_status: the grpc-status of the trailers-only
	// answer to a gRPC request (nil: derived from status).
	grpcStatus *uint32
}

// filter is one ext_proc filter instance: Envoy creates one per HTTP request.
type filter struct {
	e      *Envoy
	ctx    context.Context
	rec    *Exchange
	label  string
	stream *sideStream
	// complete is processing_complete_: once set, no message goes to the processor again
	// and the request continues with whatever was already applied.
	complete           bool
	protocolConfigSent bool
	// upstream is the cluster the route cache holds (Envoy.pickRoute).
	upstream *url.URL
	dec, enc direction
}

func newFilter(ctx context.Context, e *Envoy, rec *Exchange) *filter {
	f := &filter{e: e, ctx: ctx, rec: rec, label: fmt.Sprintf("%s %s (x-request-id %s)", rec.Method, rec.Path, rec.RequestID)}
	m := e.cfg.Mode
	f.dec.setMode(m.GetRequestHeaderMode(), m.GetRequestBodyMode(), m.GetRequestTrailerMode())
	f.enc.setMode(m.GetResponseHeaderMode(), m.GetResponseBodyMode(), m.GetResponseTrailerMode())
	return f
}

func (f *filter) dir(p phase) *direction {
	if p.isRequest() {
		return &f.dec
	}
	return &f.enc
}

func (f *filter) violation(p phase, format string, args ...any) {
	f.e.journal.violation(fmt.Sprintf("%s: %s: %s", f.label, p, fmt.Sprintf(format, args...)))
}

func (f *filter) note(p phase, format string, args ...any) {
	f.e.journal.note("%s: %s: "+format, append([]any{f.label, p}, args...))
}

func (f *filter) trace(s string) { f.rec.Trace = append(f.rec.Trace, s) }

// failOpen is Filter::failureModeAllow: failure_mode_allow, except once a body chunk went
// into a FULL_DUPLEX_STREAMED direction (Envoy cannot replay what it already handed over).
func (f *filter) failOpen() bool {
	if (f.dec.duplex() && f.dec.bodyReceived) || (f.enc.duplex() && f.enc.bodyReceived) {
		return false
	}
	return f.e.cfg.FailureModeAllow
}

// closeStream is Filter::closeStream: the side stream is half-closed and reset.
func (f *filter) closeStream() {
	if f.stream != nil {
		f.stream.close()
		f.stream = nil
		f.e.stats.streamsClosed.Add(1)
	}
}

// finish ends processing for good (processing_complete_ plus closeStream).
func (f *filter) finish() {
	f.complete = true
	f.closeStream()
}

// onHeaders is decodeHeaders/encodeHeaders: it sends a headers message when the mode
// asks for one and applies the reply to h. body is the request body when another filter
// already buffered it (CONTINUE_AND_REPLACE then edits it), nil otherwise.
func (f *filter) onHeaders(p phase, h *headerMap, endStream bool, body *[]byte) (*localReply, error) {
	d := f.dir(p)
	if f.complete || !d.sendHeaders {
		if !f.complete && d.removeContentLength() {
			h.del("content-length")
		}
		return nil, nil
	}
	req := headersMessage(p, h, endStream)
	d.held = h
	// Envoy strips content-length right after sending, before any reply.
	if d.removeContentLength() {
		h.del("content-length")
	}
	resp, lr, err := f.call(req, p)
	if err != nil || lr != nil || resp == nil {
		return lr, err
	}
	return f.onReply(p, resp, h, body), nil
}

// onBody is the BUFFERED end-of-stream body message: the whole body in one message. body
// is replaced by the processor's mutation.
func (f *filter) onBody(p phase, body *[]byte) (*localReply, error) {
	return f.bodyCall(p, body, true)
}

// bodyCall sends the whole buffered body in one message (end_of_stream as given) and
// applies the reply.
func (f *filter) bodyCall(p phase, body *[]byte, endStream bool) (*localReply, error) {
	d := f.dir(p)
	if f.complete || d.bodyMode != extprocfilterv3.ProcessingMode_BUFFERED {
		return nil, nil
	}
	resp, lr, err := f.call(bodyMessage(p, *body, endStream), p)
	if err != nil || lr != nil || resp == nil {
		return lr, err
	}
	return f.onReply(p, resp, d.held, body), nil
}

// onBufferedBody is the end of a BUFFERED message that may carry trailers t (nil: none).
// Without trailers it is onBody. With trailers it is Filter::onTrailers: the buffered body,
// when there is any, goes with end_of_stream false (a gRPC message ends with trailers, so
// this is how a gRPC body reaches the processor), then, with trailer mode SEND, the
// trailers message, whose reply mutates t.
func (f *filter) onBufferedBody(p phase, body *[]byte, t *headerMap) (*localReply, error) {
	if t == nil {
		return f.onBody(p, body)
	}
	if len(*body) > 0 {
		if lr, err := f.bodyCall(p, body, false); err != nil || lr != nil {
			return lr, err
		}
	}
	tp := phaseResponseTrailers
	if p.isRequest() {
		tp = phaseRequestTrailers
	}
	return f.onTrailers(tp, t)
}

// onTrailers sends the trailers message of phase p when the trailer mode says SEND and
// applies the reply's header mutation to t. The held headers move on: no reply can change
// them any more.
func (f *filter) onTrailers(p phase, t *headerMap) (*localReply, error) {
	d := f.dir(p)
	d.held = nil
	if f.complete || !d.sendTrailers {
		return nil, nil
	}
	resp, lr, err := f.call(trailersMessage(p, t), p)
	if err != nil || lr != nil || resp == nil {
		return lr, err
	}
	return f.onReply(p, resp, t, nil), nil
}

// headersMessage is the headers message of phase p (request or response headers).
func headersMessage(p phase, h *headerMap, endStream bool) *extprocv3.ProcessingRequest {
	hh := &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: endStream}
	req := &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{}}
	if p == phaseRequestHeaders {
		req.Request = &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}
	}
	return req
}

// bodyMessage is the body message of phase p carrying body.
func bodyMessage(p phase, body []byte, endStream bool) *extprocv3.ProcessingRequest {
	hb := &extprocv3.HttpBody{Body: body, EndOfStream: endStream}
	req := &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{}}
	if p == phaseRequestBody {
		req.Request = &extprocv3.ProcessingRequest_RequestBody{RequestBody: hb}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: hb}
	}
	return req
}

// trailersMessage is the trailers message of phase p.
func trailersMessage(p phase, t *headerMap) *extprocv3.ProcessingRequest {
	ht := &extprocv3.HttpTrailers{Trailers: t.proto()}
	req := &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{}}
	if p == phaseRequestTrailers {
		req.Request = &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: ht}
	} else {
		req.Request = &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: ht}
	}
	return req
}

// call sends one message and waits for its reply. It returns the reply, or a local reply
// (failure, fail closed), or neither when processing ended and the request goes on
// unprocessed (clean close, fail open).
func (f *filter) call(req *extprocv3.ProcessingRequest, p phase) (*extprocv3.ProcessingResponse, *localReply, error) {
	if f.stream != nil {
		if lr, done, err := f.checkIdle(p); done || err != nil {
			return nil, lr, err
		}
	}
	if resp, lr, err := f.send(req, p); err != nil || lr != nil || f.complete {
		return resp, lr, err
	}
	// On io.EOF the stream is already gone; Recv below reports why.
	return f.await(p)
}

// send opens the side stream when needed and sends one message without waiting for a
// reply. It fails like call when the stream cannot be opened or breaks.
func (f *filter) send(req *extprocv3.ProcessingRequest, p phase) (*extprocv3.ProcessingResponse, *localReply, error) {
	if f.stream == nil {
		s, err := openSideStream(f.ctx, f.e.client, f.e.cfg.onInbox)
		if err != nil {
			return f.streamEnded(p, err)
		}
		f.stream = s
		f.e.stats.streamsStarted.Add(1)
	}
	if !f.protocolConfigSent {
		// Envoy tells the processor its body modes once, on the first message.
		req.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: f.dec.bodyMode, ResponseBodyMode: f.enc.bodyMode}
		f.protocolConfigSent = true
	}
	if err := f.stream.client.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return f.streamEnded(p, err)
	} else if err == nil {
		f.e.stats.msgsSent.Add(1)
		f.trace("> " + p.String())
	}
	return nil, nil, nil
}

// checkIdle handles what arrived while Envoy had no message outstanding: Envoy dispatches it
// at once, so a reply is spurious and an end of stream ends processing.
func (f *filter) checkIdle(p phase) (*localReply, bool, error) {
	select {
	case r := <-f.stream.inbox:
		if r.err != nil {
			_, lr, err := f.streamEnded(p, r.err)
			return lr, true, err
		}
		if r.resp.GetOverrideMessageTimeout() != nil {
			f.e.stats.overrideIgnored.Add(1)
			f.note(p, "override_message_timeout received while no message was outstanding: ignored")
			return nil, false, nil
		}
		f.trace("< " + replyKind(r.resp))
		f.e.stats.spurious.Add(1)
		f.violation(p, "unexpected %s reply while no message was outstanding (before sending %s)", replyKind(r.resp), p)
		return f.failSpurious("spurious message"), true, nil
	default:
		return nil, false, nil
	}
}

// await waits for the reply to the message of phase p under message_timeout.
func (f *filter) await(p phase) (*extprocv3.ProcessingResponse, *localReply, error) {
	timer := time.NewTimer(f.e.cfg.MessageTimeout)
	defer timer.Stop()
	extended := false
	for {
		select {
		case <-f.ctx.Done():
			return nil, nil, errAborted
		case <-timer.C:
			return f.timeout(p)
		case r := <-f.stream.inbox:
			if r.err != nil {
				return f.streamEnded(p, r.err)
			}
			if d := r.resp.GetOverrideMessageTimeout(); d != nil {
				f.trace("< override_message_timeout")
				if r.resp.GetResponse() != nil {
					f.violation(p, "a reply carrying override_message_timeout is only a timer request: Envoy ignores its %s", replyKind(r.resp))
				}
				if f.overrideTimeout(p, d, extended) {
					extended = true
					timer.Reset(d.AsDuration())
				}
				continue
			}
			f.trace("< " + replyKind(r.resp))
			return r.resp, nil, nil
		}
	}
}

// overrideTimeout is Filter::onNewTimeout: honoured once per message, only within
// [1 ms, max_message_timeout].
func (f *filter) overrideTimeout(p phase, d *durationpb.Duration, extended bool) bool {
	if err := d.CheckValid(); err != nil || extended || d.AsDuration() < time.Millisecond || d.AsDuration() > f.e.cfg.MaxMessageTimeout {
		f.e.stats.overrideIgnored.Add(1)
		f.note(p, "override_message_timeout %v ignored (max_message_timeout %v, at most once per message)", d.AsDuration(), f.e.cfg.MaxMessageTimeout)
		return false
	}
	f.e.stats.overrideReceived.Add(1)
	return true
}

// streamEnded handles the end of the side stream: a clean close lets the request go on
// unprocessed; a gRPC error fails it closed (500) unless failure_mode_allow.
func (f *filter) streamEnded(p phase, err error) (*extprocv3.ProcessingResponse, *localReply, error) {
	if f.ctx.Err() != nil {
		return nil, nil, errAborted
	}
	if errors.Is(err, io.EOF) {
		f.trace("< end of stream")
		f.note(p, "the processor closed the stream: the request continues unprocessed")
		f.finish()
		return nil, nil, nil
	}
	st := status.Convert(err)
	f.trace("< gRPC status " + st.Code().String())
	f.e.stats.streamsFailed.Add(1)
	f.note(p, "gRPC error from the processor: %s: %s", st.Code(), st.Message())
	f.finish()
	if f.failOpen() {
		f.e.stats.failureModeAllowed.Add(1)
		return nil, nil, nil
	}
	return nil, &localReply{status: f.e.cfg.StatusOnError, details: fmt.Sprintf("ext_proc_error_gRPC_error_%d{%s}", uint32(st.Code()), st.Message())}, nil
}

// timeout is Filter::onMessageTimeout: 504 (500 before envoy#34843) unless fail open.
func (f *filter) timeout(p phase) (*extprocv3.ProcessingResponse, *localReply, error) {
	f.trace("! message timeout")
	f.e.stats.messageTimeouts.Add(1)
	f.violation(p, "no reply within message_timeout %v", f.e.cfg.MessageTimeout)
	f.finish()
	if f.failOpen() {
		f.e.stats.failureModeAllowed.Add(1)
		return nil, nil, nil
	}
	return nil, &localReply{status: 504, details: "ext_proc_error_per-message_timeout_exceeded"}, nil
}

// onReply is Filter::onReceiveMessage for a reply to the message of phase p. h is the
// header map the reply may mutate (nil when not available) and body the buffered body.
func (f *filter) onReply(p phase, resp *extprocv3.ProcessingResponse, h *headerMap, body *[]byte) *localReply {
	if mo := resp.GetModeOverride(); mo != nil {
		if lr := f.modeOverride(p, mo); lr != nil {
			return lr
		}
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		if p == phaseRequestHeaders {
			return f.onHeadersReply(p, r.RequestHeaders.GetResponse(), h, body)
		}
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		if p == phaseResponseHeaders {
			return f.onHeadersReply(p, r.ResponseHeaders.GetResponse(), h, body)
		}
	case *extprocv3.ProcessingResponse_RequestBody:
		if p == phaseRequestBody {
			return f.onBodyReply(p, r.RequestBody.GetResponse(), body)
		}
	case *extprocv3.ProcessingResponse_ResponseBody:
		if p == phaseResponseBody {
			return f.onBodyReply(p, r.ResponseBody.GetResponse(), body)
		}
	case *extprocv3.ProcessingResponse_RequestTrailers:
		if p == phaseRequestTrailers {
			return f.onTrailersReply(p, r.RequestTrailers.GetHeaderMutation(), h)
		}
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		if p == phaseResponseTrailers {
			return f.onTrailersReply(p, r.ResponseTrailers.GetHeaderMutation(), h)
		}
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return f.onImmediate(p, r.ImmediateResponse)
	case nil:
		f.e.stats.spurious.Add(1)
		f.violation(p, "reply with no response set")
		return f.failSpurious("unhandled message")
	}
	f.e.stats.spurious.Add(1)
	f.violation(p, "spurious %s reply to a %s message", replyKind(resp), p)
	return f.failSpurious("spurious message")
}

// modeOverride applies a mode_override the way Envoy does: only with allow_mode_override,
// only in a reply to a headers message, and to both directions at once.
func (f *filter) modeOverride(p phase, mo *extprocfilterv3.ProcessingMode) *localReply {
	switch {
	case !f.e.cfg.AllowModeOverride:
		f.e.stats.modeOverridesIgnored.Add(1)
		f.note(p, "mode_override ignored: allow_mode_override is false")
		return nil
	case isDuplex(f.e.cfg.Mode):
		f.e.stats.modeOverridesIgnored.Add(1)
		f.note(p, "mode_override ignored: Envoy does not support it when a body mode is FULL_DUPLEX_STREAMED")
		return nil
	case !p.isHeaders():
		f.e.stats.modeOverridesIgnored.Add(1)
		f.note(p, "mode_override ignored: it is only honoured in a reply to a headers message")
		return nil
	}
	m := effectiveModeOverride(mo, f.e.cfg.Mode)
	if !bodyModeModelled(m.GetRequestBodyMode()) || !bodyModeModelled(m.GetResponseBodyMode()) {
		f.violation(p, "mode_override to body modes %s/%s is not modelled by envoysim", m.GetRequestBodyMode(), m.GetResponseBodyMode())
		return f.fail("envoysim_unmodelled_mode_override")
	}
	f.e.stats.modeOverrides.Add(1)
	f.dec.setMode(m.GetRequestHeaderMode(), m.GetRequestBodyMode(), m.GetRequestTrailerMode())
	f.enc.setMode(m.GetResponseHeaderMode(), m.GetResponseBodyMode(), m.GetResponseTrailerMode())
	return nil
}

// onHeadersReply is ProcessorState::handleHeadersResponse.
func (f *filter) onHeadersReply(p phase, cr *extprocv3.CommonResponse, h *headerMap, body *[]byte) *localReply {
	d := f.dir(p)
	f.e.stats.msgsReceived.Add(1)
	replacing := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if m := cr.GetHeaderMutation(); m != nil {
		if lr := f.mutateHeaders(p, h, m, replacing, d.removeContentLength()); lr != nil {
			return lr
		}
	}
	f.routeCache(p, cr, h)
	if cr.GetTrailers() != nil {
		f.note(p, "CommonResponse.trailers is not implemented by Envoy: ignored")
	}
	if replacing {
		if bm := cr.GetBodyMutation(); bm != nil {
			// Envoy drops content-length: the processor is not trusted to have fixed it.
			h.del("content-length")
			d.replaced = true
			d.replacedBody = applyBodyMutation(*body, bm)
			if d.replacedBody == nil {
				d.replacedBody = []byte{}
			}
		}
		d.bodyMode = extprocfilterv3.ProcessingMode_NONE
		d.held = nil
		return nil
	}
	if cr.GetBodyMutation() != nil {
		f.violation(p, "body_mutation in a CONTINUE headers reply is ignored by Envoy (use CONTINUE_AND_REPLACE or the body reply)")
	}
	if d.bodyMode != extprocfilterv3.ProcessingMode_BUFFERED {
		d.held = nil
	}
	return nil
}

// onTrailersReply is ProcessorState::handleTrailersResponse: the header mutation applies
// to the trailers t under the filter's mutation rules.
func (f *filter) onTrailersReply(p phase, m *extprocv3.HeaderMutation, t *headerMap) *localReply {
	f.e.stats.msgsReceived.Add(1)
	if m == nil {
		return nil
	}
	return f.mutateHeaders(p, t, m, false, false)
}

// onBodyReply is ProcessorState::handleBufferedBodyCallback.
func (f *filter) onBodyReply(p phase, cr *extprocv3.CommonResponse, body *[]byte) *localReply {
	d := f.dir(p)
	f.e.stats.msgsReceived.Add(1)
	replacing := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if m := cr.GetHeaderMutation(); m != nil {
		if d.held != nil {
			if lr := f.mutateHeaders(p, d.held, m, replacing, d.removeContentLength()); lr != nil {
				return lr
			}
		} else {
			f.note(p, "header mutation in a body reply ignored: the headers were not held (header mode SKIP)")
		}
	}
	if bm := cr.GetBodyMutation(); bm != nil {
		if err := checkContentLength(d.held, bm); err != nil {
			cl, _ := d.held.get("content-length")
			f.violation(p, "content-length %s does not match the %d-byte mutated body: Envoy rejects the mutation with a 500", cl, len(bm.GetBody()))
			return f.fail(err.Error())
		}
		if _, ok := bm.GetMutation().(*extprocv3.BodyMutation_StreamedResponse); ok {
			f.violation(p, "streamed_response is for FULL_DUPLEX_STREAMED: Envoy ignores it in BUFFERED mode")
		}
		*body = applyBodyMutation(*body, bm)
	}
	f.routeCache(p, cr, d.held)
	d.held = nil
	return nil
}

// mutateHeaders applies a header mutation and accounts for it like Envoy.
func (f *filter) mutateHeaders(p phase, h *headerMap, m *extprocv3.HeaderMutation, replacing, skipContentLength bool) *localReply {
	res, err := applyHeaderMutation(h, m, replacing, skipContentLength)
	f.e.stats.rejectedMutations.Add(uint64(len(res.ignored)))
	if res.droppedContentLength > 0 {
		f.e.stats.contentLengthDrops.Add(uint64(res.droppedContentLength))
		f.note(p, "content-length set by the processor dropped: Envoy strips it in this body mode (the message goes chunked)")
	}
	for _, s := range res.ignored {
		f.note(p, "header mutation rejected: %s", s)
	}
	for _, s := range res.notes {
		f.note(p, "%s", s)
	}
	for _, k := range res.emptied {
		f.violation(p, "set_headers %s uses the string `value`, which Envoy ignores (it reads raw_value only, envoy#31555): the header is set to an empty value", k)
	}
	if err != nil {
		f.violation(p, "header mutation rejected with an error: %v", err)
		return f.fail(err.Error())
	}
	return nil
}

// routeCache accounts for clear_route_cache: in a request-direction reply with a header
// mutation, the route is matched again on the mutated headers h (Config.HeaderRoutes).
func (f *filter) routeCache(p phase, cr *extprocv3.CommonResponse, h *headerMap) {
	if !cr.GetClearRouteCache() {
		return
	}
	if !p.isRequest() || cr.GetHeaderMutation() == nil {
		f.e.stats.clearRouteCacheIgnored.Add(1)
		f.note(p, "clear_route_cache ignored (response direction, or no header mutation in the same reply)")
		return
	}
	if h != nil {
		f.upstream = f.e.pickRoute(h)
	}
}

// onImmediate handles an immediate_response: processing ends and a local reply goes out.
func (f *filter) onImmediate(p phase, ir *extprocv3.ImmediateResponse) *localReply {
	f.e.stats.msgsReceived.Add(1)
	f.e.stats.immediateResponses.Add(1)
	f.finish()
	code := 200
	if ir.GetStatus() != nil {
		code = int(ir.GetStatus().GetCode())
	}
	if code < 200 {
		f.note(p, "immediate_response status %d replaced by 200 (Envoy requires >= 200)", code)
		code = 200
	}
	if code > 999 {
		f.violation(p, "immediate_response status %d cannot be sent on HTTP/1", code)
		return &localReply{status: f.e.cfg.StatusOnError, details: "envoysim_invalid_immediate_status"}
	}
	lr := &localReply{status: code, body: ir.GetBody(), headers: ir.GetHeaders(), details: underscoreSpaces(ir.GetDetails())}
	if gs := ir.GetGrpcStatus(); gs != nil {
		c := gs.GetStatus()
		lr.grpcStatus = &c
	}
	return lr
}

// failSpurious is the fate of a spurious reply since envoy PR #39994: fail closed with a
// local reply, or (fail open) ignore the processor for the rest of the request.
func (f *filter) failSpurious(details string) *localReply {
	if f.failOpen() {
		f.e.stats.failureModeAllowed.Add(1)
		f.finish()
		return nil
	}
	return f.fail(details)
}

// fail is Filter::handleErrorResponse: processing ends with a status_on_error local reply.
func (f *filter) fail(details string) *localReply {
	f.finish()
	return &localReply{status: f.e.cfg.StatusOnError, details: details}
}

// replyKind names the oneof set in a reply.
func replyKind(r *extprocv3.ProcessingResponse) string {
	switch r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingResponse_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingResponse_ResponseBody:
		return "response_body"
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return "request_trailers"
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return "response_trailers"
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return "immediate_response"
	case *extprocv3.ProcessingResponse_StreamedImmediateResponse:
		return "streamed_immediate_response"
	case nil:
		return "empty"
	default:
		return "unknown"
	}
}

// underscoreSpaces is StringUtil::replaceAllEmptySpace, applied to response code details.
func underscoreSpaces(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
}
