package deploy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istionetworking "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// istioLayouts are the Istio layouts with the body mode each runs.
var istioLayouts = map[string]bodyMode{"istio": buffered, "istio-full-duplex": fullDuplex}

// TestIstio cross-checks the Istio add-ons, in both body modes: the
// EnvoyFilter's embedded Envoy config is valid, equals the ext_proc filter
// of the sidecar bootstrap of the same mode, reaches tfsbridge through the
// cluster Istio generates for its Service, and sits on the port tfsbridge's
// backend serves; buffer limits are raised exactly when bodies are buffered,
// tfsbridge's --body-mode matches, and the DestinationRule speaks HTTP/2 to it.
func TestIstio(t *testing.T) {
	for dir, mode := range istioLayouts {
		t.Run(dir, func(t *testing.T) { checkIstio(t, dir, mode) })
	}
}

func checkIstio(t *testing.T, dir string, mode bodyMode) {
	r := kustomizeBuild(t, dir)
	args := onlyTfsbridge(t, r)
	checkBodyModeFlag(t, args, mode)

	namespaces := all[corev1.Namespace](r)
	if len(namespaces) != 1 || namespaces[0].Labels["istio-injection"] != "enabled" {
		t.Fatal("want one Namespace labelled istio-injection=enabled")
	}
	ns := namespaces[0].Name
	for _, o := range r.objects {
		if o.kind != "v1/Namespace" && o.ns != ns {
			t.Errorf("%s %s in namespace %q, want %q", o.kind, o.name, o.ns, ns)
		}
	}

	svc := one[corev1.Service](t, r, "tfsbridge")
	var grpcPort int32
	for _, p := range svc.Spec.Ports {
		if strings.HasPrefix(p.Name, "grpc-") {
			grpcPort = p.Port
		}
	}
	if grpcPort == 0 {
		t.Fatalf("Service %s: no port named grpc-*; Istio would not speak HTTP/2 to it", svc.Name)
	}
	checkExtProcServicePort(t, r, svc, grpcPort, args)
	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, ns)
	extProcCluster := fmt.Sprintf("outbound|%d||%s", grpcPort, fqdn)

	ef := istioSpec[*istionetworking.EnvoyFilter](t, r, "networking.istio.io/v1alpha3/EnvoyFilter")
	selector := ef.GetWorkloadSelector().GetLabels()
	if len(selector) == 0 {
		t.Error("EnvoyFilter without workloadSelector patches every sidecar of the namespace")
	}
	for _, d := range all[appsv1.Deployment](r) {
		if subset(selector, d.Spec.Template.Labels) {
			t.Errorf("EnvoyFilter selects %s; it belongs on the v2 server's pods", d.Name)
		}
	}

	applied := map[istionetworking.EnvoyFilter_ApplyTo]bool{}
	for i, cp := range ef.GetConfigPatches() {
		name := fmt.Sprintf("configPatches[%d] %s", i, cp.GetApplyTo())
		applied[cp.GetApplyTo()] = true
		value, err := protojson.Marshal(cp.GetPatch().GetValue())
		if err != nil {
			t.Fatal(err)
		}
		match := cp.GetMatch()
		switch cp.GetApplyTo() {
		case istionetworking.EnvoyFilter_HTTP_FILTER:
			l := match.GetListener()
			if match.GetContext() != istionetworking.EnvoyFilter_SIDECAR_INBOUND ||
				l.GetFilterChain().GetFilter().GetName() != hcmFilterName ||
				l.GetFilterChain().GetFilter().GetSubFilter().GetName() != routerFilterName ||
				cp.GetPatch().GetOperation() != istionetworking.EnvoyFilter_Patch_INSERT_BEFORE {
				t.Errorf("%s: want INSERT_BEFORE the router of the SIDECAR_INBOUND HCM", name)
			}
			grpcFilter := l.GetPortNumber() == v2GRPCPort
			if !grpcFilter && strconv.Itoa(int(l.GetPortNumber())) != args.backend.Port() {
				t.Errorf("%s: on port %d, tfsbridge's backend is %s (or the v2 gRPC port %d)", name, l.GetPortNumber(), args.backend, v2GRPCPort)
			}
			f := &hcmv3.HttpFilter{}
			if err := decodeProtoStrict(value, f); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ep := &extprocv3.ExternalProcessor{}
			if f.GetName() != extProcFilterName || f.GetTypedConfig().UnmarshalTo(ep) != nil {
				t.Fatalf("%s: want the ext_proc filter, got %s", name, f.GetName())
			}
			if got := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != extProcCluster {
				t.Errorf("%s: cluster_name %q, Istio names tfsbridge's cluster %q", name, got, extProcCluster)
			}
			if grpcFilter {
				// TF gRPC on Triton's gRPC port: the bootstrap's TF gRPC filter.
				applied[grpcFilterPatch] = true
				if diff := equalExtProc(referenceGRPCExtProc(t, mode), ep); diff != "" {
					t.Errorf("%s differs from %s's TF gRPC ext_proc filter:\n%s", name, referenceBootstraps[mode], diff)
				}
				continue
			}
			checkExtProcConfig(t, ep, mode)
			if diff := equalExtProc(referenceExtProc(t, mode), ep); diff != "" {
				t.Errorf("%s differs from %s's ext_proc filter:\n%s", name, referenceBootstraps[mode], diff)
			}
		case istionetworking.EnvoyFilter_LISTENER:
			l := &listenerv3.Listener{}
			if err := decodeMergePatch(value, &listenerv3.Listener{Name: "virtualInbound"}, l); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkPatchedLimit(t, name, match.GetContext() == istionetworking.EnvoyFilter_SIDECAR_INBOUND, cp, l.GetPerConnectionBufferLimitBytes().GetValue(), args)
		case istionetworking.EnvoyFilter_CLUSTER:
			c := &clusterv3.Cluster{}
			if err := decodeMergePatch(value, &clusterv3.Cluster{Name: match.GetCluster().GetName()}, c); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if match.GetCluster().GetName() != extProcCluster {
				t.Errorf("%s: patches %q, want %q", name, match.GetCluster().GetName(), extProcCluster)
			}
			checkPatchedLimit(t, name, match.GetContext() == istionetworking.EnvoyFilter_SIDECAR_OUTBOUND, cp, c.GetPerConnectionBufferLimitBytes().GetValue(), args)
		default:
			t.Errorf("%s: unexpected patch", name)
		}
	}
	// Buffered bodies need the listener's and the ext_proc cluster's buffer
	// raised; full-duplex ones keep Istio's defaults.
	for _, want := range []istionetworking.EnvoyFilter_ApplyTo{istionetworking.EnvoyFilter_LISTENER, istionetworking.EnvoyFilter_CLUSTER} {
		if applied[want] != (mode == buffered) {
			t.Errorf("%s patch present: %v; want it exactly in buffered mode", want, applied[want])
		}
	}
	if !applied[istionetworking.EnvoyFilter_HTTP_FILTER] {
		t.Error("no HTTP_FILTER patch")
	}
	if !applied[grpcFilterPatch] {
		t.Errorf("no HTTP_FILTER patch on the v2 server's gRPC port %d (TF gRPC clients)", v2GRPCPort)
	}

	dr := istioSpec[*istionetworking.DestinationRule](t, r, "networking.istio.io/v1/DestinationRule")
	if dr.GetHost() != fqdn {
		t.Errorf("DestinationRule host %q, want %q", dr.GetHost(), fqdn)
	}
	pool := dr.GetTrafficPolicy().GetConnectionPool().GetHttp()
	if pool.GetH2UpgradePolicy() != istionetworking.ConnectionPoolSettings_HTTPSettings_UPGRADE {
		t.Error("DestinationRule must upgrade to HTTP/2 (gRPC)")
	}
	if pool.GetHttp2MaxRequests() < minStreams || pool.GetHttp1MaxPendingRequests() < minStreams {
		t.Errorf("DestinationRule http2MaxRequests %d / http1MaxPendingRequests %d, want at least %d",
			pool.GetHttp2MaxRequests(), pool.GetHttp1MaxPendingRequests(), minStreams)
	}
}

