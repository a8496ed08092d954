package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istionetworking "istio.io/api/networking/v1alpha3"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

// modelMapLayouts are the overlays that mount a model map, with the
// Deployment that runs tfsbridge in each.
var modelMapLayouts = map[string]string{
	"model-map":         "model-server",
	"model-map-split":   "model-server",
	"model-map-gateway": "tfsbridge",
	"model-map-istio":   "tfsbridge",
}

// TestModelMapLayouts renders each overlay: the workload checks of every
// layout hold, TFSBRIDGE_MODEL_MAP names a file in a ConfigMap mounted as
// a directory (a subPath mount never sees updates, so hot reload would
// silently not happen), the ConfigMap keeps its name (no hash suffix, so an
// edit updates the mounted file in place) and the map in it is valid. And
// in each data plane a request tfsbridge marks for a server without a
// route of its own is refused, never sent to the default server with that
// server's bearer token (issue 18, item 8).
func TestModelMapLayouts(t *testing.T) {
	for dir, deployment := range modelMapLayouts {
		t.Run(dir, func(t *testing.T) {
			r := kustomizeBuild(t, dir)
			for _, d := range all[appsv1.Deployment](r) {
				checkDeployment(t, r, d)
			}
			d := one[appsv1.Deployment](t, r, deployment)
			m := mountedModelMap(t, r, d)
			switch dir {
			case "model-map":
				checkTwoServerEnvoy(t, r, d, m, dir)
			case "model-map-split":
				checkTwoServerEnvoy(t, r, d, m, dir)
				checkSplitExample(t, m)
			case "model-map-gateway":
				checkGatewayServerRoutes(t, r, m)
			case "model-map-istio":
				checkIstioServerRefusal(t, r, m)
			}
		})
	}
}

// mountedModelMap finds the map tfsbridge reads in d and parses it.
func mountedModelMap(t *testing.T, r *rendered, d *appsv1.Deployment) *modelmap.Map {
	t.Helper()
	var c *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "tfsbridge" {
			c = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("Deployment %s has no tfsbridge container", d.Name)
	}
	var path string
	for _, e := range c.Env {
		if e.Name == "TFSBRIDGE_MODEL_MAP" {
			path = e.Value
		}
	}
	if path == "" {
		t.Fatal("tfsbridge has no TFSBRIDGE_MODEL_MAP")
	}
	var volume string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == filepath.Dir(path) {
			if vm.SubPath != "" || !vm.ReadOnly {
				t.Errorf("model map mount %s: subPath %q, readOnly %v; want a read-only directory mount", vm.Name, vm.SubPath, vm.ReadOnly)
			}
			volume = vm.Name
		}
	}
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName != "tfsbridge-model-map" {
		t.Fatalf("%s is not in the ConfigMap tfsbridge-model-map mounted as a directory (volume %q, ConfigMap %q)", path, volume, cmName)
	}
	cm := one[corev1.ConfigMap](t, r, cmName)
	doc, ok := cm.Data[filepath.Base(path)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cmName, filepath.Base(path))
	}
	m, err := modelmap.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("the mounted model map is invalid: %v", err)
	}
	if len(m.Models) == 0 {
		t.Error("the example model map maps no model")
	}
	return m
}

