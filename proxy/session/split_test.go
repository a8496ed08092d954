package session

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

const splitSessionMap = `
servers:
  tfs: {url: "http://tf-serving.invalid:8501", kind: tfserving}
models:
  legacy:
    server: tfs
  hpt:
    split: {tfs: 50, default: 50}
    split_key: x-user-id
    model: half_plus_two
    labels: {stable: 2}
`

// splitEnv is env with a map whose TF Serving server "tfs" is never
// reached: forwarded exchanges are the adapters' to send.
func splitEnv(t *testing.T) (*env, *modelmap.Map) {
	t.Helper()
	e := newEnv(t, "triton", halfPlusTwo)
	m, err := modelmap.Parse([]byte(splitSessionMap))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://tf-serving.invalid:8501")
	// The bridge gives a tfserving server a backend too (its bearer
	// token); none is needed here.
	mp := &Mapping{Map: m, Backends: map[string]Backend{"tfs": e.be}, URLs: map[string]*url.URL{"tfs": u}}
	e.cfg.Mapping = func() *Mapping { return mp }
	return e, m
}

// keyFor returns a split key that the model's split sends to server.
func keyFor(t *testing.T, m *modelmap.Map, model, server string) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprintf("user-%d", i); m.Model(model).Split.Pick(k) == server {
			return k
		}
	}
	t.Fatalf("no key of 1000 reaches %s", server)
	return ""
}

func TestSplitRequestHeaders(t *testing.T) {
	e, m := splitEnv(t)
	toTFS, toV2 := keyFor(t, m, "hpt", "tfs"), keyFor(t, m, "hpt", modelmap.DefaultServer)
	for _, tc := range []struct {
		name, method, path string
		header             hdr
		verdict            Verdict
		v2path             string // :path set, "" for none
		server             string // x-tfsbridge-server set, "" for none
		upstream           bool   // UpstreamURL is set
	}{
		{name: "tfserving model: predict unchanged", method: "POST", path: "/v1/models/legacy:predict", verdict: PassThrough, server: "tfs", upstream: true},
		{name: "tfserving model: labels are TF Serving's", method: "POST", path: "/v1/models/legacy/labels/stable:predict", verdict: PassThrough, server: "tfs", upstream: true},
		{name: "tfserving model: status is TF Serving's own", method: "GET", path: "/v1/models/legacy", verdict: PassThrough, server: "tfs", upstream: true},
		{name: "tfserving model: metadata is TF Serving's own", method: "GET", path: "/v1/models/legacy/metadata", verdict: PassThrough, server: "tfs", upstream: true},
		{name: "tfserving model: a client's header is replaced", method: "POST", path: "/v1/models/legacy:predict", header: hdr{"x-tfsbridge-server": "default"},
			verdict: PassThrough, server: "tfs", upstream: true},
		{name: "split: key to tfserving, untranslated", method: "POST", path: "/v1/models/hpt/labels/stable:predict", header: hdr{"x-user-id": toTFS},
			verdict: PassThrough, server: "tfs", upstream: true},
		{name: "split: key to v2, translated and renamed", method: "POST", path: "/v1/models/hpt/labels/stable:predict", header: hdr{"x-user-id": toV2},
			verdict: Continue, v2path: "/v2/models/half_plus_two/versions/2/infer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = hdr{}
			}
			s := New(e.cfg)
			defer s.Close()
			a := s.RequestHeaders(context.Background(), tc.method, tc.path, h, false)
			if a.Verdict != tc.verdict {
				t.Fatalf("verdict %v (%d %s), want %v", a.Verdict, a.Status, a.Body, tc.verdict)
			}
			p, _ := a.Get(":path")
			srv, _ := a.Get(HeaderServer)
			if p != tc.v2path || srv != tc.server || a.ClearRouteCache != (tc.server != "") || (s.UpstreamURL() != nil) != tc.upstream {
				t.Errorf("path %q server %q clear %v upstream %v; want %q %q %v %v", p, srv, a.ClearRouteCache, s.UpstreamURL(), tc.v2path, tc.server, tc.server != "", tc.upstream)
			}
			if tc.verdict == PassThrough && s.AwaitingBody() {
				t.Error("a forwarded exchange awaits its body")
			}
		})
	}
	// Counted by the server each exchange was assigned: 2 keyed ones,
	// legacy (no split) not at all.
	for _, srv := range []string{"tfs", "default"} {
		if got := e.metrics.Value("tfsbridge_split_requests_total", "model", "hpt", "server", srv); got != 1 {
			t.Errorf("split_requests_total{hpt,%s} = %v, want 1", srv, got)
		}
	}
	if got := e.metrics.Value("tfsbridge_split_requests_total", "model", "legacy"); got != 0 {
		t.Errorf("legacy counted as split: %v", got)
	}
	// Only the translated exchange is tfsbridge's to count (abandoned at
	// Close, 499); the forwarded ones are the TF Serving server's.
	if got := e.metrics.Value("tfsbridge_requests_total"); got != 1 {
		t.Errorf("requests_total = %v, want 1: forwarded exchanges counted as answered", got)
	}
}

// TestSplitKeepsItsTarget: an exchange keeps the server it got at its
// request headers when the map is replaced before its body arrives.
func TestSplitKeepsItsTarget(t *testing.T) {
	e, m := splitEnv(t)
	toV2 := keyFor(t, m, "hpt", modelmap.DefaultServer)
	s := New(e.cfg)
	defer s.Close()
	a := s.RequestHeaders(context.Background(), "POST", "/v1/models/hpt:predict", hdr{"x-user-id": toV2}, false)
	if a.Verdict != Continue {
		t.Fatalf("headers: %v %s", a.Verdict, a.Body)
	}
	all, err := modelmap.Parse([]byte("servers:\n  tfs: {url: \"http://tf-serving.invalid:8501\", kind: tfserving}\nmodels:\n  hpt:\n    split: {tfs: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	mp := &Mapping{Map: all, Backends: map[string]Backend{"tfs": e.be}, URLs: e.cfg.Mapping().URLs}
	e.cfg.Mapping = func() *Mapping { return mp }
	a = s.bufferedRequest(context.Background(), []byte(`{"instances": [1.0]}`))
	if p, _ := a.Get(":path"); a.Verdict != Continue || p != "" || s.ServerName() != "default" {
		t.Errorf("after the reload: %v path %q server %s (%s)", a.Verdict, p, s.ServerName(), a.Body)
	}
	if s2 := New(e.cfg); s2.RequestHeaders(context.Background(), "POST", "/v1/models/hpt:predict", hdr{"x-user-id": toV2}, false).Verdict != PassThrough {
		t.Error("a new exchange does not follow the new weights")
	}
}
