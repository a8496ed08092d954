package session

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/shadow"
)

// forwardShadowEnv is env whose half_plus_two lives on the TF Serving
// server tfs (forwarded, never reached here: the adapters send it) and is
// shadowed on ts at the given sample; hpt is split between tfs and the
// shadow server itself.
func forwardShadowEnv(t testing.TB, ts *tfShadow, sample string) (*env, *shadow.Engine, *modelmap.Map) {
	t.Helper()
	e := newEnv(t, "triton")
	doc := `
servers:
  tfs: {url: "http://tf-serving.invalid:8501", kind: tfserving}
  tf: {url: "` + ts.url.String() + `", kind: tfserving}
models:
  half_plus_two:
    server: tfs
    shadow: {server: tf, sample: ` + sample + `}
  hpt:
    split: {tfs: 50, tf: 50}
    split_key: x-user-id
    shadow: {server: tf, sample: 1}
`
	m, err := modelmap.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tfs, _ := url.Parse("http://tf-serving.invalid:8501")
	// The bridge gives a tfserving server a backend too (its bearer token).
	mp := &Mapping{Map: m, Backends: map[string]Backend{"tfs": e.be, "tf": e.be}, URLs: map[string]*url.URL{"tfs": tfs, "tf": ts.url}}
	e.cfg.Mapping = func() *Mapping { return mp }
	eng := shadow.New(shadow.Options{Metrics: e.metrics, MaxBytes: 1 << 20})
	t.Cleanup(eng.Close)
	e.cfg.Shadow = eng
	return e, eng, m
}

// passOn runs one body through event as an adapter of the given body
// mode would (chunk 0: whole, ext_proc BUFFERED; -1: whole in parts, the
// BUFFERED frames path; else chunks of that size, full duplex and the
// proxy) and fails unless every piece is passed on unchanged.
func passOn(t *testing.T, s *Session, body []byte, chunk int, request bool) {
	t.Helper()
	ctx := context.Background()
	event := s.ResponseChunk
	if request {
		event = s.RequestChunk
	}
	if chunk < 0 && request {
		half := len(body) / 2
		a, parts, release := s.RequestParts(ctx, [][]byte{body[:half], body[half:]})
		if a.Verdict != PassThrough || parts != nil || release != nil || a.ReplaceBody || len(a.Set)+len(a.Remove) > 0 {
			t.Fatalf("parts: %v %d parts, replace %v %v %v, want an unchanged pass-through", a.Verdict, len(parts), a.ReplaceBody, a.Set, a.Remove)
		}
		return
	}
	if chunk <= 0 {
		chunk = len(body) + 1
	}
	for i := 0; ; i += chunk {
		end := i+chunk >= len(body)
		a := event(ctx, body[min(i, len(body)):min(i+chunk, len(body))], end, nil)
		if a.Verdict != PassThrough || a.ReplaceBody || len(a.Set)+len(a.Remove) > 0 {
			t.Fatalf("chunk at %d: %v replace %v %v %v, want an unchanged pass-through", i, a.Verdict, a.ReplaceBody, a.Set, a.Remove)
		}
		if end {
			return
		}
	}
}

