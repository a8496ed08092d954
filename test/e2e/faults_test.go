package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runCases runs cases over both transports of s, as TestTable does.
func runCases(t *testing.T, s *stack, cases []tcase) {
	t.Helper()
	checkCaseNames(t, cases)
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { s.runCase(t, via, c) })
			}
		})
	}
}

// deadAddress returns a loopback URL where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	// A socket bound but never listening: connections to its port are
	// refused, and the port stays ours until the test ends, so no server
	// started meanwhile (this stack's own mock among them) can take it, as
	// it could a port merely closed again.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// envoyConnectRefused is Envoy's local reply when the upstream refuses
// the connection (envoysim reproduces recent Envoy releases' text).
const envoyConnectRefused = "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused"

// faultKinds are the v2 servers the fault tests run against.
var faultKinds = []string{triton, kserve, mlserver}

// TestBackendDown: nothing listens where the v2 server should be, with
// the server kind configured or to be detected.
func TestBackendDown(t *testing.T) {
	for _, kind := range []string{triton, "auto"} {
		t.Run(kind, func(t *testing.T) { testBackendDown(t, kind) })
	}
}

func testBackendDown(t *testing.T, backendKind string) {
	s := newStack(t, stackConfig{BackendURL: deadAddress(t), BackendKind: backendKind})
	unavailable := fail(503, "The v2 inference server is unavailable")
	runCases(t, s, []tcase{
		{name: "predict", req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody}, want: unavailable},
		{name: "status", req: request{path: "/v1/models/half_plus_two"}, want: unavailable},
		{name: "metadata", req: request{path: "/v1/models/half_plus_two/metadata"}, want: unavailable},
		{
			// TF's order holds even with the backend down.
			name: "JSON error first",
			req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1.0`},
			want: fail(400, "JSON Parse error: Missing a comma or ']' after an array element. at offset: 18"),
		},
		{
			// Not ours: whatever Envoy or the proxy answers, untranslated.
			name: "pass-through",
			req:  request{path: "/v2/health/ready"},
			per: map[string]expect{
				viaExtproc: {status: 503, body: envoyConnectRefused, ctype: "text/plain"},
				viaProxy:   {status: 503, ctype: noCType},
			},
		},
	})
	t.Run("readyz", func(t *testing.T) {
		// --readiness tfsbridge (the default): tfsbridge answers the
		// requests above itself, so it stays in rotation.
		checkReadyz(t, s, 200, "ready\n")
	})
	t.Run("readyz backend mode", func(t *testing.T) {
		// --readiness backend (sidecar layout): out of rotation with
		// the model server.
		sb := newStack(t, stackConfig{BackendURL: s.v2URL, BackendKind: backendKind, Readiness: "backend"})
		checkReadyz(t, sb, 503, "not ready: ")
	})
}

// checkReadyz checks /readyz's status and the start of its body.
func checkReadyz(t *testing.T, s *stack, status int, prefix string) {
	t.Helper()
	resp, err := send(context.Background(), s.client, s.adminURL, request{path: "/readyz"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != status || !strings.HasPrefix(string(resp.body), prefix) {
		t.Errorf("/readyz: %d %q, want %d %q...", resp.status, resp.body, status, prefix)
	}
}

// TestBackendGoesAway: the model's signature is cached, then the v2
// server disappears; the infer call itself is refused.
func TestBackendGoesAway(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) { testBackendGoesAway(t, kind) })
	}
}

func testBackendGoesAway(t *testing.T, kind string) {
	s := newStack(t, stackConfig{Kind: kind})
	rq := request{path: "/v1/models/half_plus_two:predict", body: readmeBody}
	checkResponse(t, s.do(t, viaExtproc, rq), ok(readmeResponse))
	s.mock.Close()
	runCases(t, s, []tcase{{
		name: "predict with the signature cached",
		req:  rq,
		// Envoy's router answers the refused connection itself; that
		// local reply runs through ext_proc, which turns it into the
		// proxy's TF error.
		want: fail(503, "The v2 inference server is unavailable"),
	}})
}

// TestSlowBackend: the v2 server answers after the route (Envoy) or
// request (proxy) timeout; TF's answer to a deadline is 504. Envoy's
// router answers the timeout itself; its local reply runs through
// ext_proc, which turns it into the proxy's TF error. (A slow body after
// the headers is Envoy's own 504: test/robustness, TestHostileUpstream.)
func TestSlowBackend(t *testing.T) {
	// Every kind, transport and case at once (t.Run from goroutines, not
	// t.Parallel, which would run two at a time on two cores): nearly all
	// of the test is waiting for the timeout, so it costs one timeout.
	var wg sync.WaitGroup
	for _, kind := range faultKinds {
		wg.Go(func() { t.Run(kind, func(t *testing.T) { testSlowBackend(t, kind) }) })
	}
	wg.Wait()
}

// slowBackendTimeout is the route and request timeout of TestSlowBackend.
// "fast enough" must get its answer within it through Envoy, ext_proc and
// the mock: 300 ms was missed on a busy 2-core machine, so it is seconds.
const slowBackendTimeout = 3 * time.Second

func testSlowBackend(t *testing.T, kind string) {
	s := newStack(t, stackConfig{Kind: kind, MockDelay: time.Minute, RouteTimeout: slowBackendTimeout, RequestTimeout: slowBackendTimeout})
	timeout := fail(504, "Timed out waiting for the v2 inference server")
	cases := []tcase{
		{name: "slow model", req: request{path: "/v1/models/slow:predict", body: `{"instances": [1.0]}`}, want: timeout},
		// The mock reads the body, then sleeps X-Mock-Delay until the
		// caller goes away.
		{name: "slow answer", req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody,
			header: map[string]string{"X-Mock-Delay": "1m"}}, want: timeout},
		{name: "fast enough", req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody,
			header: map[string]string{"X-Mock-Delay": "1ms"}}, want: ok(readmeResponse)},
	}
	checkCaseNames(t, cases)
	var wg sync.WaitGroup
	for _, via := range transports {
		for _, c := range cases {
			wg.Go(func() { t.Run(via+"/"+c.name, func(t *testing.T) { s.runCase(t, via, c) }) })
		}
	}
	wg.Wait()
	// The timed-out calls must have been cancelled upstream, not left
	// running (they would run for a minute). A generous wait: it ends as
	// soon as the calls do.
	if !waitFor(settleTimeout, func() bool { return s.upstream.inflight.Load() == 0 }) {
		t.Errorf("%d infer calls still running at the v2 server", s.upstream.inflight.Load())
	}
}

// repeatJSON returns {"instances": [1.0, 1.0, ...]} padded with trailing
// spaces (which TF ignores) to exactly n bytes.
func repeatJSON(n int) string {
	var b strings.Builder
	b.WriteString(`{"instances": [1.0`)
	for b.Len()+len(", 1.0]}") <= n {
		b.WriteString(", 1.0")
	}
	b.WriteString("]}")
	b.WriteString(strings.Repeat(" ", n-b.Len()))
	return b.String()
}

// TestBodyLimits: --max-body-bytes 4096 behind an Envoy whose buffer
// limit is 8192.
func TestBodyLimits(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) { testBodyLimits(t, kind) })
	}
}

func testBodyLimits(t *testing.T, kind string) {
	const limit = 4096
	s := newStack(t, stackConfig{Kind: kind, MaxBodyBytes: limit, BufferLimit: 2 * limit})
	atLimit := repeatJSON(limit)
	n := strings.Count(atLimit, "1.0")
	word := strings.Repeat("ab", 1100) // echoed twice: a v2 answer over the limit
	runCases(t, s, []tcase{
		{
			name: "exactly at the limit",
			req:  request{path: "/v1/models/half_plus_two:predict", body: atLimit},
			want: ok("{\n    \"predictions\": [" + strings.TrimSuffix(strings.Repeat("2.5, ", n), ", ") + "\n    ]\n}"),
		},
		{
			name: "one byte over",
			req:  request{path: "/v1/models/half_plus_two:predict", body: atLimit + " "},
			want: fail(413, "Request body exceeds the limit of 4096 bytes"),
		},
		{
			// Declared over the limit: refused at the request headers,
			// before Envoy buffers any of it.
			name: "declared over Envoy's buffer limit",
			req: request{path: "/v1/models/half_plus_two:predict", body: repeatJSON(3 * limit),
				header: map[string]string{"Connection": "close"}}, // see TestEnvoysimKeepAliveAfterLocalReply
			want: fail(413, "Request body exceeds the limit of 4096 bytes"),
		},
		{
			// Chunked, between our limit and Envoy's: it reaches tfsbridge
			// as one gRPC message, whatever its size.
			name: "chunked over the limit",
			req:  request{path: "/v1/models/half_plus_two:predict", body: repeatJSON(limit + 1000), chunked: true},
			want: fail(413, "Request body exceeds the limit of 4096 bytes"),
		},
		{
			// Chunked, over Envoy's buffer limit: Envoy's local 413 runs
			// through ext_proc, which turns it into TF's.
			name: "chunked over Envoy's buffer limit",
			req: request{path: "/v1/models/half_plus_two:predict", body: repeatJSON(3 * limit), chunked: true,
				header: map[string]string{"Connection": "close"}},
			want: fail(413, "Request body exceeds the limit of 4096 bytes"),
		},
		{
			name: "gzip bomb",
			req: request{path: "/v1/models/half_plus_two:predict", body: gzipped(repeatJSON(100 * limit)),
				header: map[string]string{"Content-Encoding": "gzip"}},
			want: fail(413, "Decompressed request body exceeds the limit of 4096 bytes"),
		},
		{
			name: "v2 answer over the limit",
			req:  request{path: "/v1/models/bytes_echo:predict", body: `{"instances": ["` + word + `"]}`},
			want: fail(502, "Response body exceeds the limit of 4096 bytes"),
		},
	})
}

// TestLocalReplyOfAnotherFilter: Envoy's buffer filter in front of
// ext_proc refuses a large body before ext_proc saw the request, so the
// ext_proc stream starts at the local reply's response headers; the
// processor must pass it through untouched (docs/architecture.md).
func TestLocalReplyOfAnotherFilter(t *testing.T) {
	s := newStack(t, stackConfig{BufferFilterMaxBytes: 1024})
	for _, c := range []tcase{
		{name: "under the buffer filter's limit", req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody}, want: ok(readmeResponse)},
		{name: "over it", req: request{path: "/v1/models/half_plus_two:predict", body: repeatJSON(2048),
			header: map[string]string{"Connection": "close"}}, // see TestEnvoysimKeepAliveAfterLocalReply
			want: expect{status: 413, body: "Payload Too Large", ctype: "text/plain"}},
	} {
		t.Run(c.name, func(t *testing.T) { s.runCase(t, viaExtproc, c) })
	}
	if n := s.counter(t, "tfsbridge_passthrough_total"); n != 0 {
		t.Errorf("tfsbridge_passthrough_total %v: a local reply is not a request", n)
	}
}

// TestClientCancel: a client that gives up mid-request leaves nothing
// behind — no goroutine, no call at the v2 server, no in-flight stream —
// and is counted as TF's CANCELLED (499).
func TestClientCancel(t *testing.T) {
	for _, kind := range faultKinds {
		t.Run(kind, func(t *testing.T) { testClientCancel(t, kind) })
	}
}

func testClientCancel(t *testing.T, kind string) {
	s := newStack(t, stackConfig{Kind: kind, MockDelay: time.Minute})
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			// Warm up the connections and the metadata cache first, so the
			// baseline holds every long-lived goroutine.
			checkResponse(t, s.do(t, via, request{path: "/v1/models/half_plus_two:predict", body: readmeBody}), ok(readmeResponse))
			if r := s.do(t, via, request{path: "/v1/models/slow/metadata"}); r.status != 200 {
				t.Fatalf("metadata of slow: %d %s", r.status, r.body)
			}
			cancelled := s.counter(t, `tfsbridge_requests_total{code="499",model="slow",verb="predict"}`)
			cancelOnce := func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					_, err := send(ctx, s.client, s.url(via), request{path: "/v1/models/slow:predict", body: `{"instances": [2.0]}`})
					errc <- err
				}()
				if !waitFor(settleTimeout, func() bool { return s.upstream.inflight.Load() == 1 }) {
					t.Fatalf("the request never reached the v2 server")
				}
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Errorf("client error %v, want context.Canceled", err)
				}
				if !waitFor(settleTimeout, func() bool { return s.upstream.inflight.Load() == 0 }) {
					t.Fatalf("the v2 server still runs the cancelled call")
				}
			}
			// The first round churns the warm connections (the client's is
			// closed by the cancel); the baseline is taken after it.
			cancelOnce()
			before := stableGoroutines()
			const rounds = 3
			for range rounds {
				cancelOnce()
			}
			if !waitFor(settleTimeout, func() bool {
				return s.counter(t, `tfsbridge_requests_total{code="499",model="slow",verb="predict"}`) == cancelled+rounds+1
			}) {
				t.Errorf("cancelled exchanges not counted with code 499: %v", s.counter(t, `tfsbridge_requests_total{code="499",model="slow",verb="predict"}`)-cancelled)
			}
			if !waitFor(settleTimeout, func() bool { return s.inflightStreams(t) == 0 }) {
				t.Errorf("tfsbridge_inflight_streams still %v", s.inflightStreams(t))
			}
			after := settledGoroutines(before, settleTimeout)
			t.Logf("goroutines: %d before, %d after", before, after)
			if after > before {
				var dump strings.Builder
				_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
				t.Errorf("goroutines: %d before, %d after the cancelled request\n%s", before, after, dump.String())
			}
		})
	}
}

// counter returns one series of the stack's metrics, 0 when absent.
func (s *stack) counter(t testing.TB, series string) float64 {
	t.Helper()
	return s.scrape(t)[series]
}

// inflightStreams sums tfsbridge_inflight_streams over the adapters.
func (s *stack) inflightStreams(t testing.TB) float64 {
	m := s.scrape(t)
	return m[`tfsbridge_inflight_streams{adapter="extproc"}`] + m[`tfsbridge_inflight_streams{adapter="http"}`]
}

// scrape reads /metrics into series → value ("name{labels}" exactly as
// the text exposition prints it, labels sorted by name).
func (s *stack) scrape(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := send(context.Background(), s.client, s.adminURL, request{path: "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.status, resp.body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(resp.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics line %q", line)
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}
