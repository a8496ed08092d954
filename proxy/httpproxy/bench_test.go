package httpproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// memoryUpstream answers every inference call from memory with Triton's
// binary answer for half_plus_two: the proxy's own work, without a
// socket to the v2 server.
type memoryUpstream struct{ header string }

func (u memoryUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body := append([]byte(u.header), f32le(2.5, 3, 4.5)...)
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Inference-Header-Content-Length", strconv.Itoa(len(u.header)))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// BenchmarkProxySmallExchange is one small predict (TF Serving's README
// example) through the proxy's handler, signature cached, the v2 server
// answering from memory: the allocations and CPU the proxy itself spends
// per exchange (the benchmark's request and recorder included). Run it
// with -benchmem.
func BenchmarkProxySmallExchange(b *testing.B) {
	v2 := fakev2.New(b, "triton", halfPlusTwo)
	be, err := backend.New(backend.Config{BaseURL: v2.URL, Kind: "triton", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	log, err := observe.NewLogger(io.Discard, "info", "text")
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse(v2.URL)
	header := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	p, err := New(Config{Session: &session.Config{Backend: be, Metrics: observe.NewMetrics(), Logger: log},
		Upstream: u, Transport: memoryUpstream{header: header}})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	exchange := func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/models/half_plus_two:predict", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != 200 || w.Body.String() != predictions {
			b.Fatalf("answer %d %q", w.Code, w.Body)
		}
	}
	exchange() // the signature into the cache
	b.ReportAllocs()
	for b.Loop() {
		exchange()
	}
}

// BenchmarkProxyUpstream is one small predict through the proxy's
// handler to a v2 server on a loopback socket, by the direct client
// (direct.go) and by net/http's Transport, in the same run: what the
// direct client saves per exchange.
func BenchmarkProxyUpstream(b *testing.B) {
	v2 := fakev2.New(b, "triton", halfPlusTwo)
	v2.SetInfer(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		binaryAnswer(w)
	})
	be, err := backend.New(backend.Config{BaseURL: v2.URL, Kind: "triton", Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse(v2.URL)
	body := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	for _, tc := range []struct {
		name string
		tr   http.RoundTripper
	}{{"direct", nil}, {"transport", backend.NewTransport(time.Second)}} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := New(Config{Session: &session.Config{Backend: be, Metrics: observe.NewMetrics()},
				Upstream: u, Transport: tc.tr})
			if err != nil {
				b.Fatal(err)
			}
			exchange := func() {
				req := httptest.NewRequest(http.MethodPost, "/v1/models/half_plus_two:predict", bytes.NewReader(body))
				w := httptest.NewRecorder()
				p.ServeHTTP(w, req)
				if w.Code != 200 || w.Body.String() != predictions {
					b.Fatalf("answer %d %q", w.Code, w.Body)
				}
			}
			exchange()
			b.ReportAllocs()
			for b.Loop() {
				exchange()
			}
		})
	}
}
