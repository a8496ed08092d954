package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// responseParts answers a BUFFERED response body, as handle does, with
// the translated answer sent where the translator wrote it
// (session.ResponseParts): the reply's body mutation carries the answer's
// parts, which bodyCodec hands to gRPC and releases once gRPC has written
// them (partsResponse.handOver), instead of a copy of the whole text.
// Anything but a translated answer (errors, gRPC answers, bodies the
// session does not translate) is handle's reply.
func (p *Processor) responseParts(st *streamTrace, sess *session.Session,
	req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, parts *partsResponse) {
	body := req.GetResponseBody()
	if req.GetObservabilityMode() || sess.GRPC() || (!body.GetEndOfStream() && sess.AwaitingBody()) {
		return p.handleSafely(st, sess, req), nil
	}
	defer func() {
		if v := recover(); v != nil {
			if parts != nil {
				parts.releaseUnsent()
			}
			resp, parts = immediate(sess.Recover("extproc", v)), nil
		}
	}()
	a, ans := sess.ResponseParts(st.ctx, body.GetBody())
	a = withRequestID(a, sess, false)
	if n := ans.Len(); n <= smallAnswer {
		// Sent in parts, a small answer costs more than its copy (the
		// parts' framing, their release's bookkeeping, and gRPC copies
		// parts this small anyway): it goes in the reply, copied into
		// the stream's room, and its memory back at once.
		if n > 0 {
			a.Body = ans.AppendTo(st.answerRoom(n))
		}
		ans.Release()
		return st.bodyReply(a, false), nil
	}
	resp = st.bodyReply(a, false)
	// The answer's memory goes back once gRPC is done with it, from
	// whichever goroutine frees its last buffer.
	parts = &partsResponse{msg: resp, parts: ans.Parts(), release: ans.Release}
	return resp, parts
}

// smallAnswer is the size up to which a translated answer is copied into
// its reply rather than sent in parts.
const smallAnswer = 4 << 10
