package bridge

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tfsbridge/tfsbridge/proxy/internal/testcerts"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
	"github.com/tfsbridge/tfsbridge/translate/route"
)

// toggledV2 is a v2 server stand-in whose /v2/health/ready follows ready.
type toggledV2 struct{ ready atomic.Bool }

func (u *toggledV2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/health/ready" && !u.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// healthOf asks the ext_proc server's gRPC health for service.
func healthOf(t *testing.T, hc healthpb.HealthClient, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health check %q: %v", service, err)
	}
	return r.Status
}

func healthClient(t *testing.T, addr string, creds credentials.TransportCredentials) healthpb.HealthClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// /readyz and gRPC health agree, per readiness mode, while the v2 server
// is down and once it is back.
func TestReadinessModes(t *testing.T) {
	const extprocService = "envoy.service.ext_proc.v3.ExternalProcessor"
	for _, tt := range []struct {
		mode          string
		readyWhenDown bool
	}{
		{ReadinessTFSBridge, true},
		{ReadinessBackend, false},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			up := &toggledV2{}
			_, l, _, _ := startServingWith(t, up, func(o *Options) { o.Readiness = tt.mode })
			admin := "http://" + l.Admin.Addr().String()
			hc := healthClient(t, l.Extproc.Addr().String(), nil)
			for _, backendUp := range []bool{false, true} {
				up.ready.Store(backendUp)
				wantReady := backendUp || tt.readyWhenDown
				wantCode, wantStatus := http.StatusServiceUnavailable, healthpb.HealthCheckResponse_NOT_SERVING
				if wantReady {
					wantCode, wantStatus = http.StatusOK, healthpb.HealthCheckResponse_SERVING
				}
				if code, body := get(t, admin+"/readyz"); code != wantCode {
					t.Errorf("backend up %v: /readyz = %d %q, want %d", backendUp, code, body, wantCode)
				}
				for _, svc := range []string{"", extprocService} {
					if got := healthOf(t, hc, svc); got != wantStatus {
						t.Errorf("backend up %v: gRPC health %q = %v, want %v", backendUp, svc, got, wantStatus)
					}
				}
			}
		})
	}
}

// In backend mode a gRPC health Watch follows the v2 server too.
func TestReadinessWatch(t *testing.T) {
	up := &toggledV2{}
	_, l, _, _ := startServingWith(t, up, func(o *Options) { o.Readiness = ReadinessBackend })
	hc := healthClient(t, l.Extproc.Addr().String(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := healthpb.HealthCheckResponse_NOT_SERVING
	for {
		r, err := w.Recv()
		if err != nil {
			t.Fatalf("watch ended before %v: %v", want, err)
		}
		if r.Status != want {
			continue
		}
		if want == healthpb.HealthCheckResponse_SERVING {
			return
		}
		up.ready.Store(true)
		want = healthpb.HealthCheckResponse_SERVING
	}
}

// On shutdown readiness fails first and both servers keep serving new
// requests for the drain delay; then Serve stops them.
func TestDrainDelay(t *testing.T) {
	const delay = 3 * time.Second
	up := &toggledV2{}
	up.ready.Store(true)
	envoyDrained := make(chan string, 1)
	envoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		envoyDrained <- r.Method + " " + r.URL.RequestURI()
	}))
	t.Cleanup(envoy.Close)
	b, l, cancel, done := startServingWith(t, up, func(o *Options) { o.DrainDelay = delay; o.DrainEnvoyAdmin = envoy.URL })
	admin := "http://" + l.Admin.Addr().String()
	proxy := "http://" + l.Proxy.Addr().String()
	hc := healthClient(t, l.Extproc.Addr().String(), nil)
	if got := healthOf(t, hc, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before shutdown = %v", got)
	}
	start := time.Now()
	cancel()
	eventually(t, 30*time.Second, "not ready after the shutdown began", func() bool { return b.Ready(context.Background()) != nil })
	if got := healthOf(t, hc, ""); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health while draining = %v, want NOT_SERVING", got)
	}
	if code, _ := get(t, admin+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", code)
	}
	// A new request (on a new connection) is still served, and told to
	// close its connection.
	resp, err := http.Get(proxy + "/v2/health/ready")
	if err != nil {
		t.Fatalf("new request while draining: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("new request while draining = %d, close %v; want 200 and Connection: close", resp.StatusCode, resp.Close)
	}
	select {
	case got := <-envoyDrained:
		if got != "POST /drain_listeners?graceful" {
			t.Errorf("sidecar Envoy admin got %q, want POST /drain_listeners?graceful", got)
		}
	case <-time.After(30 * time.Second):
		t.Error("the sidecar Envoy was not told to drain")
	}
	if time.Since(start) < delay {
		select {
		case err := <-done:
			t.Fatalf("Serve returned %v before the drain delay", err)
		default:
		}
	}
	waitServe(t, done, 60*time.Second)
	if d := time.Since(start); d < delay {
		t.Errorf("Serve returned %v after the shutdown, before the %v drain delay", d, delay)
	}
}

