package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
)

// setup is one v2 server the table runs against: the kind the mock
// imitates and how tfsbridge learns it (--backend-kind given, or "auto"
// detection with GET /v2).
type setup struct {
	name, kind, backendKind string
}

var setups = []setup{
	{"triton", triton, triton},
	{"triton-auto", triton, "auto"},
	{"kserve", kserve, kserve},
	{"kserve-auto", kserve, "auto"},
	{"mlserver", mlserver, mlserver},
	{"mlserver-auto", mlserver, "auto"},
}

// TestTable runs the shared table over both transports against every
// kind of v2 server.
func TestTable(t *testing.T) {
	cases := tableCases()
	checkCaseNames(t, cases)
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			s := newStack(t, stackConfig{Kind: su.kind, BackendKind: su.backendKind})
			for _, via := range transports {
				t.Run(via, func(t *testing.T) {
					for _, c := range cases {
						t.Run(c.name, func(t *testing.T) { s.runCase(t, via, c) })
					}
				})
			}
		})
	}
}

// checkCaseNames keeps subtest names unique, so -run can pick one case.
func checkCaseNames(t *testing.T, cases []tcase) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("duplicate case name %q", c.name)
		}
		seen[c.name] = true
		for k := range c.per {
			if !validPerKey(k) {
				t.Fatalf("case %q: unknown per key %q", c.name, k)
			}
		}
	}
}

func validPerKey(k string) bool {
	kinds := []string{triton, kserve, mlserver}
	if slices.Contains(kinds, k) || slices.Contains(transports, k) {
		return true
	}
	for _, kind := range kinds {
		for _, via := range transports {
			if k == kind+"/"+via {
				return true
			}
		}
	}
	return false
}

var requestSeq atomic.Int64

// runCase sends one case through via and checks the answer, then the
// Envoy stand-in's verdict.
func (s *stack) runCase(t *testing.T, via string, c tcase) {
	t.Helper()
	defer s.checkEnvoy(t)
	want := c.expectFor(s.kind, via)
	if want.skip != "" {
		t.Skip(want.skip)
	}
	s.skipExternal(t, c.req)
	rq := c.req
	var id string
	if c.passThrough {
		// The v2 server's own answer is the expectation; the request id
		// finds the exchange in the stand-in's journal.
		d := s.direct(t, rq)
		want = expect{status: d.status, body: string(d.body), ctype: d.contentType()}
		if want.ctype == "" {
			want.ctype = noCType
		}
		id = fmt.Sprintf("e2e-pass-%d", requestSeq.Add(1))
		rq.header = maps.Clone(rq.header)
		if rq.header == nil {
			rq.header = map[string]string{}
		}
		rq.header[hdrRequestID] = id
	}
	got := s.do(t, via, rq)
	checkResponse(t, got, want)
	if c.passThrough && via == viaExtproc {
		s.checkPassThroughTrace(t, id)
	}
}

// checkResponse compares status, body bytes and Content-Type.
func checkResponse(t testing.TB, got response, want expect) {
	t.Helper()
	if got.status != want.status {
		t.Errorf("status %d, want %d (body %q)", got.status, want.status, got.body)
	}
	if !bytes.Equal(got.body, []byte(want.body)) {
		t.Errorf("body\n got: %q\nwant: %q", got.body, want.body)
	}
	ct := want.ctype
	switch ct {
	case "":
		ct = "application/json"
	case noCType:
		if v, ok := got.header["Content-Type"]; ok {
			t.Errorf("Content-Type %q, want none", v)
		}
		return
	}
	if got.contentType() != ct {
		t.Errorf("Content-Type %q, want %q", got.contentType(), ct)
	}
	if n := len(got.header.Values("Content-Type")); n > 1 {
		t.Errorf("%d Content-Type headers, want 1", n)
	}
}

// checkPassThroughTrace checks that Envoy talked to the processor about
// the request headers only: the reply's mode_override switched the body
// phases (and the response headers) off.
func (s *stack) checkPassThroughTrace(t testing.TB, id string) {
	t.Helper()
	for _, x := range slices.Backward(s.env.Exchanges()) {
		if x.RequestID != id {
			continue
		}
		want := []string{"> request_headers", "< request_headers"}
		if !slices.Equal(x.Trace, want) {
			t.Errorf("ext_proc trace %q, want %q (bodies NONE via mode_override)", x.Trace, want)
		}
		if x.Details != "via_upstream" {
			t.Errorf("response details %q, want via_upstream", x.Details)
		}
		return
	}
	t.Errorf("no exchange with x-request-id %s in envoysim's journal", id)
}
