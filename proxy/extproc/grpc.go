package extproc

import (
	"strconv"

	procmodev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TF Serving gRPC clients through the filter (docs/grpc.md §5): the
// session does the translation; the adapter only makes sure Envoy sends
// what a gRPC exchange needs and words refusals as Envoy expects them.
//
//   - BUFFERED: the REST filter configuration skips trailers, but a gRPC
//     answer's status is in them. The request-headers reply of a gRPC
//     exchange therefore carries grpcProcessingMode (trailers SEND), which
//     Envoy applies when the filter has allow_mode_override (a deployment
//     with allowed_override_modes must list it). The response body comes
//     whole without end_of_stream, since the trailers follow (bodyAction).
//   - FULL_DUPLEX_STREAMED: Envoy takes no mode_override; the filter must
//     send response trailers itself (the duplex configuration already
//     does), and the session re-buffers the one message.
//   - ImmediateResponse: grpc_status and the message as the body, which
//     Envoy sends as a trailers-only answer, percent-encoding grpc-message.

// grpcProcessingMode is the mode_override of a gRPC exchange in BUFFERED
// mode: bodies BUFFERED both ways and the response trailers sent.
var grpcProcessingMode = &procmodev3.ProcessingMode{
	RequestHeaderMode:   procmodev3.ProcessingMode_SEND,
	ResponseHeaderMode:  procmodev3.ProcessingMode_SEND,
	RequestBodyMode:     procmodev3.ProcessingMode_BUFFERED,
	ResponseBodyMode:    procmodev3.ProcessingMode_BUFFERED,
	RequestTrailerMode:  procmodev3.ProcessingMode_SKIP,
	ResponseTrailerMode: procmodev3.ProcessingMode_SEND,
}

// grpcMode adds grpcProcessingMode to the request-headers reply of a
// gRPC exchange the session goes on with (buffered loop only: the
// full-duplex one strips mode overrides).
func grpcMode(sess *session.Session, a session.Action, resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if sess.GRPC() && a.Verdict == session.Continue {
		resp.ModeOverride = grpcProcessingMode
	}
	return resp
}

// grpcImmediate rewrites the ImmediateResponse of a gRPC refusal (an
// action with a grpc-status header): the code in grpc_status and the
// message, decoded, as the body, which Envoy's local reply turns into a
// percent-encoded grpc-message; the header mutation keeps the other
// headers (grpc-accept-encoding).
func grpcImmediate(a session.Action, resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	code, ok := a.Get("grpc-status")
	if !ok {
		return resp
	}
	ir := resp.GetImmediateResponse()
	c, _ := strconv.Atoi(code)
	ir.GrpcStatus = &extprocv3.GrpcStatus{Status: uint32(c)}
	msg, _ := a.Get("grpc-message")
	ir.Body = []byte(session.DecodeGRPCMessage(msg))
	var set []session.Header
	for _, h := range a.Set {
		if h.Key != "grpc-message" && h.Key != "grpc-status" && h.Key != "content-type" {
			set = append(set, h)
		}
	}
	ir.Headers = mutation(set, nil)
	return resp
}
