package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
)

// mapServer is the second mock v2 server of a model map stack; it counts
// the inference calls it gets, so a test can tell which server answered.
type mapServer struct {
	srv    *httptest.Server
	infers atomic.Int64
	// token is the bearer token file the map names for this server;
	// badAuth counts calls that did not carry its token.
	token   string
	badAuth atomic.Int64
}

// startSecond starts the second mock when the stack asks for one.
func (s *stack) startSecond(t testing.TB) {
	if s.cfg.SecondKind == "" {
		return
	}
	mock, err := mockv2.New(mockv2.Options{Kind: s.cfg.SecondKind})
	if err != nil {
		t.Fatal(err)
	}
	ms := &mapServer{token: filepath.Join(t.TempDir(), "token")}
	if err := os.WriteFile(ms.token, []byte("e2e-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/infer") {
			ms.infers.Add(1)
		}
		if r.Header.Get("Authorization") != "Bearer e2e-token" {
			ms.badAuth.Add(1)
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(ms.srv.Close)
	s.second = ms
}

// expandMap fills the second server's URL into a map document.
func (s *stack) expandMap(doc string) string {
	if s.second != nil {
		doc = strings.ReplaceAll(doc, "{{second}}", s.second.srv.URL)
		doc = strings.ReplaceAll(doc, "{{token}}", s.second.token)
	}
	if s.tfs != nil {
		doc = strings.ReplaceAll(doc, "{{tfserving}}", s.tfs.srv.URL)
	}
	return doc
}

// mapOptions writes the stack's model map and points the bridge at it,
// polled fast so reload tests need not wait seconds.
func (s *stack) mapOptions(t testing.TB, o *bridge.Options) {
	if s.cfg.ModelMap == "" {
		return
	}
	s.mapFile = filepath.Join(t.TempDir(), "map.yaml")
	s.writeMap(t, s.cfg.ModelMap)
	o.ModelMapFile = s.mapFile
	o.ModelMapPollInterval = 20 * time.Millisecond
}

// writeMap replaces the map file as a ConfigMap update does: the new
// content is written aside and renamed over the old file.
func (s *stack) writeMap(t testing.TB, doc string) {
	t.Helper()
	tmp := s.mapFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.expandMap(doc)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.mapFile); err != nil {
		t.Fatal(err)
	}
}

// linkMap replaces the map file by a symlink to target (a FIFO, a
// device), atomically.
func (s *stack) linkMap(t testing.TB, target string) {
	t.Helper()
	tmp := s.mapFile + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.mapFile); err != nil {
		t.Fatal(err)
	}
}

// headerRoutes is the Envoy route of the second server, as in the
// two-server example (deploy/model-map/envoy.yaml, there for server
// "onnx"): x-tfsbridge-server: second.
func (s *stack) headerRoutes() []envoysim.HeaderRoute {
	var routes []envoysim.HeaderRoute
	if s.second != nil {
		routes = append(routes, envoysim.HeaderRoute{Header: "x-tfsbridge-server", Value: "second", Upstream: s.second.srv.URL})
	}
	if s.tfs != nil {
		routes = append(routes, envoysim.HeaderRoute{Header: "x-tfsbridge-server", Value: "tfs", Upstream: s.tfs.srv.URL})
	}
	return routes
}

// testMap exercises every part of the map against the mock's models.
const testMap = `
servers:
  second: {url: "{{second}}", kind: mlserver, bearer_token_file: "{{token}}"}
models:
  hpt:                            # labels, and a signature on another v2 model
    model: half_plus_two
    labels: {stable: 1, canary: 7}
    signatures:
      times_two: {model: half_times_two}
  mo:                             # tensor renames both ways
    model: multi_out
    inputs: {pair: x}
    outputs: {total: sum, best: argmax}
  opaque:                         # a model that publishes no tensors
    model: opaque_half_plus_two
    inputs: {x: input-0}
    metadata:
      inputs:  [{name: input-0, datatype: FP32, shape: [-1]}]
      outputs: [{name: y, datatype: FP32, shape: [-1]}]
  remote:                         # a model on the second server
    server: second
    model: half_plus_two
    labels: {stable: 1}
`

// renamed applies the map's output renames of "mo" to an unmapped answer.
func renamed(body string) string {
	return strings.NewReplacer(`"sum"`, `"total"`, `"argmax"`, `"best"`).Replace(body)
}

func TestModelMap(t *testing.T) {
	for _, kind := range []string{triton, kserve, mlserver} {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, stackConfig{Kind: kind, ModelMap: testMap, SecondKind: mlserver})
			for _, via := range transports {
				t.Run(via, func(t *testing.T) { checkModelMap(t, s, kind, via) })
			}
		})
	}
}