// checkTwoServerEnvoy checks the sidecar overlay's Envoy: it parses
// strictly, its ext_proc filter and ext_proc endpoint are
// deploy/envoy/envoy.yaml's, it is the bootstrap the pod mounts, and its
// routes keep the model map's routing safe (checkServerRoutes).
// (checkSidecarBootstrap does not apply as a whole: a second server lives
// outside the pod.)
func checkTwoServerEnvoy(t *testing.T, r *rendered, d *appsv1.Deployment, m *modelmap.Map, dir string) {
	t.Helper()
	doc := readFile(t, dir+"/envoy.yaml")
	b, err := parseBootstrap(doc)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := parseBootstrap(readFile(t, "envoy/envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := equalExtProc(tfsExtProc(t, ref), tfsExtProc(t, b)); diff != "" {
		t.Errorf("ext_proc filter differs from deploy/envoy/envoy.yaml's:\n%s", diff)
	}
	// tfsbridge runs with deploy/kubernetes' --grpc-addr: Envoy must dial
	// the same socket as the bootstrap that layout was checked with.
	if want, got := extProcEndpoint(t, ref), extProcEndpoint(t, b); !proto.Equal(want, got) {
		t.Errorf("ext_proc cluster dials %v, deploy/envoy/envoy.yaml (tfsbridge's --grpc-addr in this pod) %v", got, want)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "envoy-config" && v.ConfigMap != nil {
			if cm := one[corev1.ConfigMap](t, r, v.ConfigMap.Name); cm.Data["envoy.yaml"] != string(doc) {
				t.Errorf("the pod does not mount %s/envoy.yaml", dir)
			}
		}
	}
	clusters := map[string]string{}
	for _, c := range b.GetStaticResources().GetClusters() {
		if addr := clusterAddr(c); addr != "" {
			clusters[c.GetName()] = addr
			if c.GetPerConnectionBufferLimitBytes().GetValue() < minBufferLimit {
				t.Errorf("cluster %s: buffer limit below %d", c.GetName(), minBufferLimit)
			}
		}
	}
	hcm := listenerHCM(t, tfsListener(t, b))
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		checkServerRoutes(t, vh.GetRoutes(), clusters, m)
	}
	checkTwoServerGRPC(t, r, d, b, m)
}

// checkServerRoutes checks the routes of the TF listener of a bootstrap
// with a model map (issue 18, item 8): first one route per map server,
// matching exactly its x-tfsbridge-server value and reaching a cluster at
// the server's URL with TF's deadline; then the refusal of any other
// value (serverRefusal), so a server added to the map without a route is
// answered with an error instead of reaching the default server with its
// bearer token; then the default server's routes, the last a catch-all to
// the pod's v2 server, and /v1/ with TF's deadline.
func checkServerRoutes(t *testing.T, routes []*routev3.Route, clusters map[string]string, m *modelmap.Map) {
	t.Helper()
	routed := map[string]bool{}
	refused, v1 := false, false
	for i, rt := range routes {
		hs := rt.GetMatch().GetHeaders()
		timeout := rt.GetRoute().GetTimeout().AsDuration()
		switch {
		case len(hs) == 1 && hs[0].GetPresentMatch():
			if err := serverRefusal(rt); err != nil {
				t.Errorf("route %d: %v", i, err)
			}
			refused = true
		case len(hs) > 0:
			server := hs[0].GetStringMatch().GetExact()
			if len(hs) != 1 || hs[0].GetName() != serverHeader || server == "" || hs[0].GetInvertMatch() {
				t.Errorf("route %d: want one exact match on %s, got %v", i, serverHeader, hs)
				continue
			}
			if refused {
				t.Errorf("route %d for server %q comes after the refusal of unknown servers: it is never reached", i, server)
			}
			srv := m.Server(server)
			if srv == nil {
				t.Errorf("route %d matches server %q, which the model map does not define", i, server)
				continue
			}
			u, err := url.Parse(srv.URL)
			if err != nil || clusters[rt.GetRoute().GetCluster()] != u.Host {
				t.Errorf("server %q is %s in the map but its route's cluster %s is at %s", server, srv.URL, rt.GetRoute().GetCluster(), clusters[rt.GetRoute().GetCluster()])
			}
			// Only TF requests carry the header.
			if timeout != tfDeadline {
				t.Errorf("route %d (server %q): timeout %v, want TF's deadline %v (tfsbridge --request-timeout)", i, server, timeout, tfDeadline)
			}
			routed[server] = true
		default:
			if !refused {
				t.Errorf("route %d, which every server value reaches, comes before the refusal of unknown servers: a request for a server without a route would reach the default server with that server's token", i)
			}
			if clusters[rt.GetRoute().GetCluster()] != net.JoinHostPort("127.0.0.1", strconv.Itoa(v2Port)) {
				t.Errorf("route %d: the routes without a server match must reach the pod's v2 server, not %s", i, rt.GetRoute().GetCluster())
			}
			if timeout < 10*time.Second {
				t.Errorf("route %d: timeout %v, want an explicit one of at least 10s", i, timeout)
			}
			if rt.GetMatch().GetPrefix() == "/v1/" {
				v1 = true
				if timeout != tfDeadline {
					t.Errorf("/v1/ route timeout %v, want TF's deadline %v (tfsbridge --request-timeout)", timeout, tfDeadline)
				}
			}
		}
	}
	if !refused {
		t.Errorf("no route refuses an %s value without a route of its own", serverHeader)
	}
	if !v1 {
		t.Error(`no "/v1/" route with TF's deadline for the default server`)
	}
	if n := len(routes); n == 0 || len(routes[n-1].GetMatch().GetHeaders()) > 0 || routes[n-1].GetMatch().GetPrefix() != "/" {
		t.Error("the last route must be the catch-all to the pod's v2 server")
	}
	for name := range m.Servers {
		if !routed[name] {
			t.Errorf("no Envoy route for the map's server %q", name)
		}
	}
}

