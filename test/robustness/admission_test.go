package robustness

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/proxy/admission"
)

// waitMetric polls a metric until ok says so; the deadline is generous (a
// loaded 2-core machine) and only bounds a failure.
func waitMetric(t *testing.T, s *stack, name string, ok func(float64) bool, deadline time.Duration) (float64, time.Duration) {
	t.Helper()
	start := time.Now()
	var v float64
	waitFor(deadline, func() bool { v = s.metrics.Value(name); return ok(v) })
	return v, time.Since(start)
}

// waitFor polls cond until it holds or within passes and reports whether it
// held: for state the stack's goroutines change with nothing to signal it.
// Callers give a generous within (a loaded 2-core machine); it only bounds
// a failure.
func waitFor(within time.Duration, cond func() bool) bool {
	return poll.Until(within, cond)
}

// TestDeclaredBytesHoldNothing: 64 connections that each declare a 64 MiB
// body, send its first 15 bytes and then trickle the rest hold only what
// they sent (issue 17: 34 of them held the whole budget for the body
// timeout), so a small request sent meanwhile is answered 200.
func TestDeclaredBytesHoldNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("64 connections")
	}
	h := startHostile(t)
	const declared = 64 << 20
	// Under the old rule the 64 would reserve 64 × 128 MiB (full duplex,
	// proxy) of a 1 GiB budget; one such body still fits alone.
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: declared, maxInflight: 1 << 30,
		readTimeout: time.Minute, requestTimeout: time.Minute, routeTimeout: time.Minute, messageTimeout: time.Minute})
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 64 {
				c := dialSlow(t, s.url(via))
				head := fmt.Sprintf("POST /v1/models/good:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"instances\": [", declared)
				if !c.trickle(head, 0) {
					t.Fatal("could not send the headers")
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond): // the attack's pace
						}
						if !c.trickle("1.0, ", 0) {
							return
						}
					}
				}()
			}
			if streams(via) {
				// Every trickler reached the session and reserved what it sent.
				v, _ := waitMetric(t, s, "tfsbridge_inflight_bytes", func(v float64) bool { return v >= 64*15*2 }, 30*time.Second)
				if v >= 64*declared {
					t.Errorf("%v bytes reserved for bodies of which a few bytes arrived", v)
				}
			}
			checkAnswer(t, "small request among the tricklers via "+via, s.post(via, "/v1/models/good:predict", []byte(`{"instances": [1.0]}`)), 200, "")
			close(stop)
			wg.Wait()
		})
	}
}

// TestNonReadersReleaseBudget: clients that ask for a large translated
// answer through ext_proc and never read it do not pin the in-flight
// budget (issue 17: two of them held 4 GiB until they closed): in
// BUFFERED mode it is released as soon as tfsbridge has sent its reply,
// in full duplex once Envoy has been silent for --write-timeout; other
// requests are admitted while the non-readers still hold their
// connections.
func TestNonReadersReleaseBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("large answers")
	}
	h := startHostile(t)
	const writeTimeout = time.Second
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 8 << 20, maxInflight: 512 << 20, writeTimeout: writeTimeout,
		requestTimeout: time.Minute, routeTimeout: time.Minute, messageTimeout: time.Minute})
	predict := "POST /v1/models/wider:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{\"instances\":[1.0]}"
	for _, via := range []string{viaExtproc, viaExtprocFD} {
		t.Run(via, func(t *testing.T) {
			hits := h.Hits("/v2/models/wider/infer")
			timeouts := s.metrics.Value("tfsbridge_response_write_timeouts_total")
			for range 2 {
				c := dialSlow(t, s.url(via))
				c.trickle(predict, 0)
			}
			// Both requests reach the v2 server; the bound only lets the
			// test go on to fail below.
			_ = waitFor(30*time.Second, func() bool { return h.Hits("/v2/models/wider/infer") >= hits+2 })
			// The budget comes back once the replies are sent (buffered)
			// or Envoy has been silent for the write timeout (full
			// duplex), while the clients still hold their connections
			// (before, it stayed reserved until they closed). The deadline
			// only bounds a failure: translating two 18 MiB answers takes
			// seconds on a loaded 2-core machine.
			v, took := waitMetric(t, s, "tfsbridge_inflight_bytes", func(v float64) bool { return v == 0 }, writeTimeout+30*time.Second)
			cut := s.metrics.Value("tfsbridge_response_write_timeouts_total") - timeouts
			t.Logf("budget back to %v after %v; %v answers cut", v, took, cut)
			if v != 0 {
				t.Fatalf("%v bytes still reserved %v after the answers began", v, took)
			}
			a := s.post(via, "/v1/models/good:predict", []byte(`{"instances": [1.0]}`))
			checkAnswer(t, "a request beside the non-readers via "+via, a, 200, "")
			if strings.Contains(a.body, "error") {
				t.Errorf("answer %q", a.body)
			}
		})
	}
}

