package session

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

const sessionMap = `
servers:
  remote: {url: "http://remote.invalid:8000", kind: triton, grpc: "remote.invalid:8001"}
models:
  hpt:
    model: half_plus_two
    labels: {stable: 2, canary: 10}
    inputs: {value: x}
    outputs: {result: y}
    signatures:
      other: {model: other_model, inputs: {}, outputs: {}}
  far:
    server: remote
    model: half_plus_two
`

// mapEnv is env with a model map; server "remote" is a second fake v2
// server whose backend carries a bearer token.
func mapEnv(t *testing.T) (*env, *fakev2.Server) {
	t.Helper()
	other := slashModel
	other.Name, other.Versions = "other_model", []string{"1", "2", "10"}
	e := newEnv(t, "triton", halfPlusTwo, other)
	m, err := modelmap.Parse([]byte(sessionMap))
	if err != nil {
		t.Fatal(err)
	}
	remote := fakev2.New(t, "triton", halfPlusTwo)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rbe, err := backend.New(backend.Config{BaseURL: remote.URL, Kind: "triton", Timeout: 2 * time.Second, BearerTokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(remote.URL)
	mp := &Mapping{Map: m, Backends: map[string]Backend{"remote": rbe}, URLs: map[string]*url.URL{"remote": u}}
	e.cfg.Mapping = func() *Mapping { return mp }
	return e, remote
}

func TestModelMapRequestHeaders(t *testing.T) {
	e, remote := mapEnv(t)
	for _, tc := range []struct {
		name, method, path string
		header             hdr
		verdict            Verdict
		v2path             string // :path set for the upstream
		server             string // x-tfsbridge-server set
		removesServer      bool
		clearRoute         bool
		auth               string
		status             int
		body               string // substring of a Respond body
	}{
		{name: "label to version", method: "POST", path: "/v1/models/hpt/labels/stable:predict", verdict: Continue,
			v2path: "/v2/models/half_plus_two/versions/2/infer"},
		{name: "renamed model", method: "POST", path: "/v1/models/hpt:predict", verdict: Continue, v2path: "/v2/models/half_plus_two/infer"},
		{name: "unmapped model", method: "POST", path: "/v1/models/half_plus_two:predict", verdict: Continue, v2path: "/v2/models/half_plus_two/infer"},
		{name: "a client's server header is removed", method: "POST", path: "/v1/models/hpt:predict", header: hdr{"x-tfsbridge-server": "remote"},
			verdict: Continue, v2path: "/v2/models/half_plus_two/infer", removesServer: true, clearRoute: true},
		{name: "model on another server", method: "POST", path: "/v1/models/far:predict", header: hdr{"x-tfsbridge-server": "x"}, verdict: Continue,
			v2path: "/v2/models/half_plus_two/infer", server: "remote", clearRoute: true, auth: "Bearer s3cret"},
		{name: "status ignores labels", method: "GET", path: "/v1/models/hpt/labels/nope", verdict: Respond, status: 200, body: `"version": "10"`},
		{name: "metadata by label", method: "GET", path: "/v1/models/hpt/labels/canary/metadata", verdict: Respond, status: 200, body: `"version": "10"`},
		{name: "metadata in TF names, every signature", method: "GET", path: "/v1/models/hpt/metadata", verdict: Respond, status: 200, body: `"other": {`},
		{name: "metadata unknown label", method: "GET", path: "/v1/models/hpt/labels/nope/metadata", verdict: Respond, status: 400,
			body: "Unrecognized servable version label: nope"},
		{name: "metadata from another server", method: "GET", path: "/v1/models/far/metadata", verdict: Respond, status: 200, body: `"name": "far"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = hdr{}
			}
			s := New(e.cfg)
			a := s.RequestHeaders(context.Background(), tc.method, tc.path, h, false)
			if a.Verdict != tc.verdict {
				t.Fatalf("verdict %v (%d %s), want %v", a.Verdict, a.Status, a.Body, tc.verdict)
			}
			if tc.verdict == Respond {
				if a.Status != tc.status || !strings.Contains(string(a.Body), tc.body) {
					t.Errorf("respond %d %s, want %d with %q", a.Status, a.Body, tc.status, tc.body)
				}
				return
			}
			p, _ := a.Get(":path")
			srv, _ := a.Get(HeaderServer)
			auth, _ := a.Get("authorization")
			removes := false
			for _, k := range a.Remove {
				removes = removes || k == HeaderServer
			}
			if p != tc.v2path || srv != tc.server || removes != tc.removesServer || a.ClearRouteCache != tc.clearRoute || auth != tc.auth {
				t.Errorf("path %q server %q removes %v clear %v auth %q; want %q %q %v %v %q",
					p, srv, removes, a.ClearRouteCache, auth, tc.v2path, tc.server, tc.removesServer, tc.clearRoute, tc.auth)
			}
			if got := s.UpstreamURL(); (got != nil) != (tc.server != "") {
				t.Errorf("UpstreamURL = %v", got)
			}
		})
	}
	if remote.Hits("/v2/models/half_plus_two") == 0 || e.srv.Hits("/v2/models/far") != 0 {
		t.Error("the remote model's metadata was not fetched from its own server")
	}
}

func TestModelMapSignatures(t *testing.T) {
	e, _ := mapEnv(t)
	for _, tc := range []struct {
		name, path, body string
		status           int
		v2path           string // the :path of the body action, "" when unchanged
		want             string // substring of an error body, or of the v2 request body
	}{
		{name: "renamed input", path: "/v1/models/hpt:predict", body: `{"inputs": {"value": [1.0]}}`, want: `"name":"x"`},
		{name: "v2 name unknown to TF clients", path: "/v1/models/hpt:predict", body: `{"inputs": {"x": [1.0]}}`, status: 400},
		{name: "signature on another v2 model", path: "/v1/models/hpt:predict", body: `{"signature_name": "other", "inputs": {"x": [1.0]}}`,
			v2path: "/v2/models/other_model/infer", want: `"name":"x"`},
		{name: "unknown signature", path: "/v1/models/hpt:predict", body: `{"signature_name": "nope", "inputs": {"value": [1.0]}}`, status: 400,
			want: `Serving signature name: \"nope\" not found in signature def`},
		{name: "unknown signature on classify", path: "/v1/models/hpt:classify", body: `{"signature_name": "nope", "examples": [{"x": 1}]}`, status: 400,
			want: `No signature was found with the name: nope`},
		{name: "unknown signature on regress", path: "/v1/models/hpt:regress", body: `{"signature_name": "nope", "examples": [{"x": 1}]}`, status: 400,
			want: `No signature was found with the name: nope`},
		{name: "unknown label before the signature", path: "/v1/models/hpt/labels/nope:predict", body: `{"signature_name": "other", "inputs": {"x": [1.0]}}`,
			status: 400, want: "Unrecognized servable version label: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(e.cfg)
			a := s.RequestHeaders(context.Background(), "POST", tc.path, hdr{}, false)
			if a.Verdict != Continue {
				t.Fatalf("headers: %v %s", a.Verdict, a.Body)
			}
			a = s.bufferedRequest(context.Background(), []byte(tc.body))
			if tc.status != 0 {
				if a.Verdict != Respond || a.Status != tc.status || !strings.Contains(string(a.Body), tc.want) {
					t.Errorf("got %v %d %s, want %d with %q", a.Verdict, a.Status, a.Body, tc.status, tc.want)
				}
				return
			}
			p, changed := a.Get(":path")
			if a.Verdict != Continue || p != tc.v2path || changed != (tc.v2path != "") || !strings.Contains(string(a.Body), tc.want) {
				t.Errorf("got %v path %q body %s; want path %q and %q", a.Verdict, p, a.Body, tc.v2path, tc.want)
			}
		})
	}
}
