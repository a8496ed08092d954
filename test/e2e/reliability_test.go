package e2e

import (
	"fmt"
	"net/http"
	"testing"
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
