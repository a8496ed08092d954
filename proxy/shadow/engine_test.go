package shadow

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfcompare"
)

// settle bounds waits for a copy's result: it comes in milliseconds, but
// a busy 2-core machine may keep a goroutine waiting for seconds.
const settle = 30 * time.Second

const (
	predictPath = "/v1/models/half_plus_two:predict"
	predictBody = `{"instances": [1.0, 2.0, 5.0]}`
	// primaryOK is the primary's answer to predictBody (y = x/2 + 2).
	primaryOK = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
)

// harness is an engine, its metrics and a model entry with a shadow
// block for half_plus_two.
type harness struct {
	t       testing.TB
	e       *Engine
	m       *observe.Metrics
	entry   *modelmap.Model
	logFile string
}

func newHarness(t testing.TB, o Options, maxInflight int) *harness {
	t.Helper()
	h := &harness{t: t, m: observe.NewMetrics(), logFile: filepath.Join(t.TempDir(), "mismatches.jsonl")}
	doc := "models:\n  half_plus_two:\n    shadow: {server: default, sample: 1, max_inflight: " + strconv.Itoa(maxInflight) +
		", tolerance: {abs: 1e-5, rel: 1e-4}, mismatch_log: " + h.logFile + "}\n"
	mm, err := modelmap.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h.entry = mm.Model("half_plus_two")
	o.Metrics = h.m
	h.e = New(o)
	t.Cleanup(h.e.Close)
	return h
}

// v2Target is a mock v2 server (its half_plus_two perturbed by delta)
// behind handler wrap, with its backend client.
func v2Target(t testing.TB, delta float64, wrap func(http.Handler) http.Handler) Target {
	t.Helper()
	opt := mockv2.Options{}
	if delta != 0 {
		opt.Perturb = map[string]float64{"half_plus_two": delta}
	}
	mock, err := mockv2.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = mock
	if wrap != nil {
		h = wrap(mock)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	be, err := backend.New(backend.Config{BaseURL: srv.URL, Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	return Target{Name: "onnx", Kind: "triton", URL: u, Backend: be}
}

func (h *harness) copyOf(target Target, path, body string, primary tfcompare.Answer) *Copy {
	h.t.Helper()
	r, err := route.Parse(http.MethodPost, pathOnly(path))
	if err != nil {
		h.t.Fatal(err)
	}
	c := &Copy{RequestID: "rid", Path: path, Route: r, Entry: h.entry, Target: target, Request: []byte(body), Primary: primary}
	c.Reserved = int64(len(c.Request) + len(c.Primary.Body))
	if !h.e.Reserve(c.Reserved) {
		h.t.Fatal("the copy does not fit the cap")
	}
	return c
}

func (h *harness) count(result string) int {
	return int(h.m.Value("tfsbridge_shadow_comparisons_total", "model", "half_plus_two", "result", result))
}

// wait waits until n copies have a result and every byte is released.
func (h *harness) wait(n int) {
	h.t.Helper()
	got := 0
	if !poll.Until(settle, func() bool {
		got = h.count(observe.ShadowMatch) + h.count(observe.ShadowMismatch) + h.count(observe.ShadowError) + h.count(observe.ShadowDropped)
		return got >= n && h.e.Held() == 0
	}) {
		h.t.Fatalf("%d results (want %d), %d bytes held", got, n, h.e.Held())
	}
}

func (h *harness) expect(want map[string]int) {
	h.t.Helper()
	for _, r := range []string{observe.ShadowMatch, observe.ShadowMismatch, observe.ShadowError, observe.ShadowDropped} {
		if got := h.count(r); got != want[r] {
			h.t.Errorf("%s = %d, want %d", r, got, want[r])
		}
	}
}

func ok(body string) tfcompare.Answer { return tfcompare.Answer{Status: 200, Body: []byte(body)} }

func TestEngineV2(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delta   float64
		path    string
		body    string
		primary tfcompare.Answer
		result  string
	}{
		{"faithful", 0, predictPath, predictBody, ok(primaryOK), observe.ShadowMatch},
		{"within tolerance", 1e-7, predictPath, predictBody, ok(primaryOK), observe.ShadowMatch},
		{"perturbed", 1e-3, predictPath, predictBody, ok(primaryOK), observe.ShadowMismatch},
		{"the same client error", 0, predictPath, `{"instances": [1.0,`, tfcompare.Answer{Status: 400, Body: []byte(`{"error": "JSON Parse error"}`)}, observe.ShadowMatch},
		{"unknown on the shadow only", 0, "nope", predictBody, ok(primaryOK), observe.ShadowMismatch},
		{"not found on both", 0, "nope", predictBody, tfcompare.Answer{Status: 404, Body: []byte(`{"error": "Servable not found for request: Latest(half_plus_two)"}`)}, observe.ShadowMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{}, 8)
			if tc.path == "nope" {
				// The map sends the model to a v2 model the shadow lacks.
				entry, sig := *h.entry, *h.entry.Default
				sig.Model, entry.Default, h.entry, tc.path = "nope", &sig, &entry, predictPath
			}
			h.e.Submit(h.copyOf(v2Target(t, tc.delta, nil), tc.path, tc.body, tc.primary))
			h.wait(1)
			h.expect(map[string]int{tc.result: 1})
		})
	}
}

