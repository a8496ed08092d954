// Package extproc is tfsbridge's Envoy adapter: the
// envoy.service.ext_proc.v3.ExternalProcessor/Process stream loop and the
// gRPC server around it. It is protocol only — message order, reply
// types, header and body mutations, immediate responses, mode overrides;
// every TF Serving / v2 decision is the session's.
//
// The Envoy filter is expected to run with request and response headers
// SEND and failure_mode_allow: false, and either bodies BUFFERED, trailers
// SKIP and allow_mode_override: true (this file's loop), or bodies
// FULL_DUPLEX_STREAMED with trailers SEND (duplex.go); --body-mode says
// which (see docs/architecture.md).
package extproc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procmodev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// Processor implements extprocv3.ExternalProcessorServer: one session per
// stream (one stream per HTTP request).
type Processor struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg     *session.Config
	opt     Options
	metrics *observe.Metrics
	log     *slog.Logger
	// inflight tracks the streams in progress for a graceful stop.
	inflight inflight.Tracker
	// holding counts the full-duplex streams that withhold a headers
	// reply: the ones that can still answer TF's 503 if the shutdown cuts
	// them now.
	holding atomic.Int64
	// receivers run the full-duplex streams' receive loops.
	receivers *workers
}

// Inflight returns the tracker of the streams in progress; a Server
// built around p drains and cuts them (ServerOptions.Inflight).
func (p *Processor) Inflight() *inflight.Tracker { return &p.inflight }

// NewProcessor returns a Processor whose sessions share cfg.
func NewProcessor(cfg *session.Config, opt Options) *Processor {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Processor{cfg: cfg, opt: opt, metrics: cfg.Metrics, log: log,
		receivers: newWorkers(int(streamWorkers()), workerKeep)}
}

// passThroughMode is the mode_override sent with the request-headers
// reply of an exchange that is not ours: no request or response body, and
// no response headers either (nothing to do there, and it saves Envoy a
// round trip per request). A deployment that sets allowed_override_modes
// must list exactly this mode.
var passThroughMode = &procmodev3.ProcessingMode{
	RequestBodyMode:    procmodev3.ProcessingMode_NONE,
	ResponseHeaderMode: procmodev3.ProcessingMode_SKIP,
	ResponseBodyMode:   procmodev3.ProcessingMode_NONE,
}

// localReplyMode is the mode_override sent when a stream starts at the
// response headers (another filter's local reply): do not send its body.
var localReplyMode = &procmodev3.ProcessingMode{
	ResponseBodyMode: procmodev3.ProcessingMode_NONE,
}

// Process runs one stream: exactly one reply, of the matching type, per
// message (or an ImmediateResponse), until Envoy ends the stream. io.EOF
// and codes.Canceled are Envoy's normal ways to end a side stream.
func (p *Processor) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	defer p.metrics.StreamStarted("extproc")()
	cut, done := p.inflight.Start(stream.Context(), nil)
	defer done()
	sess := session.New(p.cfg)
	defer sess.Close()
	st := &streamTrace{ctx: stream.Context()}
	defer st.end()
	f := &framedRequest{}
	err := recvFramed(stream, f)
	if err != nil {
		return p.recvEnded(sess, err)
	}
	req := f.ProcessingRequest
	// Envoy announces its body modes on the first message of a stream.
	dreq, dresp, err := p.duplexOf(req.GetProtocolConfig())
	if err != nil {
		p.log.Error("ext_proc body mode mismatch", "error", err)
		return stream.Send(immediate(sess.Fail(apierr.New(apierr.Internal, err.Error()))))
	}
	if dreq || dresp {
		d := &duplex{p: p, stream: stream, sess: sess, st: st, req: dreq, resp: dresp, cut: cut}
		defer d.stopDeadline(true)
		return d.run(req)
	}
	for {
		if resp, parts := p.handleFramed(st, sess, f); resp != nil {
			var err error
			if parts != nil {
				err = stream.SendMsg(parts)
				parts.releaseUnsent()
			} else {
				err = stream.Send(resp)
			}
			if err != nil {
				p.logger(sess).Debug("ext_proc stream send failed", "error", err)
				return err
			}
		}
		if sess.Answered() {
			// The reply has left: Envoy holds the answer now, and the
			// stream may stay open as long as its client takes to read
			// it. Nothing of ours is held for it any more.
			sess.ReleaseAdmission()
		}
		if err = recvFramed(stream, f); err != nil {
			return p.recvEnded(sess, err)
		}
	}
}

