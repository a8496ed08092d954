package extproc

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkPredictStream measures one whole predict exchange as Envoy
// drives it: a new ext_proc stream over loopback gRPC, four messages and
// four replies (signature cached).
func BenchmarkPredictStream(b *testing.B) {
	h := start(b)
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	reqH := requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "x-request-id", "bench")
	reqB := requestBody([]byte(`{"instances": [1.0, 2.0, 5.0]}`), true)
	respH := responseHeaders(false, ":status", "200", "inference-header-content-length", strconv.Itoa(len(header)))
	respB := responseBody(append([]byte(header), f32le(2.5, 3, 4.5)...))
	b.ReportAllocs()
	for b.Loop() {
		s, err := h.client.Process(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range []any{reqH, reqB, respH, respB} {
			if err := s.SendMsg(m); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		_ = s.CloseSend()
		<-h.results
	}
}

// BenchmarkPredictStreamDuplex is BenchmarkPredictStream in
// FULL_DUPLEX_STREAMED mode, as Envoy drives it: the request headers and
// the whole small body, then the held headers reply and one streamed
// chunk; the same for the response.
func BenchmarkPredictStreamDuplex(b *testing.B) {
	h := start(b)
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	reqH := withConfig(requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "x-request-id", "bench"), fullDuplex)
	reqB := chunkMsg([]byte(`{"instances": [1.0, 2.0, 5.0]}`), true, true)
	respH := responseHeaders(false, ":status", "200", "inference-header-content-length", strconv.Itoa(len(header)))
	respB := chunkMsg(append([]byte(header), f32le(2.5, 3, 4.5)...), true, false)
	b.ReportAllocs()
	for b.Loop() {
		s, err := h.client.Process(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, pair := range [][2]any{{reqH, reqB}, {respH, respB}} {
			for _, m := range pair {
				if err := s.SendMsg(m); err != nil {
					b.Fatal(err)
				}
			}
			// The headers reply, then the body's one streamed chunk.
			for range 2 {
				if _, err := s.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		}
		_ = s.CloseSend()
		<-h.results
	}
}
