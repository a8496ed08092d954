package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tfPrimaryMap puts half_plus_two on TF Serving (passed through
// untranslated) and shadows it on the v2 server at shadowURL, every
// request; half_times_two is on TF Serving too, its shadow never sampled.
// shadowURL "" gives the same map without shadows: the baseline.
func tfPrimaryMap(shadowURL, mismatchLog string) string {
	if shadowURL == "" {
		return `
servers:
  tfs: {url: "{{tfserving}}", kind: tfserving}
models:
  half_plus_two: {server: tfs}
  half_times_two: {server: tfs}
`
	}
	return fmt.Sprintf(`
servers:
  tfs: {url: "{{tfserving}}", kind: tfserving}
  shadow: {url: %q, kind: triton}
models:
  half_plus_two:
    server: tfs
    shadow: {server: shadow, sample: 1.0, tolerance: {abs: 1e-5, rel: 1e-4}, mismatch_log: %q}
  half_times_two:
    server: tfs
    shadow: {server: shadow, sample: 0}
`, shadowURL, mismatchLog)
}

// unsampledRequest is a request of the model whose shadow is never
// sampled.
var unsampledRequest = request{path: "/v1/models/half_times_two:predict", body: `{"instances": [[1.0, 2.0, 3.0, 4.0]]}`}

// TestShadowTFServingPrimary: the primary is TF Serving (the mock's TF
// face, the exchange forwarded untranslated) and the shadow the
// converted v2 model. Through both Envoy body modes and the proxy the
// client's answers are byte for byte those of the stack without a
// shadow; a shadow perturbed by 1e-3 shows a mismatch per successful
// predict, with the worst element where the relative error is largest, a
// faithful one none. Sampled exchanges are observed (their bodies reach
// ext_proc, unchanged); an unsampled one stays a pass-through whose
// bodies never do (BUFFERED: mode_override NONE).
func TestShadowTFServingPrimary(t *testing.T) {
	plain := newStack(t, stackConfig{ModelMap: tfPrimaryMap("", ""), TFServing: true})
	requests := append(shadowRequests(), unsampledRequest)
	want := map[string]response{}
	for _, via := range transports {
		for _, rq := range requests {
			want[via+rq.path+rq.body] = plain.do(t, via, rq)
		}
	}
	for _, tc := range faithfulAndPerturbed {
		t.Run(tc.name, func(t *testing.T) {
			ss := startShadowServer(t, tc.perturb, 0)
			logFile := filepath.Join(t.TempDir(), "mismatches.jsonl")
			s := newStack(t, stackConfig{ModelMap: tfPrimaryMap(ss.srv.URL, logFile), TFServing: true})
			sent := 0
			for _, via := range transports {
				for _, rq := range requests {
					got := s.do(t, via, rq)
					if rq.path != unsampledRequest.path {
						sent++
					}
					if w := want[via+rq.path+rq.body]; got.status != w.status || !bytes.Equal(got.body, w.body) || !sameHeaders(got.header, w.header) {
						t.Errorf("%s %.40s: answer differs from the stack without a shadow:\n%d %v %.200s\nwant %d %v %.200s",
							via, rq.body, got.status, got.header, got.body, w.status, w.header, w.body)
					}
				}
			}
			mismatches := tc.mismatches * len(transports)
			s.expectShadowResults(t, sent, mismatches)
			if got := int(ss.infers.Load()); got != 2*len(transports) {
				t.Errorf("the shadow server got %d inference calls, want %d (none for the client error, nor the unsampled model)", got, 2*len(transports))
			}
			if got, want := s.tfs.predicts.Load(), int64(len(requests)*len(transports)); got != want || s.tfs.foreign.Load() != 0 {
				t.Errorf("TF Serving got %d predicts and %d other requests, want %d and none", got, s.tfs.foreign.Load(), want)
			}
			for _, l := range readMismatches(t, logFile) {
				w := l.Worst
				// y = x/2 + 2, moved by 1e-3: the relative error is largest
				// at the first element (2.5, or 2.625 for the large body).
				if w.Output != "predictions" || !slices.Equal(w.Index, []int64{0}) || w.FlatIndex != 0 ||
					math.Abs(w.Shadow-w.Primary-1e-3) > 1e-6 || (w.Primary != 2.5 && w.Primary != 2.625) {
					t.Errorf("worst = %+v, want predictions[0], 2.5 or 2.625 moved by 1e-3", w)
				}
				if l.Model != "half_plus_two" || l.Server != "shadow" || l.Primary.Status != 200 || l.Shadow.Status != 200 || len(l.Request) == 0 {
					t.Errorf("mismatch line = %+v", l)
				}
				mismatches--
			}
			if mismatches != 0 {
				t.Errorf("%d mismatches without their mismatch_log line", mismatches)
			}
			checkObserved(t, s)
		})
	}
}

// sameHeaders compares two answers' headers but for those that differ
// between any two answers (the date, the exchange's id, Envoy's
// measure of the upstream's time).
func sameHeaders(a, b http.Header) bool {
	strip := func(h http.Header) http.Header {
		h = h.Clone()
		h.Del("Date")
		h.Del("X-Request-Id")
		h.Del("X-Envoy-Upstream-Service-Time")
		return h
	}
	return maps.EqualFunc(strip(a), strip(b), slices.Equal)
}

// checkObserved reads the ext_proc messages of the stack's forwarded
// predicts. BUFFERED: a sampled exchange's bodies reach ext_proc (and
// come back unchanged: the answers are compared byte for byte), an
// unsampled one's never do (mode_override NONE). Full duplex, where Envoy
// honours no mode_override, every forwarded body's chunks come and are
// echoed, sampled or not.
func checkObserved(t *testing.T, s *stack) {
	t.Helper()
	for _, via := range []string{viaExtproc, viaExtprocFD} {
		for _, ex := range s.envoy(via).Exchanges() {
			if !strings.HasSuffix(ex.Path, ":predict") || ex.Status != 200 {
				continue
			}
			trace := strings.Join(ex.Trace, ", ")
			bodies := via == viaExtprocFD || strings.Contains(ex.Path, "/half_plus_two:")
			for _, m := range []string{"> request_body", "< request_body", "> response_body", "< response_body"} {
				if strings.Contains(trace, m) != bodies {
					t.Errorf("%s %s: ext_proc messages %s, want bodies %v", via, ex.Path, trace, bodies)
					break
				}
			}
		}
	}
}