// recvFramed receives the next message into f (one per stream), a large
// request body left in the frames it arrived in (see framedRequest). The
// message is reused: decoding resets it, and what a message held (its
// headers, its body) is in submessages of its own, which the reset only
// lets go of.
func recvFramed(stream extprocv3.ExternalProcessor_ProcessServer, f *framedRequest) error {
	f.free()
	if f.ProcessingRequest == nil {
		f.ProcessingRequest = new(extprocv3.ProcessingRequest)
	}
	return stream.RecvMsg(f)
}

// handleFramed is handleSafely for a message received by recvFramed: a
// request body left in its frames is translated from them
// (session.RequestParts), and its reply's v2 body comes back in parts
// for bodyCodec to send where they lie; the frames go once it is
// translated.
func (p *Processor) handleFramed(st *streamTrace, sess *session.Session, f *framedRequest) (resp *extprocv3.ProcessingResponse, parts *partsResponse) {
	if f.chunks == nil {
		if f.codec && f.GetResponseBody() != nil {
			return p.responseParts(st, sess, f.ProcessingRequest)
		}
		return p.handleSafely(st, sess, f.ProcessingRequest), nil
	}
	defer f.free()
	defer func() {
		if v := recover(); v != nil {
			resp, parts = immediate(sess.Recover("extproc", v)), nil
		}
	}()
	if f.GetObservabilityMode() {
		return nil, nil
	}
	body := f.GetRequestBody()
	if !body.GetEndOfStream() && sess.AwaitingBody() {
		return st.bodyReply(withRequestID(sess.Fail(errPartialBody()), sess, false), true), nil
	}
	a, chunks, release := sess.RequestParts(st.ctx, f.chunks)
	f.free()
	a = withRequestID(a, sess, false)
	resp = st.bodyReply(a, true)
	if a.Verdict != session.Continue || chunks == nil {
		if release != nil {
			release()
		}
		return resp, nil
	}
	// The v2 body's blocks go back to the decoder's pools once gRPC has
	// written them (partsResponse.handOver), as a translated answer's do.
	return resp, &partsResponse{msg: resp, parts: chunks, release: release}
}

// recvEnded is Process's result once Recv fails: io.EOF and
// codes.Canceled are Envoy's normal ways to end a side stream.
func (p *Processor) recvEnded(sess *session.Session, err error) error {
	if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
		return nil
	}
	p.logger(sess).Debug("ext_proc stream receive failed", "error", err)
	return err
}

func (p *Processor) logger(sess *session.Session) *slog.Logger {
	if sess.RequestID() != "" {
		return sess.Logger()
	}
	return p.log
}

// handleSafely is handle, except that a panic answers this stream's
// exchange with TF's 500 (session.Recover logs and counts it) instead of
// ending the process and every other stream with it.
func (p *Processor) handleSafely(st *streamTrace, sess *session.Session,
	req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse) {
	defer func() {
		if v := recover(); v != nil {
			resp = immediate(sess.Recover("extproc", v))
		}
	}()
	return p.handle(st, sess, req)
}