// An exchange forwarded to TF Serving is shadowed when sampled: its
// bodies pass through the session unchanged, in every body mode, and the
// copy has the request as the client sent it (gunzipped) and TF
// Serving's answer, errors included; it is not counted as tfsbridge's
// request. Unsampled, it stays a plain pass-through.
func TestShadowForward(t *testing.T) {
	const reqBody = `{"instances": [1.0, 2.0, 5.0]}`
	const answer = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	for _, tc := range []struct {
		name        string
		sample      string
		chunk       int
		gzip        bool
		status      int // TF Serving's
		body        string
		shadowState int
		shadowAns   string
		result      string // "" for no copy
	}{
		{name: "buffered", sample: "1", status: 200, body: answer, shadowState: 200, shadowAns: answer, result: observe.ShadowMatch},
		{name: "buffered in parts", sample: "1", chunk: -1, status: 200, body: answer, shadowState: 200, shadowAns: answer, result: observe.ShadowMatch},
		{name: "streamed", sample: "1", chunk: 7, status: 200, body: answer, shadowState: 200, shadowAns: answer, result: observe.ShadowMatch},
		{name: "gzip request", sample: "1", gzip: true, status: 200, body: answer, shadowState: 200, shadowAns: answer, result: observe.ShadowMatch},
		{name: "drifted shadow", sample: "1", chunk: 7, status: 200, body: answer, shadowState: 200,
			shadowAns: `{"predictions": [2.5, 3.0, 4.6]}`, result: observe.ShadowMismatch},
		{name: "TF Serving's error, the shadow's too", sample: "1", status: 400, body: `{ "error": "JSON Parse error" }`,
			shadowState: 400, shadowAns: `{"error": "another text"}`, result: observe.ShadowMatch},
		{name: "TF Serving's error against a success", sample: "1", status: 404, body: `{ "error": "Servable not found" }`,
			shadowState: 200, shadowAns: answer, result: observe.ShadowMismatch},
		{name: "unsampled", sample: "0", status: 200, body: answer, shadowState: 200, shadowAns: answer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTFShadow(t, tc.shadowState, tc.shadowAns)
			e, eng, _ := forwardShadowEnv(t, ts, tc.sample)
			ctx := context.Background()
			s := New(e.cfg)
			h := hdr{}
			body := []byte(reqBody)
			if tc.gzip {
				h["content-encoding"], body = "gzip", gz(t, body)
			}
			a := s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", h, false)
			srv, _ := a.Get(HeaderServer)
			if a.Verdict != PassThrough || a.Observe != (tc.result != "") || srv != "tfs" || !a.ClearRouteCache || s.AwaitingBody() {
				t.Fatalf("headers: %v observe %v server %q clear %v, want a pass-through to tfs, observed %v", a.Verdict, a.Observe, srv, a.ClearRouteCache, tc.result != "")
			}
			passOn(t, s, body, tc.chunk, true)
			a = s.ResponseHeaders(ctx, tc.status, hdr{"content-type": "application/json"}, false)
			if a.Verdict != PassThrough || a.Observe != (tc.result != "") || len(a.Set)+len(a.Remove) > 0 {
				t.Fatalf("response headers: %v observe %v %v %v", a.Verdict, a.Observe, a.Set, a.Remove)
			}
			passOn(t, s, []byte(tc.body), max(tc.chunk, 0), false)
			s.Close()
			if got := e.metrics.Value("tfsbridge_requests_total"); got != 0 {
				t.Errorf("requests_total = %v: a forwarded exchange counted as tfsbridge's", got)
			}
			if tc.result == "" {
				eng.Close() // waits for any copy: none must have been sent
				if got := shadowResults(e.metrics); len(got) != 0 || len(ts.bodies) != 0 || eng.Held() != 0 {
					t.Errorf("results %v, %d copies, %d bytes held; want none", got, len(ts.bodies), eng.Held())
				}
				return
			}
			expectOneCopy(t, e, eng, ts, tc.result, reqBody)
		})
	}
}

