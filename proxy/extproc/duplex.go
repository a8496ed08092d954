package extproc

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	procmodev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/inflight"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

// BodyMode is the ext_proc body send mode tfsbridge expects Envoy's
// filter to use (docs/envoy-extproc.md §2).
type BodyMode uint8

const (
	// BodyModeAuto follows what Envoy announces in the first message of
	// each stream (protocol_config), BUFFERED when it announces nothing.
	BodyModeAuto BodyMode = iota
	// BodyModeBuffered expects whole bodies, one message each.
	BodyModeBuffered
	// BodyModeFullDuplex expects FULL_DUPLEX_STREAMED: bodies in chunks as
	// they arrive, answered with streamed_response chunks.
	BodyModeFullDuplex
)

// ParseBodyMode parses "auto", "buffered" or "full-duplex".
func ParseBodyMode(s string) (BodyMode, error) {
	for m := BodyModeAuto; m <= BodyModeFullDuplex; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown body mode %q (want auto, buffered or full-duplex)", s)
}

// String returns the flag spelling of m.
func (m BodyMode) String() string {
	switch m {
	case BodyModeBuffered:
		return "buffered"
	case BodyModeFullDuplex:
		return "full-duplex"
	}
	return "auto"
}

// MarshalText implements encoding.TextMarshaler (flags print defaults).
func (m BodyMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (flags, env).
func (m *BodyMode) UnmarshalText(b []byte) error {
	v, err := ParseBodyMode(string(b))
	if err == nil {
		*m = v
	}
	return err
}

// DefaultWriteTimeout bounds, when Options says nothing, how long a
// full-duplex stream may stay silent once its answer has begun: the
// proxy's --write-timeout default.
const DefaultWriteTimeout = time.Minute

// DefaultBodyTimeout bounds a full-duplex request body when Options says
// nothing: in that mode Envoy applies no message_timeout, so a client
// trickling its body would otherwise hold a session (and its tensors)
// as long as Envoy's stream idle timeout lets it.
const DefaultBodyTimeout = 60 * time.Second

// Options configure a Processor.
type Options struct {
	// BodyMode is the body mode expected of Envoy's filter.
	BodyMode BodyMode
	// BodyTimeout bounds, in full-duplex mode, the time from the request
	// headers to the end of the request body; past it the client gets
	// TF's 400 "Timed out reading the request body". 0 means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// WriteTimeout is the ext_proc equivalent of the proxy's write
	// timeout: in full-duplex mode, once the upstream's response headers
	// have reached tfsbridge, Envoy must send the next message (the next
	// chunk of the answer, which it sends only as its client reads) within
	// it, and a reply may take no longer to leave; past it the exchange
	// ends and its reservation is released. 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
}

// duplexOf decides, from the stream's first message, which directions
// run full duplex. An explicit mode that contradicts what Envoy announces
// is a configuration error: answering would only fail later, on the first
// body, with a less clear message.
func (p *Processor) duplexOf(pc *extprocv3.ProtocolConfiguration) (req, resp bool, err error) {
	fd := procmodev3.ProcessingMode_FULL_DUPLEX_STREAMED
	if pc == nil {
		on := p.opt.BodyMode == BodyModeFullDuplex
		return on, on, nil
	}
	req, resp = pc.GetRequestBodyMode() == fd, pc.GetResponseBodyMode() == fd
	switch {
	case p.opt.BodyMode == BodyModeBuffered && (req || resp):
		err = fmt.Errorf("tfsbridge runs with --body-mode=buffered but the Envoy ext_proc filter sends bodies FULL_DUPLEX_STREAMED (request %s, response %s): set --body-mode to auto or full-duplex, or the filter's processing_mode to BUFFERED",
			pc.GetRequestBodyMode(), pc.GetResponseBodyMode())
	case p.opt.BodyMode == BodyModeFullDuplex && !req && !resp:
		err = fmt.Errorf("tfsbridge runs with --body-mode=full-duplex but the Envoy ext_proc filter sends bodies %s/%s: set --body-mode to auto or buffered, or the filter's processing_mode to FULL_DUPLEX_STREAMED",
			pc.GetRequestBodyMode(), pc.GetResponseBodyMode())
	}
	return req, resp, err
}

// duplex is the state of one stream with a full-duplex direction: the
// headers replies it holds back until the body is translated, and where
// the stream's replies go.
type duplex struct {
	p         *Processor
	stream    extprocv3.ExternalProcessor_ProcessServer
	sess      *session.Session
	st        *streamTrace
	req, resp bool // which directions are full duplex
	// heldReq / heldResp are the headers actions not yet sent: a
	// translated exchange answers its headers only once its body is
	// translated, with the changes of both.
	heldReq, heldResp *session.Action
	// bodyDeadline fires when the request body is late (BodyTimeout);
	// bodyCtx ends then too, bounding a wait for budget meanwhile.
	bodyDeadline *time.Timer
	bodyCtx      context.Context
	bodyCancel   context.CancelFunc
	// wounded is closed when an older exchange needs the budget this one
	// holds while its body is still arriving (package admission).
	wounded <-chan struct{}
	// answering: the response headers have arrived; from then on Envoy's
	// silence is bounded by the write timeout.
	answering bool
	// trailers is set while a trailers message ends a body.
	trailers bool
	// cut is the stream's context from the processor's inflight tracker:
	// a shutdown that runs out of time cancels it (inflight.IsCut).
	cut context.Context
	// stall releases the budget when a send outlasts the write timeout
	// (send).
	stall *time.Timer
	// holding is set while the stream counts in p.holding: it withholds a
	// headers reply, so Envoy awaits a reply and an immediate_response is
	// one (at other times Envoy takes it for a spurious message).
	holding bool
}

// received is one Recv result, passed from the receiving goroutine.
type received struct {
	req *extprocv3.ProcessingRequest
	f   *framedRequest // a body chunk left in its frames, or nil
	err error
}

// run serves the stream from its first message on. Messages are read by a
// goroutine so that the body deadline, a wound (package admission) and the
// write timeout can end the exchange while Envoy is silent.
func (d *duplex) run(first *extprocv3.ProcessingRequest) error {
	var cut <-chan struct{}
	if d.cut != nil {
		cut = d.cut.Done()
	}
	defer d.setHolding(false)
	msgs := make(chan received)
	done := make(chan struct{})
	defer close(done)
	d.p.receivers.run(func() {
		f := &framedRequest{streamed: true}
		// Two messages in turn: once the next one is handed over, the
		// loop is done with the one before (it keeps what it needs of
		// a message — headers, a body's bytes — in submessages, which
		// decoding into the message again only lets go of).
		var turn [2]extprocv3.ProcessingRequest
		for i := 0; ; i ^= 1 {
			f.ProcessingRequest = &turn[i]
			err := d.stream.RecvMsg(f)
			m := received{req: f.ProcessingRequest, err: err}
			if err == nil && f.chunks != nil {
				// Handed over with its frames: the next message has its own.
				m.f = &framedRequest{ProcessingRequest: f.ProcessingRequest, chunks: f.chunks, data: f.data}
				f.chunks, f.data = nil, nil
			}
			select {
			case msgs <- m:
			case <-done:
				if m.f != nil {
					m.f.free()
				}
				return
			}
			if err != nil {
				return
			}
		}
	})
	var late <-chan time.Time
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	m := received{req: first}
	for {
		if m.err != nil {
			return d.p.recvEnded(d.sess, m.err)
		}
		err := d.handleSafely(m.req, m.f)
		if m.f != nil {
			m.f.free()
		}
		if err != nil {
			return err
		}
		d.setHolding(d.heldReq != nil || d.heldResp != nil)
		if d.sess.Answered() {
			// The whole answer has left (or an error reply): nothing of
			// ours is held for it any more.
			d.sess.ReleaseAdmission()
		}
		if d.bodyDeadline != nil && late == nil {
			late = d.bodyDeadline.C
		}
		var silent <-chan time.Time
		if d.answering && !d.sess.Answered() {
			if idle == nil {
				idle = time.NewTimer(d.p.writeTimeout())
			} else {
				idle.Reset(d.p.writeTimeout())
			}
			silent = idle.C
		}
		var wounded <-chan struct{}
		if d.heldReq != nil {
			wounded = d.wounded
		}
		// Wait for the next message: a timer or signal that needs no
		// action must not run the last message through handle again.
	wait:
		for {
			select {
			case m = <-msgs:
				break wait
			case <-cut:
				cut = nil
				if inflight.IsCut(d.cut) && (d.heldReq != nil || d.heldResp != nil) {
					// The shutdown's time ran out while Envoy awaits our
					// headers reply (a body still streaming): the client
					// gets TF's 503 rather than Envoy's bare 500.
					d.heldReq, d.heldResp = nil, nil
					return d.send(immediate(withRequestID(d.sess.Fail(apierr.New(apierr.Unavailable, inflight.MsgShutdown)), d.sess, false)))
				}
			case <-late:
				late = nil
				if d.heldReq != nil && d.sess.AwaitingBody() {
					d.heldReq = nil
					return d.send(immediate(withRequestID(d.sess.Fail(apierr.InvalidArgumentf("Timed out reading the request body")), d.sess, false)))
				}
			case <-wounded:
				// An older exchange needs what this body holds, and the
				// client is taking its time: give way now (TF's 503).
				d.wounded, wounded = nil, nil // closed: it must not fire again
				if d.heldReq != nil && d.sess.AwaitingBody() {
					d.heldReq = nil
					return d.send(immediate(withRequestID(d.sess.GiveWay(), d.sess, false)))
				}
			case <-silent:
				// Envoy sends the answer's next chunk only as its client
				// reads: a client that stopped reading would hold this
				// exchange, and its budget, for as long as it likes.
				d.p.metrics.WriteTimeout()
				d.sess.ReleaseAdmission()
				return errWriteTimeout
			}
		}
	}
}

// errWriteTimeout ends a full-duplex stream that stayed silent past the
// write timeout once its answer had begun: Envoy resets the HTTP stream.
var errWriteTimeout = fmt.Errorf("extproc: the answer was not taken within the write timeout")

// handleSafely is handle with the buffered loop's panic recovery.
func (d *duplex) handleSafely(req *extprocv3.ProcessingRequest, f *framedRequest) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = d.send(immediate(d.sess.Recover("extproc", v)))
		}
	}()
	if f != nil && d.req && d.heldReq != nil && !req.GetObservabilityMode() {
		// A request chunk being translated, in the frames it came in:
		// the session reads them where they lie.
		end := req.GetRequestBody().GetEndOfStream()
		for i, c := range f.chunks {
			last := i == len(f.chunks)-1
			if err := d.body(d.st.ctx, c, end && last, true); err != nil || d.heldReq == nil && !last {
				return err
			}
		}
		if len(f.chunks) == 0 {
			return d.body(d.st.ctx, nil, end, true)
		}
		return nil
	}
	if f != nil {
		// Anything else has its body whole.
		req.GetRequestBody().Body = bytes.Join(f.chunks, nil)
	}
	return d.handle(req)
}

