package robustness

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The two ways a TF Serving client reaches tfsbridge.
const (
	viaProxy     = "proxy"      // client → httpproxy → v2
	viaExtproc   = "extproc"    // client → envoysim → ext_proc gRPC server → v2
	viaExtprocFD = "extproc-fd" // the same with FULL_DUPLEX_STREAMED bodies
)

var transports = []string{viaProxy, viaExtproc, viaExtprocFD}

// throughEnvoy reports a transport through the Envoy stand-in, whose own
// replies and resets some cases expect instead of tfsbridge's answers.
func throughEnvoy(via string) bool { return via == viaExtproc || via == viaExtprocFD }

// streamingTransports never hold a body whole.
var streamingTransports = []string{viaProxy, viaExtprocFD}

// streams reports a transport that never holds a body whole: what it
// reserves of the in-flight budget is admission.StreamFactor per byte.
func streams(via string) bool { return via == viaProxy || via == viaExtprocFD }

// stackConfig sizes one deployment. The timeouts are short so that the
// hostile cases end in a second or two; zero values take these defaults.
type stackConfig struct {
	// passthrough is the pass-through policy; zero is inference.
	passthrough session.Passthrough

	upstream       string // v2 root URL
	kind           string // backend kind; "" means triton
	maxBody        int64  // default 1 MiB
	requestTimeout time.Duration
	routeTimeout   time.Duration // envoysim's route timeout
	backendTimeout time.Duration
	readTimeout    time.Duration
	readHeader     time.Duration
	idleTimeout    time.Duration
	writeTimeout   time.Duration                             // the proxy's; 0 keeps a minute
	maxInflight    int64                                     // --max-inflight-bytes; 0 keeps the bridge's default
	logger         *slog.Logger                              // tfsbridge's logs; nil discards them
	wrapBackend    func(session.Backend) session.Backend     // wraps the session's backend (fault injection)
	wrapTransport  func(http.RoundTripper) http.RoundTripper // wraps the backend client's transport (faults)
	limits         tensor.Limits
	// grpcGoWindows gives the full-duplex stand-in grpc-go's receive
	// windows toward tfsbridge instead of Envoy's 16 MiB (envoysim's
	// GRPCGoWindows): for heap measurements of this process.
	grpcGoWindows bool
	// Envoy (envoysim) settings: bufferLimit 0 means twice maxBody,
	// messageTimeout 0 means 5 s.
	bufferLimit      int
	messageTimeout   time.Duration
	failureModeAllow bool
}

const defaultTestMaxBody = 1 << 20

// shortTimeout is the stacks' default timeout: a second, three under
// -race, where a loaded 2-core machine can take that long to push a
// megabyte through the instrumented translators.
var shortTimeout = time.Second * time.Duration(1+2*btoi(racebuild.Enabled))

// patientTimeout is every timeout of a patient stack.
const patientTimeout = 30 * time.Second

