package deploy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

// checkTwoServerGRPC checks the TF gRPC side of a sidecar overlay with a
// model map: the bootstrap has deploy/envoy/envoy.yaml's TF gRPC listener
// (same ext_proc filter: buffered, response trailers sent, mode override),
// its routes send each map server's calls to that server's grpc: address
// (checkGRPCServerRoutes), and the pod publishes TF Serving's gRPC port.
func checkTwoServerGRPC(t *testing.T, r *rendered, d *appsv1.Deployment, b *bootstrapv3.Bootstrap, m *modelmap.Map) {
	t.Helper()
	l := grpcListener(b)
	if l == nil {
		t.Fatalf("no TF gRPC listener on %d: TF gRPC clients would not reach the map's servers", tfGRPCPort)
	}
	hcm := listenerHCM(t, l)
	if hcm.GetCodecType() != hcmv3.HttpConnectionManager_HTTP2 {
		t.Errorf("listener %s: codec %s, want HTTP2 (h2c gRPC clients)", l.GetName(), hcm.GetCodecType())
	}
	if got := l.GetPerConnectionBufferLimitBytes().GetValue(); got < minBufferLimit {
		t.Errorf("listener %s: buffer limit %d below %d", l.GetName(), got, minBufferLimit)
	}
	if diff := protoDiff(referenceGRPCExtProc(t, buffered), checkFilterChainOrder(t, hcm)); diff != "" {
		t.Errorf("TF gRPC ext_proc differs from deploy/envoy/envoy.yaml's:\n%s", diff)
	}
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	vhs := hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 {
		t.Fatalf("listener %s: %d virtual hosts, want 1", l.GetName(), len(vhs))
	}
	checkGRPCServerRoutes(t, vhs[0].GetRoutes(), clusters, m)

	svc := one[corev1.Service](t, r, d.Name)
	p := servicePort(t, svc, "grpc-tfs")
	if c, cp, ok := serviceTarget(d, p); p.Port != tfGRPCPort || !ok || c != "envoy" || cp.ContainerPort != tfGRPCPort {
		t.Errorf("Service %s port grpc-tfs: %d to container %q port %d, want %d to Envoy's TF gRPC listener", svc.Name, p.Port, c, cp.ContainerPort, tfGRPCPort)
	}
}

// grpcListener returns the bootstrap's listener on TF Serving's gRPC port.
func grpcListener(b *bootstrapv3.Bootstrap) *listenerv3.Listener {
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetAddress().GetSocketAddress().GetPortValue() == tfGRPCPort {
			return l
		}
	}
	return nil
}

// checkGRPCServerRoutes checks the TF gRPC routes of a bootstrap with a
// model map, as checkServerRoutes does the REST ones: first one route per
// map server, an exact x-tfsbridge-server match on every path (tfsbridge
// clears the route cache after rewriting :path to the v2 method, or
// leaving TF's for a TF Serving server) to an HTTP/2 cluster at the
// server's grpc: address; then the refusal of any other value; then TF
// Serving's two services to the pod's v2 gRPC port. Every route has TF's
// deadline and honours the client's grpc-timeout.
func checkGRPCServerRoutes(t *testing.T, routes []*routev3.Route, clusters map[string]*clusterv3.Cluster, m *modelmap.Map) {
	t.Helper()
	routed := map[string]bool{}
	refused := false
	var prefixes []string
	for i, rt := range routes {
		hs := rt.GetMatch().GetHeaders()
		if len(hs) == 1 && hs[0].GetPresentMatch() {
			if err := grpcServerRefusal(rt); err != nil {
				t.Errorf("gRPC route %d: %v", i, err)
			}
			refused = true
			continue
		}
		checkGRPCRouteTimeouts(t, i, rt)
		c := clusters[rt.GetRoute().GetCluster()]
		if c == nil {
			t.Errorf("gRPC route %d goes to unknown cluster %q", i, rt.GetRoute().GetCluster())
			continue
		}
		if !http2Cluster(c) {
			t.Errorf("cluster %s: a gRPC port needs http2_protocol_options", c.GetName())
		}
		addr := clusterAddr(c)
		if len(hs) == 0 {
			if !refused {
				t.Errorf("gRPC route %d, which every server value reaches, comes before the refusal of unknown servers", i)
			}
			if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(v2GRPCPort)); addr != want {
				t.Errorf("gRPC route %d (%s): cluster %s at %s, want the pod's v2 gRPC port %s", i, rt.GetMatch().GetPrefix(), c.GetName(), addr, want)
			}
			prefixes = append(prefixes, rt.GetMatch().GetPrefix())
			continue
		}
		server := hs[0].GetStringMatch().GetExact()
		if len(hs) != 1 || hs[0].GetName() != serverHeader || server == "" || hs[0].GetInvertMatch() {
			t.Errorf("gRPC route %d: want one exact match on %s, got %v", i, serverHeader, hs)
			continue
		}
		if refused {
			t.Errorf("gRPC route %d for server %q comes after the refusal of unknown servers: it is never reached", i, server)
		}
		if rt.GetMatch().GetPrefix() != "/" {
			t.Errorf("gRPC route %d (server %q): prefix %q, want \"/\": the route is picked again on the v2 method tfsbridge wrote", i, server, rt.GetMatch().GetPrefix())
		}
		srv := m.Server(server)
		switch {
		case srv == nil:
			t.Errorf("gRPC route %d matches server %q, which the model map does not define", i, server)
		case srv.GRPC == "":
			t.Errorf("server %q has an Envoy gRPC route but no grpc: address in the map", server)
		case addr != srv.GRPC:
			t.Errorf("server %q's grpc: is %s in the map but its gRPC route's cluster %s is at %s", server, srv.GRPC, c.GetName(), addr)
		}
		routed[server] = true
	}
	if !refused {
		t.Errorf("no gRPC route refuses an %s value without a route of its own", serverHeader)
	}
	if !slices.Equal(prefixes, tfGRPCPrefixes) {
		t.Errorf("default-server gRPC route prefixes %v, want %v", prefixes, tfGRPCPrefixes)
	}
	for name := range m.Servers {
		if !routed[name] {
			t.Errorf("no Envoy gRPC route for the map's server %q", name)
		}
	}
}

