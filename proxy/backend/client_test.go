package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
)

var halfPlusTwo = fakev2.HalfPlusTwo("1", "2")

var simple = fakev2.Model{
	Name:         "simple",
	Versions:     []string{"1"},
	Inputs:       []fakev2.Tensor{{Name: "INPUT0", Datatype: "INT32", Shape: []int64{-1, 16}}},
	Outputs:      []fakev2.Tensor{{Name: "OUTPUT0", Datatype: "INT32", Shape: []int64{-1, 16}}},
	MaxBatchSize: 8,
}

func newClient(t *testing.T, srv *fakev2.Server, kind string) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: srv.URL, Kind: kind, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func model(name string) route.Route { return route.Route{Verb: route.Predict, Model: name} }

func versioned(name string, v int64) route.Route {
	return route.Route{Verb: route.Predict, Model: name, Version: v, HasVersion: true}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "127.0.0.1:8000"},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://"},
		{BaseURL: "http://x/?q=1"},
		{BaseURL: "http://x", Kind: "torchserve"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestSignature(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		r           route.Route
		wantBatched bool
		wantMax     int64
		wantInput   tensor.Spec
		wantConfig  int // GETs of /config
	}{
		{"triton batching", "triton", model("simple"), true, 8,
			tensor.Spec{Name: "INPUT0", DataType: tensor.Int32, Shape: []int64{-1, 16}}, 1},
		// Triton: a leading -1 without max_batch_size is a variable dim.
		{"triton not batching", "triton", model("half_plus_two"), false, 0,
			tensor.Spec{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}, 1},
		// MLServer has no /config: the leading -1 decides.
		{"mlserver", "mlserver", model("half_plus_two"), true, 0,
			tensor.Spec{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}, 0},
		{"triton versioned", "triton", versioned("half_plus_two", 2), false, 0,
			tensor.Spec{Name: "x", DataType: tensor.FP32, Shape: []int64{-1}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakev2.New(t, tt.kind, halfPlusTwo, simple)
			c := newClient(t, srv, tt.kind)
			sig, err := c.Signature(context.Background(), tt.r)
			if err != nil {
				t.Fatal(err)
			}
			if sig.Model != tt.r.Model || sig.Batched != tt.wantBatched || sig.MaxBatchSize != tt.wantMax {
				t.Errorf("sig = %+v, want model %q batched %v max %d", sig, tt.r.Model, tt.wantBatched, tt.wantMax)
			}
			in := sig.Inputs[0]
			if in.Name != tt.wantInput.Name || in.DataType != tt.wantInput.DataType || !equal(in.Shape, tt.wantInput.Shape) {
				t.Errorf("input = %+v, want %+v", in, tt.wantInput)
			}
			if got := srv.Hits(tt.r.V2ConfigPath()); got != tt.wantConfig {
				t.Errorf("config GETs = %d, want %d", got, tt.wantConfig)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSignatureErrors(t *testing.T) {
	tests := []struct {
		name     string
		r        route.Route
		reply    *fakev2.Reply // on the metadata path
		wantCode apierr.Code
		wantMsg  string
		notFound bool
	}{
		{"unknown model", model("nope"), nil, apierr.NotFound,
			"Servable not found for request: Latest(nope)", true},
		{"unknown version", versioned("half_plus_two", 5), nil, apierr.NotFound,
			"Servable not found for request: Specific(half_plus_two, 5)", true},
		{"server not ready", model("half_plus_two"),
			&fakev2.Reply{Status: 503, ContentType: "application/json", Body: `{"error":"Server not ready"}`},
			apierr.Unavailable, "Server not ready", false},
		{"kserve versions", versioned("half_plus_two", 1),
			&fakev2.Reply{Status: 501, ContentType: "application/json", Body: `{"error":"Model versioning not supported yet."}`},
			apierr.Unimplemented, "Model versioning not supported yet.", false},
		{"garbage metadata", model("half_plus_two"),
			&fakev2.Reply{Status: 200, ContentType: "application/json", Body: `<html>`},
			apierr.BadGateway, "", false},
		{"plain text 500", model("half_plus_two"),
			&fakev2.Reply{Status: 500, ContentType: "text/plain", Body: "Internal Server Error"},
			apierr.Internal, "Internal Server Error", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakev2.New(t, "mlserver", halfPlusTwo)
			if tt.reply != nil {
				srv.Set(tt.r.V2ModelPath(), *tt.reply)
			}
			c := newClient(t, srv, "mlserver")
			_, err := c.Signature(context.Background(), tt.r)
			var e *apierr.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *apierr.Error", err)
			}
			if e.Code != tt.wantCode || (tt.wantMsg != "" && e.Msg != tt.wantMsg) {
				t.Errorf("err = %v (%q), want code %v msg %q", e.Code, e.Msg, tt.wantCode, tt.wantMsg)
			}
			if errors.Is(err, ErrModelNotFound) != tt.notFound {
				t.Errorf("errors.Is(ErrModelNotFound) = %v, want %v", !tt.notFound, tt.notFound)
			}
		})
	}
}

func TestSignatureCache(t *testing.T) {
	srv := fakev2.New(t, "triton", halfPlusTwo)
	c := newClient(t, srv, "")
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c.sigs.now, c.kinds.now = clock, clock

	ctx := context.Background()
	meta := "/v2/models/half_plus_two"
	for range 3 {
		if _, err := c.Signature(ctx, model("half_plus_two")); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Hits(meta); got != 1 {
		t.Fatalf("metadata GETs after 3 lookups = %d, want 1 (cached)", got)
	}
	if got := srv.Hits("/v2"); got != 1 {
		t.Errorf("GET /v2 = %d, want 1 (kind detected once)", got)
	}
	advance(DefaultMetadataTTL + time.Second)
	if _, err := c.Signature(ctx, model("half_plus_two")); err != nil {
		t.Fatal(err)
	}
	if got := srv.Hits(meta); got != 2 {
		t.Errorf("metadata GETs after the TTL = %d, want 2", got)
	}

	// Failures are remembered for ErrorTTL only.
	for range 3 {
		if _, err := c.Signature(ctx, model("gone")); err == nil {
			t.Fatal("unknown model: no error")
		}
	}
	if got := srv.Hits("/v2/models/gone"); got != 1 {
		t.Errorf("GETs of an unknown model = %d, want 1 (failure cached)", got)
	}
	advance(DefaultErrorTTL + time.Millisecond)
	_, _ = c.Signature(ctx, model("gone"))
	if got := srv.Hits("/v2/models/gone"); got != 2 {
		t.Errorf("GETs of an unknown model after ErrorTTL = %d, want 2", got)
	}
}

// Regression: failures for hostile, very long model names were cached,
// each name kept twice until 1024 entries accumulated (270 MB for 200
// requests with 256 KiB names). Names longer than any real one are looked
// up without the cache.
func TestLongModelNamesAreNotCached(t *testing.T) {
	srv := fakev2.New(t, "triton", halfPlusTwo)
	c := newClient(t, srv, "triton")
	long := strings.Repeat("n", maxCachedName+1)
	for range 2 {
		_, err := c.Signature(context.Background(), model(long))
		var e *apierr.Error
		if !errors.As(err, &e) || e.Code != apierr.NotFound || e.Msg != "Servable not found for request: Latest("+long+")" {
			t.Fatalf("error = %v, want TF's not found", err)
		}
	}
	if got := srv.Hits("/v2/models/" + long); got != 2 {
		t.Errorf("metadata GETs = %d, want 2 (not cached)", got)
	}
	if n := c.sigs.len(); n != 0 {
		t.Errorf("cache holds %d entries, want 0", n)
	}
	// A name of the longest real length is still cached.
	name := strings.Repeat("n", maxCachedName)
	_, _ = c.Signature(context.Background(), model(name))
	if n := c.sigs.len(); n != 1 {
		t.Errorf("cache holds %d entries after a %d-byte name, want 1", n, len(name))
	}
}

// joinCtx reports each call of Done on joined. Signature calls it only in
// cache.get's select, which a caller reaches once singleflight's DoChan has
// counted it in the flight (leading it or waiting on it): a receive on
// joined is one more caller sharing the flight, where a sleep could only
// hope so on a busy machine.
type joinCtx struct {
	context.Context
	joined chan<- struct{}
}

func (c joinCtx) Done() <-chan struct{} {
	c.joined <- struct{}{}
	return c.Context.Done()
}

// awaitJoins receives n joins, with a bound only for a hang.
func awaitJoins(t *testing.T, joined <-chan struct{}, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := range n {
		select {
		case <-joined:
		case <-timeout:
			t.Fatalf("%d of %d callers joined the flight", i, n)
		}
	}
}

func TestSignatureSingleflight(t *testing.T) {
	srv := fakev2.New(t, "mlserver", halfPlusTwo)
	release := make(chan struct{})
	srv.OnMetadata(func() { <-release })
	c := newClient(t, srv, "mlserver")

	const n = 20
	// Room for more than one Done per caller, so that a change in how
	// Signature uses its context shows below instead of hanging.
	joined := make(chan struct{}, 2*n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := c.Signature(joinCtx{context.Background(), joined}, model("half_plus_two"))
			errs <- err
		})
	}
	awaitJoins(t, joined, n)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if extra := len(joined); extra != 0 {
		t.Fatalf("%d more Done calls than callers: joinCtx no longer tells when a caller joined", extra)
	}
	if got := srv.Hits("/v2/models/half_plus_two"); got != 1 {
		t.Errorf("metadata GETs for %d concurrent misses = %d, want 1", n, got)
	}
}

func TestSignatureCallerCancelDoesNotFailOthers(t *testing.T) {
	srv := fakev2.New(t, "mlserver", halfPlusTwo)
	release := make(chan struct{})
	srv.OnMetadata(func() { <-release })
	c := newClient(t, srv, "mlserver")

	joined := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Signature(joinCtx{ctx, joined}, model("half_plus_two"))
		first <- err
	}()
	awaitJoins(t, joined, 1) // the first caller leads the flight
	second := make(chan error, 1)
	go func() {
		_, err := c.Signature(joinCtx{context.Background(), joined}, model("half_plus_two"))
		second <- err
	}()
	awaitJoins(t, joined, 1) // the second waits on the first's flight
	cancel()
	err := <-first
	if e := apierr.As(err); e.Code != apierr.Cancelled {
		t.Errorf("cancelled caller: err = %v, want CANCELLED", err)
	}
	close(release)
	if err := <-second; err != nil {
		t.Errorf("other caller: err = %v, want success", err)
	}
	if got := srv.Hits("/v2/models/half_plus_two"); got != 1 {
		t.Errorf("metadata GETs = %d, want 1 (the second caller shares the first's)", got)
	}
}

func TestCacheCap(t *testing.T) {
	c := newCache[int](time.Minute, time.Second, 3, time.Now)
	ctx := context.Background()
	for i := range 10 {
		key := string(rune('a' + i))
		if _, _, err := c.get(ctx, key, time.Second, func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
		if c.len() > 3 {
			t.Fatalf("cache holds %d entries, cap 3", c.len())
		}
	}
	v, hit, _ := c.get(ctx, "j", time.Second, func(context.Context) (int, error) { return -1, nil })
	if !hit || v != 9 {
		t.Errorf("latest entry: v=%d hit=%v, want 9 true", v, hit)
	}
}

func TestKind(t *testing.T) {
	for _, tt := range []struct {
		server, config string
		want           oip.ServerKind
	}{
		{"triton", "auto", oip.Triton},
		{"kserve", "", oip.KServe},
		{"mlserver", "auto", oip.MLServer},
		{"triton", "mlserver", oip.MLServer}, // configured wins, no GET /v2
	} {
		srv := fakev2.New(t, tt.server)
		c := newClient(t, srv, tt.config)
		got, err := c.Kind(context.Background())
		if err != nil || got != tt.want {
			t.Errorf("server %s, config %q: Kind = %v, %v; want %v", tt.server, tt.config, got, err, tt.want)
		}
		wantHits := 1
		if tt.config != "auto" && tt.config != "" {
			wantHits = 0
		}
		if srv.Hits("/v2") != wantHits {
			t.Errorf("server %s, config %q: GET /v2 = %d, want %d", tt.server, tt.config, srv.Hits("/v2"), wantHits)
		}
	}
	srv := fakev2.New(t, "torchserve")
	if _, err := newClient(t, srv, "auto").Kind(context.Background()); apierr.As(err).Code != apierr.BadGateway {
		t.Errorf("unknown server name: err = %v, want BAD_GATEWAY", err)
	}
}

func TestModelReady(t *testing.T) {
	m := halfPlusTwo
	m.NotReady = []string{"1"}
	srv := fakev2.New(t, "triton", m)
	srv.Set("/v2/models/kserve_like/ready", fakev2.Reply{Status: 503, Body: `{"error":"Model with name kserve_like is not ready."}`})
	c := newClient(t, srv, "triton")
	ctx := context.Background()
	for _, tt := range []struct {
		r        route.Route
		want     bool
		wantCode apierr.Code
	}{
		{model("half_plus_two"), true, apierr.OK},
		{versioned("half_plus_two", 2), true, apierr.OK},
		{versioned("half_plus_two", 1), false, apierr.OK},
		{model("kserve_like"), false, apierr.OK},
		{model("nope"), false, apierr.NotFound},
	} {
		got, err := c.ModelReady(ctx, tt.r)
		if got != tt.want || (err == nil) != (tt.wantCode == apierr.OK) || (err != nil && apierr.As(err).Code != tt.wantCode) {
			t.Errorf("ModelReady(%v) = %v, %v; want %v, code %v", tt.r, got, err, tt.want, tt.wantCode)
		}
	}
}

func TestHealth(t *testing.T) {
	srv := fakev2.New(t, "triton")
	c := newClient(t, srv, "triton")
	if err := c.Health(context.Background()); err != nil {
		t.Errorf("Health = %v, want nil", err)
	}
	srv.Set("/v2/health/ready", fakev2.Reply{Status: 400})
	if err := c.Health(context.Background()); err == nil {
		t.Error("Health with a 400 = nil, want an error")
	}
}

// TestTransportErrors checks the mapping of failed round trips: refused →
// 503, timeout → 504, garbage → 502.
func TestTransportErrors(t *testing.T) {
	// A port nobody listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := lis.Addr().String()
	lis.Close()

	hang := listen(t, func(c net.Conn) { time.Sleep(2 * time.Second); c.Close() })
	garbage := listen(t, func(c net.Conn) {
		_, _ = bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n\r\n"))
		c.Close()
	})
	tests := []struct {
		name   string
		addr   string
		status int
	}{
		{"refused", closedAddr, http.StatusServiceUnavailable},
		{"timeout", hang, http.StatusGatewayTimeout},
		{"garbage", garbage, http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{BaseURL: "http://" + tt.addr, Kind: "mlserver", Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Signature(context.Background(), model("m"))
			e := apierr.As(err)
			if e.HTTPStatus() != tt.status {
				t.Errorf("status = %d (%v), want %d", e.HTTPStatus(), err, tt.status)
			}
			if strings.Contains(e.Msg, "127.0.0.1") {
				t.Errorf("message %q leaks the backend address", e.Msg)
			}
		})
	}
}

func listen(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return lis.Addr().String()
}

func TestTransportErrorKeepsAPIError(t *testing.T) {
	in := apierr.New(apierr.NotFound, "x")
	if got := TransportError(in); got != in {
		t.Errorf("TransportError(apierr) = %v, want it unchanged", got)
	}
	if got := TransportError(context.Canceled); got.Code != apierr.Cancelled {
		t.Errorf("TransportError(Canceled) = %v, want CANCELLED", got)
	}
}

// TestNoRedirects: a v2 server (or anything answering in its place) that
// redirects a control call must not make tfsbridge fetch another host;
// every call gets a 502 that names the redirect and not the Location.
func TestNoRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"triton","version":"2","extensions":[]}`))
	}))
	t.Cleanup(other.Close)
	good := fakev2.New(t, "triton", halfPlusTwo)
	// Everything but the paths in redirect is served by the good server.
	redirect := map[string]int{
		"/v2": 302, "/v2/health/ready": 307, "/v2/models/m": 301, "/v2/models/m/versions/3": 308,
		"/v2/models/half_plus_two/config": 302, "/v2/models/half_plus_two/ready": 303,
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, ok := redirect[r.URL.Path]; ok {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
			return
		}
		resp, err := http.Get(good.URL + r.URL.RequestURI())
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(front.Close)

	auto, err := New(Config{BaseURL: front.URL, Kind: "auto", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	triton, err := New(Config{BaseURL: front.URL, Kind: "triton", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := []struct {
		name string
		path string
		call func() error
	}{
		{"kind", "/v2", func() error { _, err := auto.Kind(ctx); return err }},
		{"metadata", "/v2/models/m", func() error { _, err := triton.Signature(ctx, model("m")); return err }},
		{"versioned metadata", "/v2/models/m/versions/3", func() error { _, err := triton.Signature(ctx, versioned("m", 3)); return err }},
		{"config", "/v2/models/half_plus_two/config", func() error { _, err := triton.Signature(ctx, model("half_plus_two")); return err }},
		{"ready", "/v2/models/half_plus_two/ready", func() error { _, err := triton.ModelReady(ctx, model("half_plus_two")); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			e := apierr.As(c.call())
			want := fmt.Sprintf("v2 inference server answered GET %s with a redirect (HTTP %d); tfsbridge does not follow redirects", c.path, redirect[c.path])
			if e == nil || e.HTTPStatus() != http.StatusBadGateway || e.Msg != want {
				t.Errorf("got %v; want 502 %q", e, want)
			}
		})
	}
	if err := triton.Health(ctx); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("Health = %v; want a redirect error", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect target was fetched %d times", n)
	}
}

// TestUnsafeModelNames: names that no v2 path can carry safely are unknown
// servables, answered without a call to the server.
func TestUnsafeModelNames(t *testing.T) {
	srv := fakev2.New(t, "triton", halfPlusTwo)
	c := newClient(t, srv, "triton")
	for _, r := range []route.Route{model(".."), model("."), versioned("..", 3), model("../half_plus_two"), model(`a\..`)} {
		_, err := c.Signature(context.Background(), r)
		want := "Servable not found for request: " + r.Servable()
		if e := apierr.As(err); e.Code != apierr.NotFound || e.Msg != want || !errors.Is(err, ErrModelNotFound) {
			t.Errorf("Signature(%v) = %v; want NOT_FOUND %q wrapping ErrModelNotFound", r, err, want)
		}
		if _, err := c.ModelReady(context.Background(), r); apierr.As(err).Code != apierr.NotFound {
			t.Errorf("ModelReady(%v) = %v; want NOT_FOUND", r, err)
		}
	}
	if n := srv.Hits("/v2/models/half_plus_two"); n != 0 {
		t.Errorf("the server was asked %d times", n)
	}
}