// serverRefusal checks that rt refuses any request carrying
// x-tfsbridge-server (it comes after the routes of the known servers):
// whatever the path, with an error status and a body in TF's
// {"error": "..."} shape, which tfsbridge's response path turns into the
// TF client's answer.
func serverRefusal(rt *routev3.Route) error {
	hs := rt.GetMatch().GetHeaders()
	if len(hs) != 1 || hs[0].GetName() != serverHeader || !hs[0].GetPresentMatch() || hs[0].GetInvertMatch() {
		return fmt.Errorf("want one present_match on %s, got %v", serverHeader, hs)
	}
	if rt.GetMatch().GetPrefix() != "/" {
		return fmt.Errorf("matches prefix %q, want every path (\"/\"): the v2 path tfsbridge rewrote", rt.GetMatch().GetPrefix())
	}
	dr := rt.GetDirectResponse()
	if dr == nil || rt.GetRoute() != nil {
		return fmt.Errorf("want a direct_response, not a route to a cluster")
	}
	var ctype string
	for _, h := range rt.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), "content-type") {
			ctype = h.GetHeader().GetValue()
		}
	}
	return checkRefusalBody(int(dr.GetStatus()), ctype, dr.GetBody().GetInlineString())
}

// checkRefusalBody checks a refusal's status, content type and body: an
// error status and TF's {"error": "..."} JSON, nothing else.
func checkRefusalBody(status int, contentType, body string) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("status %d, want an error status", status)
	}
	if contentType != "application/json" {
		return fmt.Errorf("content-type %q, want application/json", contentType)
	}
	var e map[string]string
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e) != 1 || strings.TrimSpace(e["error"]) == "" {
		return fmt.Errorf(`body %q, want {"error": "..."} (TF's error shape): %w`, body, err)
	}
	return nil
}

// tfsListener returns the bootstrap's TF REST listener: the one on TF
// Serving's REST port that runs ext_proc (the TF gRPC listener runs it
// too, on 8500).
func tfsListener(t *testing.T, b *bootstrapv3.Bootstrap) *listenerv3.Listener {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetAddress().GetSocketAddress().GetPortValue() == tfsPort && httpFilter(listenerHCM(t, l), extProcFilterName) != nil {
			return l
		}
	}
	t.Fatalf("no listener on %d runs ext_proc", tfsPort)
	return nil
}

// extProcEndpoint returns the address the bootstrap's ext_proc cluster dials.
func extProcEndpoint(t *testing.T, b *bootstrapv3.Bootstrap) *corev3.Address {
	t.Helper()
	name := tfsExtProc(t, b).GetGrpcService().GetEnvoyGrpc().GetClusterName()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return singleEndpoint(t, c)
		}
	}
	t.Fatalf("no ext_proc cluster %q", name)
	return nil
}

// tfsExtProc returns the ext_proc filter of the bootstrap's TF REST listener.
func tfsExtProc(t *testing.T, b *bootstrapv3.Bootstrap) *extprocv3.ExternalProcessor {
	t.Helper()
	return checkFilterChainOrder(t, listenerHCM(t, tfsListener(t, b)))
}

