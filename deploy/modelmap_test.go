package deploy

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tfsbridge/tfsbridge/proxy/modelmap"
)

// modelMapLayouts are the overlays that mount a model map, with the
// Deployment that runs tfsbridge in each.
var modelMapLayouts = map[string]string{
	"model-map":         "model-server",
	"model-map-gateway": "tfsbridge",
	"model-map-istio":   "tfsbridge",
}

// TestModelMapLayouts renders each overlay: the workload checks of every
// layout hold, TFSBRIDGE_MODEL_MAP names a file in a ConfigMap mounted as
// a directory (a subPath mount never sees updates, so hot reload would
// silently not happen), the ConfigMap keeps its name (no hash suffix, so an
// edit updates the mounted file in place) and the map in it is valid.
func TestModelMapLayouts(t *testing.T) {
	for dir, deployment := range modelMapLayouts {
		t.Run(dir, func(t *testing.T) {
			r := kustomizeBuild(t, dir)
			for _, d := range all[appsv1.Deployment](r) {
				checkDeployment(t, r, d)
			}
			d := one[appsv1.Deployment](t, r, deployment)
			m := mountedModelMap(t, r, d)
			if dir == "model-map" {
				checkTwoServerEnvoy(t, r, d, m)
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
// strictly, its ext_proc filter is deploy/envoy/envoy.yaml's, it is the
// bootstrap the pod mounts, and its header routes send each map server's
// x-tfsbridge-server value to a cluster at that server's URL, before the
// catch-all route to the pod's own v2 server. (checkSidecarBootstrap does
// not apply as a whole: a second server lives outside the pod.)
func checkTwoServerEnvoy(t *testing.T, r *rendered, d *appsv1.Deployment, m *modelmap.Map) {
	t.Helper()
	doc := readFile(t, "model-map/envoy.yaml")
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
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "envoy-config" && v.ConfigMap != nil {
			if cm := one[corev1.ConfigMap](t, r, v.ConfigMap.Name); cm.Data["envoy.yaml"] != string(doc) {
				t.Error("the pod does not mount model-map/envoy.yaml")
			}
		}
	}
	clusters := map[string]string{}
	for _, c := range b.GetStaticResources().GetClusters() {
		if eps := c.GetLoadAssignment().GetEndpoints(); len(eps) == 1 && len(eps[0].GetLbEndpoints()) == 1 {
			a := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			clusters[c.GetName()] = net.JoinHostPort(a.GetAddress(), strconv.Itoa(int(a.GetPortValue())))
			if c.GetPerConnectionBufferLimitBytes().GetValue() < minBufferLimit {
				t.Errorf("cluster %s: buffer limit below %d", c.GetName(), minBufferLimit)
			}
		}
	}
	routed := map[string]bool{}
	for _, l := range b.GetStaticResources().GetListeners() {
		hcm := listenerHCM(t, l)
		if httpFilter(hcm, extProcFilterName) == nil {
			continue
		}
		for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
			routes := vh.GetRoutes()
			for i, rt := range routes {
				hs := rt.GetMatch().GetHeaders()
				if rt.GetRoute().GetTimeout().AsDuration() < 10*time.Second {
					t.Errorf("route %d: timeout %v, want an explicit one of at least 10s", i, rt.GetRoute().GetTimeout().AsDuration())
				}
				if len(hs) == 0 {
					if i != len(routes)-1 || clusters[rt.GetRoute().GetCluster()] != net.JoinHostPort("127.0.0.1", strconv.Itoa(v2Port)) {
						t.Errorf("route %d: the catch-all route must come last and reach the pod's v2 server", i)
					}
					continue
				}
				server := hs[0].GetStringMatch().GetExact()
				if len(hs) != 1 || hs[0].GetName() != "x-tfsbridge-server" || server == "" {
					t.Errorf("route %d: want one exact match on x-tfsbridge-server, got %v", i, hs)
					continue
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
				routed[server] = true
			}
		}
	}
	for name := range m.Servers {
		if !routed[name] {
			t.Errorf("no Envoy route for the map's server %q", name)
		}
	}
}

// tfsExtProc returns the ext_proc filter of the bootstrap's TF listener.
func tfsExtProc(t *testing.T, b *bootstrapv3.Bootstrap) *extprocv3.ExternalProcessor {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if hcm := listenerHCM(t, l); httpFilter(hcm, extProcFilterName) != nil {
			return checkFilterChainOrder(t, hcm)
		}
	}
	t.Fatal("no listener runs ext_proc")
	return nil
}