func checkModelMap(t *testing.T, s *stack, kind, via string) {
	hpt := `{"instances": [1.0, 2.0, 5.0]}`
	want := `{
    "predictions": [2.5, 3.0, 4.5
    ]
}`
	// The unmapped answers, to compare the mapped ones with.
	moDirect := s.do(t, via, request{path: "/v1/models/multi_out:predict", body: `{"instances": [{"x": [1.0, 2.0]}, {"x": [4.0, 3.0]}]}`})
	htDirect := s.do(t, via, request{path: "/v1/models/half_times_two:predict", body: `{"instances": [[1.0, 2.0, 3.0, 4.0]]}`})
	if moDirect.status != 200 || htDirect.status != 200 {
		t.Fatalf("unmapped models: %d %s / %d %s", moDirect.status, moDirect.body, htDirect.status, htDirect.body)
	}
	notFound := func(model string) func(r response) bool {
		return func(r response) bool { return r.status == 404 && strings.Contains(string(r.body), model) }
	}
	cases := []struct {
		name string
		rq   request
		ok   func(r response) bool
		skip bool
	}{
		{name: "label", rq: request{path: "/v1/models/hpt/labels/stable:predict", body: hpt}, skip: kind == kserve,
			ok: func(r response) bool { return r.status == 200 && string(r.body) == want }},
		{name: "label to a missing version names the TF model", rq: request{path: "/v1/models/hpt/labels/canary:predict", body: hpt},
			ok: func(r response) bool {
				return r.status == 404 && strings.Contains(string(r.body), "Specific(hpt, 7)") || kind == kserve && r.status >= 400
			}},
		{name: "unknown label", rq: request{path: "/v1/models/hpt/labels/nope:predict", body: hpt},
			ok: func(r response) bool {
				return r.status == 400 && string(r.body) == tfError("Unrecognized servable version label: nope")
			}},
		{name: "unknown label metadata", rq: request{path: "/v1/models/hpt/labels/nope/metadata"},
			ok: func(r response) bool {
				return r.status == 400 && string(r.body) == tfError("Unrecognized servable version label: nope")
			}},
		{name: "status by label ignores it, as TF", rq: request{path: "/v1/models/hpt/labels/nope"},
			ok: func(r response) bool {
				return r.status == 200 && strings.Contains(string(r.body), `"state": "AVAILABLE"`)
			}},
		{name: "default signature by name", rq: request{path: "/v1/models/hpt:predict", body: `{"signature_name": "serving_default", "instances": [1.0, 2.0, 5.0]}`},
			ok: func(r response) bool { return r.status == 200 && string(r.body) == want }},
		{name: "signature on another v2 model", rq: request{path: "/v1/models/hpt:predict", body: `{"signature_name": "times_two", "instances": [[1.0, 2.0, 3.0, 4.0]]}`},
			ok: func(r response) bool { return r.status == 200 && string(r.body) == string(htDirect.body) }},
		{name: "unknown signature", rq: request{path: "/v1/models/hpt:predict", body: `{"signature_name": "predict_images", "instances": [1.0]}`},
			ok: func(r response) bool {
				return r.status == 400 && string(r.body) == tfError(`Serving signature name: "predict_images" not found in signature def`)
			}},
		{name: "renames both ways", rq: request{path: "/v1/models/mo:predict", body: `{"instances": [{"pair": [1.0, 2.0]}, {"pair": [4.0, 3.0]}]}`},
			ok: func(r response) bool { return r.status == 200 && string(r.body) == renamed(string(moDirect.body)) }},
		{name: "renamed input unknown under its v2 name", rq: request{path: "/v1/models/mo:predict", body: `{"inputs": {"x": [[1.0, 2.0]]}}`},
			ok: func(r response) bool { return r.status == 400 && !strings.Contains(string(r.body), `"sum"`) }},
		{name: "metadata in TF names", rq: request{path: "/v1/models/mo/metadata"},
			ok: func(r response) bool {
				b := string(r.body)
				return r.status == 200 && strings.Contains(b, `"pair": {`) && strings.Contains(b, `"total": {`) &&
					strings.Contains(b, `"best": {`) && !strings.Contains(b, `"sum"`) && strings.Contains(b, `"name": "mo"`)
			}},
		{name: "metadata lists each signature", rq: request{path: "/v1/models/hpt/metadata"},
			ok: func(r response) bool {
				b := string(r.body)
				return r.status == 200 && strings.Contains(b, `"serving_default": {`) && strings.Contains(b, `"times_two": {`)
			}},
		{name: "explicit metadata", rq: request{path: "/v1/models/opaque:predict", body: hpt},
			ok: func(r response) bool { return r.status == 200 && string(r.body) == want }},
		{name: "explicit metadata answers metadata", rq: request{path: "/v1/models/opaque/metadata"},
			ok: func(r response) bool {
				return r.status == 200 && strings.Contains(string(r.body), `"x": {`) && strings.Contains(string(r.body), `"y": {`)
			}},
		{name: "a client cannot pick the server", rq: request{path: "/v1/models/hpt:predict", body: hpt, header: map[string]string{"x-tfsbridge-server": "second"}},
			ok: func(r response) bool { return r.status == 200 && string(r.body) == want }},
		{name: "a client cannot steer a native v2 call either", rq: request{method: "POST", path: "/v2/models/half_plus_two/infer",
			body: `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.0]}]}`, header: map[string]string{"x-tfsbridge-server": "second"}},
			ok: func(r response) bool { return r.status == 200 && strings.Contains(string(r.body), "2.5") }},
		{name: "unmapped models pass unchanged", rq: request{path: "/v1/models/nope:predict", body: hpt}, ok: notFound("Latest(nope)")},
	}
	before := s.second.infers.Load()
	for _, c := range cases {
		if c.skip {
			continue
		}
		r := s.do(t, via, c.rq)
		if !c.ok(r) {
			t.Errorf("%s: %s %s → %d %s", c.name, c.rq.path, c.rq.body, r.status, r.body)
		}
	}
	if got := s.second.infers.Load(); got != before {
		t.Errorf("the second server got %d inference calls meant for the default one", got-before)
	}
	// A model on the second server goes there, label included.
	r := s.do(t, via, request{path: "/v1/models/remote/labels/stable:predict", body: hpt})
	if r.status != 200 || string(r.body) != want || s.second.infers.Load() != before+1 {
		t.Errorf("remote: %d %s; second server calls %d, want %d", r.status, r.body, s.second.infers.Load(), before+1)
	}
	if r := s.do(t, via, request{path: "/v1/models/remote/metadata"}); r.status != 200 || !strings.Contains(string(r.body), `"name": "remote"`) {
		t.Errorf("remote metadata: %d %s", r.status, r.body)
	}
	if n := s.second.badAuth.Load(); n != 0 {
		t.Errorf("%d calls reached the second server without its bearer token", n)
	}
	s.checkEnvoy(t)
}

