package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/translate/route"
)

// External servers: the real-interop workflow (.github/workflows/interop.yaml)
// runs TestTable and TestConformanceExamples against real servers with
//
//	TFSBRIDGE_E2E_V2=<kind>=<url>          a real v2 server (triton, kserve or mlserver) replaces the
//	                                       mock: stacks of that kind use it, stacks of other kinds skip
//	TFSBRIDGE_E2E_EXTPROC_ADDR=<host:port> where each stack's ext_proc server listens (one stack at
//	                                       a time), so a real Envoy's ext_proc cluster can reach it
//	TFSBRIDGE_E2E_ENVOY=<url>              a real Envoy, BUFFERED, in front of that ext_proc server and
//	                                       the v2 server: the extproc transport goes through it
//	TFSBRIDGE_E2E_ENVOY_FD=<url>           the same in FULL_DUPLEX_STREAMED mode (extproc-fd)
//
// The Envoy stand-ins still run (and must see no violation), but carry no
// traffic a real Envoy replaces. A case whose model the real server does not
// serve, or that needs the mock's fault injection, is skipped, not failed:
// the interop models are a subset of the mock's.
// Unset, everything runs in process as before.
const (
	envExternalV2      = "TFSBRIDGE_E2E_V2"
	envExternalExtproc = "TFSBRIDGE_E2E_EXTPROC_ADDR"
	envExternalEnvoy   = "TFSBRIDGE_E2E_ENVOY"
	envExternalEnvoyFD = "TFSBRIDGE_E2E_ENVOY_FD"
)

// externalV2 returns the real v2 server's kind and URL, "" when unset.
func externalV2(t testing.TB) (kind, url string) {
	t.Helper()
	v := os.Getenv(envExternalV2)
	if v == "" {
		return "", ""
	}
	kind, url, ok := strings.Cut(v, "=")
	if !ok || (kind != triton && kind != kserve && kind != mlserver) || !strings.HasPrefix(url, "http") {
		t.Fatalf("%s=%q: want <triton|kserve|mlserver>=<http://host:port>", envExternalV2, v)
	}
	return kind, url
}

// useExternal points a stack at the real v2 server, if one is set: a
// stack of another kind, or one that needs the mock's fault injection or
// a second server, cannot run against it and is skipped.
func (s *stack) useExternal(t testing.TB) bool {
	t.Helper()
	kind, url := externalV2(t)
	if url == "" {
		return false
	}
	if kind != s.kind || s.cfg.BackendURL != "" || s.cfg.SecondKind != "" || s.cfg.MockDelay != 0 {
		t.Skipf("%s targets a real %s server; this stack needs a %s mock", envExternalV2, kind, s.kind)
	}
	s.v2URL = url
	return true
}

// extprocListenAddr is where a stack's ext_proc server listens.
func extprocListenAddr() string {
	if a := os.Getenv(envExternalExtproc); a != "" {
		return a
	}
	return "127.0.0.1:0"
}

// externalEnvoyURL returns the real Envoy that carries a transport, "" for
// the stand-in.
func externalEnvoyURL(via string) string {
	switch via {
	case viaExtproc:
		return os.Getenv(envExternalEnvoy)
	case viaExtprocFD:
		return os.Getenv(envExternalEnvoyFD)
	}
	return ""
}

// skipExternal skips, against a real v2 server, a case that needs the
// mock's fault injection, or whose model the mock serves and the real
// server does not (GET /v2/models/<m>/ready is not 200 there). Cases about
// models that exist nowhere still run. Without a real server it does
// nothing.
func (s *stack) skipExternal(t *testing.T, rq request) {
	t.Helper()
	if _, url := externalV2(t); url == "" {
		return
	}
	if rq.header[hdrFaultStatus] != "" {
		t.Skip("needs the mock's fault injection")
	}
	r, err := route.Parse(http.MethodPost, rq.path)
	if err != nil || r.Model == "" {
		return
	}
	if s.ready(s.v2URL, r.Model) {
		return
	}
	mock, err := mockv2.New(mockv2.Options{Kind: s.kind})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mock.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v2/models/"+r.Model+"/ready", nil))
	if rec.Code == http.StatusOK {
		t.Skipf("the real %s server does not serve %q", s.kind, r.Model)
	}
}

// ready reports whether the v2 server at base has model ready, asking
// once per stack and model.
func (s *stack) ready(base, model string) bool {
	s.mu.Lock()
	if s.servedModels == nil {
		s.servedModels = map[string]bool{}
	}
	ok, seen := s.servedModels[model]
	s.mu.Unlock()
	if seen {
		return ok
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/v2/models/"+model+"/ready", nil)
	if err == nil {
		var resp *http.Response
		if resp, err = s.client.Do(req); err == nil {
			ok = resp.StatusCode == http.StatusOK
			_ = resp.Body.Close()
		}
	}
	s.mu.Lock()
	s.servedModels[model] = ok
	s.mu.Unlock()
	return ok
}

// servedCache is the part of a stack served keeps (under stack.mu).
type servedCache struct {
	servedModels map[string]bool
}
