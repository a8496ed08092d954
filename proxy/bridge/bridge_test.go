package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/httpproxy"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

// The defaults are cmd/tfsbridge's documented flag defaults; a change here
// changes the binary's behaviour and must be deliberate.
func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	want := Options{
		BackendURL:       "http://127.0.0.1:8000",
		BackendKind:      backend.KindAuto,
		BackendTimeout:   backend.DefaultTimeout,
		MetadataTTL:      backend.DefaultMetadataTTL,
		MetadataErrorTTL: backend.DefaultErrorTTL,
		MaxBodyBytes:     64 << 20,
		MaxInflightBytes: admission.DefaultLimit(),
		BodyTimeout:      time.Minute,
		MaxJSONDepth:     tensor.DefaultLimits.MaxDepth,
		MaxElements:      tensor.DefaultLimits.MaxElements,
		ShutdownTimeout:  15 * time.Second,
		Readiness:        "tfsbridge",
		DrainDelay:       5 * time.Second,
		Shadow:           ShadowOptions{MaxBytes: 64 << 20, Timeout: 30 * time.Second, LogMaxBytes: 64 << 20, LogPerSecond: 10},
		// TF gRPC answers name no version tfsbridge cannot know.
		TFGRPCDefaultVersion: -1,
		Proxy: ProxyOptions{
			RequestTimeout:    httpproxy.DefaultRequestTimeout,
			ReadTimeout:       httpproxy.DefaultReadTimeout,
			ReadHeaderTimeout: httpproxy.DefaultReadHeaderTimeout,
			IdleTimeout:       httpproxy.DefaultIdleTimeout,
			WriteTimeout:      httpproxy.DefaultWriteTimeout,
		},
	}
	if o != want {
		t.Errorf("DefaultOptions() = %+v\nwant %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		field  string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"error ttl zero disables", func(o *Options) { o.MetadataErrorTTL = 0 }, ""},
		{"nil logger", func(o *Options) { o.Logger = nil }, ""},
		{"TF gRPC default version 0", func(o *Options) { o.TFGRPCDefaultVersion = 0 }, ""},
		{"TF gRPC default version below -1", func(o *Options) { o.TFGRPCDefaultVersion = -2 }, "TFGRPCDefaultVersion"},
		{"zero backend timeout", func(o *Options) { o.BackendTimeout = 0 }, "BackendTimeout"},
		{"zero metadata ttl", func(o *Options) { o.MetadataTTL = 0 }, "MetadataTTL"},
		{"negative error ttl", func(o *Options) { o.MetadataErrorTTL = -time.Second }, "MetadataErrorTTL"},
		{"zero body", func(o *Options) { o.MaxBodyBytes = 0 }, "MaxBodyBytes"},
		{"zero in-flight budget", func(o *Options) { o.MaxInflightBytes = 0 }, "MaxInflightBytes"},
		{"grpc recv raised", func(o *Options) { o.GRPCMaxRecvBytes = o.MaxBodyBytes * 2 }, ""},
		{"grpc recv below body", func(o *Options) { o.GRPCMaxRecvBytes = o.MaxBodyBytes - 1 }, "GRPCMaxRecvBytes"},
		{"grpc recv negative", func(o *Options) { o.GRPCMaxRecvBytes = -1 }, "GRPCMaxRecvBytes"},
		{"zero depth", func(o *Options) { o.MaxJSONDepth = 0 }, "MaxJSONDepth"},
		{"negative elements", func(o *Options) { o.MaxElements = -1 }, "MaxElements"},
		{"zero shutdown", func(o *Options) { o.ShutdownTimeout = 0 }, "ShutdownTimeout"},
		{"zero drain delay", func(o *Options) { o.DrainDelay = 0 }, ""},
		{"negative drain delay", func(o *Options) { o.DrainDelay = -time.Second }, "DrainDelay"},
		{"envoy admin", func(o *Options) { o.DrainEnvoyAdmin = "http://127.0.0.1:9901" }, ""},
		{"envoy admin not a URL", func(o *Options) { o.DrainEnvoyAdmin = "127.0.0.1:9901" }, "DrainEnvoyAdmin"},
		{"backend readiness", func(o *Options) { o.Readiness = ReadinessBackend }, ""},
		{"unknown readiness", func(o *Options) { o.Readiness = "model" }, "Readiness"},
		{"cert without key", func(o *Options) { o.TLS.Extproc.CertFile = "tls.crt" }, "TLS.Extproc.KeyFile"},
		{"key without cert", func(o *Options) { o.TLS.Extproc.KeyFile = "tls.key" }, "TLS.Extproc.CertFile"},
		{"backend cert without key", func(o *Options) { o.TLS.Backend.CertFile = "tls.crt" }, "TLS.Backend.KeyFile"},
		{"backend key without cert", func(o *Options) { o.TLS.Backend.KeyFile = "tls.key" }, "TLS.Backend.CertFile"},
		{"zero request timeout", func(o *Options) { o.Proxy.RequestTimeout = 0 }, "Proxy.RequestTimeout"},
		{"zero read timeout", func(o *Options) { o.Proxy.ReadTimeout = 0 }, "Proxy.ReadTimeout"},
		{"zero header timeout", func(o *Options) { o.Proxy.ReadHeaderTimeout = 0 }, "Proxy.ReadHeaderTimeout"},
		{"negative idle timeout", func(o *Options) { o.Proxy.IdleTimeout = -1 }, "Proxy.IdleTimeout"},
		{"zero write timeout", func(o *Options) { o.Proxy.WriteTimeout = 0 }, "Proxy.WriteTimeout"},
		{"zero value", func(o *Options) { *o = Options{} }, "Proxy.RequestTimeout"},
		{"zero shadow memory", func(o *Options) { o.Shadow.MaxBytes = 0 }, "Shadow.MaxBytes"},
		{"zero shadow timeout", func(o *Options) { o.Shadow.Timeout = 0 }, "Shadow.Timeout"},
		{"zero shadow log cap", func(o *Options) { o.Shadow.LogMaxBytes = 0 }, "Shadow.LogMaxBytes"},
		{"NaN shadow log rate", func(o *Options) { o.Shadow.LogPerSecond = math.NaN() }, "Shadow.LogPerSecond"},
		{"https backend", func(o *Options) { o.BackendURL = "https://triton.example:8443/base" }, ""},
		{"backend without scheme", func(o *Options) { o.BackendURL = "localhost:8000" }, "BackendURL"},
		{"backend without host", func(o *Options) { o.BackendURL = "http:///v2" }, "BackendURL"},
		{"backend with query", func(o *Options) { o.BackendURL = "http://h:8000/?x=1" }, "BackendURL"},
		{"backend kind any case", func(o *Options) { o.BackendKind = "KServe" }, ""},
		{"backend kind typo", func(o *Options) { o.BackendKind = "trition" }, "BackendKind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.change(&o)
			err := o.Validate()
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Validate() = %v, want a FieldError for %s", err, tt.field)
			case tt.field != "" && !strings.HasPrefix(err.Error(), tt.field+" must"):
				t.Errorf("message %q does not start with the field", err)
			}
			if _, err2 := New(o); (err2 == nil) != (tt.field == "") {
				t.Errorf("New() error %v disagrees with Validate() %v", err2, err)
			}
		})
	}
}