func TestEngineMismatchLog(t *testing.T) {
	h := newHarness(t, Options{}, 8)
	h.e.Submit(h.copyOf(v2Target(t, 1e-3, nil), predictPath, predictBody, ok(primaryOK)))
	h.wait(1)
	data, err := os.ReadFile(h.logFile)
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Model, Verb, Server string
		RequestID           string `json:"request_id"`
		Worst               struct {
			Output          string
			Index           []int64
			Primary, Shadow float64
			RelError        float64 `json:"rel_error"`
		}
		Request json.RawMessage
		Primary struct {
			Status int
			Body   json.RawMessage
		}
		Shadow struct{ Status int }
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &line); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	w := line.Worst
	if line.Model != "half_plus_two" || line.Verb != "predict" || line.Server != "onnx" || line.RequestID != "rid" ||
		w.Output != "predictions" || len(w.Index) != 1 || w.Index[0] != 0 || w.Primary != 2.5 || w.Shadow != 2.501 ||
		line.Primary.Status != 200 || line.Shadow.Status != 200 {
		t.Errorf("mismatch line = %s", data)
	}
	var req, prim any
	if json.Unmarshal(line.Request, &req) != nil || json.Unmarshal(line.Primary.Body, &prim) != nil {
		t.Errorf("request and primary answer are not embedded as JSON: %s", data)
	}
}

func TestEngineTFServing(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		result       string
	}{
		{"same answer", `{"predictions": [2.5, 3.0, 4.5]}`, observe.ShadowMatch},
		{"another answer", `{"predictions": [2.5, 3.0, 4.6]}`, observe.ShadowMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotPath, gotBody string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				gotPath, gotBody = r.URL.Path, string(b)
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			h := newHarness(t, Options{}, 8)
			h.e.Submit(h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath+"?x=1", predictBody, ok(primaryOK)))
			h.wait(1)
			h.expect(map[string]int{tc.result: 1})
			if gotPath != predictPath || gotBody != predictBody {
				t.Errorf("TF Serving got %s %q, want the request as it came", gotPath, gotBody)
			}
		})
	}
}

func TestEngineShadowError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u, _ := url.Parse(srv.URL)
	srv.Close() // nothing listens there now
	h := newHarness(t, Options{}, 8)
	h.e.Submit(h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK)))
	h.wait(1)
	h.expect(map[string]int{observe.ShadowError: 1})
}

// A stalled shadow holds max_inflight slots; the copies beyond are
// dropped at once, never queued.
func TestEngineMaxInflight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	target := v2Target(t, 0, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/infer") {
				entered <- struct{}{}
				<-release
			}
			next.ServeHTTP(w, r)
		})
	})
	h := newHarness(t, Options{}, 2)
	for range 5 {
		h.e.Submit(h.copyOf(target, predictPath, predictBody, ok(primaryOK)))
	}
	// Submit counts a drop before it returns.
	h.expect(map[string]int{observe.ShadowDropped: 3})
	<-entered
	<-entered
	close(release)
	h.wait(5)
	h.expect(map[string]int{observe.ShadowDropped: 3, observe.ShadowMatch: 2})
}

