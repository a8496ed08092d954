package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
)

// Transport names: the two ways a TF Serving client reaches tfsbridge.
const (
	viaExtproc   = "extproc"    // client → envoysim (BUFFERED) → ext_proc gRPC server → mock
	viaExtprocFD = "extproc-fd" // the same with FULL_DUPLEX_STREAMED bodies
	viaProxy     = "proxy"      // client → httpproxy → mock
)

// transports lists them, in the order tests run them.
var transports = []string{viaExtproc, viaExtprocFD, viaProxy}

// Mock kinds.
const (
	triton   = "triton"
	kserve   = "kserve"
	mlserver = "mlserver"
)

// stackConfig chooses how one stack is built. Zero values take the
// defaults cmd/tfsbridge's flags have.
type stackConfig struct {
	// Kind is the server the mock imitates; "" means triton.
	Kind string
	// BackendKind is --backend-kind: "" means the mock's kind given
	// explicitly, "auto" means detection with GET /v2.
	BackendKind string
	// BackendURL replaces the mock as the v2 server (a dead address).
	BackendURL string
	// MaxBodyBytes is --max-body-bytes; 0 means the default 64 MiB.
	MaxBodyBytes int64
	// RequestTimeout is the proxy's --request-timeout; 0 means
	// httpproxy.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RouteTimeout is Envoy's route timeout in envoysim; 0 means
	// envoysim's default (15 s).
	RouteTimeout time.Duration
	// MockDelay is how long the mock's "slow" model waits.
	MockDelay time.Duration
	// BufferLimit is Envoy's per-connection buffer limit; 0 means 64 MiB:
	// deployments raise Envoy's default to tfsbridge's body limit (deploy/
	// sets 64Mi), or every body over 1 MiB gets Envoy's 413.
	BufferLimit int
	// BufferFilterMaxBytes > 0 puts Envoy's buffer filter, with this
	// max_request_bytes, in front of ext_proc.
	BufferFilterMaxBytes int
	// ModelMap is a --model-map document ("" for none); "{{second}}" in
	// it stands for the second mock's URL (see modelmap_test.go).
	ModelMap string
	// SecondKind, when set, starts a second mock v2 server of this kind,
	// which Envoy reaches by x-tfsbridge-server: second.
	SecondKind string
	// TFServing, when set, starts a TF Serving REST server (the mock's TF
	// face, split_test.go), which Envoy reaches by x-tfsbridge-server:
	// tfs and a map names as "{{tfserving}}".
	TFServing bool
	// Readiness is --readiness; "" means the default (tfsbridge).
	Readiness string
	// DrainDelay is --drain-delay; 0 (no load balancer to drain from)
	// unless a test runs one.
	DrainDelay time.Duration
}

// Settings of the stack that are not cmd/tfsbridge's flag defaults.
const (
	defaultBufferLimit = 64 << 20
	messageTimeout     = 5 * time.Second
	drainTimeout       = 2 * time.Second
)

// stack is one complete deployment: the mock v2 server, the bridge wired
// by package bridge as cmd/tfsbridge wires it (one backend client, one
// session config and one metrics registry shared by the ext_proc server
// and the proxy, as in "tfsbridge demo"), the Envoy stand-in in front of
// the ext_proc server, and the admin server.
type stack struct {
	cfg      stackConfig
	kind     string
	mock     *httptest.Server // nil when BackendURL replaces it
	second   *mapServer       // the second mock (SecondKind), nil without
	tfs      *tfServer        // the TF Serving server (TFServing), nil without
	mapFile  string           // the --model-map file, "" without
	upstream *faultInjector
	v2URL    string
	bridge   *bridge.Bridge
	grpcAddr string
	env      *envoysim.Envoy
	envFD    *envoysim.Envoy
	proxyURL string
	adminURL string
	client   *http.Client
	logs     *syncBuffer
	// stopBridge sends the bridge its SIGTERM; bridgeDone is closed when
	// Serve has returned.
	stopBridge context.CancelFunc
	bridgeDone chan struct{}
	// serveErr is Serve's result once bridgeDone is closed; a test that
	// cuts exchanges on purpose sets cutExpected.
	serveErr    error
	cutExpected bool

	mu         sync.Mutex
	violations int // violations already reported, by env then envFD
	violFD     int

	servedCache // models a real v2 server serves (external_test.go)
}