// The ext_proc server serves TLS (and mTLS) from files, and the backend
// client trusts an https v2 server through --backend-ca-file.
func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", "tfsbridge")
	envoy := ca.Issue(t, "envoy", "envoy")

	up := &toggledV2{}
	up.ready.Store(true)
	v2 := httptest.NewTLSServer(up)
	t.Cleanup(v2.Close)
	v2CA := t.TempDir() + "/v2-ca.pem"
	testcerts.WriteCert(t, v2CA, v2.Certificate().Raw)

	o := DefaultOptions()
	o.BackendURL = v2.URL
	o.BackendKind = "triton"
	o.DrainDelay = 0
	o.Readiness = ReadinessBackend // /readyz then proves the backend call
	o.TLS = TLSOptions{
		Extproc: tlsconfig.ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File},
		Backend: tlsconfig.ClientFiles{CAFile: v2CA},
	}
	logs := &lockedBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Addrs{Extproc: "127.0.0.1:0", Admin: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	defer func() { cancel(); waitServe(t, done, 60*time.Second) }()

	if err := b.Backend.Health(context.Background()); err != nil {
		t.Errorf("backend over TLS with --backend-ca-file: %v", err)
	}
	if _, err := b.Backend.ModelReady(context.Background(), route.Route{Model: "m"}); err != nil {
		t.Errorf("model ready over TLS: %v", err)
	}

	clientCfg, err := tlsconfig.Client(tlsconfig.ClientFiles{CAFile: ca.File, CertFile: envoy.CertFile, KeyFile: envoy.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	hc := healthClient(t, l.Extproc.Addr().String(), credentials.NewTLS(clientCfg))
	if got := healthOf(t, hc, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health over mTLS = %v", got)
	}
	// Without a client certificate, or in plaintext, nothing gets through.
	for name, creds := range map[string]credentials.TransportCredentials{
		"no client cert": credentials.NewTLS(&tls.Config{RootCAs: clientCfg.RootCAs}),
		"plaintext":      insecure.NewCredentials(),
	} {
		conn, err := grpc.NewClient(l.Extproc.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		_ = conn.Close()
		if err == nil {
			t.Errorf("%s: health check succeeded", name)
		}
	}
	// Each refusal is counted by reason and logged (grpc-go itself says
	// nothing); the server sees them after the clients gave up.
	for _, reason := range []string{"no_client_certificate", "not_tls"} {
		eventually(t, 30*time.Second, "tfsbridge_tls_handshake_failures_total{reason="+reason+"}", func() bool {
			return b.Metrics.Value("tfsbridge_tls_handshake_failures_total", "reason", reason) >= 1 &&
				strings.Contains(logs.String(), "reason="+reason)
		})
	}
	if !strings.Contains(logs.String(), "ext_proc TLS handshake refused") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
}