// The memory cap: a copy whose bytes do not fit is not sent; nor is one
// whose shadow answer would not fit.
func TestEngineMemoryCap(t *testing.T) {
	h := newHarness(t, Options{MaxBytes: 100}, 8)
	if h.e.Reserve(101) {
		t.Error("101 bytes fit a cap of 100")
	}
	target := v2Target(t, 0, nil)
	h.e.Submit(h.copyOf(target, predictPath, predictBody, ok(primaryOK))) // 30 + 46 bytes; the answer does not fit
	h.wait(1)
	h.expect(map[string]int{observe.ShadowDropped: 1})
}

func TestMismatchLogLimits(t *testing.T) {
	rec := &record{Model: "m", Request: body(`{"instances": [1]}`)}
	line, _ := json.Marshal(rec)
	dir := t.TempDir()
	for _, tc := range []struct {
		name      string
		maxBytes  int64
		perSecond float64
		writes    int
		lines     int
	}{
		{"rate: a burst of perSecond lines", 1 << 20, 2, 5, 2},
		{"size cap", int64(len(line)+1)*3 + 5, 100, 5, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			l := newMismatchLog(path, tc.maxBytes, tc.perSecond, nil)
			l.log = discardLogger()
			for range tc.writes {
				l.write(rec)
			}
			l.close()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Count(data, []byte("\n")); got != tc.lines {
				t.Errorf("%d lines, want %d", got, tc.lines)
			}
		})
	}
	t.Run("a FIFO is refused without blocking", func(t *testing.T) {
		path := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skip(err)
		}
		l := newMismatchLog(path, 1<<20, 10, discardLogger())
		l.write(rec) // returns: nothing reads the FIFO
		if l.f != nil {
			t.Error("a FIFO was opened")
		}
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// --shadow-timeout: a copy whose shadow does not answer in time fails
// (shadow_error), and the worker's next copy gets a fresh deadline of its
// own (the deadline's context is reused only until a copy times out).
func TestEngineTimeout(t *testing.T) {
	var infers atomic.Int32
	stop := make(chan struct{})
	target := v2Target(t, 0, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/infer") && infers.Add(1) == 1 {
				// The first copy stalls until the engine gives up (the
				// body read, net/http sees the connection close) or the
				// test ends.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-stop:
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for its handlers
	h := newHarness(t, Options{Timeout: 300 * time.Millisecond}, 1)
	h.e.Submit(h.copyOf(target, predictPath, predictBody, ok(primaryOK)))
	h.wait(1)
	h.expect(map[string]int{observe.ShadowError: 1})
	for i := range 3 {
		h.e.Submit(h.copyOf(target, predictPath, predictBody, ok(primaryOK)))
		h.wait(2 + i)
	}
	h.expect(map[string]int{observe.ShadowError: 1, observe.ShadowMatch: 3})
}

// A v2 request over joinMax goes out in its parts, not joined; its
// answer is compared as any other.
func TestEngineLargeRequest(t *testing.T) {
	const n = 20000 // 20000 float32 instances: an 80 KB binary or larger JSON request
	req := "{\"instances\": [" + strings.TrimSuffix(strings.Repeat("1.0, ", n), ", ") + "]}"
	primary := "{\"predictions\": [" + strings.TrimSuffix(strings.Repeat("2.5, ", n), ", ") + "]}"
	h := newHarness(t, Options{}, 1)
	h.e.Submit(h.copyOf(v2Target(t, 0, nil), predictPath, req, ok(primary)))
	h.wait(1)
	h.expect(map[string]int{observe.ShadowMatch: 1})
}

// A server URL's user info is sent as basic auth, as http.Client would
// (the engine calls the transport itself); a redirect is the answer.
func TestEngineURLUserAndRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pw, _ := r.BasicAuth(); user != "u" || pw != "p w" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, primaryOK)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		user   *url.Userinfo
		result string
	}{
		{url.UserPassword("u", "p w"), observe.ShadowMatch},
		{nil, observe.ShadowMismatch}, // a 302 against the primary's 200, not followed
	} {
		u, _ := url.Parse(srv.URL)
		u.User = tc.user
		h := newHarness(t, Options{}, 8)
		h.e.Submit(h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK)))
		h.wait(1)
		h.expect(map[string]int{tc.result: 1})
	}
}
