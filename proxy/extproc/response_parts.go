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
	resp = st.bodyReply(withRequestID(a, sess, false), false)
	if ans.Len() == 0 {
		ans.Release()
		return resp, nil
	}
	// The answer's memory goes back once gRPC is done with it, from
	// whichever goroutine frees its last buffer.
	parts = &partsResponse{msg: resp, parts: ans.Parts(), release: ans.Release}
	return resp, parts
}
