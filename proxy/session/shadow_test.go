package session

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/shadow"
)

// tfShadow is a TF Serving stand-in that a model's shadow block names:
// it records the copies it gets and answers each with answer.
type tfShadow struct {
	url    *url.URL
	mu     sync.Mutex
	paths  []string
	bodies []string
	status int
	answer string
	// gate, when set, holds every copy's answer until closed, each
	// copy announced on entered first.
	gate, entered chan struct{}
}

func newTFShadow(t testing.TB, status int, answer string) *tfShadow {
	t.Helper()
	ts := &tfShadow{status: status, answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.paths, ts.bodies = append(ts.paths, r.URL.Path), append(ts.bodies, string(b))
		gate, entered := ts.gate, ts.entered
		ts.mu.Unlock()
		if gate != nil {
			entered <- struct{}{}
			<-gate
		}
		w.WriteHeader(ts.status)
		_, _ = io.WriteString(w, ts.answer)
	}))
	t.Cleanup(srv.Close)
	ts.url, _ = url.Parse(srv.URL)
	return ts
}

// shadowEnv is env whose half_plus_two is shadowed, every request, on
// ts (a server of kind tfserving), by an engine of memory cap maxBytes.
func shadowEnv(t *testing.T, ts *tfShadow, maxBytes int64) (*env, *shadow.Engine) {
	t.Helper()
	return shadowEnvKind(t, ts, maxBytes, shadow.KindTFServing)
}

