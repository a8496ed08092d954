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
