package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkShadowCost measures what shadowing every request (sample 1.0,
// to a faithful mock) costs the client's path: the same small predict
// through a stack whose model map has no shadow and one whose map has, in alternating turns of
// 50 exchanges so both share the machine's moments, one client at a time,
// for each transport. It reports each side's p50 and p50-cost-% (the
// shadowed p50 over the plain one, minus 1, in percent; the bound
// is 10). The copies run while the client is answered, so their CPU (the
// shadow server's included, on the same machine) is part of the cost;
// tee-p50-cost-% is the same with every copy dropped (a stalled shadow):
// what the client's own path pays.
func BenchmarkShadowCost(b *testing.B) {
	const turn = 50
	ss := startShadowServer(b, 0, 0)
	shadowed := newStack(b, stackConfig{ModelMap: shadowMap(ss.srv.URL, filepath.Join(b.TempDir(), "m.jsonl"), 8)})
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
			run(plain, 10, &warm)
			run(teeOnly, 10, &warm)
			var with, without, tee []time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += turn {
				run(plain, turn, &without)
				run(shadowed, turn, &with)
				run(teeOnly, turn, &tee)
			}
			b.StopTimer()
			p50w, p50, p50t := quantile(with, 0.5), quantile(without, 0.5), quantile(tee, 0.5)
			b.ReportMetric(float64(p50)/float64(time.Microsecond), "plain-p50-µs")
			b.ReportMetric(float64(p50w)/float64(time.Microsecond), "shadowed-p50-µs")
			b.ReportMetric((float64(p50w)/float64(p50)-1)*100, "p50-cost-%")
			b.ReportMetric((float64(p50t)/float64(p50)-1)*100, "tee-p50-cost-%")
		})
	}
}
