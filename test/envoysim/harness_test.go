package envoysim

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/tfsbridge/tfsbridge/internal/poll"
)

// responder scripts a processor: the replies to message n of a stream (nil = stay silent).
type responder func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse

// procStream is what the scripted processor saw on one stream.
type procStream struct {
	mu   sync.Mutex
	msgs []*extprocv3.ProcessingRequest
	end  error // the Recv error that ended the stream
	done chan struct{}
}

// recv receives the next message and records it, or records the error
// that ended the stream and reports false.
func (s *procStream) recv(stream extprocv3.ExternalProcessor_ProcessServer) (*extprocv3.ProcessingRequest, bool) {
	req, err := stream.Recv()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.end = err
		return nil, false
	}
	s.msgs = append(s.msgs, req)
	return req, true
}

func (s *procStream) messages() []*extprocv3.ProcessingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*extprocv3.ProcessingRequest(nil), s.msgs...)
}

// procServer is a scripted ext_proc server over a real socket.
type procServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	respond responder
	// perStream, when set, makes a fresh responder (with its own state) for each stream.
	perStream func() responder
	// custom, when set, replaces the Recv/respond loop.
	custom func(s extprocv3.ExternalProcessor_ProcessServer, ps *procStream) error

	mu      sync.Mutex
	streams []*procStream
}

func (p *procServer) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	ps := &procStream{done: make(chan struct{})}
	p.mu.Lock()
	p.streams = append(p.streams, ps)
	p.mu.Unlock()
	defer close(ps.done)
	if p.custom != nil {
		return p.custom(s, ps)
	}
	respond := p.respond
	if p.perStream != nil {
		respond = p.perStream()
	}
	for n := 0; ; n++ {
		req, ok := ps.recv(s)
		if !ok {
			return nil
		}
		for _, r := range respond(n, req) {
			if err := s.Send(r); err != nil {
				return nil
			}
		}
	}
}

func (p *procServer) stream(t *testing.T, i int) *procStream {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.streams) {
		t.Fatalf("processor saw %d streams, want at least %d", len(p.streams), i+1)
	}
	return p.streams[i]
}

func (p *procServer) streamCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.streams)
}

// upRequest is what the upstream received.
type upRequest struct {
	method, uri, host string
	header            http.Header
	body              string
	contentLength     int64
	transferEncoding  []string
	trailer           http.Header
}

// upstream records requests and answers with handler (default: 200 JSON).
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []upRequest
}

const upstreamBody = `{"outputs": [1.5]}`

func startUpstream(t *testing.T, handler http.HandlerFunc) *upstream {
	u := &upstream{}
	if handler == nil {
		handler = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, upstreamBody)
		}
	}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, upRequest{method: r.Method, uri: r.RequestURI, host: r.Host, header: r.Header.Clone(), body: string(b), contentLength: r.ContentLength, transferEncoding: r.TransferEncoding, trailer: r.Trailer.Clone()})
		u.mu.Unlock()
		handler(w, r)
	}))
	return u
}

func (u *upstream) requests() []upRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upRequest(nil), u.got...)
}

// env is one stand-in wired to a scripted processor and a recording upstream.
type env struct {
	t      *testing.T
	proc   *procServer
	up     *upstream
	envoy  *Envoy
	client *http.Client
}

// newEnv starts everything; cfg.ProcessorAddr and cfg.Upstream are filled in when empty.
// Cleanup closes it all and fails the test if a goroutine of ours survives.
func newEnv(t *testing.T, cfg Config, proc *procServer, upHandler http.HandlerFunc) *env {
	t.Helper()
	ev := &env{t: t, proc: proc}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, proc)
	go func() { _ = gs.Serve(lis) }()
	ev.up = startUpstream(t, upHandler)
	if cfg.ProcessorAddr == "" {
		cfg.ProcessorAddr = lis.Addr().String()
	}
	if cfg.Upstream == "" {
		cfg.Upstream = ev.up.srv.URL
	}
	if cfg.MessageTimeout == 0 {
		// Generous: the test processors answer at once, but on a busy
		// machine a reply can wait seconds for a CPU. Tests of the timer
		// set their own.
		cfg.MessageTimeout = 30 * time.Second
	}
	ev.envoy, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	ev.client = &http.Client{Transport: tr, Timeout: time.Minute} // a bound for a hang
	t.Cleanup(func() {
		if err := ev.envoy.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		gs.Stop()
		ev.up.srv.Close()
		tr.CloseIdleConnections()
		checkNoLeaks(t)
	})
	return ev
}

