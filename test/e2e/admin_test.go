package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/buildinfo"
)

// TestMetrics makes a few requests through each transport and reads the
// documented series back from /metrics.
func TestMetrics(t *testing.T) {
	adapter := map[string]string{viaExtproc: "extproc", viaExtprocFD: "extproc", viaProxy: "http"}
	bi := buildinfo.Get()
	for _, via := range transports {
		t.Run(via, func(t *testing.T) {
			s := newStack(t, stackConfig{})
			unknown := `{"instances": [1.0]}`
			checkResponse(t, s.do(t, via, request{path: "/v1/models/half_plus_two:predict", body: readmeBody}), ok(readmeResponse))
			checkResponse(t, s.do(t, via, request{path: "/v1/models/half_plus_two:predict", body: readmeBody}), ok(readmeResponse))
			checkResponse(t, s.do(t, via, request{path: "/v1/models/nope:predict", body: unknown}),
				fail(404, "Servable not found for request: Latest(nope)"))
			checkResponse(t, s.do(t, via, request{path: "/v1/models/half_plus_two"}), ok(status1("1")))
			checkResponse(t, s.do(t, via, request{path: "/v1/models/half_plus_two:PREDICT", body: readmeBody}),
				fail(400, "Malformed request: POST /v1/models/half_plus_two:PREDICT"))
			if r := s.do(t, via, request{path: "/v2/health/ready"}); r.status != 200 {
				t.Errorf("pass-through: %d", r.status)
			}
			// Streams end a moment after their last reply.
			if !waitFor(settleTimeout, func() bool { return s.inflightStreams(t) == 0 }) {
				t.Errorf("tfsbridge_inflight_streams %v after all requests ended", s.inflightStreams(t))
			}

			m := s.scrape(t)
			want := map[string]float64{
				`tfsbridge_requests_total{code="200",model="half_plus_two",verb="predict"}`: 2,
				// An unconfirmed model name never becomes a label value.
				`tfsbridge_requests_total{code="404",model="_unknown",verb="predict"}`:     1,
				`tfsbridge_requests_total{code="200",model="half_plus_two",verb="status"}`: 1,
				// A malformed URL has no model.
				`tfsbridge_requests_total{code="400",model="",verb="invalid"}`: 1,
				`tfsbridge_passthrough_total`:                                  1,

				// Every request body translation is timed, the failed one too.
				`tfsbridge_translation_duration_seconds_count{direction="request"}`:  3,
				`tfsbridge_translation_duration_seconds_count{direction="response"}`: 2,

				// Every predict body is measured, the failed one too.
				`tfsbridge_body_size_bytes_count{stage="tf_request"}`:  3,
				`tfsbridge_body_size_bytes_sum{stage="tf_request"}`:    float64(2*len(readmeBody) + len(unknown)),
				`tfsbridge_body_size_bytes_count{stage="v2_request"}`:  2,
				`tfsbridge_body_size_bytes_count{stage="v2_response"}`: 2,
				`tfsbridge_body_size_bytes_count{stage="tf_response"}`: 2,
				`tfsbridge_body_size_bytes_sum{stage="tf_response"}`:   float64(2 * len(readmeResponse)),

				`tfsbridge_inflight_streams{adapter="` + adapter[via] + `"}`:        0,
				`tfsbridge_backend_errors_total{kind="not_found",server="default"}`: 1,

				// Every answered TF request is timed, by verb and code.
				`tfsbridge_request_duration_seconds_count{code="200",verb="predict"}`: 2,
				`tfsbridge_request_duration_seconds_count{code="404",verb="predict"}`: 1,
				`tfsbridge_request_duration_seconds_count{code="200",verb="status"}`:  1,
				`tfsbridge_request_duration_seconds_count{code="400",verb="invalid"}`: 1,
				// Two metadata fetches (half_plus_two, nope), Triton's config
				// for the one that exists.
				`tfsbridge_backend_request_duration_seconds_count{call="metadata",server="default"}`: 2,
				`tfsbridge_backend_request_duration_seconds_count{call="config",server="default"}`:   1,
				// go test binaries carry no module version or VCS stamp.
				`tfsbridge_build_info{go_version="` + bi.GoVersion + `",revision="` + bi.Revision + `",version="` + bi.Version + `"}`: 1,
			}
			for series, v := range want {
				got, present := m[series]
				if !present {
					t.Errorf("%s missing from /metrics", series)
				} else if got != v {
					t.Errorf("%s = %v, want %v", series, got, v)
				}
			}
			// The half_plus_two signature is fetched once, then reused;
			// "nope" is a miss (and its failure is cached briefly).
			hits, misses := m[`tfsbridge_metadata_cache_lookups_total{result="hit"}`], m[`tfsbridge_metadata_cache_lookups_total{result="miss"}`]
			if misses != 2 || hits < 2 {
				t.Errorf("metadata cache: %v hits, %v misses; want ≥ 2 hits and 2 misses", hits, misses)
			}
			// Translation takes some time, and less than a second here.
			for _, dir := range []string{"request", "response"} {
				sum := m[`tfsbridge_translation_duration_seconds_sum{direction="`+dir+`"}`]
				if sum <= 0 || sum > 1 {
					t.Errorf("translation %s seconds sum %v, want in (0, 1]", dir, sum)
				}
			}
			// v2 binary bodies of 3 floats are smaller than TF's JSON.
			if v2, tf := m[`tfsbridge_body_size_bytes_sum{stage="v2_request"}`], m[`tfsbridge_body_size_bytes_sum{stage="tf_request"}`]; v2 <= 0 {
				t.Errorf("v2 request bytes %v (TF %v)", v2, tf)
			}
			for _, series := range []string{"go_goroutines", "process_resident_memory_bytes"} {
				if m[series] <= 0 {
					t.Errorf("%s = %v, want > 0", series, m[series])
				}
			}
		})
	}
}

// TestHealthEndpoints checks /healthz and /readyz while everything runs.
func TestHealthEndpoints(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, tt := range []struct{ path, body string }{
		{"/healthz", "ok\n"},
		{"/readyz", "ready\n"},
	} {
		resp, err := send(context.Background(), s.client, s.adminURL, request{path: tt.path})
		if err != nil {
			t.Fatal(err)
		}
		checkResponse(t, resp, expect{status: 200, body: tt.body, ctype: "text/plain; charset=utf-8"})
	}
	resp, err := send(context.Background(), s.client, s.adminURL, request{path: "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.contentType(); resp.status != 200 || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics: %d %q", resp.status, ct)
	}
}
