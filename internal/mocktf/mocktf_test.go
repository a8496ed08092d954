package mocktf

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
)

// TestServe: the TF face answers TF Serving's REST API as TF Serving
// would, for every kind of mock behind it, and stops when ctx ends.
func TestServe(t *testing.T) {
	for _, kind := range []string{"triton", "kserve", "mlserver", ""} {
		t.Run("kind="+kind, func(t *testing.T) {
			mk := kind
			if mk == "" {
				mk = "triton" // detected with GET /v2
			}
			mock, err := mockv2.New(mockv2.Options{Kind: mk})
			if err != nil {
				t.Fatal(err)
			}
			v2 := httptest.NewServer(mock)
			defer v2.Close()
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, lis, Options{V2URL: v2.URL, Kind: kind}) }()
			base := "http://" + lis.Addr().String()
			for _, tc := range []struct {
				method, path, body, want string
				status                   int
			}{
				{"POST", "/v1/models/half_plus_two:predict", `{"instances": [1.0, 2.0, 5.0]}`, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}", 200},
				{"POST", "/v1/models/nope:predict", `{"instances": [1.0]}`, "{\n    \"error\": \"Servable not found for request: Latest(nope)\"\n}", 404},
			} {
				req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || string(body) != tc.want {
					t.Errorf("%s: %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.status, tc.want)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve = %v, want nil once ctx is done", err)
			}
		})
	}
}
