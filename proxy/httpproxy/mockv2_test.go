package httpproxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// TestAgainstMockV2 runs TF Serving calls through the proxy to the mock
// v2 server, imitating each of the three servers.
func TestAgainstMockV2(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"row", "POST", "/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`,
			200, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"},
		{"columnar", "POST", "/v1/models/half_plus_two:predict", `{"inputs": [1.0, 2.0]}`,
			200, "{\n    \"outputs\": [\n        2.5,\n        3.0\n    ]\n}"},
		{"unknown model", "POST", "/v1/models/nope:predict", `{"instances": [1.0]}`,
			404, string(tfresponse.Error(nil, "Servable not found for request: Latest(nope)"))},
		{"syntax error first", "POST", "/v1/models/nope:predict", `{"instances": [1.0]`,
			400, ""},
		{"status", "GET", "/v1/models/half_plus_two", "", 200, ""},
		{"metadata", "GET", "/v1/models/half_plus_two/metadata", "", 200, ""},
		{"status unknown", "GET", "/v1/models/nope", "", 404,
			string(tfresponse.Error(nil, "Could not find any versions of model nope"))},
		{"native v2 passes", "GET", "/v2/health/ready", "", 200, ""},
	}
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		t.Run(kind, func(t *testing.T) {
			mock, err := mockv2.New(mockv2.Options{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			v2srv := httptest.NewServer(mock)
			defer v2srv.Close()
			be, err := backend.New(backend.Config{BaseURL: v2srv.URL, Timeout: 2 * time.Second}) // kind detected
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(v2srv.URL)
			p, err := New(Config{Session: &session.Config{Backend: be}, Upstream: u})
			if err != nil {
				t.Fatal(err)
			}
			proxy := httptest.NewServer(p)
			defer proxy.Close()
			for _, tt := range tests {
				req, _ := http.NewRequest(tt.method, proxy.URL+tt.path, strings.NewReader(tt.body))
				if tt.body == "" {
					req.Body = http.NoBody
					req.ContentLength = 0
				}
				resp, body := do(t, req)
				if resp.StatusCode != tt.status || (tt.want != "" && body != tt.want) {
					t.Errorf("%s: %d %q, want %d %q", tt.name, resp.StatusCode, body, tt.status, tt.want)
				}
			}
		})
	}
}
