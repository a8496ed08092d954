package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/inflight"
)

// upstreamFailures is the series of tfsbridge_upstream_failures_total
// for the default server and reason.
func upstreamFailures(reason string) string {
	return fmt.Sprintf(`tfsbridge_upstream_failures_total{reason=%q,server="default"}`, reason)
}

// TestUpstreamFailuresSameEverywhere: a v2 server that resets the
// connection before answering gives TF's 503 on every transport (Envoy's
// router and the proxy alike), and every failed inference call — reset,
// or a 5xx of the server's own — is counted by server and reason.
func TestUpstreamFailuresSameEverywhere(t *testing.T) {
	s := newStack(t, stackConfig{})
	predict := "/v1/models/half_plus_two:predict"
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   expect
		reason string
	}{
		{"reset", map[string]string{hdrFaultStatus: faultReset}, fail(503, "The v2 inference server is unavailable"), "reset"},
		{"500", map[string]string{hdrFaultStatus: "500", hdrFaultType: "application/json", hdrFaultBody: `{"error":"CUDA out of memory"}`},
			fail(500, "CUDA out of memory"), "server_error"},
	} {
		for _, via := range transports {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				before := s.counter(t, upstreamFailures(tc.reason))
				checkResponse(t, s.do(t, via, request{path: predict, body: readmeBody, header: tc.header}), tc.want)
				if got := s.counter(t, upstreamFailures(tc.reason)) - before; got != 1 {
					t.Errorf("%s counted %v times, want 1", upstreamFailures(tc.reason), got)
				}
			})
		}
	}
	// Each failure's log line names where the exchange went.
	if n := strings.Count(s.logs.String(), "server=default v2_model=half_plus_two"); n != 2*len(transports) {
		t.Errorf("%d log lines name the server and v2 model, want %d:\n%s", n, 2*len(transports), s.logs.String())
	}
}

// TestClientServerHeaderRemoved: every copy of a client's
// x-tfsbridge-server, empty ones included, is removed before the request
// goes upstream, on both transports, for TF and pass-through requests.
func TestClientServerHeaderRemoved(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, path := range []string{"/v1/models/half_plus_two:predict", "/v2/models/half_plus_two/infer"} {
		for _, values := range [][]string{{"", "second"}, {"second", ""}, {""}, {"a", "b"}} {
			for _, via := range transports {
				t.Run(fmt.Sprintf("%s/%q/%s", path, values, via), func(t *testing.T) {
					body := readmeBody
					if path[1] == 'v' && path[2] == '2' {
						body = `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`
					}
					resp := s.do(t, via, request{path: path, body: body, repeated: http.Header{"X-Tfsbridge-Server": values}})
					if resp.status != 200 {
						t.Errorf("status %d %s, want 200", resp.status, resp.body)
					}
					if got := *s.upstream.serverHeaders.Load(); len(got) != 0 {
						t.Errorf("the v2 server received x-tfsbridge-server %q", got)
					}
				})
			}
		}
	}
}

// TestShutdownCutsSlowExchange: an exchange still running when the
// shutdown timeout expires is cut on purpose, counted by adapter and
// summed up in the "serving stopped" line, and Serve reports the cut.
// The proxy answers it TF's 503. With BUFFERED bodies tfsbridge has no
// reply slot while the request is at the v2 server (it may answer only a
// message Envoy sent), so Envoy answers; the client still gets an answer,
// never a hang.
func TestShutdownCutsSlowExchange(t *testing.T) {
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			s := newStack(t, stackConfig{MockDelay: time.Minute})
			s.cutExpected = true
			got := make(chan response, 1)
			go func() {
				resp, err := send(context.Background(), s.client, s.url(via), request{path: "/v1/models/slow:predict", body: `{"instances": [1.0]}`})
				if err != nil {
					resp = response{status: -1, body: []byte(err.Error())}
				}
				got <- resp
			}()
			// Generous: the request only has to reach the mock.
			if !waitFor(30*time.Second, func() bool { return s.upstream.inflight.Load() == 1 }) {
				t.Fatal("the slow request did not reach the v2 server")
			}
			s.stopBridge()
			// Generous deadlines: the cut comes drainTimeout (2s) after
			// the stop. Envoy's 500 comes when its side stream fails;
			// envoysim notices that only at the next phase, after its
			// route timeout (15s), whence the minute.
			select {
			case <-s.bridgeDone:
			case <-time.After(30 * time.Second):
				t.Fatal("Serve did not return after the shutdown timeout")
			}
			var r response
			select {
			case r = <-got:
			case <-time.After(60 * time.Second):
				t.Fatal("the cut request got no answer")
			}
			adapter := "extproc"
			switch via {
			case viaProxy:
				adapter = "http"
				checkResponse(t, r, fail(503, inflight.MsgShutdown))
			default:
				// Both body modes: the request is at the v2 server, where
				// Envoy awaits no reply from ext_proc (an
				// immediate_response would be spurious), so Envoy answers.
				// A full-duplex stream cut while its body still arrives
				// does answer TF's 503 (proxy/extproc TestShutdownCut).
				if r.status != http.StatusInternalServerError {
					t.Errorf("through Envoy: %d %s, want Envoy's 500", r.status, r.body)
				}
			}
			if !errors.Is(s.serveErr, bridge.ErrCut) {
				t.Errorf("Serve = %v, want ErrCut", s.serveErr)
			}
			if n := s.bridge.Metrics.Value("tfsbridge_shutdown_cut_exchanges_total", "adapter", adapter); n != 1 {
				t.Errorf("cut %s exchanges counted: %v, want 1", adapter, n)
			}
			if !strings.Contains(s.logs.String(), "serving stopped") || !strings.Contains(s.logs.String(), "cut=1") {
				t.Errorf("no 'serving stopped ... cut=1' line:\n%s", s.logs.String())
			}
		})
	}
}

// TestHostileTokenFile: a bearer token file that is a FIFO with no
// writer, or /dev/zero, never blocks or bloats a request for a model on
// that server: each transport answers at once with TF's 503, the problem
// is logged (naming the server) and counted.
func TestHostileTokenFile(t *testing.T) {
	for name, swap := range map[string]func(string) error{
		"fifo":     func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"dev-zero": func(p string) error { return os.Symlink("/dev/zero", p) },
	} {
		t.Run(name, func(t *testing.T) {
			s := newStack(t, stackConfig{ModelMap: testMap, SecondKind: mlserver})
			if err := os.Remove(s.second.token); err != nil {
				t.Fatal(err)
			}
			if err := swap(s.second.token); err != nil {
				t.Fatal(err)
			}
			for _, via := range transports {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // generous: it must not block at all
				r, err := send(ctx, s.client, s.url(via), request{path: "/v1/models/remote:predict", body: readmeBody})
				cancel()
				if err != nil {
					t.Fatalf("%s: %v (blocked?)", via, err)
				}
				checkResponse(t, r, fail(503, "The v2 inference server's bearer token is unavailable"))
			}
			if n := s.bridge.Metrics.Value("tfsbridge_file_reloads_total", "file", "bearer_token", "result", "failure"); n < 1 {
				t.Errorf("token file failures counted: %v", n)
			}
			if !strings.Contains(s.logs.String(), "bearer token file unusable") || !strings.Contains(s.logs.String(), "server=second") {
				t.Errorf("the token file's problem was not logged:\n%s", s.logs.String())
			}
		})
	}
}