// handle maps one ProcessingRequest to its reply; nil means no reply is
// due (observability mode, flow-control-only messages).
func (p *Processor) handle(st *streamTrace, sess *session.Session,
	req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if req.GetObservabilityMode() {
		// Envoy ignores replies in observability mode and asks for none.
		return nil
	}
	ctx := st.ctx
	switch m := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		h := headersOf(m.RequestHeaders)
		ctx = st.begin(h)
		a := sess.RequestHeaders(ctx, h.Get(":method"), h.Get(":path"), h, m.RequestHeaders.GetEndOfStream())
		return grpcMode(sess, a, st.headersReply(withRequestID(a, sess, false), true))

	case *extprocv3.ProcessingRequest_RequestBody:
		return st.bodyReply(withRequestID(bodyAction(ctx, sess, m.RequestBody, sess.RequestChunk, true), sess, false), true)

	case *extprocv3.ProcessingRequest_ResponseHeaders:
		h := headersOf(m.ResponseHeaders)
		code, _ := strconv.Atoi(h.Get(":status"))
		a := sess.ResponseHeaders(ctx, code, h, m.ResponseHeaders.GetEndOfStream())
		return st.headersReply(st.withRequestID(a, sess, true), false)

	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.bodyReply(withRequestID(bodyAction(ctx, sess, m.ResponseBody, sess.ResponseChunk, false), sess, false), false)

	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}}

	case *extprocv3.ProcessingRequest_ResponseTrailers:
		// A TF gRPC exchange's status is here (grpc.go).
		a := sess.ResponseTrailers(ctx, headerMap(m.ResponseTrailers.GetTrailers().GetHeaders()))
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: mutation(a.Set, a.Remove)}}}
	}
	return nil
}

// bodyAction runs a BUFFERED body event: the whole body as one chunk with
// end set, its output gathered into one reply. Only whole bodies can be
// translated here: a chunk without end_of_stream means the filter is not
// in BUFFERED mode (STREAMED, or BUFFERED_PARTIAL over the buffer limit).
// Forwarding an untranslated TF body to a v2 server is worse than a clear
// error.
func bodyAction(ctx context.Context, sess *session.Session, body *extprocv3.HttpBody,
	event func(context.Context, []byte, bool, session.Sink) session.Action, request bool) session.Action {
	if !request && sess.GRPC() {
		// A gRPC answer's body comes whole but without end_of_stream:
		// its trailers (the status) follow.
		return event(ctx, body.GetBody(), body.GetEndOfStream(), session.Whole)
	}
	if !body.GetEndOfStream() && sess.AwaitingBody() {
		return sess.Fail(errPartialBody())
	}
	return event(ctx, body.GetBody(), true, session.Whole)
}

// errPartialBody is the answer to a body chunk without end_of_stream.
func errPartialBody() *apierr.Error {
	return apierr.New(apierr.Internal,
		"tfsbridge needs the ext_proc body mode BUFFERED or FULL_DUPLEX_STREAMED: received a partial body (STREAMED or BUFFERED_PARTIAL?)")
}

// reply holds the messages of one reply: a headers or body reply is a
// nest of five or six small messages and a header mutation, allocated
// together here instead of one by one for each of the four replies of
// every exchange.
type reply struct {
	resp extprocv3.ProcessingResponse
	hr   extprocv3.HeadersResponse
	br   extprocv3.BodyResponse
	cr   extprocv3.CommonResponse
	bm   extprocv3.BodyMutation
	mb   extprocv3.BodyMutation_Body
	reqH extprocv3.ProcessingResponse_RequestHeaders
	resH extprocv3.ProcessingResponse_ResponseHeaders
	reqB extprocv3.ProcessingResponse_RequestBody
	resB extprocv3.ProcessingResponse_ResponseBody
	hm   headerMutation
}

// headersReply answers a headers message, in a reply of its own.
func headersReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	return new(reply).headers(a, request)
}

// headers answers a headers message in r (zero).
func (r *reply) headers(a session.Action, request bool) *extprocv3.ProcessingResponse {
	if a.Verdict == session.Respond {
		return immediate(a)
	}
	hr, resp := &r.hr, &r.resp
	if a.Verdict == session.PassThrough {
		switch {
		case a.Observe:
			// The bodies still come, in the filter's own modes, for the
			// session to look at (an observed forward): no override.
			hr.Response = r.common(a)
		case request:
			resp.ModeOverride = passThroughMode
			hr.Response = r.common(a) // nil unless a header must go
		default:
			resp.ModeOverride = localReplyMode
		}
	} else {
		hr.Response = r.common(a)
		if a.ReplaceBody {
			// A body set in reply to headers applies only with
			// CONTINUE_AND_REPLACE (the message had no body).
			hr.Response.Status = extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		}
	}
	if request {
		r.reqH.RequestHeaders = hr
		resp.Response = &r.reqH
	} else {
		r.resH.ResponseHeaders = hr
		resp.Response = &r.resH
	}
	return resp
}

