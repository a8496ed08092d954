package observe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestModelLabel(t *testing.T) {
	m := NewMetrics()
	tests := []struct {
		model     string
		confirmed bool
		want      string
	}{
		{"", true, ""},
		{"probe", false, ModelUnknown},
		{"resnet", true, "resnet"},
		{"resnet", true, "resnet"},
		// Regression: /v1/models/%FF%FE:predict made Prometheus panic on
		// the label value, killing the ext_proc server.
		{"\xff\xfe", true, "\ufffd"}, // a run of bad bytes is one U+FFFD
		{"caf\xc3", true, "caf\ufffd"},
		{"café", true, "café"},
	}
	for _, tt := range tests {
		got := m.ModelLabel(tt.model, tt.confirmed)
		if got != tt.want {
			t.Errorf("ModelLabel(%q, %v) = %q, want %q", tt.model, tt.confirmed, got, tt.want)
		}
		m.Request("predict", got, 200) // must not panic
	}
	for i := range MaxModelLabels * 2 {
		m.ModelLabel("m"+strconv.Itoa(i), true)
	}
	if got := m.ModelLabel("one-more", true); got != ModelOther {
		t.Errorf("past the cap: %q, want %q", got, ModelOther)
	}
	if got := m.ModelLabel("resnet", true); got != "resnet" {
		t.Errorf("a model seen before the cap: %q, want resnet", got)
	}
	// Regression: a permissive v2 server confirms any name, and 1 MiB
	// names were kept as labels (pinning their request lines).
	if long := strings.Repeat("n", MaxModelLabelLen+1); NewMetrics().ModelLabel(long, true) != ModelOther {
		t.Errorf("a %d-byte name is a label value, want %q", len(long), ModelOther)
	}
	line := "/v1/models/" + strings.Repeat("m", MaxModelLabelLen) + ":predict"
	name := line[len("/v1/models/") : len(line)-len(":predict")]
	if got := NewMetrics().ModelLabel(name, true); got != name || unsafe.StringData(got) == unsafe.StringData(name) {
		t.Errorf("label %q shares the request line's memory", got)
	}
	// The panic counters exist, at 0, before the first panic.
	fams, err := NewMetrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		if f.GetName() == "tfsbridge_panics_total" {
			series = len(f.GetMetric())
		}
	}
	if series != len(Adapters) {
		t.Errorf("tfsbridge_panics_total has %d series, want one per adapter", series)
	}
	var nilM *Metrics
	if got := nilM.ModelLabel("x", true); got != "x" {
		t.Errorf("nil metrics: %q", got)
	}
	nilM.Request("predict", "x", 200) // must not panic
	nilM.StreamStarted("http")()
}

func TestRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, tt := range []struct {
		header string
		keep   bool
	}{
		{"abc-123", true},
		{"", false},
		{"has space", false},
		{"new\nline", false},
		{`quote"`, false},
		{strings.Repeat("a", 129), false},
	} {
		got := RequestID(tt.header)
		if tt.keep && got != tt.header {
			t.Errorf("RequestID(%q) = %q, want it kept", tt.header, got)
		}
		if !tt.keep && !uuid.MatchString(got) {
			t.Errorf("RequestID(%q) = %q, want a generated UUID", tt.header, got)
		}
	}
	if a, b := NewRequestID(), NewRequestID(); a == b {
		t.Error("two generated ids are equal")
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown"`) {
		t.Errorf("json logger at warn wrote %q", out)
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := NewLogger(io.Discard, bad[0], bad[1]); err == nil {
			t.Errorf("NewLogger(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

func TestAdminHandler(t *testing.T) {
	m := NewMetrics()
	m.Request("predict", "half_plus_two", 200)
	var readyErr error
	srv := httptest.NewServer(AdminHandler(m, func(context.Context) error { return readyErr }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 ||
		!strings.Contains(body, `tfsbridge_requests_total{code="200",model="half_plus_two",verb="predict"} 1`) {
		t.Errorf("/metrics = %d, missing the request counter:\n%s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz = %d while ready", code)
	}
	readyErr = errors.New("backend down")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "backend down") {
		t.Errorf("/readyz = %d %q while not ready", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("/nope = %d", code)
	}
}

// TestWithPprof: the profiles appear under /debug/pprof/ only when asked
// for, and the admin endpoints stay.
func TestWithPprof(t *testing.T) {
	m := NewMetrics()
	for _, tc := range []struct {
		name  string
		h     http.Handler
		pprof int
	}{
		{"off", AdminHandler(m, nil), http.StatusNotFound},
		{"on", WithPprof(AdminHandler(m, nil)), http.StatusOK},
	} {
		srv := httptest.NewServer(tc.h)
		for path, want := range map[string]int{
			"/debug/pprof/":          tc.pprof,
			"/debug/pprof/cmdline":   tc.pprof,
			"/debug/pprof/goroutine": tc.pprof,
			"/metrics":               http.StatusOK,
			"/healthz":               http.StatusOK,
		} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s: GET %s = %d, want %d", tc.name, path, resp.StatusCode, want)
			}
		}
		srv.Close()
	}
}

// The operational collectors are registered and nil-safe; build info is
// exposed once, with the Go version.
func TestOpsMetrics(t *testing.T) {
	var none *Metrics
	none.RequestDuration("predict", 200, time.Millisecond)
	none.BackendCall("", CallMetadata, time.Millisecond)

	m := NewMetrics()
	m.RequestDuration("predict", 200, 3*time.Millisecond)
	m.BackendCall("", CallConfig, time.Millisecond)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "tfsbridge_build_info" {
			labels := map[string]string{}
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["go_version"] != runtime.Version() || labels["version"] == "" || labels["revision"] == "" {
				t.Errorf("build info labels %v", labels)
			}
		}
	}
	for _, name := range []string{"tfsbridge_request_duration_seconds", "tfsbridge_backend_request_duration_seconds", "tfsbridge_build_info"} {
		if got[name] != 1 {
			t.Errorf("%s: %d series, want 1", name, got[name])
		}
	}
}

// TestLatencyBucketsHaveSLOBounds checks that both latency histograms have
// an edge at each bound a latency SLO is usually written against, and at
// TF Serving's 30 s deadline: "le" must equal the bound exactly for
// rate(..._bucket{le="0.1"}) to exist.
func TestLatencyBucketsHaveSLOBounds(t *testing.T) {
	m := NewMetrics()
	m.RequestDuration("predict", 200, time.Millisecond)
	m.BackendCall("default", CallMetadata, time.Millisecond)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	seen := 0
	for _, f := range families {
		if f.GetName() != "tfsbridge_request_duration_seconds" && f.GetName() != "tfsbridge_backend_request_duration_seconds" {
			continue
		}
		seen++
		edges := map[float64]bool{}
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			edges[b.GetUpperBound()] = true
		}
		for _, le := range want {
			if !edges[le] {
				t.Errorf("%s has no bucket le=%g", f.GetName(), le)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d latency histograms, want 2", seen)
	}
}
