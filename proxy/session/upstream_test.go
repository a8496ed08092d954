package session

import (
	"context"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// TestUpstreamFailureCounted: an inference call that got no usable answer
// — Envoy's local replies on the response path, or the v2 server's own
// 5xx — is counted by server and reason; a 4xx is the client's and is
// not.
func TestUpstreamFailureCounted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		reason string // "" counts nothing
	}{
		{"envoy refused", 503, "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused", observe.UpstreamConnect},
		{"envoy no healthy upstream", 503, "no healthy upstream", observe.UpstreamConnect},
		{"envoy reset", 503, "upstream connect error or disconnect/reset before headers. reset reason: connection termination", observe.UpstreamReset},
		{"envoy protocol error", 503, "upstream connect error or disconnect/reset before headers. reset reason: protocol error", observe.UpstreamReset},
		{"envoy route timeout", 504, "upstream request timeout", observe.UpstreamTimeout},
		{"server 500", 500, `{"error":"CUDA out of memory"}`, observe.UpstreamServerError},
		{"server 503", 503, `{"error":"Server not ready"}`, observe.UpstreamServerError},
		{"client 400", 400, `{"error":"bad input"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			s := predictSession(t, e, `{"instances": [1.0]}`)
			ctx := context.Background()
			s.ResponseHeaders(ctx, tc.status, hdr{}, false)
			if a := s.bufferedResponse(ctx, []byte(tc.body)); a.Verdict != Respond || a.Status != tc.status {
				t.Errorf("answer %v %d %s", a.Verdict, a.Status, a.Body)
			}
			for _, r := range observe.UpstreamReasons {
				want := 0.0
				if r == tc.reason {
					want = 1
				}
				if got := e.metrics.Value("tfsbridge_upstream_failures_total", "server", "default", "reason", r); got != want {
					t.Errorf("%s counted %v, want %v", r, got, want)
				}
			}
		})
	}
}