// TestModelMapReload swaps the map good → bad → good while requests run:
// none fails, the bad file keeps the old map and is counted.
// mapMetric returns the value of a model map series: a counter or gauge,
// the one whose only label has value label ("" for an unlabelled
// series), -1 when there is none.
func (s *stack) mapMetric(t testing.TB, name, label string) float64 {
	t.Helper()
	mfs, err := s.bridge.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 && label == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestModelMapReload(t *testing.T) {
	const first = "models:\n  alias: {model: half_plus_two}\n"
	const second = "models:\n  alias: {model: slow}\n  other: {model: half_plus_two}\n"
	s := newStack(t, stackConfig{ModelMap: first, MockDelay: time.Millisecond})
	reloads := func(result string) float64 { return s.mapMetric(t, "tfsbridge_model_map_reloads_total", result) }
	if reloads("success") != 0 || reloads("failure") != 0 {
		t.Fatalf("reloads at start: %v %v", reloads("success"), reloads("failure"))
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failed atomic.Int64
	var sent atomic.Int64
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			via := transports[i%2]
			for ctx.Err() == nil {
				r, err := send(context.Background(), s.client, s.url(via), request{path: "/v1/models/alias:predict", body: `{"instances": [1.0]}`})
				sent.Add(1)
				if err != nil || r.status != 200 {
					failed.Add(1)
					t.Errorf("during reload via %s: %v %d %s", via, err, r.status, r.body)
					return
				}
			}
		}()
	}
	stop := func() {
		cancel()
		wg.Wait()
	}
	defer stop() // before the stack's cleanup, also when a wait below fails
	wait := func(cond func() bool, what string) {
		t.Helper()
		if !waitFor(5*time.Second, cond) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	status := func(path string) int { return s.do(t, viaProxy, request{path: path}).status }

	wait(func() bool { return sent.Load() > 20 }, "traffic")
	s.writeMap(t, "models:\n  alias: {modle: slow}\n")
	wait(func() bool { return reloads("failure") == 1 }, "the bad map to be refused")
	if got := status("/v1/models/other"); got != 404 {
		t.Errorf("after a bad map, other = %d, want 404 (old map kept)", got)
	}
	s.writeMap(t, second)
	wait(func() bool { return reloads("success") == 1 }, "the good map")
	if got := status("/v1/models/other"); got != 200 {
		t.Errorf("after the new map, other = %d, want 200", got)
	}
	wait(func() bool { return sent.Load() > 60 }, "more traffic")
	stop()
	if failed.Load() != 0 {
		t.Errorf("%d requests failed during reloads", failed.Load())
	}
	if !strings.Contains(s.logs.String(), "model map reload failed") || !strings.Contains(s.logs.String(), `line 2: models.alias: unknown key \"modle\"`) {
		t.Errorf("the bad map was not logged with its line: %s", s.logs.String())
	}
}

// TestModelMapFailing: a map file that breaks (a FIFO, a device, bad YAML)
// keeps the previous map in force and keeps tfsbridge_model_map_reload_failing
// at 1 for as long as it stays broken, however many polls pass (an alert
// on it stays firing; the failure counter moves once per problem). A good
// file clears it and tfsbridge_model_map_info names the new map. The
// bridge still shuts down promptly with its map path a FIFO.
func TestModelMapFailing(t *testing.T) {
	const first = "models:\n  alias: {model: half_plus_two}\n"
	const second = "models:\n  alias: {model: half_plus_two}\n  other: {model: half_plus_two}\n"
	s := newStack(t, stackConfig{ModelMap: first})
	status := func() modelmap.Status {
		st, ok := s.bridge.ModelMapStatus()
		if !ok {
			t.Fatal("no model map")
		}
		return st
	}
	sha := func(doc string) string {
		sum := sha256.Sum256([]byte(doc))
		return hex.EncodeToString(sum[:])
	}
	failing := func() float64 { return s.mapMetric(t, "tfsbridge_model_map_reload_failing", "") }
	failures := func() float64 { return s.mapMetric(t, "tfsbridge_model_map_reloads_total", "failure") }
	wait := func(what string, cond func() bool) {
		t.Helper()
		// Generous: the watcher polls every 20 ms, but the machine may be busy.
		if !waitFor(20*time.Second, cond) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	serves := func(model string) bool {
		return s.do(t, viaProxy, request{path: "/v1/models/" + model + ":predict", body: `{"instances": [1.0]}`}).status == 200
	}
	if failing() != 0 || s.mapMetric(t, "tfsbridge_model_map_info", sha(first)) != 1 {
		t.Fatalf("at start: failing %v, info for the first map %v", failing(), s.mapMetric(t, "tfsbridge_model_map_info", sha(first)))
	}
	loadedAt := s.mapMetric(t, "tfsbridge_model_map_last_reload_success_timestamp_seconds", "")

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	breakages := []struct {
		name  string
		apply func()
	}{
		{"a FIFO", func() { s.linkMap(t, fifo) }},
		{"/dev/zero", func() { s.linkMap(t, "/dev/zero") }},
		{"bad YAML", func() { s.writeMap(t, "models:\n  alias: {modle: slow}\n") }},
	}
	for i, b := range breakages {
		b.apply()
		wait(b.name+" to be refused", func() bool { return failures() == float64(i+1) })
		// Two more polls of the same broken file: still failing, counted once.
		polls := status().Polls
		wait("two more polls", func() bool { return status().Polls >= polls+2 })
		if failing() != 1 || failures() != float64(i+1) || !serves("alias") || serves("other") {
			t.Errorf("%s, two polls later: failing %v, failures %v; want 1, %d and the first map in force", b.name, failing(), failures(), i+1)
		}
		if s.mapMetric(t, "tfsbridge_model_map_info", sha(first)) != 1 || status().SHA256 != sha(first) {
			t.Errorf("%s: the map in force is no longer named as the first one: %+v", b.name, status())
		}
	}
	s.writeMap(t, second)
	wait("the good map", func() bool { return failing() == 0 })
	if !serves("other") || s.mapMetric(t, "tfsbridge_model_map_info", sha(second)) != 1 || s.mapMetric(t, "tfsbridge_model_map_info", sha(first)) != -1 {
		t.Errorf("after the repair: other served %v, info %v / old %v", serves("other"),
			s.mapMetric(t, "tfsbridge_model_map_info", sha(second)), s.mapMetric(t, "tfsbridge_model_map_info", sha(first)))
	}
	if at := s.mapMetric(t, "tfsbridge_model_map_last_reload_success_timestamp_seconds", ""); at <= loadedAt {
		t.Errorf("last success time %v, not after the first load %v", at, loadedAt)
	}

	// A FIFO in the map's place does not hold up a shutdown.
	s.linkMap(t, fifo)
	wait("the FIFO to be refused again", func() bool { return failing() == 1 })
	s.stopBridge()
	select {
	case <-s.bridgeDone:
	case <-time.After(20 * time.Second): // generous; a blocked watcher never returns
		t.Fatal("the bridge did not stop with its model map path a FIFO")
	}
}
