package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
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
// time, for each transport. Everything runs in this one process, on the
// machine's cores: the client, envoysim, tfsbridge, the mock v2 server
// and the shadow server. It reports plain-p50-µs (no shadow) and
// shadowed-p50-µs (the p50-cost-% stack's), and each shadowed stack's
// cost as its p50 over the plain one minus 1, in percent (the issue's
// bound is 10):
//
//   - p50-cost-%: tfsbridge's own shadow work, every copy sent and
//     compared. The session's tee, the hand-off to the engine, the
//     copy's translation to v2, its HTTP exchange through net/http
//     (tfsbridge's side: request written, answer read), the answer's
//     translation back to TF and the comparison with the primary's (a
//     match: the stand-in's answer is the mock's to the same request).
//     The shadow server is startReplayServer's stand-in, a raw keep-alive
//     responder that reads each request and writes recorded bytes: its
//     own share is a read and a write syscall per copy. The shadow
//     model's serving is not measured — in a deployment it runs on the
//     shadow's own machine.
//   - drift-p50-cost-%: the same stand-in answering what a converted
//     model would, its outputs 1e-6 off the primary's (within the
//     tolerance: a match): the answer is not the primary's bytes, so
//     it is translated back to TF and compared value by value, where
//     p50-cost-%'s copy matches the primary's bytes untranslated.
//   - full-p50-cost-%: the same with the shadow model's work included:
//     the shadow server is the full mock behind net/http, in this
//     process, parsing and answering every copy on the same cores as
//     the primary.
//   - tee-p50-cost-%: every copy dropped (a stalled shadow, max_inflight
//     1): what the client's own path pays to keep the copy, without a
//     copy's CPU competing for the machine.
//   - p50-cost-µs: p50-cost-%'s difference in time, which does not
//     depend on how fast the plain path happened to be in the run (a
//     busy machine slows the plain path and the copy alike).
func BenchmarkShadowCost(b *testing.B) { benchShadowCost(b, false) }

// BenchmarkShadowCostPaced is BenchmarkShadowCost with the client's
// requests arriving at a steady rate instead of back to back, as a
// fleet's independent requests arrive and as latency is measured at a
// rate (wrk2's way). Back to back, the next request starts the instant
// an answer leaves, while its copy is on its way to the shadow server:
// the copy's CPU (tfsbridge's side of its exchange, and the stand-in
// server's, on the same two shared cores) lands on that next request
// every time, so that run tells what a copy costs the machine at a
// single client's saturation. Paced, it tells what a copy costs the
// client's wait. The period is twice the plain stack's back-to-back p50
// in the warm-up; a request after a pause pays for waking the
// process's threads, so the plain stack is then busy about four fifths
// of the time (reported as busy-%, its paced p50 over the period). An
// exchange that overruns its period is followed at once by the next
// (the ticker keeps one missed tick).
func BenchmarkShadowCostPaced(b *testing.B) { benchShadowCost(b, true) }

// benchShadowCost runs BenchmarkShadowCost, its requests back to back or
// paced.
func benchShadowCost(b *testing.B, paced bool) {
	const turn = 50
	full := startShadowServer(b, 0, 0)
	shadowed := newStack(b, stackConfig{ModelMap: shadowMap(startReplayServer(b, 0), filepath.Join(b.TempDir(), "m.jsonl"), 8)})
	drifted := newStack(b, stackConfig{ModelMap: shadowMap(startReplayServer(b, 1e-6), filepath.Join(b.TempDir(), "m.jsonl"), 8)})
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
			var tick *time.Ticker
			var period time.Duration
			run := func(s *stack, n int, lat *[]time.Duration) {
				for range n {
					if tick != nil {
						<-tick.C
					}
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
			run(drifted, 10, &warm)
			run(plain, 10, &warm)
			run(teeOnly, 10, &warm)
			if paced {
				var calib []time.Duration
				run(plain, 50, &calib)
				period = 2 * quantile(calib, 0.5)
				tick = time.NewTicker(period)
				defer tick.Stop()
			}
			var with, withDrift, withFull, without, tee []time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += turn {
				run(plain, turn, &without)
				run(shadowed, turn, &with)
				run(drifted, turn, &withDrift)
				run(shadowedFull, turn, &withFull)
				run(teeOnly, turn, &tee)
			}
			b.StopTimer()
			p50 := float64(quantile(without, 0.5))
			cost := func(lat []time.Duration) float64 { return (float64(quantile(lat, 0.5))/p50 - 1) * 100 }
			b.ReportMetric(p50/float64(time.Microsecond), "plain-p50-µs")
			b.ReportMetric(float64(quantile(with, 0.5))/float64(time.Microsecond), "shadowed-p50-µs")
			b.ReportMetric(cost(with), "p50-cost-%")
			b.ReportMetric(float64(quantile(with, 0.5)-quantile(without, 0.5))/float64(time.Microsecond), "p50-cost-µs")
			b.ReportMetric(cost(withDrift), "drift-p50-cost-%")
			b.ReportMetric(cost(withFull), "full-p50-cost-%")
			b.ReportMetric(cost(tee), "tee-p50-cost-%")
			if paced {
				b.ReportMetric(float64(period)/float64(time.Microsecond), "period-µs")
				b.ReportMetric(p50/float64(period)*100, "busy-%")
			}
		})
	}
	// The comparisons ran and matched: the stand-in's answer is the
	// mock's, so the cost measured is that of a real comparison.
	for name, s := range map[string]*stack{"stand-in": shadowed, "drifted stand-in": drifted} {
		if m, mm := s.shadowCount(observe.ShadowMatch), s.shadowCount(observe.ShadowMismatch); m == 0 || mm != 0 {
			b.Fatalf("%s shadow: %d matches, %d mismatches; want some and none", name, m, mm)
		}
	}
}