// newStack builds and starts a stack; everything stops when t ends, after
// the Envoy stand-in's verdict on the whole test is checked.
func newStack(t testing.TB, cfg stackConfig) *stack {
	t.Helper()
	s := &stack{cfg: cfg, kind: cfg.Kind, logs: &syncBuffer{}}
	if s.kind == "" {
		s.kind = triton
	}
	if cfg.BackendURL != "" {
		s.v2URL = cfg.BackendURL
	} else if !s.useExternal(t) {
		mock, err := mockv2.New(mockv2.Options{Kind: s.kind, Delay: cfg.MockDelay})
		if err != nil {
			t.Fatal(err)
		}
		s.upstream = &faultInjector{next: mock}
		s.mock = httptest.NewServer(s.upstream)
		t.Cleanup(s.mock.Close)
		s.v2URL = s.mock.URL
	}
	s.startSecond(t)
	s.startTFServing(t)
	s.startBridge(t)
	s.startEnvoy(t)
	s.client = newClient()
	t.Cleanup(s.client.CloseIdleConnections)
	t.Cleanup(func() {
		s.checkEnvoy(t)
		if t.Failed() && s.logs.Len() > 0 {
			t.Logf("tfsbridge logs:\n%s", s.logs.String())
		}
	})
	return s
}

