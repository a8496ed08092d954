package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// BenchmarkShadowCost measures what shadowing every request (sample 1.0)
// costs the client's path: the same small predict through a stack whose
// model map has no shadow and stacks whose map has, in alternating turns
// of 50 exchanges so all share the machine's moments, one client at a
// time, for each transport. It reports each side's p50 and, as the
// shadowed p50 over the plain one minus 1, in percent (the bound
// is 10):
//
//   - p50-cost-%: tfsbridge's own shadow work. The shadow server is a
//     stand-in that drains the copy and answers the v2 answer the mock
//     gave it once at setup (the same request, so the comparison runs
//     and matches): the copy's translation, HTTP exchange and comparison
//     are measured, the shadow model's serving is not — in a deployment
//     it runs on the shadow's own machine.
//   - full-p50-cost-%: the same including the shadow model's own work:
//     the shadow server is the full mock, in this process, parsing and
//     answering every copy on the same cores as the primary.
//   - tee-p50-cost-%: every copy dropped (a stalled shadow): what the
//     client's own path pays to keep the copy.
func BenchmarkShadowCost(b *testing.B) {
	const turn = 50
	full := startShadowServer(b, 0, 0)
	shadowed := newStack(b, stackConfig{ModelMap: shadowMap(startReplayServer(b), filepath.Join(b.TempDir(), "m.jsonl"), 8)})
	shadowedFull := newStack(b, stackConfig{ModelMap: shadowMap(full.srv.URL, filepath.Join(b.TempDir(), "m.jsonl"), 8)})
	// A shadow that never answers within the run: after its first
	// max_inflight copies every copy is dropped, so this stack's cost is
	// what the session's tee and the hand-off alone add to the client's
	// path, without a copy's CPU competing for the machine.
	stalled := startShadowServer(b, 0, time.Hour)
	teeOnly := newStack(b, stackConfig{ModelMap: shadowMap(stalled.srv.URL, filepath.Join(b.TempDir(), "m.jsonl"), 1)})
	plain := newStack(b, stackConfig{ModelMap: plainMap})
	rq := request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1.0, 2.0, 5.0]}`}
	for _, via := range transports {
		b.Run(via, func(b *testing.B) {
			run := func(s *stack, n int, lat *[]time.Duration) {
				for range n {
					t0 := time.Now()
					resp, err := send(context.Background(), s.client, s.url(via), rq)
					if err != nil || resp.status != 200 {
						b.Fatalf("%s: %v %d %s", via, err, resp.status, resp.body)
					}
					*lat = append(*lat, time.Since(t0))
				}
			}
			var warm []time.Duration
			run(shadowed, 10, &warm)
			run(shadowedFull, 10, &warm)
			run(plain, 10, &warm)
			run(teeOnly, 10, &warm)
			var with, withFull, without, tee []time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += turn {
				run(plain, turn, &without)
				run(shadowed, turn, &with)
				run(shadowedFull, turn, &withFull)
				run(teeOnly, turn, &tee)
			}
			b.StopTimer()
			p50 := float64(quantile(without, 0.5))
			cost := func(lat []time.Duration) float64 { return (float64(quantile(lat, 0.5))/p50 - 1) * 100 }
			b.ReportMetric(p50/float64(time.Microsecond), "plain-p50-µs")
			b.ReportMetric(float64(quantile(with, 0.5))/float64(time.Microsecond), "shadowed-p50-µs")
			b.ReportMetric(cost(with), "p50-cost-%")
			b.ReportMetric(cost(withFull), "full-p50-cost-%")
			b.ReportMetric(cost(tee), "tee-p50-cost-%")
		})
	}
	// The comparisons ran and matched: the stand-in's answer is the
	// mock's, so the cost measured is that of a real comparison.
	if m, mm := shadowed.shadowCount(observe.ShadowMatch), shadowed.shadowCount(observe.ShadowMismatch); m == 0 || mm != 0 {
		b.Fatalf("stand-in shadow: %d matches, %d mismatches; want some and none", m, mm)
	}
}

// startReplayServer is a shadow server that costs next to nothing: its
// first inference call goes to a faithful mock and its answer is
// recorded; every later one is drained without parsing and answered with
// that recording (the benchmark sends one request, so it is the right
// answer). Metadata calls go to the mock. It returns the server's URL.
func startReplayServer(b *testing.B) string {
	b.Helper()
	mock, err := mockv2.New(mockv2.Options{Kind: triton})
	if err != nil {
		b.Fatal(err)
	}
	var (
		once   sync.Once
		header http.Header
		status int
		body   []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/infer") {
			mock.ServeHTTP(w, r)
			return
		}
		recorded := false
		once.Do(func() {
			rec := httptest.NewRecorder()
			mock.ServeHTTP(rec, r)
			header, status, body = rec.Header().Clone(), rec.Code, rec.Body.Bytes()
			recorded = true
		})
		if !recorded {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}