// do sends one request through the stand-in; hdr is key, value, key, value...
func (ev *env) do(method, path, body string, hdr ...string) (int, http.Header, string) {
	ev.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ev.envoy.URL()+path, rd)
	if err != nil {
		ev.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, b, err := ev.send(req)
	if err != nil {
		ev.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// send sends req through the stand-in and reads the whole answer; err reports a failed
// exchange (e.g. a stream reset mid-body).
func (ev *env) send(req *http.Request) (*http.Response, string, error) {
	resp, err := ev.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// lastExchange returns the single most recent exchange.
func (ev *env) lastExchange() Exchange {
	ev.t.Helper()
	xs := ev.envoy.Exchanges()
	if len(xs) == 0 {
		ev.t.Fatal("no exchange recorded")
	}
	return xs[len(xs)-1]
}

func (ev *env) wantNoViolations() {
	ev.t.Helper()
	if v := ev.envoy.Violations(); len(v) > 0 {
		ev.t.Errorf("violations:\n%s", strings.Join(v, "\n"))
	}
}

func (ev *env) wantViolation(substr string) {
	ev.t.Helper()
	for _, v := range ev.envoy.Violations() {
		if strings.Contains(v, substr) {
			return
		}
	}
	ev.t.Errorf("no violation containing %q in %q", substr, ev.envoy.Violations())
}

// waitFor polls cond until it holds or within passes and reports whether it
// held: for state the stand-in records on its own goroutines with nothing
// to signal it. Callers give a generous within (tens of seconds); it only
// bounds a failure.
func waitFor(within time.Duration, cond func() bool) bool {
	return poll.Until(within, cond)
}

// checkNoLeaks waits for every goroutine of the stand-in, the test servers and their
// transports to be gone.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	markers := []string{"envoysim.(*", "envoysim.openSideStream", "net/http.(*persistConn)", "grpc/internal/transport.", "net/http.(*conn).serve"}
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaks []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "checkNoLeaks") {
				continue
			}
			for _, m := range markers {
				if strings.Contains(g, m) {
					leaks = append(leaks, g)
					break
				}
			}
		}
		if len(leaks) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines leaked:\n%s", len(leaks), strings.Join(leaks, "\n\n"))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// --- reply builders ---

// common answers req with the matching reply kind carrying cr.
func common(req *extprocv3.ProcessingRequest, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	default:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
	}
}

// passThrough continues every message unchanged.
func passThrough(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
	return []*extprocv3.ProcessingResponse{common(req, &extprocv3.CommonResponse{})}
}

// on answers messages of one kind with reply and passes the others through.
func on(kind string, reply func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse) responder {
	return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		if kindOf(req) == kind {
			return reply(req)
		}
		return passThrough(n, req)
	}
}

func one(r *extprocv3.ProcessingResponse) []*extprocv3.ProcessingResponse {
	return []*extprocv3.ProcessingResponse{r}
}

func kindOf(req *extprocv3.ProcessingRequest) string {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingRequest_ResponseBody:
		return "response_body"
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return "request_trailers"
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return "response_trailers"
	default:
		return "other"
	}
}

func kinds(msgs []*extprocv3.ProcessingRequest) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = kindOf(m)
	}
	return out
}

func headersOf(req *extprocv3.ProcessingRequest) *extprocv3.HttpHeaders {
	if h := req.GetRequestHeaders(); h != nil {
		return h
	}
	return req.GetResponseHeaders()
}

// hget returns the raw value of key in a proto header map.
func hget(m *corev3.HeaderMap, key string) (string, bool) {
	for _, h := range m.GetHeaders() {
		if h.GetKey() == key {
			return string(h.GetRawValue()), true
		}
	}
	return "", false
}

func setHeaders(opts ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	return &extprocv3.HeaderMutation{SetHeaders: opts}
}

func newBody(b string) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(b)}}
}

func immediate(ir *extprocv3.ImmediateResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}}
}

// waitEnd waits for the processor's stream to end and returns the Recv error it saw.
func waitEnd(t *testing.T, ps *procStream) error {
	t.Helper()
	select {
	case <-ps.done:
	case <-time.After(3 * time.Second):
		t.Fatal("processor stream did not end")
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.end
}

// refusedURL is the URL of a loopback port nothing listens on (it was
// bound, then closed): an upstream that refuses connections.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}