// startBridge serves the ext_proc server, the proxy and the admin server
// through package bridge, with cmd/tfsbridge's flag defaults but for the
// test's knobs, on ephemeral loopback ports.
func (s *stack) startBridge(t testing.TB) {
	t.Helper()
	log, err := observe.NewLogger(s.logs, "warn", "text")
	if err != nil {
		t.Fatal(err)
	}
	o := bridge.DefaultOptions()
	o.BackendURL = s.v2URL
	o.BackendKind = s.cfg.BackendKind
	if o.BackendKind == "" {
		o.BackendKind = s.kind
	}
	if s.cfg.MaxBodyBytes != 0 {
		o.MaxBodyBytes = s.cfg.MaxBodyBytes
	}
	if s.cfg.RequestTimeout != 0 {
		o.Proxy.RequestTimeout = s.cfg.RequestTimeout
	}
	o.ShutdownTimeout = drainTimeout
	o.DrainDelay = s.cfg.DrainDelay
	if s.cfg.Readiness != "" {
		o.Readiness = s.cfg.Readiness
	}
	o.Logger = log
	s.mapOptions(t, &o)
	s.bridge, err = bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := bridge.Listen(bridge.Addrs{Extproc: extprocListenAddr(), Proxy: "127.0.0.1:0", Admin: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s.grpcAddr = l.Extproc.Addr().String()
	if l.Extproc.Addr().Network() == "unix" { // TFSBRIDGE_E2E_EXTPROC_ADDR=unix://...
		s.grpcAddr = "unix://" + s.grpcAddr
	}
	s.proxyURL = "http://" + l.Proxy.Addr().String()
	s.adminURL = "http://" + l.Admin.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBridge, s.bridgeDone = cancel, make(chan struct{})
	go func() {
		s.serveErr = s.bridge.Serve(ctx, l)
		close(s.bridgeDone)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.bridgeDone
		if s.serveErr != nil && !(s.cutExpected && errors.Is(s.serveErr, bridge.ErrCut)) {
			t.Errorf("bridge: %v", s.serveErr)
		}
	})
}

// startEnvoy starts the Envoy stand-in configured as docs/architecture.md says:
// headers SEND, bodies BUFFERED, trailers SKIP, allow_mode_override,
// failure_mode_allow false, message_timeout in seconds.
func (s *stack) startEnvoy(t testing.TB) {
	t.Helper()
	limit := s.cfg.BufferLimit
	if limit == 0 {
		limit = defaultBufferLimit
	}
	s.env = startEnvoysim(t, envoysim.Config{
		ProcessorAddr:        s.grpcAddr,
		Upstream:             s.v2URL,
		Mode:                 envoysim.DefaultMode(),
		AllowModeOverride:    true,
		MessageTimeout:       messageTimeout,
		BufferLimit:          limit,
		BufferFilterMaxBytes: s.cfg.BufferFilterMaxBytes,
		UpstreamTimeout:      s.cfg.RouteTimeout,
		HeaderRoutes:         s.headerRoutes(),
	})
	// The same Envoy in full-duplex mode, before the same ext_proc
	// server (--body-mode auto follows each stream): no buffer limit,
	// no message timeout, no mode override in this mode.
	s.envFD = startEnvoysim(t, envoysim.Config{
		ProcessorAddr:   s.grpcAddr,
		Upstream:        s.v2URL,
		Mode:            envoysim.FullDuplexMode(),
		UpstreamTimeout: s.cfg.RouteTimeout,
		HeaderRoutes:    s.headerRoutes(),
	})
}

// startEnvoysim starts a stand-in that stops with the test.
func startEnvoysim(t testing.TB, cfg envoysim.Config) *envoysim.Envoy {
	t.Helper()
	env, err := envoysim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// envoy returns the stand-in a transport goes through (nil for the proxy).
func (s *stack) envoy(via string) *envoysim.Envoy {
	switch via {
	case viaExtproc:
		return s.env
	case viaExtprocFD:
		return s.envFD
	}
	return nil
}

// url returns the base URL a client uses to reach tfsbridge through via.
func (s *stack) url(via string) string {
	if via == viaProxy {
		return s.proxyURL
	}
	if u := externalEnvoyURL(via); u != "" {
		return u
	}
	return s.envoy(via).URL()
}

// checkEnvoy reports the stand-in's verdict: no protocol violation since
// the last check, no spurious message, no rejected header mutation.
func (s *stack) checkEnvoy(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range []struct {
		env  *envoysim.Envoy
		seen *int
	}{{s.env, &s.violations}, {s.envFD, &s.violFD}} {
		if e.env == nil {
			continue
		}
		v := e.env.Violations()
		for _, msg := range v[min(*e.seen, len(v)):] {
			t.Errorf("envoysim violation: %s", msg)
		}
		*e.seen = len(v)
		st := e.env.Stats()
		if st.SpuriousMsgsReceived != 0 || st.RejectedHeaderMutations != 0 {
			t.Errorf("envoysim: spurious_msgs_received %d, rejected_header_mutations %d; want 0 and 0 (notes: %q)",
				st.SpuriousMsgsReceived, st.RejectedHeaderMutations, e.env.Notes())
		}
	}
}

// newClient is a TF Serving client's HTTP client. Compression stays off
// so that no Accept-Encoding is added behind the test's back.
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16, Proxy: nil},
		Timeout:   30 * time.Second,
	}
}

// request is one HTTP request of a test case.
type request struct {
	method string
	path   string
	// body is sent when not empty; method defaults to POST then, to
	// GET otherwise.
	body   string
	header map[string]string
	// repeated are headers sent with every one of their values, empty
	// ones included, as separate header lines.
	repeated http.Header
	// chunked sends the body without a content-length.
	chunked bool
}

// response is what the client got.
type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) contentType() string { return r.header.Get("Content-Type") }