// bodyReply answers a body message, in a reply of its own.
func bodyReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	return new(reply).body(a, request)
}

// body answers a body message in r (zero).
func (r *reply) body(a session.Action, request bool) *extprocv3.ProcessingResponse {
	if a.Verdict == session.Respond {
		return immediate(a)
	}
	if a.Verdict == session.Continue {
		r.br.Response = r.common(a)
	}
	if request {
		r.reqB.RequestBody = &r.br
		r.resp.Response = &r.reqB
	} else {
		r.resB.ResponseBody = &r.br
		r.resp.Response = &r.resB
	}
	return &r.resp
}

// common builds the CommonResponse of a Continue action in r; nil when
// the action changes nothing.
func (r *reply) common(a session.Action) *extprocv3.CommonResponse {
	if len(a.Set) == 0 && len(a.Remove) == 0 && !a.ReplaceBody {
		return nil
	}
	cr := &r.cr
	cr.HeaderMutation = r.hm.build(a.Set, a.Remove)
	// Envoy re-picks the route (the model map's x-tfsbridge-server) only
	// when asked, and only with a header mutation in the same reply.
	cr.ClearRouteCache = a.ClearRouteCache && cr.HeaderMutation != nil
	if a.ReplaceBody {
		r.mb.Body = a.Body
		r.bm.Mutation = &r.mb
		cr.BodyMutation = &r.bm
	}
	return cr
}

// mutation builds a header mutation on its own (immediate and trailers
// replies); headers and body replies build theirs inside the reply.
func mutation(set []session.Header, remove []string) *extprocv3.HeaderMutation {
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	return new(headerMutation).build(set, remove)
}

// inlineHeaders and inlineRaw size a headerMutation's own room: a
// translated request's body reply sets four headers (content-type,
// content-length, accept-encoding, inference-header-content-length) of
// about 60 bytes of values, five with the :path rewrite when a
// full-duplex stream sends both in its held headers reply, every other
// reply of an exchange fewer. (Replies live in pooled rooms: the room
// costs nothing per exchange.)
const (
	inlineHeaders = 6
	inlineRaw     = 192
)

// headerMutation is a header mutation with room for its headers' messages
// and values: building one for a reply (most replies carry one) then
// allocates nothing beyond the reply, where it took four allocations.
type headerMutation struct {
	hm   extprocv3.HeaderMutation
	hs   [inlineHeaders]setHeader
	opts [inlineHeaders]*corev3.HeaderValueOption
	raw  [inlineRaw]byte
}

// build fills m with a mutation that sets set and removes remove: values
// in raw_value only (setting value too makes Envoy reject the mutation),
// always overwriting. It returns nil when the mutation is empty.
func (m *headerMutation) build(set []session.Header, remove []string) *extprocv3.HeaderMutation {
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	hm := &m.hm
	hm.RemoveHeaders = remove
	if len(set) == 0 {
		return hm
	}
	n := 0
	for _, h := range set {
		n += len(h.Value)
	}
	raw := m.raw[:0]
	if n > len(m.raw) {
		raw = make([]byte, 0, n)
	}
	hs, opts := m.hs[:], m.opts[:]
	if len(set) > inlineHeaders {
		hs, opts = make([]setHeader, len(set)), make([]*corev3.HeaderValueOption, len(set))
	}
	for i, h := range set {
		start := len(raw)
		raw = append(raw, h.Value...)
		v := &hs[i]
		v.val.Key, v.val.RawValue = h.Key, raw[start:len(raw):len(raw)]
		v.opt.Header = &v.val
		v.opt.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		opts[i] = &v.opt
	}
	hm.SetHeaders = opts[:len(set):len(set)]
	return hm
}

// setHeader is one header of a mutation, its two messages together.
type setHeader struct {
	opt corev3.HeaderValueOption
	val corev3.HeaderValue
}

// immediate builds an ImmediateResponse: Envoy answers the client with it
// and ends processing for the whole request. A gRPC refusal is adjusted
// by grpcImmediate.
func immediate(a session.Action) *extprocv3.ProcessingResponse {
	return grpcImmediate(a, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(a.Status)},
			Headers: mutation(a.Set, nil),
			Body:    a.Body,
			Details: a.Reason,
		},
	}})
}
