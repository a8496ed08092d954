package httpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

var halfPlusTwo = fakev2.HalfPlusTwo()

const predictions = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"

func f32le(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// binaryAnswer writes the v2 binary response for y = [2.5, 3, 4.5].
func binaryAnswer(w http.ResponseWriter) {
	header := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	_, _ = w.Write(append([]byte(header), f32le(2.5, 3, 4.5)...))
}

type setup struct {
	v2       *fakev2.Server
	proxy    *httptest.Server
	upstream string // override of the proxy's upstream (default: v2)
	maxBody  int64
	timeout  time.Duration
	// transport, when set, makes the proxy's upstream calls.
	transport http.RoundTripper
	// noSmall: every exchange goes through ReverseProxy (Proxy.noSmall).
	noSmall bool
}

func (s *setup) start(t *testing.T) {
	t.Helper()
	if s.v2 == nil {
		s.v2 = fakev2.New(t, "triton", halfPlusTwo)
	}
	be, err := backend.New(backend.Config{BaseURL: s.v2.URL, Kind: "triton", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	up := s.upstream
	if up == "" {
		up = s.v2.URL
	}
	u, _ := url.Parse(up)
	p, err := New(Config{
		Session:        &session.Config{Backend: be, MaxBodyBytes: s.maxBody, Metrics: observe.NewMetrics()},
		Upstream:       u,
		RequestTimeout: s.timeout,
		Transport:      s.transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.noSmall = s.noSmall
	s.proxy = httptest.NewServer(p)
	t.Cleanup(s.proxy.Close)
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func post(t *testing.T, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPredict(t *testing.T) {
	s := &setup{}
	s.v2 = fakev2.New(t, "triton", halfPlusTwo)
	var seen atomic.Value
	s.v2.SetInfer(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.Store(struct {
			h    http.Header
			cl   int64
			body []byte
			uri  string
		}{r.Header.Clone(), r.ContentLength, body, r.RequestURI})
		binaryAnswer(w)
	})
	s.start(t)

	req := post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`)
	req.Header.Set("X-Request-Id", "req-42")
	// Headers the client calls hop-by-hop cannot remove what the
	// translation sets for the v2 server.
	req.Header.Set("Connection", "Inference-Header-Content-Length, Content-Type, Accept-Encoding, X-Request-Id")
	resp, body := do(t, req)
	if resp.StatusCode != 200 || body != predictions {
		t.Fatalf("answer = %d %q, want 200 %q", resp.StatusCode, body, predictions)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type = %q", ct)
	}
	if resp.ContentLength != int64(len(predictions)) || resp.Header.Get("Inference-Header-Content-Length") != "" {
		t.Errorf("content-length %d, IHCL %q", resp.ContentLength, resp.Header.Get("Inference-Header-Content-Length"))
	}

	up := seen.Load().(struct {
		h    http.Header
		cl   int64
		body []byte
		uri  string
	})
	if up.uri != "/v2/models/half_plus_two/infer" {
		t.Errorf("upstream path = %q", up.uri)
	}
	if up.cl != int64(len(up.body)) || up.h.Get("Accept-Encoding") != "identity" || up.h.Get("X-Request-Id") != "req-42" {
		t.Errorf("upstream: content-length %d for %d bytes, accept-encoding %q, x-request-id %q",
			up.cl, len(up.body), up.h.Get("Accept-Encoding"), up.h.Get("X-Request-Id"))
	}
	n, err := strconv.Atoi(up.h.Get("Inference-Header-Content-Length"))
	if err != nil || len(up.body)-n != 12 || !bytes.Equal(up.body[n:], f32le(1, 2, 5)) {
		t.Errorf("upstream binary body: IHCL %q, body %q", up.h.Get("Inference-Header-Content-Length"), up.body)
	}
}

func TestReadsAnswerImmediately(t *testing.T) {
	s := &setup{}
	s.start(t)
	req, _ := http.NewRequest(http.MethodGet, s.proxy.URL+"/v1/models/half_plus_two", nil)
	resp, body := do(t, req)
	want := string(tfresponse.Status(nil, []tfresponse.VersionStatus{{Version: "1", State: "AVAILABLE", ErrorCode: "OK"}}))
	if resp.StatusCode != 200 || body != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status = %d %q (%s), want 200 %q", resp.StatusCode, body, resp.Header.Get("Content-Type"), want)
	}
	if n := s.v2.Hits("/v2/models/half_plus_two/infer"); n != 0 {
		t.Errorf("a GET reached the infer endpoint %d times", n)
	}
}

func TestPassThrough(t *testing.T) {
	release := make(chan struct{})
	var sawCustom atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawCustom.Store(r.Header.Get("X-Hop") != "")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(207)
		_, _ = w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("second\n"))
	}))
	defer up.Close()
	s := &setup{upstream: up.URL}
	s.start(t)

	req, _ := http.NewRequest(http.MethodPost, s.proxy.URL+"/v2/models/m/infer", strings.NewReader("raw"))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 207 || resp.Header.Get("X-Upstream") != "yes" {
		t.Errorf("pass-through answer = %d %v", resp.StatusCode, resp.Header)
	}
	// The first chunk arrives while the upstream still holds the second:
	// pass-through bodies are streamed, not buffered.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Errorf("first chunk = %q, %v", line, err)
	}
	close(release)
	if sawCustom.Load() {
		t.Error("a header listed in Connection (hop-by-hop) reached the upstream")
	}
}

func TestUpstreamFailures(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + lis.Addr().String()
	lis.Close()

	garbage, _ := net.Listen("tcp", "127.0.0.1:0")
	defer garbage.Close()
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("garbage\r\n\r\n"))
				c.Close()
			}()
		}
	}()

	tests := []struct {
		name     string
		upstream string
		infer    http.HandlerFunc
		status   int
		msg      string
	}{
		{name: "refused", upstream: closed, status: 503, msg: "The v2 inference server is unavailable"},
		// Not HTTP before any header: Envoy's router answers 503
		// ("...disconnect/reset before headers. reset reason: protocol
		// error"), and so does the proxy.
		{name: "garbage", upstream: "http://" + garbage.Addr().String(), status: 503,
			msg: "The v2 inference server is unavailable"},
		{name: "closed before answering", infer: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
		}, status: 503, msg: "The v2 inference server is unavailable"},
		{name: "timeout", infer: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, status: 504, msg: "Timed out waiting for the v2 inference server"},
		{name: "v2 error", infer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":"unexpected shape for input 'x'"}`))
		}, status: 400, msg: "unexpected shape for input 'x'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only "timeout" needs its request timeout short; the others
			// get a generous one that a busy machine cannot run into.
			timeout := 30 * time.Second
			if tt.name == "timeout" {
				timeout = 200 * time.Millisecond
			}
			s := &setup{upstream: tt.upstream, timeout: timeout}
			s.v2 = fakev2.New(t, "triton", halfPlusTwo)
			if tt.infer != nil {
				s.v2.SetInfer(tt.infer)
			}
			s.start(t)
			resp, body := do(t, post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0]}`))
			want := string(tfresponse.Error(nil, tt.msg))
			if resp.StatusCode != tt.status || body != want {
				t.Errorf("answer = %d %q, want %d %q", resp.StatusCode, body, tt.status, want)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("content-type = %q", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestClientCancelPropagates(t *testing.T) {
	s := &setup{}
	s.v2 = fakev2.New(t, "triton", halfPlusTwo)
	started, cancelled := make(chan struct{}), make(chan struct{})
	s.v2.SetInfer(func(w http.ResponseWriter, r *http.Request) {
		// Go's server notices a closed connection only once the body
		// has been read.
		_, _ = io.ReadAll(r.Body)
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(time.Minute):
		}
	})
	s.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	req := post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0]}`).WithContext(ctx)
	go func() {
		<-started // the call is upstream: cancel the client now
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded after cancel")
	}
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second): // a bound for a hang, generous for a busy machine
		t.Error("the upstream request was not cancelled with the client's")
	}
}