// checkGRPCRouteTimeouts checks a TF gRPC route's deadline: TF's, or the
// client's shorter grpc-timeout.
func checkGRPCRouteTimeouts(t *testing.T, i int, rt *routev3.Route) {
	t.Helper()
	if d := rt.GetRoute().GetTimeout().AsDuration(); d != tfDeadline {
		t.Errorf("gRPC route %d: timeout %v, want TF's deadline %v", i, d, tfDeadline)
	}
	if msd := rt.GetRoute().GetMaxStreamDuration(); msd.GetGrpcTimeoutHeaderMax() == nil || msd.GetGrpcTimeoutHeaderMax().AsDuration() != 0 {
		t.Errorf("gRPC route %d: max_stream_duration.grpc_timeout_header_max must be 0s (honour the client's grpc-timeout)", i)
	}
}

// grpcServerRefusal checks the TF gRPC listener's refusal of unknown
// servers: every path, a direct_response with an error status and a text.
// Envoy answers a gRPC request's local reply trailers-only, the status
// mapped to grpc-status (503: UNAVAILABLE) and the text as grpc-message,
// so no content-type may be forced on it.
func grpcServerRefusal(rt *routev3.Route) error {
	hs := rt.GetMatch().GetHeaders()
	if hs[0].GetName() != serverHeader || hs[0].GetInvertMatch() {
		return fmt.Errorf("want one present_match on %s, got %v", serverHeader, hs)
	}
	if rt.GetMatch().GetPrefix() != "/" {
		return fmt.Errorf("matches prefix %q, want every path (\"/\")", rt.GetMatch().GetPrefix())
	}
	dr := rt.GetDirectResponse()
	if dr == nil || rt.GetRoute() != nil {
		return fmt.Errorf("want a direct_response, not a route to a cluster")
	}
	if dr.GetStatus() < 500 || dr.GetStatus() > 599 {
		return fmt.Errorf("status %d, want a 5xx (a gRPC UNAVAILABLE or INTERNAL)", dr.GetStatus())
	}
	if strings.TrimSpace(dr.GetBody().GetInlineString()) == "" {
		return fmt.Errorf("no text: the client's grpc-message would be empty")
	}
	for _, h := range rt.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), "content-type") {
			return fmt.Errorf("sets content-type %q: Envoy's gRPC local reply must keep application/grpc", h.GetHeader().GetValue())
		}
	}
	return nil
}

// http2Cluster reports whether Envoy speaks HTTP/2 to c's upstream.
func http2Cluster(c *clusterv3.Cluster) bool {
	anyOpts, ok := c.GetTypedExtensionProtocolOptions()[httpOptionsKey]
	opts := &upstreamhttpv3.HttpProtocolOptions{}
	return ok && anyOpts.UnmarshalTo(opts) == nil && opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// clusterAddr returns a single-endpoint cluster's host:port, "" otherwise.
func clusterAddr(c *clusterv3.Cluster) string {
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		return ""
	}
	a := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	return net.JoinHostPort(a.GetAddress(), strconv.Itoa(int(a.GetPortValue())))
}
