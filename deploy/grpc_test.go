package deploy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	istionetworking "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// tfGRPCPrefixes are the route prefixes of TF Serving's gRPC services.
var tfGRPCPrefixes = []string{"/tensorflow.serving.PredictionService/", "/tensorflow.serving.ModelService/"}

// grpcEnvoy is a bootstrap's TF gRPC listener and what checkGRPCListener found.
type grpcEnvoy struct {
	listener    *listenerv3.Listener
	extProc     *extprocv3.ExternalProcessor
	backendAddr *corev3.SocketAddress // the v2 gRPC cluster's endpoint
}

// grpcProcessingMode is the processing mode of TF gRPC routes (docs/grpc.md; spec grpc.md
// §5.2): the buffered mode with the response trailers sent, where grpc-status is.
func grpcProcessingMode() *extprocv3.ProcessingMode {
	pm := buffered.processingMode()
	pm.ResponseTrailerMode = extprocv3.ProcessingMode_SEND
	return pm
}

// checkGRPCListener asserts the TF gRPC listener of a buffered sidecar bootstrap: HTTP/2
// on TF Serving's gRPC port, routes for exactly PredictionService and ModelService to an
// HTTP/2 cluster on the v2 server's gRPC port, with TF's deadline and the client's
// grpc-timeout honoured, and an ext_proc filter equal to the REST one (rest) but for the
// response trailers, which it sends.
func checkGRPCListener(t *testing.T, g *grpcEnvoy, clusters map[string]*clusterv3.Cluster, rest *extprocv3.ExternalProcessor, mode bodyMode) {
	t.Helper()
	l := g.listener
	want := grpcProcessingMode()
	if mode == fullDuplex {
		want = mode.processingMode() // trailers SEND already, as Envoy requires
	}
	if p := l.GetAddress().GetSocketAddress(); p.GetAddress() != "0.0.0.0" {
		t.Errorf("TF gRPC listener on %s, want 0.0.0.0", p.GetAddress())
	}
	checkBufferLimit(t, "listener "+l.GetName(), l.GetPerConnectionBufferLimitBytes().GetValue(), mode)
	hcm := listenerHCM(t, l)
	if hcm.GetCodecType() != hcmv3.HttpConnectionManager_HTTP2 && hcm.GetCodecType() != hcmv3.HttpConnectionManager_AUTO {
		t.Errorf("listener %s: codec %s cannot take h2c gRPC clients", l.GetName(), hcm.GetCodecType())
	}
	g.extProc = checkFilterChainOrder(t, hcm)
	if diff := protoDiff(want, g.extProc.GetProcessingMode()); diff != "" {
		t.Errorf("TF gRPC processing_mode:\n%s", diff)
	}
	same := proto.Clone(g.extProc).(*extprocv3.ExternalProcessor)
	same.ProcessingMode = rest.GetProcessingMode()
	if diff := protoDiff(rest, same); diff != "" {
		t.Errorf("TF gRPC ext_proc differs from the REST listener's beyond its trailer mode:\n%s", diff)
	}

	var prefixes []string
	var cluster string
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			prefixes = append(prefixes, r.GetMatch().GetPrefix())
			if cluster != "" && r.GetRoute().GetCluster() != cluster {
				t.Errorf("TF gRPC routes go to %s and %s, want one v2 gRPC cluster", cluster, r.GetRoute().GetCluster())
			}
			cluster = r.GetRoute().GetCluster()
			if d := r.GetRoute().GetTimeout().AsDuration(); d != tfDeadline {
				t.Errorf("route %s: timeout %v, want TF's deadline %v", r.GetMatch().GetPrefix(), d, tfDeadline)
			}
			if msd := r.GetRoute().GetMaxStreamDuration(); msd.GetGrpcTimeoutHeaderMax() == nil || msd.GetGrpcTimeoutHeaderMax().AsDuration() != 0 {
				t.Errorf("route %s: max_stream_duration.grpc_timeout_header_max must be 0s (honour the client's grpc-timeout)", r.GetMatch().GetPrefix())
			}
		}
	}
	if !slices.Equal(prefixes, tfGRPCPrefixes) {
		t.Errorf("TF gRPC route prefixes %v, want %v", prefixes, tfGRPCPrefixes)
	}
	c, ok := clusters[cluster]
	if !ok {
		t.Fatalf("TF gRPC routes go to unknown cluster %q", cluster)
	}
	if !http2Cluster(c) {
		t.Errorf("cluster %s: the v2 server's gRPC port needs http2_protocol_options", c.GetName())
	}
	g.backendAddr = singleEndpoint(t, c).GetSocketAddress()
	if g.backendAddr.GetPortValue() != v2GRPCPort {
		t.Errorf("cluster %s: port %d, want the v2 server's gRPC port %d", c.GetName(), g.backendAddr.GetPortValue(), v2GRPCPort)
	}
}

