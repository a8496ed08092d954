package robustness

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// faultyBackend is the session's backend with test faults: it panics for
// the models named "panic_sig" (signature lookup) and "panic_ready"
// (readiness), and holds the signature lookups of "slowmeta_held_*" models until
// release is closed, so that those exchanges are in flight while others
// panic.
type faultyBackend struct {
	session.Backend
	held    chan struct{} // one send per held lookup that started
	release chan struct{}
}

func (b *faultyBackend) Signature(ctx context.Context, r route.Route) (*tensor.Signature, error) {
	switch {
	case r.Model == "panic_sig":
		panic("injected: signature of " + r.Model)
	case strings.HasPrefix(r.Model, "slowmeta_held_"): // the hostile server infers these like "good"
		b.held <- struct{}{}
		<-b.release
	}
	return b.Backend.Signature(ctx, r)
}

func (b *faultyBackend) ModelReady(ctx context.Context, r route.Route) (bool, error) {
	if r.Model == "panic_ready" {
		var m map[string]int
		m["nil map"]++ //nolint:staticcheck // a genuine runtime error is the point
	}
	return b.Backend.ModelReady(ctx, r)
}

// panickyTransport panics inside the backend client's shared, single-flight
// metadata fetch for the model "panic_fetch": a helper goroutine, where an
// unrecovered panic would end the process.
type panickyTransport struct{ http.RoundTripper }

func (p panickyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v2/models/panic_fetch" {
		panic("injected: metadata fetch")
	}
	return p.RoundTripper.RoundTrip(r)
}

// logRecorder is a slog.Handler that keeps every record at Info and
// above, with the attributes of the logger it came through (request_id).
type logRecorder struct {
	attrs []slog.Attr
	log   *recordedLogs
}

type recordedLogs struct {
	mu      sync.Mutex
	records []map[string]string // attribute key → value, plus "level" and "msg"
}

func newLogRecorder() *logRecorder { return &logRecorder{log: &recordedLogs{}} }

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"level": r.Level.String(), "msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	h.log.records = append(h.log.records, m)
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{attrs: append(slices.Clip(h.attrs), attrs...), log: h.log}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the record with request_id id, nil if none.
func (h *logRecorder) find(id string) map[string]string {
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	for _, r := range h.log.records {
		if r["request_id"] == id {
			return r
		}
	}
	return nil
}

// TestPanicIsolated: a panic while handling one exchange — in the session's
// goroutine, in a readiness check, in the shared metadata fetch — answers
// that exchange with TF's 500, is logged at error level with its request id
// and stack, and is counted by adapter; exchanges in flight at the same
// time on the same server finish normally, and the servers keep serving.
func TestPanicIsolated(t *testing.T) {
	h := startHostile(t)
	fb := &faultyBackend{held: make(chan struct{}, 64), release: make(chan struct{})}
	logs := newLogRecorder()
	// Patient: the held exchanges wait while the panicking ones run, which
	// on a busy machine can take longer than the short default timeouts.
	s := newStack(t, patient(stackConfig{
		upstream:      h.URL(),
		logger:        slog.New(logs), // the default level, info
		wrapBackend:   func(b session.Backend) session.Backend { fb.Backend = b; return fb },
		wrapTransport: func(rt http.RoundTripper) http.RoundTripper { return panickyTransport{rt} },
	}))

	// Exchanges in flight on both transports while the panics happen.
	const heldPerTransport = 4
	type result struct {
		what string
		a    answer
	}
	results := make(chan result, len(transports)*heldPerTransport)
	for i := range heldPerTransport {
		for _, via := range transports {
			go func() {
				model := fmt.Sprintf("slowmeta_held_%s_%d", via, i)
				results <- result{model + " via " + via, s.post(via, "/v1/models/"+model+":predict", []byte(`{"instances":[1.0]}`))}
			}()
		}
	}
	for range len(transports) * heldPerTransport {
		select {
		case <-fb.held:
		case <-time.After(answerDeadline):
			t.Fatal("the held exchanges did not start")
		}
	}

	cases := []struct {
		name, method, path string
	}{
		{"signature", "POST", "/v1/models/panic_sig:predict"},
		{"readiness", "GET", "/v1/models/panic_ready"},
		{"shared fetch", "POST", "/v1/models/panic_fetch:predict"},
	}
	for _, c := range cases {
		for _, via := range transports {
			id := "panic-" + strings.ReplaceAll(c.name, " ", "-") + "-" + via
			var body []byte
			if c.method == "POST" {
				body = []byte(`{"instances":[1.0]}`)
			}
			a := s.send(via, c.method, c.path, body, map[string]string{"X-Request-Id": id})
			what := c.name + " via " + via
			checkAnswer(t, what, a, 500, "Internal error in tfsbridge while handling this request (request id "+id+")")
			if line := logs.find(id); line == nil {
				t.Errorf("%s: no log line for request id %s", what, id)
			} else if line["level"] != "ERROR" || !strings.Contains(line["stack"], "robustness.") ||
				!strings.Contains(line["panic"], "injected") && !strings.Contains(line["panic"], "nil map") {
				t.Errorf("%s: log line %v, want level ERROR, the panic and its stack", what, line)
			}
		}
	}

	close(fb.release)
	for range len(transports) * heldPerTransport {
		r := <-results
		checkAnswer(t, r.what, r.a, 200, "")
	}
	// Both Envoy modes go through the ext_proc adapter.
	for adapter, n := range map[string]int{"http": 1, "extproc": 2} {
		if got := s.metrics.Value("tfsbridge_panics_total", "adapter", adapter); got != float64(n*len(cases)) {
			t.Errorf("tfsbridge_panics_total{adapter=%q} = %v, want %d", adapter, got, n*len(cases))
		}
	}
	// Both servers still serve, and a panic's model is not poisoned.
	for _, via := range transports {
		checkAnswer(t, "after the panics via "+via, s.post(via, "/v1/models/good:predict", []byte(`{"instances":[1.0]}`)), 200, "")
	}
}

// TestInvalidUTF8ModelName is the panic that issue 13 found: a model name
// that is not UTF-8 (%FF%FE), confirmed by a v2 server that serves
// metadata for any name, became a Prometheus label value, and Prometheus
// panics on those. Predict and status must get their ordinary answers.
func TestInvalidUTF8ModelName(t *testing.T) {
	h := startHostile(t)
	s := newStack(t, patient(stackConfig{upstream: h.URL()}))
	for _, via := range transports {
		// The hostile server has no infer answer for this name: 404 (the
		// JSON decoder reads the name's bytes as U+FFFD).
		checkAnswer(t, "predict via "+via, s.post(via, "/v1/models/%FF%FE:predict", []byte(`{"instances":[1.0]}`)),
			404, "Servable not found for request: Latest(\ufffd\ufffd)")
		a := s.send(via, "GET", "/v1/models/%FF%FE", nil, nil)
		if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"state": "AVAILABLE"`) {
			t.Errorf("status via %s: %d %q %v, want 200 AVAILABLE", via, a.status, a.body, a.err)
		}
	}
	if got := s.metrics.Value("tfsbridge_panics_total"); got != 0 {
		t.Errorf("%v panics", got)
	}
	if got := s.metrics.Value("tfsbridge_requests_total", "model", "\ufffd", "verb", "status"); got != float64(len(transports)) {
		t.Errorf("status requests labelled model=U+FFFD: %v, want %d", got, len(transports))
	}
}