// handle answers one message. Buffered directions are answered as the
// buffered loop does; full-duplex ones follow the rules of
// docs/envoy-extproc.md §2: headers, then body chunks, then trailers, in
// that order, body replies as streamed_response only.
func (d *duplex) handle(req *extprocv3.ProcessingRequest) error {
	if req.GetObservabilityMode() {
		return nil
	}
	ctx := d.st.ctx
	switch m := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if !d.req {
			break
		}
		h := headersOf(m.RequestHeaders)
		ctx = d.st.begin(h)
		a := withRequestID(d.sess.RequestHeaders(ctx, h.Get(":method"), h.Get(":path"), h, m.RequestHeaders.GetEndOfStream()), d.sess, false)
		if a.Verdict == session.Continue && !m.RequestHeaders.GetEndOfStream() {
			d.heldReq = &a
			d.bodyDeadline = time.NewTimer(d.p.bodyTimeout())
			d.bodyCtx, d.bodyCancel = context.WithTimeout(ctx, d.p.bodyTimeout())
			d.wounded = d.sess.Admission().Wounded()
			return nil
		}
		return d.send(d.headersReply(a, true))

	case *extprocv3.ProcessingRequest_RequestBody:
		if !d.req {
			break
		}
		return d.body(ctx, m.RequestBody.GetBody(), m.RequestBody.GetEndOfStream(), true)

	case *extprocv3.ProcessingRequest_RequestTrailers:
		if d.req {
			// Trailers end a body whose last chunk did not say so;
			// the trailers reply, not the last chunk, then ends it.
			if err := d.bodyEnd(ctx, true); err != nil {
				return err
			}
		}

	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if !d.resp {
			break
		}
		h := headersOf(m.ResponseHeaders)
		code, _ := strconv.Atoi(h.Get(":status"))
		a := withRequestID(d.sess.ResponseHeaders(ctx, code, h, m.ResponseHeaders.GetEndOfStream()), d.sess, true)
		// Only a translated answer is bounded: a pass-through one may
		// stream as slowly as it likes.
		d.answering = d.sess.AwaitingBody()
		if a.Verdict == session.Continue && d.sess.AwaitingBody() {
			d.heldResp = &a
			return nil
		}
		return d.send(d.headersReply(a, false))

	case *extprocv3.ProcessingRequest_ResponseBody:
		if !d.resp {
			break
		}
		return d.body(ctx, m.ResponseBody.GetBody(), m.ResponseBody.GetEndOfStream(), false)

	case *extprocv3.ProcessingRequest_ResponseTrailers:
		if d.resp {
			if err := d.bodyEnd(ctx, false); err != nil {
				return err
			}
		}
	}
	// A buffered direction, or trailers: the buffered loop's answer.
	if resp := d.p.handle(d.st, d.sess, req); resp != nil {
		return d.send(resp)
	}
	return nil
}