// checkGatewayServerRoutes checks the Envoy Gateway overlay's HTTPRoute
// (the one tfsbridge's EnvoyExtensionPolicy targets): a rule per map
// server matching its x-tfsbridge-server value exactly, then a rule
// matching the header with any value on every path whose only filter is a
// direct response in TF's error shape.
func checkGatewayServerRoutes(t *testing.T, r *rendered, m *modelmap.Map) {
	t.Helper()
	pols := all[egv1a1.EnvoyExtensionPolicy](r)
	// The REST HTTPRoute first; the TF gRPC GRPCRoute (checkGatewayGRPCRoute) after it.
	if len(pols) != 1 || len(pols[0].Spec.TargetRefs) == 0 || pols[0].Spec.TargetRefs[0].Kind != "HTTPRoute" {
		t.Fatal("want one EnvoyExtensionPolicy whose first targetRef is the HTTPRoute")
	}
	route := one[gwapiv1.HTTPRoute](t, r, string(pols[0].Spec.TargetRefs[0].Name))
	routed := map[string]bool{}
	refused := false
	for i, rule := range route.Spec.Rules {
		for _, match := range rule.Matches {
			for _, h := range match.Headers {
				if !strings.EqualFold(string(h.Name), serverHeader) {
					continue
				}
				typ := gwapiv1.HeaderMatchExact
				if h.Type != nil {
					typ = *h.Type
				}
				switch {
				case typ == gwapiv1.HeaderMatchRegularExpression && h.Value == ".*":
					if err := gatewayRefusal(t, r, rule, match); err != nil {
						t.Errorf("rule %d: %v", i, err)
					}
					refused = true
				case typ == gwapiv1.HeaderMatchExact && m.Server(h.Value) != nil:
					if refused {
						t.Errorf("rule %d for server %q comes after the refusal of unknown servers", i, h.Value)
					}
					routed[h.Value] = true
				default:
					t.Errorf("rule %d: %s match %s %q: want Exact on a map server, or the refusal's RegularExpression \".*\"", i, serverHeader, typ, h.Value)
				}
			}
		}
	}
	if !refused {
		t.Errorf("HTTPRoute %s has no rule refusing an %s value without a rule of its own", route.Name, serverHeader)
	}
	for name := range m.Servers {
		if !routed[name] {
			t.Errorf("HTTPRoute %s has no rule for the map's server %q", route.Name, name)
		}
	}
}

// gatewayRefusal checks the HTTPRoute rule that refuses unknown servers.
func gatewayRefusal(t *testing.T, r *rendered, rule gwapiv1.HTTPRouteRule, match gwapiv1.HTTPRouteMatch) error {
	t.Helper()
	if match.Path == nil || match.Path.Type == nil || *match.Path.Type != gwapiv1.PathMatchPathPrefix || match.Path.Value == nil || *match.Path.Value != "/" {
		return fmt.Errorf("want PathPrefix /: the route is picked again on the rewritten v2 path")
	}
	if len(match.Headers) != 1 || match.Method != nil || len(match.QueryParams) > 0 {
		return fmt.Errorf("want the %s header as the only condition besides the path", serverHeader)
	}
	if len(rule.BackendRefs) > 0 || len(rule.Filters) != 1 || rule.Filters[0].ExtensionRef == nil {
		return fmt.Errorf("want no backendRefs and one ExtensionRef filter")
	}
	ref := rule.Filters[0].ExtensionRef
	if ref.Group != egv1a1.GroupName || ref.Kind != "HTTPRouteFilter" {
		return fmt.Errorf("filter %s/%s, want an Envoy Gateway HTTPRouteFilter", ref.Group, ref.Kind)
	}
	dr := one[egv1a1.HTTPRouteFilter](t, r, string(ref.Name)).Spec.DirectResponse
	if dr == nil || dr.StatusCode == nil || dr.ContentType == nil || dr.Body == nil || dr.Body.Inline == nil ||
		(dr.Body.Type != nil && *dr.Body.Type != egv1a1.ResponseValueTypeInline) {
		return fmt.Errorf("HTTPRouteFilter %s: want a directResponse with statusCode, contentType and an inline body", ref.Name)
	}
	return checkRefusalBody(*dr.StatusCode, *dr.ContentType, *dr.Body.Inline)
}

