package robustness

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// The edges of the exchange rather than its bodies: where a request may
// go (redirects, dot segments, the pass-through policy), which headers
// survive a hop, and what a body cut short gets.

// recorder is a mockv2 server that remembers every request it receives
// and can answer chosen paths with a redirect to elsewhere.
type recorder struct {
	mock      http.Handler
	redirect  map[string]int // path → 3xx status
	elsewhere string
	// connection, when set, is the Connection header of every infer
	// answer: a v2 server naming its own headers hop-by-hop.
	connection string

	mu   sync.Mutex
	seen []string // "METHOD request-URI"
}

func startRecorder(t *testing.T, r *recorder) *httptest.Server {
	t.Helper()
	m, err := mockv2.New(mockv2.Options{Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	r.mock = m
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.RequestURI)
	r.mu.Unlock()
	if code, ok := r.redirect[req.URL.Path]; ok {
		http.Redirect(w, req, r.elsewhere+req.URL.Path, code)
		return
	}
	if r.connection != "" && strings.HasSuffix(req.URL.Path, "/infer") {
		w.Header().Set("Connection", r.connection)
	}
	r.mock.ServeHTTP(w, req)
}

// saw returns the requests received whose request line contains s.
func (r *recorder) saw(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.seen {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// received reports a request whose line ("METHOD request-URI") is line.
func (r *recorder) received(line string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.seen {
		if l == line {
			return true
		}
	}
	return false
}

// rawSend writes a raw HTTP/1.1 request to the transport's socket, half-
// closes the connection's write side when halfClose is set, and reads
// one answer. An err means the connection ended without an answer.
func (s *stack) rawSend(t *testing.T, via, request string, halfClose bool) answer {
	t.Helper()
	c := dialSlow(t, s.url(via))
	start := time.Now()
	if _, err := c.conn.Write([]byte(request)); err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	if halfClose {
		if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	resp, body, err := c.response(answerDeadline)
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	return answer{status: resp.StatusCode, body: body, elapsed: time.Since(start)}
}

// TestNoRedirects: a v2 server (or whatever answers in its place) that
// redirects a control call gets tfsbridge to fetch nothing elsewhere; the
// client gets a 502 that says so, through both transports.
func TestNoRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "you should not be here", http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	rec := &recorder{elsewhere: other.URL, redirect: map[string]int{
		"/v2":                                       302,
		"/v2/models/bytes_echo":                     301,
		"/v2/models/simple/config":                  307,
		"/v2/models/half_plus_two/ready":            308,
		"/v2/models/half_plus_two/versions/1/ready": 302,
		"/v2/models/half_times_two/infer":           303,
	}}
	up := startRecorder(t, rec)
	fixed := newStack(t, patient(stackConfig{upstream: up.URL, kind: "triton"}))
	auto := newStack(t, patient(stackConfig{upstream: up.URL, kind: "auto"}))
	const suffix = " with a redirect (HTTP %s); tfsbridge does not follow redirects"
	tests := []struct {
		name   string
		s      *stack
		method string
		path   string
		msg    string
	}{
		{"server kind", auto, "POST", "/v1/models/half_plus_two:predict", "v2 inference server answered GET /v2" + strings.Replace(suffix, "%s", "302", 1)},
		{"model metadata", fixed, "POST", "/v1/models/bytes_echo:predict", "v2 inference server answered GET /v2/models/bytes_echo" + strings.Replace(suffix, "%s", "301", 1)},
		{"model config", fixed, "GET", "/v1/models/simple/metadata", "v2 inference server answered GET /v2/models/simple/config" + strings.Replace(suffix, "%s", "307", 1)},
		{"model ready", fixed, "GET", "/v1/models/half_plus_two/versions/1", "v2 inference server answered GET /v2/models/half_plus_two/versions/1/ready" + strings.Replace(suffix, "%s", "302", 1)},
		// Not a control call: the inference itself is redirected. Neither
		// Envoy's router nor the proxy follows it; the status is a 502.
		{"infer", fixed, "POST", "/v1/models/half_times_two:predict", ""},
	}
	for _, tc := range tests {
		for _, via := range transports {
			var body []byte
			if tc.method == "POST" {
				body = []byte(`{"instances":[1.0]}`)
			}
			a := tc.s.send(via, tc.method, tc.path, body, nil)
			checkAnswer(t, tc.name+" via "+via, a, http.StatusBadGateway, tc.msg)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect target was fetched %d times", n)
	}
}

// TestDotSegmentModels: a model named "." or ".." (literally or
// percent-encoded) is an unknown servable, answered with TF's texts
// without a single call naming it to the v2 server: no encoding of it is
// safe behind a normalising hop (see route.SafeSegment).
func TestDotSegmentModels(t *testing.T) {
	rec := &recorder{}
	up := startRecorder(t, rec)
	s := newStack(t, patient(stackConfig{upstream: up.URL}))
	tests := []struct {
		method, path string
		status       int
		msg          string
	}{
		{"POST", "/v1/models/..:predict", 404, "Servable not found for request: Latest(..)"},
		{"POST", "/v1/models/%2E%2E:predict", 404, "Servable not found for request: Latest(..)"},
		{"POST", "/v1/models/%2e/versions/1:predict", 404, "Servable not found for request: Specific(., 1)"},
		{"POST", "/v1/models/..%2Fhalf_plus_two:predict", 404, "Servable not found for request: Latest(../half_plus_two)"},
		{"POST", "/v1/models/..%5C..:predict", 404, `Servable not found for request: Latest(..\..)`},
		{"GET", "/v1/models/%2E%2E/metadata", 404, "Servable not found for request: Latest(..)"},
		{"GET", "/v1/models/..", 404, "Could not find any versions of model .."},
		{"GET", "/v1/models/%2E%2E/versions/1", 404, "Could not find version 1 of model .."},
		// TF's own order: a JSON syntax error comes before the lookup.
		{"POST", "/v1/models/%2E%2E:predict", 400, "JSON Parse error: Missing a name for object member. at offset: 1"},
	}
	for i, tc := range tests {
		for _, via := range transports {
			body := []byte(`{"instances":[1.0]}`)
			if i == len(tests)-1 {
				body = []byte(`{,}`)
			}
			if tc.method == "GET" {
				body = nil
			}
			checkAnswer(t, tc.method+" "+tc.path+" via "+via, s.send(via, tc.method, tc.path, body, nil), tc.status, tc.msg)
		}
	}
	for _, bad := range []string{"/v2/models/..", "/v2/models/.", "%2E", "%2e", "/v2/infer", "/v2/versions", "%5C"} {
		if got := rec.saw(bad); len(got) > 0 {
			t.Errorf("the v2 server received %q", got)
		}
	}
}

// refusedPaths are requests no TF client may make through tfsbridge under
// the default policy: the v2 server's control plane and anything outside
// the inference API.
var refusedPaths = []struct{ method, path string }{
	{"POST", "/v2/repository/models/half_plus_two/unload"},
	{"POST", "/v2/repository/index"},
	{"POST", "/v2/systemsharedmemory/region/r/unregister"},
	{"POST", "/v2/cudasharedmemory/region/r/register"},
	{"POST", "/v2/trace/setting"},
	{"POST", "/v2/models/half_plus_two/trace/setting"},
	{"POST", "/v2/logging"},
	{"GET", "/v2/models/half_plus_two/config"},
	{"GET", "/v2/models/half_plus_two/stats"},
	{"GET", "/metrics"},
	{"GET", "/"},
	{"GET", "//elsewhere/x"},
	{"GET", "/v2/models/../repository/index"},
	{"POST", "/v2/models/%2E%2E/repository/index"},
	{"DELETE", "/v2/models/half_plus_two"},
}

// allowedPaths are the v2 inference API: they reach the v2 server.
var allowedPaths = []struct {
	method, path, body string
}{
	{"GET", "/v2/health/live", ""},
	{"GET", "/v2/health/ready", ""},
	{"GET", "/v2", ""},
	{"GET", "/v2/models/half_plus_two", ""},
	{"GET", "/v2/models/half_plus_two/versions/1", ""},
	{"GET", "/v2/models/half_plus_two/ready", ""},
	{"POST", "/v2/models/half_plus_two/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.0]}]}`},
}

// TestPassthroughPolicy: under --passthrough inference (the default) only
// the v2 inference API reaches the v2 server and everything else gets
// TF's 404 layout; none refuses those too; all passes everything.
func TestPassthroughPolicy(t *testing.T) {
	for _, policy := range []session.Passthrough{session.PassthroughInference, session.PassthroughNone, session.PassthroughAll} {
		t.Run(policy.String(), func(t *testing.T) {
			rec := &recorder{}
			up := startRecorder(t, rec)
			s := newStack(t, patient(stackConfig{upstream: up.URL, passthrough: policy}))
			what := "a TF Serving REST call"
			if policy == session.PassthroughInference {
				what += " or a v2 inference call"
			}
			for _, via := range transports {
				for _, p := range refusedPaths {
					var body []byte
					if p.method == "POST" {
						body = []byte("{}")
					}
					a := s.send(via, p.method, p.path, body, nil)
					if policy == session.PassthroughAll {
						if msg, ok := tfErrorMessage(a.body); a.err != nil || ok && strings.HasPrefix(msg, "Not found: ") {
							t.Errorf("%s %s via %s: %d %q %v, want the v2 server's answer", p.method, p.path, via, a.status, a.body, a.err)
						}
						continue
					}
					checkAnswer(t, p.method+" "+p.path+" via "+via, a, http.StatusNotFound,
						"Not found: "+p.method+" "+p.path+" is not "+what)
				}
				for _, p := range allowedPaths {
					a := s.send(via, p.method, p.path, []byte(p.body), nil)
					if policy == session.PassthroughNone {
						checkAnswer(t, p.method+" "+p.path+" via "+via, a, http.StatusNotFound,
							"Not found: "+p.method+" "+p.path+" is not "+what)
						continue
					}
					if a.err != nil || a.status != http.StatusOK || isTFError(a.body) {
						t.Errorf("%s %s via %s: %d %q %v, want the v2 server's 200", p.method, p.path, via, a.status, a.body, a.err)
					}
				}
			}
			// CONNECT reaches only the proxy (Envoy answers it itself).
			a := s.rawSend(t, viaProxy, "CONNECT elsewhere:443 HTTP/1.1\r\nHost: elsewhere:443\r\n\r\n", false)
			if policy != session.PassthroughAll {
				checkAnswer(t, "CONNECT via proxy", a, http.StatusNotFound, "Not found: CONNECT ")
			}
			if policy == session.PassthroughAll {
				return
			}
			for _, p := range refusedPaths {
				if rec.received(p.method + " " + p.path) {
					t.Errorf("the v2 server received %s %s", p.method, p.path)
				}
			}
			if got := rec.saw("CONNECT"); len(got) > 0 {
				t.Errorf("the v2 server received %q", got)
			}
			if got := len(rec.saw("/v2/health/live")); policy == session.PassthroughNone && got > 0 {
				t.Errorf("policy none: the v2 server received %d health calls", got)
			}
		})
	}
}

// TestHopByHopHeaders: a client naming the headers tfsbridge sets for the
// v2 server in its Connection header does not strip them (the v2 server
// would read a binary body as JSON, and the client get a 500 it caused),
// and a v2 server naming its own in its answer's Connection header still
// has its binary answer read as binary. Both transports.
func TestHopByHopHeaders(t *testing.T) {
	const body = `{"instances":[1.0]}`
	for _, tc := range []struct {
		name           string
		client, server string // Connection headers
	}{
		{"client names them", "close, Inference-Header-Content-Length, Content-Type, Content-Length, Accept-Encoding", ""},
		{"server names them", "keep-alive", "Inference-Header-Content-Length, Content-Type, Content-Length"},
	} {
		request := "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf\r\nConnection: " + tc.client + "\r\n" +
			"Content-Type: application/json\r\nContent-Length: 19\r\n\r\n" + body
		rec := &recorder{connection: tc.server}
		up := startRecorder(t, rec)
		s := newStack(t, patient(stackConfig{upstream: up.URL}))
		for _, via := range transports {
			checkAnswer(t, tc.name+" via "+via, s.rawSend(t, via, request, false), http.StatusOK, "")
		}
	}
}

// TestTruncatedBodies: a body that ends before its declared end (the
// client half-closes its write side, still reading) is never answered
// with a success, translated or passed through: the proxy answers 400
// (a TF error for TF requests) and Envoy resets the connection.
func TestTruncatedBodies(t *testing.T) {
	rec := &recorder{}
	up := startRecorder(t, rec)
	s := newStack(t, patient(stackConfig{upstream: up.URL}))
	const partial = `{"instances":[1.0,` // 18 of the 100 bytes declared
	tests := []struct {
		name, head, body string
		tfMsg            string // proxy: TF error message; "" for a bare 400
	}{
		{"predict, content-length", "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf\r\nContent-Length: 100\r\n\r\n", partial,
			"Incomplete request body: received 18 of the 100 bytes of its Content-Length"},
		{"predict, chunked", "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf\r\nTransfer-Encoding: chunked\r\n\r\n", "12\r\n" + partial + "\r\n",
			"Incomplete request body: the chunked body ended early"},
		{"v2 infer, content-length", "POST /v2/models/half_plus_two/infer HTTP/1.1\r\nHost: tf\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", partial, ""},
		{"v2 infer, chunked", "POST /v2/models/half_plus_two/infer HTTP/1.1\r\nHost: tf\r\nTransfer-Encoding: chunked\r\n\r\n", "12\r\n" + partial + "\r\n", ""},
	}
	for _, tc := range tests {
		for _, via := range transports {
			a := s.rawSend(t, via, tc.head+tc.body, true)
			what := tc.name + " via " + via
			switch {
			case a.elapsed > answerDeadline:
				t.Errorf("%s: answered after %v", what, a.elapsed)
			case throughEnvoy(via):
				// Envoy's codec resets the stream: nothing reached the v2
				// server, and no answer is a success.
				if a.err == nil && a.status < 400 {
					t.Errorf("%s: %d %q, want a 4xx or the connection closed", what, a.status, a.body)
				}
			case tc.tfMsg != "":
				checkAnswer(t, what, a, http.StatusBadRequest, tc.tfMsg)
			case a.err != nil || a.status != http.StatusBadRequest:
				t.Errorf("%s: %d %q %v, want a bare 400", what, a.status, a.body, a.err)
			}
		}
	}
	if got := rec.saw("/v2/models/half_plus_two/infer"); len(got) > 0 {
		// The pass-through request may have started upstream; it must
		// not have been answered as a success, which the checks above
		// cover. The translated ones never start.
		for _, l := range got {
			if !strings.HasPrefix(l, "POST ") {
				t.Errorf("unexpected upstream request %q", l)
			}
		}
	}
}