// send makes one request to base and reads the whole answer.
func send(ctx context.Context, c *http.Client, base string, rq request) (response, error) {
	var body io.Reader = http.NoBody
	if rq.body != "" {
		body = strings.NewReader(rq.body)
		if rq.chunked {
			// Hidden from net/http, the length is unknown: it sends chunks.
			body = struct{ io.Reader }{body}
		}
	}
	method := rq.method
	if method == "" {
		method = http.MethodGet
		if rq.body != "" {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, base+rq.path, body)
	if err != nil {
		return response{}, err
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	for k, vs := range rq.repeated {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("read body: %w", err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}, nil
}

// do sends rq through via and fails the test on a transport error.
func (s *stack) do(t testing.TB, via string, rq request) response {
	t.Helper()
	resp, err := send(context.Background(), s.client, s.url(via), rq)
	if err != nil {
		t.Fatalf("%s %s via %s: %v", rq.method, rq.path, via, err)
	}
	return resp
}

// direct sends rq to the v2 server itself, bypassing tfsbridge: what a
// pass-through exchange must return unchanged.
func (s *stack) direct(t testing.TB, rq request) response {
	t.Helper()
	resp, err := send(context.Background(), s.client, s.v2URL, rq)
	if err != nil {
		t.Fatalf("direct %s %s: %v", rq.method, rq.path, err)
	}
	return resp
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

// settleTimeout bounds a wait for something that must happen soon (a
// stream ending, a counter moving, goroutines exiting). waitFor returns as
// soon as it happens; the bound only decides how long a broken run takes
// to fail, so it is generous: on a busy 2-core machine a goroutine can
// wait seconds for a CPU.
const settleTimeout = 30 * time.Second

// waitFor polls cond until it holds or the deadline passes; it is how the
// tests wait for asynchronous effects without sleeping blindly.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return poll.Until(timeout, cond)
}

// stableGoroutines returns the goroutine count once it has not changed
// for 100 ms (or after 2 s): a baseline free of goroutines that are about
// to exit anyway.
func stableGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(2 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// settledGoroutines returns the goroutine count once it stops falling
// (idle connections and finished handlers take a moment to exit), or
// after timeout.
func settledGoroutines(target int, timeout time.Duration) int {
	n := runtime.NumGoroutine()
	waitFor(timeout, func() bool {
		n = runtime.NumGoroutine()
		return n <= target
	})
	return n
}

// tfError is TF Serving's error body for msg (docs/tfserving-rest.md §1.6: rapidjson's
// pretty writer, 4-space indent, no trailing newline) with rapidjson's
// escaping (docs/tfserving-rest.md §5.4). Written here from the doc, not taken from tfresponse,
// so the test does not grade the code with its own answer.
func tfError(msg string) string {
	var b strings.Builder
	b.WriteString("{\n    \"error\": \"")
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04X`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteString("\"\n}")
	return b.String()
}

// Headers that make the fault injector in front of the mock answer an
// infer call itself: the status, Content-Type and body a real v2 server
// (or a proxy in front of it) answers in trouble, which the mock's sample
// models cannot be made to produce. Like the headers of ai-gateway's fake
// upstream, they travel with the client's request, which both adapters
// forward upstream.
const (
	hdrFaultStatus = "X-E2e-Status"
	hdrFaultType   = "X-E2e-Content-Type"
	hdrFaultBody   = "X-E2e-Body"
)

// faultInjector sits in front of the mock: it answers infer calls that
// carry hdrFaultStatus itself, and counts infer calls in flight.
type faultInjector struct {
	next     http.Handler
	inflight atomic.Int64
	infers   atomic.Int64
	// serverHeaders are the x-tfsbridge-server values of the last
	// request that reached the v2 server.
	serverHeaders atomic.Pointer[[]string]
}

// faultReset as hdrFaultStatus makes the injector reset the connection
// without answering.
const faultReset = "reset"

func (f *faultInjector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vals := r.Header.Values("X-Tfsbridge-Server")
	f.serverHeaders.Store(&vals)
	if !strings.HasSuffix(r.URL.Path, "/infer") {
		f.next.ServeHTTP(w, r)
		return
	}
	f.infers.Add(1)
	f.inflight.Add(1)
	defer f.inflight.Add(-1)
	code := r.Header.Get(hdrFaultStatus)
	if code == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	if code == faultReset {
		_, _ = io.Copy(io.Discard, r.Body)
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			_ = c.Close()
		}
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	status, err := strconv.Atoi(code)
	if err != nil {
		status = http.StatusTeapot
	}
	if ct := r.Header.Get(hdrFaultType); ct != "" {
		w.Header().Set("Content-Type", ct)
	} else {
		w.Header()["Content-Type"] = nil
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, r.Header.Get(hdrFaultBody))
}