// decodeMergePatch decodes a MERGE patch value strictly into patch, then
// validates it merged onto base (the object Istio generates, reduced to its
// required fields), as Istio applies it with proto.Merge.
func decodeMergePatch(value []byte, base, patch proto.Message) error {
	if err := unmarshalProtoStrict(value, patch); err != nil {
		return err
	}
	merged := proto.Clone(base)
	proto.Merge(merged, patch)
	return validateDeep(merged)
}

// checkPatchedLimit checks a MERGE patch that raises a buffer limit.
func checkPatchedLimit(t *testing.T, name string, rightContext bool, cp *istionetworking.EnvoyFilter_EnvoyConfigObjectPatch, limit uint32, args tfsbridgeArgs) {
	t.Helper()
	if !rightContext || cp.GetPatch().GetOperation() != istionetworking.EnvoyFilter_Patch_MERGE {
		t.Errorf("%s: want a MERGE in the context of the traffic it buffers", name)
	}
	if limit < minBufferLimit || int64(limit) > args.maxBody {
		t.Errorf("%s: per_connection_buffer_limit_bytes %d, want %d..--max-body-bytes %d", name, limit, minBufferLimit, args.maxBody)
	}
}

// istioSpec returns the spec of the only Istio object of a kind.
func istioSpec[T proto.Message](t *testing.T, r *rendered, kind string) T {
	t.Helper()
	var found []T
	for _, o := range r.objects {
		if o.kind == kind {
			found = append(found, o.obj.(*istioObject).Spec.(T))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d objects of kind %s, want 1", r.dir, len(found), kind)
	}
	return found[0]
}

// referenceBootstraps are the sidecar bootstraps whose ext_proc filter every
// other data plane of the same body mode must mirror.
var referenceBootstraps = map[bodyMode]string{buffered: "envoy/envoy.yaml", fullDuplex: "envoy/envoy-full-duplex.yaml"}

// referenceExtProc returns the ext_proc filter config of the body mode's
// reference bootstrap.
func referenceExtProc(t *testing.T, mode bodyMode) *extprocv3.ExternalProcessor {
	t.Helper()
	b, err := parseBootstrap(readFile(t, referenceBootstraps[mode]))
	if err != nil {
		t.Fatal(err)
	}
	return checkSidecarBootstrap(t, b, mode).extProc
}

// checkBodyModeFlag checks tfsbridge's --body-mode against the mode its data
// plane runs: that mode, or, for buffered, auto (the default), which is
// buffered whenever Envoy does not announce full duplex. Full duplex is
// explicit: auto needs an Envoy that announces its mode on each stream.
func checkBodyModeFlag(t *testing.T, args tfsbridgeArgs, mode bodyMode) {
	t.Helper()
	got, ok := args.flags["body-mode"]
	if got == string(mode) || (mode == buffered && (!ok || got == "auto")) {
		return
	}
	t.Errorf("tfsbridge --body-mode=%q (given: %v), the data plane runs %s", got, ok, mode)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
