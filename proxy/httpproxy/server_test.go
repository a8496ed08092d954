package httpproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// startTimed serves a Proxy with the given read timeout through
// NewServer, as tfsbridge proxy does.
func startTimed(t *testing.T, v2 *fakev2.Server, read time.Duration) string {
	t.Helper()
	be, err := backend.New(backend.Config{BaseURL: v2.URL, Kind: "triton", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(v2.URL)
	p, err := New(Config{
		Session:     &session.Config{Backend: be, Metrics: observe.NewMetrics()},
		Upstream:    u,
		ReadTimeout: read,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = p.NewServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Regression: the proxy had no read timeout, so a client that sent its
// headers and part of the body it announced held the connection forever.
func TestSlowBodyTimesOut(t *testing.T) {
	v2 := fakev2.New(t, "triton", halfPlusTwo)
	addr := startTimed(t, v2, 300*time.Millisecond)
	for _, tt := range []struct {
		name, target string
		status       int
		body         string
	}{
		{"translated", "/v1/models/half_plus_two:predict", 400,
			string(tfresponse.Error(nil, "Timed out reading the request body"))},
		{"pass-through", "/v2/models/half_plus_two/infer", 408, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			_, _ = io.WriteString(conn, "POST "+tt.target+" HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"instances\":")
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || (tt.body != "" && string(b) != tt.body) {
				t.Errorf("answer %d %q, want %d %q", resp.StatusCode, b, tt.status, tt.body)
			}
			// The body would never come: only the deadline answers. The
			// bound catches a deadline that never fires, with room for a
			// busy machine's late timers.
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("answered after %v", d)
			}
		})
	}
}

// The read deadline must end with the body: an exchange whose upstream
// call outlasts it is not cut.
func TestReadTimeoutSparesSlowUpstream(t *testing.T) {
	v2 := fakev2.New(t, "triton", halfPlusTwo)
	v2.SetInfer(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		// the behaviour under test: an upstream slower than the 1 s read
		// deadline (a late answer is only more so on a busy machine).
		time.Sleep(1500 * time.Millisecond)
		binaryAnswer(w)
	})
	// A read deadline that even a busy machine's client meets with its
	// small request (200 ms left little room for a descheduled client).
	addr := startTimed(t, v2, time.Second)
	resp, err := http.Post("http://"+addr+"/v1/models/half_plus_two:predict", "application/json", strings.NewReader(`{"instances": [1.0, 2.0, 5.0]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != predictions {
		t.Errorf("answer %d %q, want 200 %q", resp.StatusCode, b, predictions)
	}
}