// checkIstioServerRefusal checks the Istio overlay: its ext_proc runs in
// the inbound sidecar of the default server's pods, whose only upstream is
// the pod, so every model must stay on the default server and an
// EnvoyFilter on the same pods and port puts the refusal of any
// x-tfsbridge-server value first among the inbound routes.
func checkIstioServerRefusal(t *testing.T, r *rendered, m *modelmap.Map) {
	t.Helper()
	if len(m.Servers) > 0 {
		t.Errorf("the map names servers %v, which an inbound sidecar cannot reach", m.Servers)
	}
	var extProc, refusal *istionetworking.EnvoyFilter
	for _, o := range all[istioObject](r) {
		ef, ok := o.Spec.(*istionetworking.EnvoyFilter)
		if !ok {
			continue
		}
		for _, cp := range ef.GetConfigPatches() {
			switch cp.GetApplyTo() {
			case istionetworking.EnvoyFilter_HTTP_FILTER:
				extProc = ef
			case istionetworking.EnvoyFilter_HTTP_ROUTE:
				refusal = ef
			}
		}
	}
	if extProc == nil || refusal == nil {
		t.Fatal("want an EnvoyFilter adding ext_proc and one patching an HTTP_ROUTE")
	}
	if !maps.Equal(extProc.GetWorkloadSelector().GetLabels(), refusal.GetWorkloadSelector().GetLabels()) {
		t.Errorf("the refusal selects %v, ext_proc runs on %v", refusal.GetWorkloadSelector().GetLabels(), extProc.GetWorkloadSelector().GetLabels())
	}
	// Every port ext_proc runs on needs the refusal: Triton's HTTP port
	// (REST) and its gRPC port (TF gRPC clients).
	ports := map[uint32]bool{}
	for _, cp := range extProc.GetConfigPatches() {
		if cp.GetApplyTo() == istionetworking.EnvoyFilter_HTTP_FILTER {
			ports[cp.GetMatch().GetListener().GetPortNumber()] = false
		}
	}
	if _, ok := ports[v2GRPCPort]; !ok {
		t.Errorf("ext_proc runs on ports %v, not on the v2 gRPC port %d", slices.Collect(maps.Keys(ports)), v2GRPCPort)
	}
	for _, cp := range refusal.GetConfigPatches() {
		if cp.GetApplyTo() != istionetworking.EnvoyFilter_HTTP_ROUTE {
			continue
		}
		match := cp.GetMatch()
		port := match.GetRouteConfiguration().GetPortNumber()
		if done, ok := ports[port]; match.GetContext() != istionetworking.EnvoyFilter_SIDECAR_INBOUND || !ok || done {
			t.Errorf("HTTP_ROUTE patch on %s port %d, want SIDECAR_INBOUND, once on each port ext_proc runs on (%v)", match.GetContext(), port, ports)
		}
		ports[port] = true
		if cp.GetPatch().GetOperation() != istionetworking.EnvoyFilter_Patch_INSERT_FIRST {
			t.Errorf("HTTP_ROUTE patch %s, want INSERT_FIRST: the route to the pod must not come first", cp.GetPatch().GetOperation())
		}
		value, err := protojson.Marshal(cp.GetPatch().GetValue())
		if err != nil {
			t.Fatal(err)
		}
		rt := &routev3.Route{}
		if err := decodeProtoStrict(value, rt); err != nil {
			t.Fatalf("HTTP_ROUTE patch: %v", err)
		}
		check := serverRefusal
		if port == v2GRPCPort {
			check = grpcServerRefusal
		}
		if err := check(rt); err != nil {
			t.Errorf("HTTP_ROUTE patch on port %d: %v", port, err)
		}
	}
	for port, refused := range ports {
		if !refused {
			t.Errorf("no refusal of unknown servers on port %d, where ext_proc runs: a call tfsbridge marks for another server would reach the default one", port)
		}
	}
}

// checkSplitExample checks that the split overlay shows what it is for: a
// model split between a TF Serving server and a v2 one, sticky on a key
// header. (That every server of the split has its Envoy route is
// checkServerRoutes' rule for every server of the map.)
func checkSplitExample(t *testing.T, m *modelmap.Map) {
	t.Helper()
	for _, mm := range m.Models {
		if mm.Split == nil || mm.Split.Key == "" {
			continue
		}
		var tf, v2 bool
		for _, sh := range mm.Split.Shares {
			if m.Server(sh.Server).TFServing() {
				tf = tf || sh.Weight > 0
			} else {
				v2 = v2 || sh.Weight > 0
			}
		}
		if tf && v2 {
			return
		}
	}
	t.Error("no model is split, sticky on a key, between a TF Serving server and a v2 one")
}
