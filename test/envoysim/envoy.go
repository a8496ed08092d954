package envoysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"

	"github.com/tfsbridge/tfsbridge/internal/framepool"
)

// Envoy is a running stand-in: an HTTP/1.1 and h2c listener on 127.0.0.1 that processes every
// request through the ext_proc processor at Config.ProcessorAddr and the upstream at
// Config.Upstream. It is safe for concurrent use.
type Envoy struct {
	cfg      Config
	upstream *url.URL
	routes   []route
	ln       net.Listener
	srv      *http.Server
	serving  chan struct{}

	conn   *grpc.ClientConn
	client extprocv3.ExternalProcessorClient

	transport  *http.Transport
	httpClient *http.Client

	// ctx is cancelled by Close, which aborts every exchange still in flight.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup

	stats   counters
	journal journal
}

// envoyStreamWindow and envoyConnWindow are Envoy's default HTTP/2 receive windows
// (Http2ProtocolOptions initial_stream_window_size and initial_connection_window_size),
// which its gRPC client to the processor uses.
const (
	envoyStreamWindow = 16 << 20
	envoyConnWindow   = 24 << 20
)

// Start validates cfg, connects (lazily) to the processor and starts listening on a random
// port of 127.0.0.1.
func Start(cfg Config) (*Envoy, error) {
	cfg, up, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	// Envoy's gRPC client has no receive limit by default; the processor's own limit
	// (grpc-go: 4 MiB) is the one a large body runs into, as in production.
	// Its HTTP/2 receive windows are Envoy's defaults (since 1.36: 16 MiB a stream, 24 MiB
	// the connection; 256 MiB before), fixed, where grpc-go's client would start at 64 KiB
	// and grow them by its BDP estimate: a reply carrying a translated body is never held
	// back by window updates in Envoy, so it is not here either.
	// Frames are read into buffers that are not cleared first, as Envoy's
	// are (grpc-go's default pool clears every buffer it hands out again).
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		experimental.WithBufferPool(framepool.New()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
	}
	if !cfg.GRPCGoWindows {
		opts = append(opts, grpc.WithInitialWindowSize(envoyStreamWindow), grpc.WithInitialConnWindowSize(envoyConnWindow))
	}
	conn, err := grpc.NewClient(cfg.ProcessorAddr, opts...)
	if err != nil {
		return nil, fmt.Errorf("envoysim: processor client: %w", err)
	}
	routes, err := parseRoutes(cfg.HeaderRoutes)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("envoysim: listen: %w", err)
	}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext, // Envoy's default connect_timeout
		DisableCompression:  true,                                                // never add accept-encoding, never decode
		MaxIdleConnsPerHost: 64,
	}
	if cfg.UpstreamHTTP2 {
		// http2_protocol_options on the cluster: HTTP/2 with prior knowledge, no TLS.
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Envoy{
		cfg:        cfg,
		upstream:   &url.URL{Scheme: up.Scheme, Host: up.Host},
		routes:     routes,
		ln:         ln,
		serving:    make(chan struct{}),
		conn:       conn,
		client:     extprocv3.NewExternalProcessorClient(conn),
		transport:  transport,
		httpClient: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		ctx:        ctx,
		cancel:     cancel,
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	// codec_type AUTO: HTTP/1.1, and HTTP/2 with prior knowledge (h2c), which is what
	// gRPC clients speak to a plaintext port.
	e.srv.Protocols = new(http.Protocols)
	e.srv.Protocols.SetHTTP1(true)
	e.srv.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		defer close(e.serving)
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

// URL is the listener's base URL, e.g. "http://127.0.0.1:41234".
func (e *Envoy) URL() string { return "http://" + e.ln.Addr().String() }

// Close stops listening, aborts the exchanges still in flight, waits for them and releases
// every connection. It is idempotent.
func (e *Envoy) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	err := e.srv.Close()
	<-e.serving
	e.inflight.Wait()
	e.transport.CloseIdleConnections()
	return errors.Join(err, e.conn.Close())
}

// enter registers an exchange unless the stand-in is closed.
func (e *Envoy) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.inflight.Add(1)
	return true
}

// Violations lists every rule of the ext_proc protocol the processor broke so far, in
// human-readable form ("GET /v1/models/m (x-request-id ...): request_body: ..."). A correct
// processor leaves it empty.
func (e *Envoy) Violations() []string { return e.journal.snapshotViolations() }

// Notes lists what Envoy silently ignored or worked around (rejected header mutations,
// ignored mode overrides, clean stream closes, gRPC errors): legal, but worth a look.
func (e *Envoy) Notes() []string { return e.journal.snapshotNotes() }

// Stats returns a snapshot of the ext_proc counters.
func (e *Envoy) Stats() Stats { return e.stats.snapshot() }

// Exchanges returns the most recent downstream exchanges (up to a few thousand), oldest first.
func (e *Envoy) Exchanges() []Exchange { return e.journal.snapshotExchanges() }