// bodyEnd ends a body at its trailers: what is left of the translated body
// goes out without end_of_stream, since the trailers reply ends it.
func (d *duplex) bodyEnd(ctx context.Context, request bool) error {
	d.trailers = true
	defer func() { d.trailers = false }()
	return d.body(ctx, nil, true, request)
}

// body handles one full-duplex body chunk: translated when the session
// awaits it, echoed unchanged otherwise.
func (d *duplex) body(ctx context.Context, chunk []byte, end, request bool) error {
	held := &d.heldResp
	event := d.sess.ResponseChunk
	if request {
		held, event = &d.heldReq, d.sess.RequestChunk
	}
	if *held == nil {
		// Not translated: it goes on unchanged, once the session has
		// seen it (an observed forward keeps a copy, Action.Observe).
		event(ctx, chunk, end, sink{d, request})
		if d.trailers {
			// Trailers end the body: their reply, not a chunk, answers.
			return nil
		}
		// Every chunk is answered, an empty last one too (Envoy sends
		// one when the end of a body arrives without data), or Envoy
		// waits for its reply for ever.
		return d.send(d.st.streamedReply(chunk, end, request))
	}
	// A wait for budget inside the event is bounded like the silence it
	// replaces: the body deadline, or the write timeout.
	if request && d.bodyCtx != nil {
		ctx = d.bodyCtx
	} else if !request {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.p.writeTimeout())
		defer cancel()
	}
	a := event(ctx, chunk, end, sink{d, request})
	switch a.Verdict {
	case session.Pending:
		return nil
	case session.Respond:
		*held = nil
		d.stopDeadline(request)
		return d.send(immediate(withRequestID(a, d.sess, false)))
	case session.Reset:
		return errReset
	}
	*held = nil
	d.stopDeadline(request)
	return nil
}