func TestBodyLimits(t *testing.T) {
	s := &setup{maxBody: 1024}
	s.v2 = fakev2.New(t, "triton", halfPlusTwo)
	s.v2.SetInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bytes.Repeat([]byte(" "), 2048))
	})
	s.start(t)
	big := `{"instances": [` + strings.Repeat("1.0, ", 400) + `1.0]}`
	tooLarge := string(tfresponse.Error(nil, "Request body exceeds the limit of 1024 bytes"))

	// Declared too large: refused without reading.
	resp, body := do(t, post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", big))
	if resp.StatusCode != 413 || body != tooLarge {
		t.Errorf("declared too large: %d %q, want 413 %q", resp.StatusCode, body, tooLarge)
	}
	// Chunked (no declared length): read up to the limit, then refused.
	req := post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", "")
	req.Body = io.NopCloser(strings.NewReader(big))
	req.ContentLength = -1
	resp, body = do(t, req)
	if resp.StatusCode != 413 || body != tooLarge {
		t.Errorf("chunked too large: %d %q, want 413 %q", resp.StatusCode, body, tooLarge)
	}
	// A v2 answer over the limit.
	resp, body = do(t, post(t, s.proxy.URL+"/v1/models/half_plus_two:predict", `{"instances": [1.0]}`))
	want := string(tfresponse.Error(nil, "Response body exceeds the limit of 1024 bytes"))
	if resp.StatusCode != 502 || body != want {
		t.Errorf("response too large: %d %q, want 502 %q", resp.StatusCode, body, want)
	}
}

func TestUpstreamURL(t *testing.T) {
	for _, tt := range []struct{ base, target, want string }{
		{"http://h:1", "/v2/models/m/infer", "http://h:1/v2/models/m/infer"},
		{"http://h:1/", "/v2/models/m/infer", "http://h:1/v2/models/m/infer"},
		{"http://h:1/prefix", "/v2/models/a%2Fb/infer", "http://h:1/prefix/v2/models/a%2Fb/infer"},
		{"http://h:1", "/v2/models/m/infer?x=1", "http://h:1/v2/models/m/infer?x=1"},
	} {
		base, _ := url.Parse(tt.base)
		if got := upstreamURL(base, tt.target).String(); got != tt.want {
			t.Errorf("upstreamURL(%s, %s) = %s, want %s", tt.base, tt.target, got, tt.want)
		}
	}
}
