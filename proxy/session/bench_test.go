package session

import (
	"context"
	"io"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// BenchmarkSmallExchange is issue 9's allocation budget: the four events
// of TF Serving's README predict ({"instances": [1.0, 2.0, 5.0]}) through
// a session configured as the binary's — metrics, an info-level logger,
// the backend client with its signature in cache — and Triton's binary
// answer back. Run it with -benchmem; README quotes its allocs/op and
// B/op.
func BenchmarkSmallExchange(b *testing.B) {
	e := newEnv(b, "triton")
	log, err := observe.NewLogger(io.Discard, "info", "text")
	if err != nil {
		b.Fatal(err)
	}
	e.cfg.Logger = log
	req := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	resp := append([]byte(header), f32le(2.5, 3, 4.5)...)
	reqHdr := hdr{"content-type": "application/json", "content-length": itoa(len(req))}
	respHdr := hdr{"inference-header-content-length": itoa(len(header)), "content-type": "application/octet-stream"}
	ctx := context.Background()
	exchange := func() {
		s := New(e.cfg)
		defer s.Close()
		if a := s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", reqHdr, false); a.Verdict != Continue {
			b.Fatalf("request headers: %v %s", a.Verdict, a.Body)
		}
		if a := s.bufferedRequest(ctx, req); a.Verdict != Continue {
			b.Fatalf("request: %v %s", a.Verdict, a.Body)
		}
		s.ResponseHeaders(ctx, 200, respHdr, false)
		a := s.bufferedResponse(ctx, resp)
		if a.Verdict != Continue || string(a.Body) != "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}" {
			b.Fatalf("response: %v %q", a.Verdict, a.Body)
		}
	}
	exchange() // the signature into the cache
	b.ReportAllocs()
	for b.Loop() {
		exchange()
	}
}
