package extproc

import (
	"bytes"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/internal/grpctest"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// grpcRequestHeaders are a grpc-python Predict call's headers.
func grpcRequestHeaders(path string, kv ...string) []string {
	return append([]string{":method", "POST", ":path", path, ":scheme", "http", ":authority", "tf:8500",
		"content-type", "application/grpc", "te", "trailers", "grpc-accept-encoding", "identity,deflate,gzip", "grpc-timeout", "9S"}, kv...)
}

func responseTrailers(kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: headers(kv...)}}}
}

func grpcResponseBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

// hptAnswer is the v2 answer of half_plus_two to [1, 2].
func hptAnswer() []byte {
	return grpctest.Frame(oipgrpc.AppendInferResponse(nil, oipgrpc.Head{ModelName: "half_plus_two", ModelVersion: "1"},
		[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: f32le(2.5, 3)}}))
}

// hptTFAnswer is TF Serving's PredictResponse for hptAnswer.
func hptTFAnswer() []byte {
	return grpctest.Frame(tfgrpc.AppendPredictResponse(nil,
		[]tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: f32le(2.5, 3)}},
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields))
}

// TestGRPCBuffered drives a Predict call in BUFFERED mode: the headers
// reply asks for the trailers (mode_override), the body reply carries
// :path and the v2 message, the response body (without end_of_stream)
// becomes the TF message, and the trailers keep grpc-status 0.
func TestGRPCBuffered(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	resp := exchange(t, s, requestHeaders(false, grpcRequestHeaders(grpctest.PredictPath)...))
	mo := resp.GetModeOverride()
	if resp.GetRequestHeaders() == nil || mo.GetResponseTrailerMode().String() != "SEND" || mo.GetResponseBodyMode().String() != "BUFFERED" {
		t.Fatalf("headers reply %v, want a mode_override with response trailers SEND", resp)
	}
	resp = exchange(t, s, requestBody(grpctest.Frame(grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)), true))
	cr := resp.GetRequestBody().GetResponse()
	set := setHeaders(t, cr.GetHeaderMutation())
	if set[":path"] != "/inference.GRPCInferenceService/ModelInfer" || set["grpc-accept-encoding"] != "identity" {
		t.Errorf("body reply headers %v", set)
	}
	v2, err := oipgrpc.DecodeInferRequest(grpctest.Unframe(cr.GetBodyMutation().GetBody()), tensor.Limits{})
	if err != nil || v2.ModelName != "half_plus_two" || !bytes.Equal(v2.Tensors[0].Data, f32le(1, 2)) {
		t.Fatalf("v2 request %+v, %v", v2, err)
	}
	resp = exchange(t, s, responseHeaders(false, ":status", "200", "content-type", "application/grpc"))
	if resp.GetResponseHeaders() == nil {
		t.Fatalf("reply %v", resp)
	}
	resp = exchange(t, s, grpcResponseBody(hptAnswer(), false))
	if got := resp.GetResponseBody().GetResponse().GetBodyMutation().GetBody(); !bytes.Equal(got, hptTFAnswer()) {
		t.Errorf("TF answer % x\nwant % x", got, hptTFAnswer())
	}
	resp = exchange(t, s, responseTrailers("grpc-status", "0"))
	if resp.GetResponseTrailers() == nil || resp.GetResponseTrailers().GetHeaderMutation() != nil {
		t.Errorf("trailers reply %v, want no change", resp)
	}
}

// TestGRPCBufferedStatus: a v2 error in the trailers becomes TF's.
func TestGRPCBufferedStatus(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	exchange(t, s, requestHeaders(false, grpcRequestHeaders(grpctest.PredictPath)...))
	exchange(t, s, requestBody(grpctest.Frame(grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)), true))
	exchange(t, s, responseHeaders(false, ":status", "200", "content-type", "application/grpc"))
	exchange(t, s, grpcResponseBody(nil, false))
	resp := exchange(t, s, responseTrailers("grpc-status", "14", "grpc-message", "Request for unknown model: 'half_plus_two' version 1 is not at ready state", "grpc-status-details-bin", "xx"))
	hm := resp.GetResponseTrailers().GetHeaderMutation()
	set := setHeaders(t, hm)
	if set["grpc-status"] != "5" || set["grpc-message"] != "Servable not found for request: Latest(half_plus_two)" {
		t.Errorf("trailers set %v", set)
	}
	if len(hm.GetRemoveHeaders()) != 1 || hm.GetRemoveHeaders()[0] != "grpc-status-details-bin" {
		t.Errorf("trailers remove %v", hm.GetRemoveHeaders())
	}
}

// TestGRPCImmediate: a refusal is an ImmediateResponse with grpc_status
// and the raw message as the body.
func TestGRPCImmediate(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	exchange(t, s, requestHeaders(false, grpcRequestHeaders(grpctest.PredictPath)...))
	resp := exchange(t, s, requestBody(grpctest.Frame(grpctest.Predict(tfgrpc.ModelSpec{Name: "nope"}, "x", grpctest.F32Content)), true))
	ir := resp.GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 200 || ir.GetGrpcStatus().GetStatus() != 5 ||
		string(ir.GetBody()) != "Servable not found for request: Latest(nope)" {
		t.Fatalf("reply %v", resp)
	}
	if set := setHeaders(t, ir.GetHeaders()); len(set) > 1 { // x-request-id at most
		t.Errorf("immediate headers %v", set)
	}
}

// TestGRPCFullDuplex re-buffers the message in both directions: the
// request in small chunks, the answer split, the trailers last.
func TestGRPCFullDuplex(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	if err := s.Send(withConfig(requestHeaders(false, grpcRequestHeaders(grpctest.PredictPath)...), fullDuplex)); err != nil {
		t.Fatal(err)
	}
	sendChunks(t, s, grpctest.Frame(grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)), 6, true)
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if set := setHeaders(t, resp.GetRequestHeaders().GetResponse().GetHeaderMutation()); set[":path"] != "/inference.GRPCInferenceService/ModelInfer" {
		t.Fatalf("held headers reply %v", resp)
	}
	if v2 := grpctest.Unframe(streamedBody(t, s, true)); v2 == nil {
		t.Fatal("the v2 request is not one message")
	}
	if err := s.Send(responseHeaders(false, ":status", "200", "content-type", "application/grpc")); err != nil {
		t.Fatal(err)
	}
	answer := hptAnswer()
	for i := 0; i < len(answer); i += 10 {
		if err := s.Send(chunkMsg(answer[i:min(i+10, len(answer))], false, false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(responseTrailers("grpc-status", "0")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var kinds []string
	for len(kinds) == 0 || kinds[len(kinds)-1] != "trailers" {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch r := resp.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_ResponseHeaders:
			kinds = append(kinds, "headers")
		case *extprocv3.ProcessingResponse_ResponseBody:
			sr := r.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr.GetEndOfStream() {
				t.Error("the body ends before the trailers")
			}
			got = append(got, sr.GetBody()...)
			kinds = append(kinds, "body")
		case *extprocv3.ProcessingResponse_ResponseTrailers:
			kinds = append(kinds, "trailers")
		default:
			t.Fatalf("reply %v", resp)
		}
	}
	if kinds[0] != "headers" || !bytes.Equal(got, hptTFAnswer()) {
		t.Errorf("replies %v, answer % x", kinds, got)
	}
}
