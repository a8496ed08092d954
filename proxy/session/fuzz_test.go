package session

import (
	"bytes"
	"context"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// staticBackend knows one FP32 model, in memory, so fuzzing and
// benchmarks measure the session and translators, not HTTP.
type staticBackend struct{ sig *tensor.Signature }

func newStaticBackend() staticBackend {
	return staticBackend{sig: &tensor.Signature{
		Model:    "m",
		Versions: []string{"1"},
		Inputs:   []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}},
		Outputs:  []tensor.Spec{{Name: "y", DataType: tensor.FP32, Shape: []int64{-1}}},
		Batched:  true,
	}}
}

func (b staticBackend) Kind(context.Context) (oip.ServerKind, error) { return oip.Triton, nil }

func (b staticBackend) Signature(_ context.Context, r route.Route) (*tensor.Signature, error) {
	if r.Model != "m" {
		return nil, apierr.New(apierr.NotFound, "Servable not found for request: "+r.Servable())
	}
	return b.sig, nil
}

func (b staticBackend) ModelReady(context.Context, route.Route) (bool, error) { return true, nil }

// FuzzSession feeds arbitrary request lines, bodies and upstream answers
// through all four events: nothing may panic, every Respond must carry a
// real status, and a Continue with a body must carry its exact length.
func FuzzSession(f *testing.F) {
	f.Add("POST", "/v1/models/m:predict", []byte(`{"instances": [1.0, 2.0]}`), 200, "",
		[]byte(`{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[1,2]}]}`))
	f.Add("GET", "/v1/models/m/versions/1/metadata", []byte(nil), 200, "", []byte(nil))
	f.Add("POST", "/v1/models/m:predict", []byte(`{"inputs": {"x": [1]}}`), 200, "20", []byte("{}"))
	f.Add("POST", "/v1/models/m:predict", []byte(`{"instances": [1]}`), 503, "", []byte("down"))
	cfg := &Config{Backend: newStaticBackend(), MaxBodyBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, method, path string, body []byte, status int, ihcl string, respBody []byte) {
		ctx := context.Background()
		s := New(cfg)
		defer s.Close()
		check := func(a Action) bool {
			switch a.Verdict {
			case Respond:
				if a.Status < 200 || a.Status > 599 {
					t.Fatalf("respond with status %d", a.Status)
				}
				return false
			case Continue:
				if a.ReplaceBody {
					if cl, ok := a.Get("content-length"); !ok || cl != itoa(len(a.Body)) {
						t.Fatalf("replacement body of %d bytes with content-length %q", len(a.Body), cl)
					}
				}
			}
			return true
		}
		if !check(s.RequestHeaders(ctx, method, path, hdr{}, false)) {
			return
		}
		if !check(s.bufferedRequest(ctx, body)) {
			return
		}
		if !check(s.ResponseHeaders(ctx, status, hdr{"inference-header-content-length": ihcl}, false)) {
			return
		}
		check(s.bufferedResponse(ctx, respBody))
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// BenchmarkPredictExchange runs the four events of one predict exchange
// (TF row request → v2 binary → v2 binary answer → TF JSON) in memory.
func BenchmarkPredictExchange(b *testing.B) {
	cfg := &Config{Backend: newStaticBackend()}
	req := []byte(`{"instances": [1.0, 2.0, 5.0, 7.5, 9.25, 11.0, 13.5, 100.0]}`)
	header := `{"model_name":"m","outputs":[{"name":"y","datatype":"FP32","shape":[8],"parameters":{"binary_data_size":32}}]}`
	resp := append([]byte(header), make([]byte, 32)...)
	h := hdr{"inference-header-content-length": itoa(len(header))}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := New(cfg)
		s.RequestHeaders(ctx, "POST", "/v1/models/m:predict", hdr{}, false)
		if a := s.bufferedRequest(ctx, req); a.Verdict != Continue {
			b.Fatalf("request: %v %s", a.Verdict, a.Body)
		}
		s.ResponseHeaders(ctx, 200, h, false)
		if a := s.bufferedResponse(ctx, resp); a.Verdict != Continue {
			b.Fatalf("response: %v %s", a.Verdict, a.Body)
		}
		s.Close()
	}
}

// FuzzSessionStream drives one exchange twice, whole (each body one chunk
// to Whole, as ext_proc BUFFERED) and streamed in chunks of the fuzzed sizes (RequestChunk,
// ResponseChunk): the answers must be the same — the same status and
// error body, or the same v2 request bytes and the same TF answer bytes —
// except where a streamed answer legitimately resets (it failed after its
// first bytes went out).
func FuzzSessionStream(f *testing.F) {
	header := `{"model_name":"m","outputs":[{"name":"y","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}`
	f.Add([]byte(`{"instances": [1.0, 2.0]}`), 3, 200, itoa(len(header)), append([]byte(header), 0, 0, 128, 63, 0, 0, 0, 64), 5)
	f.Add([]byte(`{"inputs": {"x": [1, "a"]}}`), 1, 200, "", []byte(`{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[1]}]}`), 2)
	f.Add([]byte(`{"instances": [1]}`), 7, 404, "", []byte(`{"error":"gone"}`), 1)
	f.Add([]byte(`{"instances": [1]}`), 7, 200, "9999", []byte(header), 64)
	cfg := &Config{Backend: newStaticBackend(), MaxBodyBytes: 1 << 16}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte, reqChunk, status int, ihcl string, respBody []byte, respChunk int) {
		if status < 100 || status > 599 || len(body) > 4<<10 || len(respBody) > 4<<10 {
			// Small bodies cut small cover the chunk boundaries; a large
			// one cut in bytes is thousands of events and slows the
			// fuzzer to a halt (its workers then miss the deadline).
			return
		}
		reqChunk, respChunk = 1+abs(reqChunk)%97, 1+abs(respChunk)%97
		h := hdr{"x-request-id": "fuzz"}
		rh := hdr{"inference-header-content-length": ihcl}

		whole := New(cfg)
		defer whole.Close()
		whole.RequestHeaders(ctx, "POST", "/v1/models/m:predict", h, false)
		wa := whole.bufferedRequest(ctx, body)

		streamed := New(cfg)
		defer streamed.Close()
		streamed.RequestHeaders(ctx, "POST", "/v1/models/m:predict", h, false)
		sa := streamBody(t, streamed.RequestChunk, body, reqChunk)
		if !sameAnswer(t, "request", wa, sa) || wa.Verdict != Continue {
			return
		}
		whole.ResponseHeaders(ctx, status, rh, false)
		wa = whole.bufferedResponse(ctx, respBody)
		streamed.ResponseHeaders(ctx, status, rh, false)
		sa = streamBody(t, streamed.ResponseChunk, respBody, respChunk)
		if sa.Verdict == Reset {
			if wa.Verdict != Respond || wa.Status < 500 {
				t.Fatalf("streamed answer reset; whole answer %v %d %q", wa.Verdict, wa.Status, wa.Body)
			}
			return
		}
		sameAnswer(t, "response", wa, sa)
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// sameAnswer fails unless whole and streamed answer alike; it reports
// whether both went on.
func sameAnswer(t *testing.T, what string, whole, streamed Action) bool {
	t.Helper()
	if whole.Verdict != streamed.Verdict {
		t.Fatalf("%s: whole %v %d %q, streamed %v %d %q", what, whole.Verdict, whole.Status, whole.Body,
			streamed.Verdict, streamed.Status, streamed.Body)
	}
	if whole.Status != streamed.Status || !bytes.Equal(whole.Body, streamed.Body) {
		t.Fatalf("%s: whole %d %q\nstreamed %d %q", what, whole.Status, whole.Body, streamed.Status, streamed.Body)
	}
	return whole.Verdict == Continue
}
