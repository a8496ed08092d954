package session

import (
	"context"
	"io"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// BenchmarkSmallExchange is issue 9's allocation budget: the four events
// of TF Serving's README predict ({"instances": [1.0, 2.0, 5.0]}) through
// a session configured as the binary's — metrics, an info-level logger,
// the backend client with its signature in cache — and Triton's binary
// answer back. Run it with -benchmem; README quotes its allocs/op and
// B/op.
func BenchmarkSmallExchange(b *testing.B) {
	exchange := smallExchange(b)
	b.ReportAllocs()
	for b.Loop() {
		exchange()
	}
}

// TestSmallExchangeAllocs holds BenchmarkSmallExchange's allocations at
// their count (issue #23 reports them per stop): a change that adds one to
// every exchange fails here, not in a later stop's table. Under -race,
// sync.Pool drops some of what it is given, so the count is not checked.
func TestSmallExchangeAllocs(t *testing.T) {
	const want = 24
	exchange := smallExchange(t)
	if n := testing.AllocsPerRun(200, exchange); n > want && !racebuild.Enabled {
		t.Errorf("a small exchange allocates %v times, want at most %d", n, want)
	}
}

// smallExchange returns one small predict exchange through a session,
// its answer checked, after a first one that put the signature in the
// cache.
func smallExchange(tb testing.TB) func() {
	e := newEnv(tb, "triton")
	log, err := observe.NewLogger(io.Discard, "info", "text")
	if err != nil {
		tb.Fatal(err)
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
			tb.Fatalf("request headers: %v %s", a.Verdict, a.Body)
		}
		if a := s.bufferedRequest(ctx, req); a.Verdict != Continue {
			tb.Fatalf("request: %v %s", a.Verdict, a.Body)
		}
		s.ResponseHeaders(ctx, 200, respHdr, false)
		a := s.bufferedResponse(ctx, resp)
		if a.Verdict != Continue || string(a.Body) != "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}" {
			tb.Fatalf("response: %v %q", a.Verdict, a.Body)
		}
	}
	exchange() // the signature into the cache
	return exchange
}