// No copy of an observed forward that is not whole: TF Serving never
// answered (the client or the upstream went away), or the request body
// never ended; nothing stays reserved. A split's share on the shadow
// server itself is not observed at all.
func TestShadowForwardNoCopy(t *testing.T) {
	const reqBody = `{"instances": [1.0]}`
	for _, tc := range []struct {
		name     string
		reqEnd   bool
		answered bool
	}{
		{"no answer", true, false},
		{"request cut", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTFShadow(t, 200, "{}")
			e, eng, _ := forwardShadowEnv(t, ts, "1")
			ctx := context.Background()
			s := New(e.cfg)
			if a := s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false); !a.Observe {
				t.Fatalf("headers: %v, not observed", a.Verdict)
			}
			s.RequestChunk(ctx, []byte(reqBody), tc.reqEnd, nil)
			if tc.answered {
				s.ResponseHeaders(ctx, 200, hdr{}, false)
				s.ResponseChunk(ctx, []byte(`{"predictions": [2.5]}`), true, nil)
			}
			s.Close()
			eng.Close()
			if got := shadowResults(e.metrics); len(got) != 0 || len(ts.bodies) != 0 || eng.Held() != 0 {
				t.Errorf("results %v, %d copies, %d bytes held; want none", got, len(ts.bodies), eng.Held())
			}
		})
	}
	t.Run("primary is the shadow server", func(t *testing.T) {
		ts := newTFShadow(t, 200, "{}")
		e, _, m := forwardShadowEnv(t, ts, "1")
		for _, srv := range []string{"tf", "tfs"} {
			s := New(e.cfg)
			a := s.RequestHeaders(context.Background(), "POST", "/v1/models/hpt:predict", hdr{"x-user-id": keyFor(t, m, "hpt", srv)}, false)
			s.Close()
			if a.Verdict != PassThrough || a.Observe != (srv == "tfs") {
				t.Errorf("share on %s: %v observed %v, want observed only off the shadow server", srv, a.Verdict, a.Observe)
			}
		}
	})
}

// A large body of an observed forward that arrives in parts (ext_proc
// BUFFERED's frames) is neither joined nor translated: the parts go back
// nil (Envoy keeps its body), and the tee holds one copy of it, the
// body's own size allocated once.
func TestShadowForwardPartsNotJoined(t *testing.T) {
	ts := newTFShadow(t, 200, "{}")
	e, eng, _ := forwardShadowEnv(t, ts, "1")
	s := New(e.cfg)
	defer s.Close()
	s.RequestHeaders(context.Background(), "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
	part := []byte(strings.Repeat(" ", 100<<10))
	body := 3 * len(part)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a, parts, _ := s.RequestParts(context.Background(), [][]byte{part, part, part})
	runtime.ReadMemStats(&after)
	if a.Verdict != PassThrough || parts != nil {
		t.Fatalf("%v %d parts, want a pass-through", a.Verdict, len(parts))
	}
	if got := eng.Held(); got != int64(body) {
		t.Errorf("the tee holds %d bytes, want the body's %d", got, body)
	}
	// A join, or a copy grown by appends, would allocate twice the body.
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(body)+32<<10 {
		t.Errorf("%d bytes allocated for a %d-byte body in parts", got, body)
	}
}

// BenchmarkShadowForward is one forwarded predict exchange as the
// adapters drive it: without a shadow block ("plain"), with one whose
// draw fails ("unsampled": the PassThrough at the request headers, its
// bodies never seen) and sampled ("observed": the bodies pass through the
// session and the tee, the copy handed over and dropped, max_inflight
// spent on a stalled shadow), so that what observing costs the client's
// path shows, and no copy's CPU.
func BenchmarkShadowForward(b *testing.B) {
	release := make(chan struct{})
	stalled := &tfShadow{}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	stalled.url, _ = url.Parse(srv.URL)
	req := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	answer := []byte("{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}")
	for _, mode := range []string{"plain", "unsampled", "observed"} {
		b.Run(mode, func(b *testing.B) {
			sample := map[string]string{"plain": "0", "unsampled": "0", "observed": "1"}[mode]
			e, _, m := forwardShadowEnv(b, stalled, sample)
			m.Model("half_plus_two").Shadow.MaxInflight = 1
			if mode == "plain" {
				m.Model("half_plus_two").Shadow = nil
			}
			ctx := context.Background()
			exchange := func() {
				s := New(e.cfg)
				defer s.Close()
				a := s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{"content-type": "application/json"}, false)
				if !a.Observe {
					return // mode NONE: nothing more reaches tfsbridge
				}
				s.RequestChunk(ctx, req, true, Whole)
				s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/json"}, false)
				s.ResponseChunk(ctx, answer, true, Whole)
			}
			exchange()
			b.ReportAllocs()
			for b.Loop() {
				exchange()
			}
		})
	}
}