// TestEnvoyGRPCRoutes: every sidecar bootstrap serves TF Serving's gRPC port.
func TestEnvoyGRPCRoutes(t *testing.T) {
	for _, f := range bootstrapFiles(t) {
		t.Run(f, func(t *testing.T) {
			b, err := parseBootstrap(readFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			s := checkSidecarBootstrap(t, b, bootstrapModes[f])
			if s.grpc == nil || s.grpc.extProc == nil {
				t.Fatalf("no TF gRPC listener on %d", tfGRPCPort)
			}
			if !slices.Contains(s.listenerPorts, tfGRPCPort) {
				t.Errorf("listener ports %v lack %d", s.listenerPorts, tfGRPCPort)
			}
		})
	}
}

// TestGRPCBackends: the v2 server behind the TF gRPC listener serves gRPC where Envoy's
// v2 gRPC cluster points, in the compose layout (the mock's --grpc-addr) and in the
// Kubernetes pod (Triton's --grpc-port), and the TF gRPC port is published.
func TestGRPCBackends(t *testing.T) {
	b, err := parseBootstrap(readFile(t, "envoy/envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := checkSidecarBootstrap(t, b, buffered).grpc
	if g == nil {
		t.Fatal("envoy/envoy.yaml: no TF gRPC listener")
	}
	backend := net.JoinHostPort(g.backendAddr.GetAddress(), strconv.Itoa(int(g.backendAddr.GetPortValue())))

	mock, err := loadCompose(t).GetService("mock")
	if err != nil {
		t.Fatal(err)
	}
	if sub, flags := composeFlags(t, "mock", mock.Command); sub != "mock" || flags["grpc-addr"] != backend {
		t.Errorf("compose mock --grpc-addr=%s, Envoy's v2 gRPC cluster is %s", flags["grpc-addr"], backend)
	}

	r := kustomizeBuild(t, "kubernetes")
	d := one[appsv1.Deployment](t, r, "model-server")
	triton := container(t, d, "triton")
	if !slices.Contains(triton.Args, fmt.Sprintf("--grpc-port=%d", g.backendAddr.GetPortValue())) {
		t.Errorf("triton args %v: want --grpc-port=%d (Envoy's v2 gRPC cluster)", triton.Args, g.backendAddr.GetPortValue())
	}
	svc := one[corev1.Service](t, r, "model-server")
	if p := servicePort(t, svc, "grpc-tfs"); p.Port != tfGRPCPort {
		t.Errorf("Service %s port grpc-tfs = %d, want TF Serving's gRPC port %d", svc.Name, p.Port, tfGRPCPort)
	}
}

// grpcFilterPatch marks, among an EnvoyFilter's applied patch kinds, the TF gRPC filter on
// the v2 server's gRPC port.
const grpcFilterPatch istionetworking.EnvoyFilter_ApplyTo = -1

// referenceGRPCExtProc returns the TF gRPC ext_proc filter of the body mode's reference
// bootstrap.
func referenceGRPCExtProc(t *testing.T, mode bodyMode) *extprocv3.ExternalProcessor {
	t.Helper()
	b, err := parseBootstrap(readFile(t, referenceBootstraps[mode]))
	if err != nil {
		t.Fatal(err)
	}
	g := checkSidecarBootstrap(t, b, mode).grpc
	if g == nil {
		t.Fatalf("%s: no TF gRPC listener", referenceBootstraps[mode])
	}
	return g.extProc
}

// checkGatewayGRPCRoute checks the Envoy Gateway GRPCRoute the ext_proc policy also runs
// on: TF Serving's two services, exactly, to the v2 server tfsbridge reads metadata from,
// on its gRPC port, from a Gateway listener on TF Serving's gRPC port.
func checkGatewayGRPCRoute(t *testing.T, r *rendered, name string, args tfsbridgeArgs) {
	t.Helper()
	route := one[gwapiv1.GRPCRoute](t, r, name)
	if len(route.Spec.Rules) != 1 || len(route.Spec.Rules[0].BackendRefs) != 1 {
		t.Fatalf("GRPCRoute %s: want one rule with one backendRef", name)
	}
	rule := route.Spec.Rules[0]
	var services []string
	for _, m := range rule.Matches {
		if m.Method == nil || m.Method.Service == nil || m.Method.Method != nil || (m.Method.Type != nil && *m.Method.Type != gwapiv1.GRPCMethodMatchExact) {
			t.Errorf("GRPCRoute %s: match %+v, want an exact service match", name, m)
			continue
		}
		services = append(services, *m.Method.Service)
	}
	if want := []string{"tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"}; !slices.Equal(services, want) {
		t.Errorf("GRPCRoute %s matches %v, want %v", name, services, want)
	}
	backend := rule.BackendRefs[0].BackendObjectReference
	if backend.Port == nil || string(backend.Name) != args.backend.Hostname() || *backend.Port != v2GRPCPort {
		t.Errorf("GRPCRoute %s sends to %s (port %s), want %s:%d (tfsbridge's --backend host, the v2 gRPC port)", name, backend.Name, portString(backend.Port), args.backend.Hostname(), v2GRPCPort)
	}
	if len(route.Spec.ParentRefs) != 1 || route.Spec.ParentRefs[0].SectionName == nil {
		t.Fatalf("GRPCRoute %s: want one parentRef with a sectionName", name)
	}
	parent := route.Spec.ParentRefs[0]
	gw := one[gwapiv1.Gateway](t, r, string(parent.Name))
	var ok bool
	for _, l := range gw.Spec.Listeners {
		ok = ok || (l.Name == *parent.SectionName && l.Port == tfGRPCPort && l.Protocol == gwapiv1.HTTPProtocolType)
	}
	if !ok {
		t.Errorf("Gateway %s listener %s: want HTTP (h2c) on %d", gw.Name, *parent.SectionName, tfGRPCPort)
	}
}