// setHolding keeps p.holding up to date with whether the stream
// withholds a headers reply.
func (d *duplex) setHolding(on bool) {
	if on != d.holding {
		d.holding = on
		if on {
			d.p.holding.Add(1)
		} else {
			d.p.holding.Add(-1)
		}
	}
}

func (d *duplex) stopDeadline(request bool) {
	if request && d.bodyDeadline != nil {
		d.bodyDeadline.Stop()
	}
	if request && d.bodyCancel != nil {
		d.bodyCancel()
	}
}

// errReset ends a stream whose output broke midway: Envoy resets the
// HTTP stream, as it must when part of an answer already went out.
var errReset = fmt.Errorf("extproc: streamed exchange aborted")

func (d *duplex) send(resp *extprocv3.ProcessingResponse) error {
	if d.answering {
		// Envoy takes replies off the wire as they come, so a Send
		// blocks only on an Envoy that stopped reading this stream: the
		// budget must not wait for it. (One timer per stream, re-armed
		// for each send: the reservation is the session's, for good.)
		if d.stall == nil {
			d.stall = time.AfterFunc(d.p.writeTimeout(), d.sess.Admission().Release)
		} else {
			d.stall.Reset(d.p.writeTimeout())
		}
		defer d.stall.Stop()
	}
	if err := d.stream.Send(resp); err != nil {
		d.p.logger(d.sess).Debug("ext_proc stream send failed", "error", err)
		return err
	}
	return nil
}

