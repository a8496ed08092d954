package extproc

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// TestThroughEnvoySim drives the processor through the Envoy stand-in in
// front of the mock v2 server, and checks the stand-in saw no protocol
// violation (wrong reply types, value instead of raw_value, stale
// content-length, ...).
func TestThroughEnvoySim(t *testing.T) {
	mock, err := mockv2.New(mockv2.Options{Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	v2srv := httptest.NewServer(mock)
	defer v2srv.Close()
	be, err := backend.New(backend.Config{BaseURL: v2srv.URL, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(NewProcessor(&session.Config{Backend: be}, Options{}), ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, lis, time.Second) }()

	env, err := envoysim.Start(envoysim.Config{ProcessorAddr: lis.Addr().String(), Upstream: v2srv.URL, AllowModeOverride: true,
		MessageTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"row", "POST", "/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`,
			200, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"},
		{"unknown model", "POST", "/v1/models/nope:predict", `{"instances": [1.0]}`,
			404, string(tfresponse.Error(nil, "Servable not found for request: Latest(nope)"))},
		{"empty body", "POST", "/v1/models/half_plus_two:predict", "",
			400, string(tfresponse.Error(nil, "JSON Parse error: The document is empty"))},
		// An answer over largeBody: its reply's body is the translator's
		// pooled parts, released once gRPC has written them (run with
		// -tags tfsbridge_poison, a release before the write shows here).
		{"large answer", "POST", "/v1/models/half_plus_two:predict",
			`{"instances": [` + strings.TrimSuffix(strings.Repeat("1.0, ", 40000), ", ") + `]}`,
			200, "{\n    \"predictions\": [" + strings.TrimSuffix(strings.Repeat("2.5, ", 40000), ", ") + "\n    ]\n}"},
		{"status", "GET", "/v1/models/half_plus_two", "", 200, ""},
		{"native v2 passes", "GET", "/v2/health/ready", "", 200, ""},
	}
	for _, tt := range tests {
		var body io.Reader = http.NoBody
		if tt.body != "" {
			body = strings.NewReader(tt.body)
		}
		req, _ := http.NewRequest(tt.method, env.URL()+tt.path, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || (tt.want != "" && string(got) != tt.want) {
			t.Errorf("%s: %d %q, want %d %q", tt.name, resp.StatusCode, got, tt.status, tt.want)
		}
	}
	for _, v := range env.Violations() {
		t.Errorf("envoysim violation: %s", v)
	}
}
