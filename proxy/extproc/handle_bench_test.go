package extproc

import (
	"context"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// BenchmarkHandleSmall is BenchmarkPredictStream without gRPC: the four
// messages of a small predict handed to the processor's handle as the
// stream loop would, replies built but not sent. What it costs is
// tfsbridge's own work per exchange (session, header and reply
// messages); BenchmarkPredictStream adds both ends of gRPC.
func BenchmarkHandleSmall(b *testing.B) {
	h := start(b)
	p := h.srv.proc
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	msgs := []*extprocv3.ProcessingRequest{
		requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "x-request-id", "bench"),
		requestBody([]byte(`{"instances": [1.0, 2.0, 5.0]}`), true),
		responseHeaders(false, ":status", "200", "inference-header-content-length", strconv.Itoa(len(header))),
		responseBody(append([]byte(header), f32le(2.5, 3, 4.5)...)),
	}
	exchange := func() {
		sess := session.New(p.cfg)
		st := &streamTrace{ctx: context.Background()}
		for _, m := range msgs {
			if p.handle(st, sess, m) == nil {
				b.Fatal("no reply")
			}
		}
		st.end()
		sess.Close()
	}
	exchange()
	b.ReportAllocs()
	for b.Loop() {
		exchange()
	}
}