// startReplayServer is a shadow server that costs next to nothing, the
// stand-in for one on its own machine: a raw HTTP/1.1 keep-alive
// responder, not net/http. Per request it reads the head line by line
// (only the request line and Content-Length looked at) and the declared
// body into a reused buffer, then writes canned bytes. Its first
// inference call goes to a faithful mock and the answer is recorded as
// the wire bytes; every later one is drained unparsed and answered with
// that recording (the benchmark sends one request, so it is the right
// answer). Metadata calls (the engine's kind and signature look-ups,
// cached after the first) go to the mock. A perturb other than 0 is the
// mock's (mockv2.Options.Perturb) for half_plus_two. It returns the
// server's URL.
func startReplayServer(b *testing.B, perturb float64) string {
	b.Helper()
	opt := mockv2.Options{Kind: triton}
	if perturb != 0 {
		opt.Perturb = map[string]float64{"half_plus_two": perturb}
	}
	mock, err := mockv2.New(opt)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rs := &replayServer{mock: mock, conns: map[net.Conn]struct{}{}}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			if !rs.track(c) {
				_ = c.Close()
				return
			}
			rs.wg.Add(1)
			go func() {
				defer rs.wg.Done()
				defer rs.untrack(c)
				if err := rs.serve(c); err != nil && !rs.isClosed() {
					b.Errorf("replay shadow server: %v", err)
				}
			}()
		}
	}()
	b.Cleanup(func() {
		_ = ln.Close()
		rs.closeAll()
		rs.wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// replayServer is startReplayServer's responder.
type replayServer struct {
	mock http.Handler

	mu     sync.Mutex
	canned []byte // the recorded inference answer, as wire bytes
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// serve answers c's requests until the client closes it.
func (rs *replayServer) serve(c net.Conn) error {
	br := bufio.NewReaderSize(c, 16<<10)
	var head, body []byte
	for {
		head = head[:0]
		infer, length := false, 0
		for first := true; ; first = false {
			line, err := br.ReadSlice('\n')
			if err != nil {
				if first && errors.Is(err, io.EOF) {
					return nil // the client closed an idle connection
				}
				return fmt.Errorf("reading a request head: %w", err)
			}
			head = append(head, line...)
			if first {
				infer = bytes.Contains(line, []byte("/infer "))
				continue
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
			name, value, _ := bytes.Cut(line, []byte(":"))
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
					return fmt.Errorf("content-length %q: %w", value, err)
				}
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				return fmt.Errorf("unexpected transfer-encoding %q", bytes.TrimSpace(value))
			}
		}
		body = slices.Grow(body[:0], length)[:length]
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("reading a request body: %w", err)
		}
		ans := rs.answer(infer, head, body)
		if ans == nil {
			return errors.New("the mock's answer did not serialize")
		}
		if _, err := c.Write(ans); err != nil {
			return fmt.Errorf("writing an answer: %w", err)
		}
	}
}

// answer is the wire answer to a request: the recording for an
// inference call once there is one, else the mock's, recorded for the
// first inference call.
func (rs *replayServer) answer(infer bool, head, body []byte) []byte {
	rs.mu.Lock()
	canned := rs.canned
	rs.mu.Unlock()
	if infer && canned != nil {
		return canned
	}
	req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(head), bytes.NewReader(body))))
	if err != nil {
		return nil
	}
	rec := httptest.NewRecorder()
	rs.mock.ServeHTTP(rec, req)
	res := rec.Result()
	res.ContentLength = int64(rec.Body.Len())
	var wire bytes.Buffer
	if err := res.Write(&wire); err != nil {
		return nil
	}
	if infer {
		rs.mu.Lock()
		if rs.canned == nil {
			rs.canned = wire.Bytes()
		}
		rs.mu.Unlock()
	}
	return wire.Bytes()
}

// track notes an accepted connection, false once the server is closed.
func (rs *replayServer) track(c net.Conn) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return false
	}
	rs.conns[c] = struct{}{}
	return true
}

func (rs *replayServer) untrack(c net.Conn) {
	rs.mu.Lock()
	delete(rs.conns, c)
	rs.mu.Unlock()
	_ = c.Close()
}

func (rs *replayServer) isClosed() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.closed
}

// closeAll closes the open connections (their serve loops end).
func (rs *replayServer) closeAll() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	for c := range rs.conns {
		_ = c.Close()
	}
}
