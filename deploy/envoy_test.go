package deploy

import (
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

const (
	extProcFilterName = "envoy.filters.http.ext_proc"
	routerFilterName  = "envoy.filters.http.router"
	healthFilterName  = "envoy.filters.http.health_check"
	hcmFilterName     = "envoy.filters.network.http_connection_manager"
	httpOptionsKey    = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// parseBootstrap decodes a static Envoy bootstrap strictly (see decodeProtoStrict).
func parseBootstrap(doc []byte) (*bootstrapv3.Bootstrap, error) {
	b := &bootstrapv3.Bootstrap{}
	if err := decodeProtoStrict(doc, b); err != nil {
		return nil, err
	}
	return b, nil
}

// bootstrapModes names every Envoy bootstrap in deploy/envoy (all YAML there
// except the kustomization that wraps them into a ConfigMap) with the body
// mode it runs tfsbridge in.
var bootstrapModes = map[string]bodyMode{
	"envoy/envoy.yaml":             buffered,
	"envoy/envoy-tls.yaml":         buffered,
	"envoy/envoy-full-duplex.yaml": fullDuplex,
}

// bootstrapFiles lists every Envoy bootstrap in deploy/envoy and checks that
// bootstrapModes names each.
func bootstrapFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("envoy/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	if len(files) != len(bootstrapModes) {
		t.Fatalf("bootstraps %v, bootstrapModes names %d: give each file its body mode", files, len(bootstrapModes))
	}
	for _, f := range files {
		if _, ok := bootstrapModes[f]; !ok {
			t.Fatalf("%s: not in bootstrapModes", f)
		}
	}
	return files
}

// sidecarEnvoy is what the Kubernetes manifests must agree with in a
// sidecar bootstrap.
type sidecarEnvoy struct {
	listenerPorts []uint32 // ports Envoy listens on outside loopback
	readyPort     uint32   // health listener answering readyPath
	readyPath     string
	bufferLimit   uint32 // the TF listener's per_connection_buffer_limit_bytes (0: Envoy's default)
	extProc       *extprocv3.ExternalProcessor
	extProcAddr   *corev3.Address       // where the ext_proc cluster points (TCP or a pipe)
	backendAddr   *corev3.SocketAddress // where the v2 route's cluster points
	grpc          *grpcEnvoy            // the TF gRPC listener, when the bootstrap has one
}

func TestEnvoyBootstrapsParseStrictly(t *testing.T) {
	for _, f := range bootstrapFiles(t) {
		t.Run(f, func(t *testing.T) {
			if _, err := parseBootstrap(readFile(t, f)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEnvoyBootstrapsDecidedSettings(t *testing.T) {
	for _, f := range bootstrapFiles(t) {
		t.Run(f, func(t *testing.T) {
			b, err := parseBootstrap(readFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			s := checkSidecarBootstrap(t, b, bootstrapModes[f])
			if p := s.extProcAddr.GetPipe().GetPath(); p != extProcSocket {
				t.Errorf("ext_proc cluster dials %v, want the pipe %s (tfsbridge's Unix socket)", s.extProcAddr, extProcSocket)
			}
			if s.backendAddr.GetPortValue() != v2Port {
				t.Errorf("v2 backend port = %d, want %d", s.backendAddr.GetPortValue(), v2Port)
			}
			if !slices.Contains(s.listenerPorts, tfsPort) {
				t.Errorf("no listener on %d: %v", tfsPort, s.listenerPorts)
			}
		})
	}
}

// checkSidecarBootstrap asserts the settings decided for a sidecar Envoy in
// docs/architecture.md and docs/envoy-extproc.md, for the body mode it runs
// tfsbridge in, and returns what other files must agree with.
func checkSidecarBootstrap(t *testing.T, b *bootstrapv3.Bootstrap, mode bodyMode) sidecarEnvoy {
	t.Helper()
	var s sidecarEnvoy

	// Admin can drain and dump config: loopback only.
	adminAddr := b.GetAdmin().GetAddress().GetSocketAddress()
	if adminAddr.GetAddress() != "127.0.0.1" || adminAddr.GetPortValue() != envoyAdminPort {
		t.Errorf("admin on %s:%d, want 127.0.0.1:%d", adminAddr.GetAddress(), adminAddr.GetPortValue(), envoyAdminPort)
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	used := map[string]bool{}

	var tfsListener *listenerv3.Listener
	var tfRoute *routev3.Route
	for _, l := range b.GetStaticResources().GetListeners() {
		addr := l.GetAddress().GetSocketAddress()
		if addr.GetAddress() != "127.0.0.1" {
			s.listenerPorts = append(s.listenerPorts, addr.GetPortValue())
		}
		hcm := listenerHCM(t, l)
		if addr.GetPortValue() == tfGRPCPort {
			// TF Serving's gRPC port has its own ext_proc filter (checkGRPCListener).
			s.grpc = &grpcEnvoy{listener: l}
			for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					used[r.GetRoute().GetCluster()] = true
				}
			}
			continue
		}
		extProcFilter := httpFilter(hcm, extProcFilterName)
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				c := r.GetRoute().GetCluster()
				if _, ok := clusters[c]; !ok {
					t.Errorf("listener %s routes to unknown cluster %q", l.GetName(), c)
				}
				used[c] = true
				if d := r.GetRoute().GetTimeout().AsDuration(); d < 10*time.Second || d > 10*time.Minute {
					t.Errorf("listener %s: route timeout %v, want an explicit 10s..10m (Envoy's default is 15s)", l.GetName(), d)
				}
				if extProcFilter != nil && r.GetMatch().GetPrefix() == "/v1/" {
					tfRoute = r
				}
				if extProcFilter != nil {
					s.backendAddr = singleEndpoint(t, clusters[c]).GetSocketAddress()
				}
			}
		}
		if extProcFilter != nil {
			if tfsListener != nil {
				t.Errorf("listeners %s and %s both run ext_proc", tfsListener.GetName(), l.GetName())
			}
			tfsListener = l
			s.extProc = checkFilterChainOrder(t, hcm)
		}
		if filter := httpFilter(hcm, healthFilterName); filter != nil {
			s.readyPort, s.readyPath = addr.GetPortValue(), healthCheckPath(t, filter)
		}
	}
	// TF requests get TF's deadline, as through the reverse proxy; the
	// match is case-insensitive like tfsbridge's own routing.
	switch {
	case tfRoute == nil:
		t.Error(`no route for prefix "/v1/" on the ext_proc listener`)
	case tfRoute.GetRoute().GetTimeout().AsDuration() != tfDeadline:
		t.Errorf("/v1/ route timeout %v, want TF's deadline %v (tfsbridge --request-timeout)", tfRoute.GetRoute().GetTimeout().AsDuration(), tfDeadline)
	case tfRoute.GetMatch().GetCaseSensitive() == nil || tfRoute.GetMatch().GetCaseSensitive().GetValue():
		t.Error("/v1/ route must match case-insensitively (tfsbridge accepts /V1/MODELS/...)")
	}
	if tfsListener == nil {
		t.Fatal("no listener runs the ext_proc filter")
	}
	if p := tfsListener.GetAddress().GetSocketAddress(); p.GetAddress() != "0.0.0.0" || p.GetPortValue() != tfsPort {
		t.Errorf("ext_proc listener on %s:%d, want 0.0.0.0:%d", p.GetAddress(), p.GetPortValue(), tfsPort)
	}
	s.bufferLimit = tfsListener.GetPerConnectionBufferLimitBytes().GetValue()
	checkBufferLimit(t, "listener "+tfsListener.GetName(), s.bufferLimit, mode)
	if s.readyPath == "" || s.readyPort == 0 {
		t.Error("no listener answers readiness with the health_check filter")
	}

	checkExtProcConfig(t, s.extProc, mode)
	if s.grpc != nil {
		checkGRPCListener(t, s.grpc, clusters, s.extProc, mode)
	}
	extProcCluster := s.extProc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	c, ok := clusters[extProcCluster]
	if !ok {
		t.Fatalf("ext_proc points at unknown cluster %q", extProcCluster)
	}
	used[extProcCluster] = true
	checkExtProcCluster(t, c)
	s.extProcAddr = singleEndpoint(t, c)

	for name, c := range clusters {
		if !used[name] {
			t.Errorf("cluster %s is not used", name)
		}
		checkBufferLimit(t, "cluster "+name, c.GetPerConnectionBufferLimitBytes().GetValue(), mode)
	}
	if mode == fullDuplex {
		hcm := listenerHCM(t, tfsListener)
		idle := hcm.GetStreamIdleTimeout().AsDuration()
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if rt := r.GetRoute().GetTimeout().AsDuration(); idle <= rt {
					t.Errorf("stream_idle_timeout %v not above route %s's timeout %v: with no message_timeout it is what ends a stalled stream, and must not pre-empt the route's 504", idle, r.GetMatch().GetPrefix(), rt)
				}
			}
		}
	}
	return s
}

// checkBufferLimit checks a per_connection_buffer_limit_bytes (0: unset,
// Envoy's 1 MiB default) for the body mode: buffered bodies are held whole in
// it, so it must be raised (above it Envoy answers 413 or 500; docs/envoy-extproc.md, Body
// modes); full-duplex bodies never are, and a raised limit only lets Envoy
// queue more per connection.
func checkBufferLimit(t *testing.T, name string, limit uint32, mode bodyMode) {
	t.Helper()
	switch mode {
	case buffered:
		if limit < minBufferLimit {
			t.Errorf("%s: buffer limit %d < %d: BUFFERED bodies above it get 413", name, limit, minBufferLimit)
		}
	case fullDuplex:
		if limit > maxStreamingBuffer {
			t.Errorf("%s: buffer limit %d > %d: nothing is buffered whole in full-duplex mode", name, limit, maxStreamingBuffer)
		}
	}
}

// checkExtProcConfig asserts docs/architecture.md's ext_proc filter settings
// for a body mode: its processing_mode, fail closed, and, when buffered, mode
// override allowed and a message_timeout in seconds; when full-duplex, none
// of the two (Envoy honours neither in that mode, so setting them would only
// mislead).
func checkExtProcConfig(t *testing.T, ep *extprocv3.ExternalProcessor, mode bodyMode) {
	t.Helper()
	if got, err := bodyModeOf(ep.GetProcessingMode()); err != nil || got != mode {
		t.Errorf("processing_mode is not %s: %v", mode, err)
	}
	if diff := protoDiff(mode.processingMode(), ep.GetProcessingMode()); diff != "" {
		t.Errorf("processing_mode differs from docs/architecture.md's %s mode:\n%s", mode, diff)
	}
	if ep.GetFailureModeAllow() {
		t.Error("failure_mode_allow must be false: an untranslated TF body must not reach the v2 server")
	}
	if ep.GetObservabilityMode() {
		t.Error("observability_mode ignores every reply")
	}
	if ep.GetGrpcService().GetEnvoyGrpc() == nil {
		t.Error("ext_proc must use grpc_service.envoy_grpc")
	}
	mt := ep.GetMessageTimeout()
	switch mode {
	case buffered:
		if !ep.GetAllowModeOverride() {
			t.Error("allow_mode_override must be true: tfsbridge turns bodies off for paths it does not translate")
		}
		if mt == nil || mt.AsDuration() < minMessageTimeout {
			t.Errorf("message_timeout %v: want at least %v (the 200 ms default yields 504s)", mt.AsDuration(), minMessageTimeout)
		}
		if mm := ep.GetMaxMessageTimeout(); mm != nil && mm.AsDuration() < mt.AsDuration() {
			t.Errorf("max_message_timeout %v < message_timeout %v", mm.AsDuration(), mt.AsDuration())
		}
	case fullDuplex:
		if ep.GetAllowModeOverride() {
			t.Error("allow_mode_override set: Envoy does not honour mode_override in full-duplex mode (tfsbridge streams pass-through bodies back itself)")
		}
		if mt != nil || ep.GetMaxMessageTimeout() != nil {
			t.Error("message_timeout or max_message_timeout set: Envoy applies neither in full-duplex mode; tfsbridge's own deadline does the job")
		}
	}
}

// checkExtProcCluster asserts HTTP/2, the gRPC health check, raised circuit
// breakers and no HTTP/2 keepalive pings on the cluster tfsbridge sits behind.
func checkExtProcCluster(t *testing.T, c *clusterv3.Cluster) {
	t.Helper()
	anyOpts, ok := c.GetTypedExtensionProtocolOptions()[httpOptionsKey]
	if !ok {
		t.Fatalf("cluster %s: no %s: gRPC needs HTTP/2", c.GetName(), httpOptionsKey)
	}
	opts := &upstreamhttpv3.HttpProtocolOptions{}
	if err := anyOpts.UnmarshalTo(opts); err != nil {
		t.Fatal(err)
	}
	h2 := opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions()
	if h2 == nil {
		t.Fatalf("cluster %s: explicit_http_config.http2_protocol_options not set", c.GetName())
	}
	if h2.GetConnectionKeepalive() != nil {
		t.Errorf("cluster %s: connection_keepalive pings draw GOAWAY too_many_pings from grpc-go", c.GetName())
	}

	var healthChecked bool
	for _, hc := range c.GetHealthChecks() {
		if hc.GetGrpcHealthCheck().GetServiceName() == extProcHealthSvc {
			healthChecked = true
		}
	}
	if !healthChecked {
		t.Errorf("cluster %s: no gRPC health check on service %q", c.GetName(), extProcHealthSvc)
	}

	var def *clusterv3.CircuitBreakers_Thresholds
	for _, th := range c.GetCircuitBreakers().GetThresholds() {
		if th.GetPriority() == corev3.RoutingPriority_DEFAULT {
			def = th
		}
	}
	if def == nil {
		t.Fatalf("cluster %s: no DEFAULT circuit breaker thresholds (Envoy's 1024 overflow, docs/envoy-extproc.md: Timeouts and limits)", c.GetName())
	}
	for name, v := range map[string]uint32{
		"max_requests":         def.GetMaxRequests().GetValue(),
		"max_pending_requests": def.GetMaxPendingRequests().GetValue(),
	} {
		if v < minStreams {
			t.Errorf("cluster %s: %s = %d, want at least %d", c.GetName(), name, v, minStreams)
		}
	}
}

// checkFilterChainOrder asserts ext_proc runs once, before the router, and
// the router terminates the chain; it returns the ext_proc config.
func checkFilterChainOrder(t *testing.T, hcm *hcmv3.HttpConnectionManager) *extprocv3.ExternalProcessor {
	t.Helper()
	var names []string
	for _, f := range hcm.GetHttpFilters() {
		names = append(names, f.GetName())
	}
	if len(names) == 0 || names[len(names)-1] != routerFilterName {
		t.Errorf("http_filters %v: the router must come last", names)
	}
	if n := countOf(names, extProcFilterName); n != 1 {
		t.Errorf("http_filters %v: ext_proc %d times, want once", names, n)
	}
	ep := &extprocv3.ExternalProcessor{}
	if err := httpFilter(hcm, extProcFilterName).GetTypedConfig().UnmarshalTo(ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

// listenerHCM returns the HTTP connection manager of a listener with exactly
// one filter chain made of one HCM.
func listenerHCM(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	chains := l.GetFilterChains()
	if len(chains) != 1 || len(chains[0].GetFilters()) != 1 || chains[0].GetFilters()[0].GetName() != hcmFilterName {
		t.Fatalf("listener %s: want one filter chain with one %s", l.GetName(), hcmFilterName)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := chains[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatalf("listener %s: %v", l.GetName(), err)
	}
	return hcm
}

// httpFilter returns the named HTTP filter, or nil.
func httpFilter(hcm *hcmv3.HttpConnectionManager, name string) *hcmv3.HttpFilter {
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// healthCheckPath returns the exact :path a non-pass-through health_check
// filter answers.
func healthCheckPath(t *testing.T, f *hcmv3.HttpFilter) string {
	t.Helper()
	hc := &healthcheckv3.HealthCheck{}
	if err := f.GetTypedConfig().UnmarshalTo(hc); err != nil {
		t.Fatal(err)
	}
	if hc.GetPassThroughMode().GetValue() {
		t.Error("health_check in pass-through mode would forward probes upstream")
	}
	for _, h := range hc.GetHeaders() {
		if h.GetName() == ":path" && h.GetStringMatch().GetExact() != "" {
			return h.GetStringMatch().GetExact()
		}
	}
	t.Error("health_check filter does not match an exact :path")
	return ""
}

// singleEndpoint returns the only endpoint address of a static cluster:
// 127.0.0.1 (same pod) or a Unix socket (pipe) at an absolute path.
func singleEndpoint(t *testing.T, c *clusterv3.Cluster) *corev3.Address {
	t.Helper()
	var addrs []*corev3.Address
	for _, le := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range le.GetLbEndpoints() {
			addrs = append(addrs, lb.GetEndpoint().GetAddress())
		}
	}
	if len(addrs) != 1 {
		t.Fatalf("cluster %s: %d endpoints, want 1", c.GetName(), len(addrs))
	}
	if pipe := addrs[0].GetPipe(); pipe != nil {
		if !path.IsAbs(pipe.GetPath()) {
			t.Errorf("cluster %s: pipe %q, want an absolute path", c.GetName(), pipe.GetPath())
		}
	} else if a := addrs[0].GetSocketAddress().GetAddress(); a != "127.0.0.1" {
		t.Errorf("cluster %s: endpoint %s, want 127.0.0.1 (same pod)", c.GetName(), a)
	}
	return addrs[0]
}

func countOf(list []string, v string) int {
	n := 0
	for _, s := range list {
		if s == v {
			n++
		}
	}
	return n
}

// equalExtProc compares two ext_proc configs, ignoring which cluster each
// reaches tfsbridge through (a sidecar and a mesh name it differently).
func equalExtProc(a, b *extprocv3.ExternalProcessor) string {
	a, b = proto.Clone(a).(*extprocv3.ExternalProcessor), proto.Clone(b).(*extprocv3.ExternalProcessor)
	a.GrpcService, b.GrpcService = nil, nil
	return protoDiff(a, b)
}

// protoDiff returns "" if want and got are equal, else both in text form.
func protoDiff(want, got proto.Message) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "want: " + prototext.Format(want) + "\ngot:  " + prototext.Format(got)
}