// sink is the session's Sink for one direction of a full-duplex stream.
type sink struct {
	d       *duplex
	request bool
}

// Headers sends the held headers reply with the body's changes too.
func (s sink) Headers(a session.Action) error {
	held := s.d.heldResp
	if s.request {
		held = s.d.heldReq
	}
	if held != nil {
		a = held.Then(a)
	}
	return s.d.send(s.d.headersReply(a, s.request))
}

// Body sends one streamed_response chunk.
func (s sink) Body(p []byte, end bool) error {
	return s.d.send(s.d.st.streamedReply(p, end && !s.d.trailers, s.request))
}

// duplexHeadersReply is headersReply without mode_override, which Envoy
// does not honour in full-duplex mode.
func duplexHeadersReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	r := headersReply(a, request)
	r.ModeOverride = nil
	return r
}

// headersReply is duplexHeadersReply in the stream's room.
func (d *duplex) headersReply(a session.Action, request bool) *extprocv3.ProcessingResponse {
	r := d.st.headersReply(a, request)
	r.ModeOverride = nil
	return r
}

// streamedReply is a body reply carrying one streamed_response chunk:
// the only body reply Envoy accepts in full-duplex mode.
func streamedReply(p []byte, end, request bool) *extprocv3.ProcessingResponse {
	return new(chunkReply).build(p, end, request)
}

// build fills r (zero) with a streamed_response reply.
func (r *chunkReply) build(p []byte, end, request bool) *extprocv3.ProcessingResponse {
	r.sbr.Body, r.sbr.EndOfStream = p, end
	r.sr.StreamedResponse = &r.sbr
	r.bm.Mutation = &r.sr
	r.cr.BodyMutation = &r.bm
	r.br.Response = &r.cr
	if request {
		r.reqB.RequestBody = &r.br
		r.resp.Response = &r.reqB
	} else {
		r.resB.ResponseBody = &r.br
		r.resp.Response = &r.resB
	}
	return &r.resp
}

// chunkReply holds the messages of a streamed_response reply together, as
// reply does for the others (without the header mutation's room: one is
// sent per chunk of a body).
type chunkReply struct {
	resp extprocv3.ProcessingResponse
	br   extprocv3.BodyResponse
	cr   extprocv3.CommonResponse
	bm   extprocv3.BodyMutation
	sbr  extprocv3.StreamedBodyResponse
	sr   extprocv3.BodyMutation_StreamedResponse
	reqB extprocv3.ProcessingResponse_RequestBody
	resB extprocv3.ProcessingResponse_ResponseBody
}

func (p *Processor) writeTimeout() time.Duration {
	if p.opt.WriteTimeout > 0 {
		return p.opt.WriteTimeout
	}
	return DefaultWriteTimeout
}

func (p *Processor) bodyTimeout() time.Duration {
	if p.opt.BodyTimeout > 0 {
		return p.opt.BodyTimeout
	}
	return DefaultBodyTimeout
}