func TestNewBackendErrors(t *testing.T) {
	for name, change := range map[string]func(*Options){
		"bad url":  func(o *Options) { o.BackendURL = "ftp://x" },
		"no url":   func(o *Options) { o.BackendURL = "" },
		"bad kind": func(o *Options) { o.BackendKind = "torchserve" },
	} {
		o := DefaultOptions()
		change(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// New wires the options into the shared parts.
func TestNewWiring(t *testing.T) {
	o := DefaultOptions()
	o.BackendURL = "http://127.0.0.1:1/"
	o.BackendKind = "kserve"
	o.MaxBodyBytes = 1000
	o.MaxJSONDepth = 7
	o.MaxElements = 99
	o.Passthrough = session.PassthroughNone
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Session.Admission.Limit(); got != o.MaxInflightBytes {
		t.Errorf("in-flight budget %d, want %d", got, o.MaxInflightBytes)
	}
	if b.Session.MaxBodyBytes != 1000 || b.Session.Limits != (tensor.Limits{MaxDepth: 7, MaxElements: 99, MaxOutputBytes: 32000}) {
		t.Errorf("session: body %d, limits %+v", b.Session.MaxBodyBytes, b.Session.Limits)
	}
	if b.Session.Passthrough != session.PassthroughNone {
		t.Errorf("session: pass-through %v", b.Session.Passthrough)
	}
	if b.Session.Backend != b.Backend || b.Session.Metrics != b.Metrics || b.Session.Logger != b.Log || b.Log == nil {
		t.Error("the session does not share the bridge's backend, metrics and logger")
	}
	if k, err := b.Backend.Kind(context.Background()); err != nil || k.String() != "kserve" {
		t.Errorf("backend kind = %v, %v", k, err)
	}
	if err := b.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "not serving") {
		t.Errorf("Ready before Serve = %v, want not serving", err)
	}
}

func TestListen(t *testing.T) {
	l, err := Listen(Addrs{Proxy: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Extproc != nil || l.Admin != nil || l.Proxy == nil || Addr(l.Admin) != nil {
		t.Errorf("Listen bound %+v", l)
	}
	// A busy address fails, names the server and frees what was bound.
	_, err = Listen(Addrs{Extproc: "127.0.0.1:0", Admin: l.Proxy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Errorf("Listen on a busy address = %v", err)
	}
	if err := deadBridge(t).Serve(context.Background(), Listeners{}); err == nil {
		t.Error("Serve with no listener succeeded")
	}
}

// deadBridge is a bridge to a v2 server nobody listens on.
func deadBridge(t *testing.T) *Bridge {
	t.Helper()
	o := DefaultOptions()
	o.BackendURL = "http://127.0.0.1:1"
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// slowUpstream is a v2 server stand-in: ready, and /slow answers after
// release is closed, telling started when the request arrived.
type slowUpstream struct {
	started chan struct{}
	release chan struct{}
}

func (u *slowUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/models/slow" {
		close(u.started)
		<-u.release
		_, _ = io.WriteString(w, "done")
		return
	}
	w.WriteHeader(http.StatusOK) // /v2/health/ready and the rest
}

// startServing serves a bridge in front of up on ephemeral ports; it
// returns the listeners, the cancel that stops serving and Serve's result.
func startServing(t *testing.T, up http.Handler, drain time.Duration) (*Bridge, Listeners, context.CancelFunc, <-chan error) {
	t.Helper()
	return startServingWith(t, up, func(o *Options) { o.ShutdownTimeout = drain })
}

// startServingWith is startServing with the options set by change; the
// drain delay is 0 unless change sets one.
func startServingWith(t *testing.T, up http.Handler, change func(*Options)) (*Bridge, Listeners, context.CancelFunc, <-chan error) {
	t.Helper()
	v2 := httptest.NewServer(up)
	t.Cleanup(v2.Close)
	o := DefaultOptions()
	o.BackendURL = v2.URL
	o.BackendKind = "triton"
	o.DrainDelay = 0
	change(&o)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Addrs{Extproc: "127.0.0.1:0", Proxy: "127.0.0.1:0", Admin: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	t.Cleanup(cancel)
	return b, l, cancel, done
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestServeAndDrain runs the three servers on real sockets, then stops
// them with a request in flight: the request completes (draining), the
// bridge reports not ready meanwhile, and Serve returns nil.
func TestServeAndDrain(t *testing.T) {
	up := &slowUpstream{started: make(chan struct{}), release: make(chan struct{})}
	b, l, cancel, done := startServing(t, up, 10*time.Second)
	admin := "http://" + l.Admin.Addr().String()
	proxy := "http://" + l.Proxy.Addr().String()

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body := get(t, admin+path); code != http.StatusOK {
			t.Errorf("GET %s = %d %q", path, code, body)
		}
	}
	conn, err := grpc.NewClient(l.Extproc.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("ext_proc health = %v, %v", hc, err)
	}

	inflight := getAsync(proxy + "/v2/models/slow") // passed through untouched
	<-up.started
	cancel()
	// Draining: not ready any more, the request still running.
	eventually(t, 30*time.Second, "not ready after the shutdown began", func() bool { return b.Ready(context.Background()) != nil })
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(up.release)
	if r := <-inflight; r.err != nil || r.code != http.StatusOK || r.body != "done" {
		t.Errorf("in-flight request = %d %q, %v; want 200 done", r.code, r.body, r.err)
	}
	waitServe(t, done, 30*time.Second)
	if _, err := net.DialTimeout("tcp", l.Proxy.Addr().String(), time.Second); err == nil {
		t.Error("the proxy still accepts connections after Serve returned")
	}
}

// A request outlasting ShutdownTimeout is cut rather than waited for:
// it is answered 503 (its headers had not gone out), counted and logged,
// and Serve reports the cut.
func TestDrainDeadline(t *testing.T) {
	// A pass-through call, a TF status GET and a TF metadata GET whose
	// upstream call outlasts the shutdown timeout: each is cut and gets
	// TF's 503.
	for _, path := range []string{"/v2/models/slow", "/v1/models/slow", "/v1/models/slow/metadata"} {
		t.Run(path, func(t *testing.T) {
			up := &slowUpstream{started: make(chan struct{}), release: make(chan struct{})}
			defer close(up.release)
			logs := &lockedBuffer{}
			b, l, cancel, done := startServingWith(t, up, func(o *Options) {
				o.ShutdownTimeout = 200 * time.Millisecond
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			inflight := getAsync("http://" + l.Proxy.Addr().String() + path)
			<-up.started
			start := time.Now()
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second): // generous: the cut takes 200ms
				t.Fatal("Serve did not return after the shutdown timeout")
			}
			if d := time.Since(start); d < 150*time.Millisecond {
				t.Errorf("Serve returned after %v, before the shutdown timeout", d)
			}
			if !errors.Is(err, ErrCut) || !strings.Contains(err.Error(), "1 still in progress") {
				t.Errorf("Serve = %v, want ErrCut for 1 exchange", err)
			}
			if r := <-inflight; r.err != nil || r.code != http.StatusServiceUnavailable {
				t.Errorf("the request outlasting the shutdown timeout: %d %q, %v; want 503", r.code, r.body, r.err)
			}
			if got := b.Metrics.Value("tfsbridge_shutdown_cut_exchanges_total", "adapter", "http"); got != 1 {
				t.Errorf("cut exchanges counted: %v, want 1", got)
			}
			if !strings.Contains(logs.String(), "serving stopped") || !strings.Contains(logs.String(), "cut=1") {
				t.Errorf("no shutdown line with cut=1:\n%s", logs.String())
			}
		})
	}
}

// result is one GET's outcome.
type result struct {
	code int
	body string
	err  error
}

// getAsync GETs url in the background: the tests stop the bridge while
// the request runs.
func getAsync(url string) <-chan result {
	c := make(chan result, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			c <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		c <- result{code: resp.StatusCode, body: string(body), err: err}
	}()
	return c
}

// waitServe waits for Serve's result, which must be nil.
func waitServe(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(within):
		t.Fatalf("Serve did not return within %v of the shutdown", within)
	}
}