// reservedPeak runs f and returns the highest tfsbridge_inflight_bytes
// seen meanwhile, sampled every 50µs like heapPeak. An exchange's
// reservation only grows until it ends, so sampling misses at most its
// last growth before the release, which the caller's margin covers.
func reservedPeak(s *stack, f func()) int64 {
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		peak := int64(0)
		t := time.NewTicker(50 * time.Microsecond)
		defer t.Stop()
		for {
			peak = max(peak, int64(s.metrics.Value("tfsbridge_inflight_bytes")))
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	return <-done
}

// TestReservationCoversHeap: for every shape of body, the heap an exchange
// grows by at its peak through the streaming transports stays within
// what it reserved of the in-flight budget, plus a small constant for the
// transports' own buffers (issue 17: one long b64 string was reserved at
// 2× its size and held at 7.5×). The heap is measured at GOGC=25, as in
// TestStreamedBodyMemory, so that garbage not yet collected does not
// count as held.
func TestReservationCoversHeap(t *testing.T) {
	if racebuild.Enabled || testing.Short() {
		t.Skip("heap measurement")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	const size = 8 << 20
	const slack = 8 << 20 // copy buffers, gRPC messages in flight, the stand-in's
	h := startHostile(t)
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 16 << 20, maxInflight: 1 << 30,
		requestTimeout: time.Minute, readTimeout: time.Minute, routeTimeout: time.Minute})
	shapes := []struct {
		name, path string
		body       *patternBody
	}{
		{"7-digit numbers", "good:predict", &patternBody{head: []byte(`{"instances": [`), unit: []byte("1234567,"), tail: []byte(`1]}`), n: size / 8}},
		{"17-digit numbers", "good:predict", &patternBody{head: []byte(`{"instances": [`), unit: []byte("0.123456789012345,"), tail: []byte(`1]}`), n: size / 18}},
		{"one long b64", "bytes_good:predict", newB64Body(size / 4)},
		{"many short strings", "bytes_good:predict", &patternBody{head: []byte(`{"instances": [`), unit: []byte(`"ab",`), tail: []byte(`"x"]}`), n: size / 5}},
		{"empty strings", "bytes_good:predict", &patternBody{head: []byte(`{"instances": [`), unit: []byte(`"",`), tail: []byte(`""]}`), n: size / 3}},
		// Gathered and translated whole (RequestFactor); the stand-in's
		// answer has no "scores", so the exchange ends in a 400 after
		// the request was translated and sent.
		{"classify examples", "examples_good:classify", &patternBody{head: []byte(`{"examples": [`), unit: []byte(`{"x": 1.5},`), tail: []byte(`{"x": 1}]}`), n: size / 11}},
	}
	for _, via := range streamingTransports {
		for _, c := range shapes {
			t.Run(via+"/"+c.name, func(t *testing.T) {
				body := *c.body
				var status int
				var err error
				var reserved int64
				var answer []byte
				peak := heapPeak(func() {
					reserved = reservedPeak(s, func() {
						req, _ := http.NewRequest("POST", s.url(via)+"/v1/models/"+c.path, &body)
						req.ContentLength = c.body.Len()
						var resp *http.Response
						if resp, err = s.client.Do(req); err == nil {
							status = resp.StatusCode
							answer, _ = io.ReadAll(io.LimitReader(resp.Body, 200))
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				})
				t.Logf("%d-byte body: answer %d %.80q, reserved %d bytes (%.2f×), peak heap growth %d bytes (%.2f×)",
					c.body.Len(), status, answer, reserved, float64(reserved)/float64(c.body.Len()), peak, float64(peak)/float64(c.body.Len()))
				if err != nil || status == 503 || status == 0 {
					t.Fatalf("answer %d %v", status, err)
				}
				if peak > uint64(reserved)+slack {
					t.Errorf("peak heap growth %d bytes, over the %d reserved + %d", peak, reserved, slack)
				}
				waitDrained(t, s, via)
			})
		}
	}
}

// TestStalledYoungerGivesWay: a younger exchange that holds most of the
// budget and then stalls mid-body gives way at once when an older one
// needs the room (package admission's wound), instead of holding it until
// its body timeout: the older one is answered 200, the staller TF's 503.
func TestStalledYoungerGivesWay(t *testing.T) {
	if testing.Short() {
		t.Skip("large bodies")
	}
	h := startHostile(t)
	const part = 6 << 20
	// Room for one 6 MiB body and a half: the older one's rest does not
	// fit beside the staller's 6 MiB.
	budget := int64(part+part/2) * admission.StreamFactor
	// Body timeouts of a minute: the test must end long before them.
	s := newStack(t, stackConfig{upstream: h.URL(), maxBody: 16 << 20, maxInflight: budget,
		readTimeout: time.Minute, requestTimeout: time.Minute, routeTimeout: time.Minute})
	values := bytes.Repeat(floatValue, part/len(floatValue))
	older := append(append([]byte(`{"instances": [`), values...), "0.5]}"...)
	for _, via := range streamingTransports {
		t.Run(via, func(t *testing.T) {
			post := func(n int) *slowClient {
				c := dialSlow(t, s.url(via))
				c.trickle(fmt.Sprintf("POST /v1/models/good:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n), 0)
				return c
			}
			write := func(c *slowClient, b []byte) {
				go func() { _, _ = c.conn.Write(b) }() // never blocks the test
			}
			reserved := func(atLeast float64) {
				t.Helper()
				if v, _ := waitMetric(t, s, "tfsbridge_inflight_bytes", func(v float64) bool { return v >= atLeast }, 30*time.Second); v < atLeast {
					t.Fatalf("%v bytes reserved, want at least %v", v, atLeast)
				}
			}
			a := post(len(older))
			write(a, older[:1024])
			reserved(1024 * admission.StreamFactor)                // a is the older one
			b := post(part + 1<<20)                                // fits the budget alone
			write(b, append([]byte(`{"instances": [`), values...)) // and then nothing more
			reserved((1024 + part) * admission.StreamFactor)
			start := time.Now()
			write(a, older[1024:])
			// Generous deadlines (a loaded machine); the staller's body
			// timeout is a minute.
			respA, bodyA, errA := a.response(30 * time.Second)
			respB, bodyB, errB := b.response(30 * time.Second)
			t.Logf("older: %v after %v; staller: %v %.120q", status(respA), time.Since(start), status(respB), bodyB)
			if errA != nil || respA.StatusCode != 200 {
				t.Errorf("older: %v %v %.200q, want 200", status(respA), errA, bodyA)
			}
			if errB != nil || respB.StatusCode != 503 || !strings.Contains(bodyB, "older requests need the rest of the in-flight budget") {
				t.Errorf("staller: %v %v %.200q, want the 503 of a wounded exchange", status(respB), errB, bodyB)
			}
			waitDrained(t, s, via)
		})
	}
}

// status is a response's status code, 0 without one.
func status(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}