// shadowEnvKind is shadowEnv with the shadow server of the map kind
// given (a v2 kind: its copies reuse the primary's v2 request).
func shadowEnvKind(t *testing.T, ts *tfShadow, maxBytes int64, kind string) (*env, *shadow.Engine) {
	t.Helper()
	e := newEnv(t, "triton")
	m, err := modelmap.Parse([]byte("servers:\n  tf: {url: \"" + ts.url.String() + "\"}\nmodels:\n  half_plus_two:\n    shadow: {server: tf, sample: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	m.Servers["tf"].Kind = kind // a kind the map learns in the split branch
	mp := &Mapping{Map: m, Backends: map[string]Backend{}, URLs: map[string]*url.URL{"tf": ts.url}}
	e.cfg.Mapping = func() *Mapping { return mp }
	eng := shadow.New(shadow.Options{Metrics: e.metrics, MaxBytes: maxBytes})
	t.Cleanup(eng.Close)
	e.cfg.Shadow = eng
	return e, eng
}

func shadowResults(m *observe.Metrics) map[string]int {
	out := map[string]int{}
	for _, r := range []string{observe.ShadowMatch, observe.ShadowMismatch, observe.ShadowError, observe.ShadowDropped} {
		if n := int(m.Value("tfsbridge_shadow_comparisons_total", "model", "half_plus_two", "result", r)); n > 0 {
			out[r] = n
		}
	}
	return out
}

// expectOneCopy waits for the one comparison of an exchange and checks
// its result and that the shadow got the request as the client sent it.
func expectOneCopy(t *testing.T, e *env, eng *shadow.Engine, ts *tfShadow, result, reqBody string) {
	t.Helper()
	got := waitResults(t, e.metrics, eng, 1)
	if len(got) != 1 || got[result] != 1 {
		t.Errorf("results %v, want one %s", got, result)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.bodies) != 1 || ts.bodies[0] != reqBody || ts.paths[0] != "/v1/models/half_plus_two:predict" {
		t.Errorf("the shadow got %q %q, want the request as the client sent it", ts.paths, ts.bodies)
	}
}

// waitResults waits until the engine has counted n results and released
// every byte (a copy's result comes in milliseconds; the bound is for a
// busy machine).
func waitResults(t *testing.T, m *observe.Metrics, eng *shadow.Engine, n int) map[string]int {
	t.Helper()
	var got map[string]int
	done := poll.Until(30*time.Second, func() bool {
		got = shadowResults(m)
		total := 0
		for _, v := range got {
			total += v
		}
		return total >= n && eng.Held() == 0
	})
	if !done {
		t.Fatalf("results %v (want %d), %d bytes held", got, n, eng.Held())
	}
	return got
}

// The tee keeps the request as the client sent it (gunzipped) and the
// answer as the client got it, whole or in pieces, for success and error
// answers alike; the client's answer is what it is without a shadow.
func TestShadowTee(t *testing.T) {
	const want = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	const reqBody = `{"instances": [1.0, 2.0, 5.0]}`
	binHeader := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	binOK := append([]byte(binHeader), f32le(2.5, 3, 4.5)...)
	v2err := `{"error":"input byte size mismatch"}`
	for _, tc := range []struct {
		name        string
		gzip        bool
		chunk       int // 0: whole bodies (ext_proc BUFFERED); -1: the request whole in parts (its frames)
		status      int // the v2 server's
		body        []byte
		wantStatus  int
		wantBody    string
		shadowAns   string
		shadowState int
		result      string
	}{
		{name: "whole", status: 200, body: binOK, wantStatus: 200, wantBody: want, shadowState: 200, shadowAns: want, result: observe.ShadowMatch},
		{name: "whole in parts", chunk: -1, status: 200, body: binOK, wantStatus: 200, wantBody: want, shadowState: 200, shadowAns: want, result: observe.ShadowMatch},
		{name: "streamed", chunk: 7, status: 200, body: binOK, wantStatus: 200, wantBody: want, shadowState: 200, shadowAns: want, result: observe.ShadowMatch},
		{name: "gzip request", gzip: true, status: 200, body: binOK, wantStatus: 200, wantBody: want, shadowState: 200, shadowAns: want, result: observe.ShadowMatch},
		{name: "drifted shadow", chunk: 7, status: 200, body: binOK, wantStatus: 200, wantBody: want, shadowState: 200,
			shadowAns: `{"predictions": [2.5, 3.0, 4.6]}`, result: observe.ShadowMismatch},
		{name: "error of the same status", status: 400, body: []byte(v2err), wantStatus: 400, wantBody: tfError("input byte size mismatch"),
			shadowState: 400, shadowAns: `{"error": "another text"}`, result: observe.ShadowMatch},
		{name: "error against success", status: 400, body: []byte(v2err), wantStatus: 400, wantBody: tfError("input byte size mismatch"),
			shadowState: 200, shadowAns: want, result: observe.ShadowMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTFShadow(t, tc.shadowState, tc.shadowAns)
			e, eng := shadowEnv(t, ts, 1<<20)
			ctx := context.Background()
			s := New(e.cfg)
			h := hdr{}
			body := []byte(reqBody)
			if tc.gzip {
				h["content-encoding"], body = "gzip", gz(t, body)
			}
			s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", h, false)
			var a Action
			switch tc.chunk {
			case -1:
				a, _, _ = s.RequestParts(ctx, [][]byte{body[:10], body[10:]})
			case 0:
				a = s.bufferedRequest(ctx, body)
			default:
				a = streamRequest(t, s, body, tc.chunk)
			}
			if a.Verdict != Continue {
				t.Fatalf("request: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			rh := hdr{"content-type": "application/json"}
			if tc.status == 200 {
				rh = hdr{"content-type": "application/octet-stream", "inference-header-content-length": strconv.Itoa(len(binHeader))}
			}
			s.ResponseHeaders(ctx, tc.status, rh, false)
			if tc.chunk <= 0 || tc.status != 200 {
				a = s.bufferedResponse(ctx, tc.body)
			} else {
				a = streamBody(t, s.ResponseChunk, tc.body, tc.chunk)
			}
			s.Close()
			status := a.Status
			if a.Verdict == Continue {
				status = 200
			}
			if status != tc.wantStatus || string(a.Body) != tc.wantBody {
				t.Errorf("client got %d %q, want %d %q", status, a.Body, tc.wantStatus, tc.wantBody)
			}
			expectOneCopy(t, e, eng, ts, tc.result, reqBody)
		})
	}
}

// No copy: a model without a shadow block, an exchange nobody was
// answered, a request over the memory cap (dropped and counted; the
// client's exchange goes on untouched).
func TestShadowTeeNoCopy(t *testing.T) {
	const reqBody = `{"instances": [1.0, 2.0, 5.0]}`
	for _, tc := range []struct {
		name     string
		path     string
		maxBytes int64
		answer   bool
		want     map[string]int
	}{
		{"no shadow block", "/v1/models/half_plus_two:predict", 1 << 20, true, map[string]int{}},
		{"abandoned", "/v1/models/half_plus_two:predict", 1 << 20, false, map[string]int{}},
		{"over the memory cap", "/v1/models/half_plus_two:predict", 10, true, map[string]int{observe.ShadowDropped: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTFShadow(t, 200, "{}")
			e, eng := shadowEnv(t, ts, tc.maxBytes)
			if tc.name == "no shadow block" {
				e.cfg.Mapping().Map.Model("half_plus_two").Shadow = nil
			}
			ctx := context.Background()
			s := New(e.cfg)
			s.RequestHeaders(ctx, "POST", tc.path, hdr{}, false)
			if a := streamRequest(t, s, []byte(reqBody), 5); a.Verdict != Continue {
				t.Fatalf("request: %v %d %s", a.Verdict, a.Status, a.Body)
			}
			if tc.answer {
				s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/json"}, false)
				jsonOK := `{"model_name":"m","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`
				if a := s.bufferedResponse(ctx, []byte(jsonOK)); a.Verdict != Continue {
					t.Fatalf("response: %v %d %s", a.Verdict, a.Status, a.Body)
				}
			}
			s.Close()
			if got := shadowResults(e.metrics); len(got) != len(tc.want) || got[observe.ShadowDropped] != tc.want[observe.ShadowDropped] {
				t.Errorf("results %v, want %v", got, tc.want)
			}
			if eng.Held() != 0 {
				t.Errorf("%d bytes still held", eng.Held())
			}
			eng.Close() // waits for any copy: none must have been sent
			if len(ts.bodies) != 0 {
				t.Errorf("the shadow got %d copies", len(ts.bodies))
			}
		})
	}
}

// BenchmarkShadowTee is the small exchange of BenchmarkSmallExchange for
// a mapped half_plus_two, without a shadow block ("map") and with one at
// sample 1.0 whose copies all find max_inflight spent ("tee": a stalled
// shadow holds the one slot), so every exchange pays the tee — sampling,
// keeping the request and the answer, the hand-off and the drop — and no
// copy's CPU: what shadowing costs the client's own path.
func BenchmarkShadowTee(b *testing.B) {
	for _, tee := range []bool{false, true} {
		name := "map"
		if tee {
			name = "tee"
		}
		b.Run(name, func(b *testing.B) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
			defer srv.Close()
			defer close(release)
			u, _ := url.Parse(srv.URL)
			e := newEnv(b, "triton")
			doc := "servers:\n  tf: {url: \"" + srv.URL + "\"}\nmodels:\n  half_plus_two: {}\n"
			if tee {
				doc = "servers:\n  tf: {url: \"" + srv.URL + "\"}\nmodels:\n  half_plus_two:\n    shadow: {server: tf, sample: 1, max_inflight: 1}\n"
			}
			m, err := modelmap.Parse([]byte(doc))
			if err != nil {
				b.Fatal(err)
			}
			m.Servers["tf"].Kind = shadow.KindTFServing
			mp := &Mapping{Map: m, Backends: map[string]Backend{}, URLs: map[string]*url.URL{"tf": u}}
			e.cfg.Mapping = func() *Mapping { return mp }
			eng := shadow.New(shadow.Options{Metrics: e.metrics})
			defer eng.Close()
			e.cfg.Shadow = eng
			req := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
			header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
			resp := append([]byte(header), f32le(2.5, 3, 4.5)...)
			respHdr := hdr{"inference-header-content-length": itoa(len(header)), "content-type": "application/octet-stream"}
			ctx := context.Background()
			exchange := func() {
				s := New(e.cfg)
				defer s.Close()
				s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{"content-type": "application/json"}, false)
				if a := s.bufferedRequest(ctx, req); a.Verdict != Continue {
					b.Fatalf("request: %v %s", a.Verdict, a.Body)
				}
				s.ResponseHeaders(ctx, 200, respHdr, false)
				if a := s.bufferedResponse(ctx, resp); a.Verdict != Continue {
					b.Fatalf("response: %v %q", a.Verdict, a.Body)
				}
			}
			exchange()
			b.ReportAllocs()
			for b.Loop() {
				exchange()
			}
		})
	}
}