// patient returns cfg with every timeout it leaves zero set to
// patientTimeout instead of shortTimeout: for the tests where no answer
// may come from a timeout. On a busy 2-core machine a request can wait
// seconds for a CPU, and one second is then no longer "never".
func patient(cfg stackConfig) stackConfig {
	for _, d := range []*time.Duration{&cfg.requestTimeout, &cfg.routeTimeout, &cfg.backendTimeout, &cfg.readTimeout, &cfg.readHeader, &cfg.messageTimeout} {
		if *d == 0 {
			*d = patientTimeout
		}
	}
	return cfg
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stack is tfsbridge assembled by package bridge, as cmd/tfsbridge runs it
// (one backend client, one session config shared by the ext_proc server
// and the proxy, graceful shutdown), with
// the Envoy stand-in in front of the ext_proc server. Every transport it
// creates is kept so that close can drop their idle connections and the
// goroutine count can return to its baseline.
type stack struct {
	cfg      stackConfig
	proxyURL string
	envoyURL string
	env      *envoysim.Envoy
	envFD    *envoysim.Envoy
	backend  *backend.Client
	metrics  metricReader
	client   *http.Client

	transports []*http.Transport
	closers    []func()
	closeOnce  sync.Once
}

func newStack(t *testing.T, cfg stackConfig) *stack {
	t.Helper()
	if cfg.kind == "" {
		cfg.kind = "triton"
	}
	if cfg.maxBody == 0 {
		cfg.maxBody = defaultTestMaxBody
	}
	if cfg.bufferLimit == 0 {
		cfg.bufferLimit = int(2 * cfg.maxBody)
	}
	if cfg.messageTimeout == 0 {
		cfg.messageTimeout = 5 * time.Second
	}
	for _, d := range []*time.Duration{&cfg.requestTimeout, &cfg.routeTimeout, &cfg.backendTimeout, &cfg.readTimeout, &cfg.readHeader} {
		if *d == 0 {
			*d = shortTimeout
		}
	}
	if cfg.idleTimeout == 0 {
		// Not short: a keep-alive connection the proxy closes for idling
		// just as the client reuses it fails that POST with a broken pipe
		// or a reset (net/http retries only requests it has not begun to
		// write). On a busy machine a pooled connection easily idles a
		// second between two requests. TestSlowClients sets its own.
		cfg.idleTimeout = time.Minute
	}
	s := &stack{cfg: cfg}
	t.Cleanup(s.close)

	backendTransport := backend.NewTransport(cfg.backendTimeout)
	proxyTransport := backend.NewTransport(cfg.backendTimeout)
	clientTransport := &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 64}
	s.transports = append(s.transports, backendTransport, proxyTransport, clientTransport)
	// The client's own timeout is a last resort, above answerDeadline, so
	// that a slow answer is reported as one rather than as a client error.
	s.client = &http.Client{Transport: clientTransport, Timeout: answerDeadline + 30*time.Second}

	// tfsbridge, as package bridge serves it for "tfsbridge demo": the
	// ext_proc server and the proxy on ephemeral ports.
	o := bridge.DefaultOptions()
	o.BackendURL = cfg.upstream
	o.BackendKind = cfg.kind
	o.BackendTimeout = cfg.backendTimeout
	o.MaxBodyBytes = cfg.maxBody
	if cfg.limits.MaxDepth > 0 {
		o.MaxJSONDepth = cfg.limits.MaxDepth
	}
	if cfg.limits.MaxElements > 0 {
		o.MaxElements = cfg.limits.MaxElements
	}
	o.ShutdownTimeout = time.Second
	o.Passthrough = cfg.passthrough
	o.DrainDelay = 0 // no load balancer to drain from
	o.Proxy = bridge.ProxyOptions{
		RequestTimeout:    cfg.requestTimeout,
		ReadTimeout:       cfg.readTimeout,
		ReadHeaderTimeout: cfg.readHeader,
		IdleTimeout:       cfg.idleTimeout,
		WriteTimeout:      o.Proxy.WriteTimeout,
	}
	if cfg.writeTimeout > 0 {
		o.Proxy.WriteTimeout = cfg.writeTimeout
	}
	if cfg.maxInflight > 0 {
		o.MaxInflightBytes = cfg.maxInflight
	}
	o.Logger = cfg.logger
	o.BackendTransport = backendTransport
	if cfg.wrapTransport != nil {
		o.BackendTransport = cfg.wrapTransport(backendTransport)
	}
	o.ProxyTransport = proxyTransport
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.wrapBackend != nil {
		b.Session.Backend = cfg.wrapBackend(b.Session.Backend)
	}
	s.backend = b.Backend
	s.metrics = b.Metrics
	l, err := bridge.Listen(bridge.Addrs{Extproc: "127.0.0.1:0", Proxy: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s.proxyURL = "http://" + l.Proxy.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	s.closers = append(s.closers, func() { cancel(); <-done })

	// Envoy in front of the ext_proc server: headers SEND, bodies
	// BUFFERED, a buffer limit above the session's so that the session's
	// own limit is what a body between the two meets.
	s.env, err = envoysim.Start(envoysim.Config{
		ProcessorAddr:     l.Extproc.Addr().String(),
		Upstream:          cfg.upstream,
		Mode:              envoysim.DefaultMode(),
		AllowModeOverride: true,
		MessageTimeout:    cfg.messageTimeout,
		FailureModeAllow:  cfg.failureModeAllow,
		BufferLimit:       cfg.bufferLimit,
		UpstreamTimeout:   cfg.routeTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.envoyURL = s.env.URL()
	// And in full-duplex mode (--body-mode auto follows each stream):
	// no buffer limit, no message timeout.
	s.envFD, err = envoysim.Start(envoysim.Config{
		ProcessorAddr:    l.Extproc.Addr().String(),
		Upstream:         cfg.upstream,
		Mode:             envoysim.FullDuplexMode(),
		FailureModeAllow: cfg.failureModeAllow,
		UpstreamTimeout:  cfg.routeTimeout,
		GRPCGoWindows:    cfg.grpcGoWindows,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Envoy stops before tfsbridge, as close promises.
	s.closers = append([]func(){func() { _ = s.env.Close() }, func() { _ = s.envFD.Close() }}, s.closers...)
	return s
}

// url is the base URL of transport via.
func (s *stack) url(via string) string {
	switch via {
	case viaProxy:
		return s.proxyURL
	case viaExtprocFD:
		return s.envFD.URL()
	}
	return s.envoyURL
}

// dropIdle closes every idle keep-alive connection the stack holds.
func (s *stack) dropIdle() {
	for _, tr := range s.transports {
		tr.CloseIdleConnections()
	}
}

// close stops everything, in the order a deployment would: clients,
// Envoy, then tfsbridge (the proxy and the ext_proc server together).
func (s *stack) close() {
	s.closeOnce.Do(func() {
		s.dropIdle()
		for _, c := range s.closers {
			c()
		}
		s.dropIdle()
	})
}

// answer is one HTTP exchange as the client saw it.
type answer struct {
	status  int
	body    string
	elapsed time.Duration
	err     error
}

// post sends body to path through via and reads the whole answer.
func (s *stack) post(via, path string, body []byte) answer {
	start := time.Now()
	resp, err := s.client.Post(s.url(via)+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return answer{status: resp.StatusCode, body: string(b), elapsed: time.Since(start), err: err}
}

// isTFError reports a TF Serving error body: {"error": "..."} in
// rapidjson's pretty layout.
func isTFError(body string) bool {
	return strings.HasPrefix(body, "{\n    \"error\": \"") && strings.HasSuffix(body, "\"\n}")
}

// startMock serves mockv2 imitating kind.
func startMock(t *testing.T, kind string) *httptest.Server {
	t.Helper()
	m, err := mockv2.New(mockv2.Options{Kind: kind, Delay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv
}
