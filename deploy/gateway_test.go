package deploy

import (
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayLayouts are the Envoy Gateway layouts with the body mode each runs.
var gatewayLayouts = map[string]bodyMode{"envoy-gateway": buffered, "envoy-gateway-full-duplex": fullDuplex}

// TestEnvoyGateway cross-checks the Envoy Gateway add-ons, in both body
// modes: the policy runs tfsbridge in docs/architecture.md's processing mode
// on the /v1 route, through the tfsbridge Service, fail closed, with the
// route's Gateway buffer limit raised exactly when bodies are buffered, and
// tfsbridge's --body-mode matches.
func TestEnvoyGateway(t *testing.T) {
	for dir, mode := range gatewayLayouts {
		t.Run(dir, func(t *testing.T) { checkEnvoyGateway(t, dir, mode) })
	}
}

func checkEnvoyGateway(t *testing.T, dir string, mode bodyMode) {
	r := kustomizeBuild(t, dir)
	args := onlyTfsbridge(t, r)
	checkBodyModeFlag(t, args, mode)
	ref := referenceExtProc(t, mode)

	policies := all[egv1a1.EnvoyExtensionPolicy](r)
	if len(policies) != 1 || len(policies[0].Spec.TargetRefs) != 2 || len(policies[0].Spec.ExtProc) != 1 {
		t.Fatalf("want one EnvoyExtensionPolicy with two targetRefs (the REST and gRPC routes) and one extProc")
	}
	policy := policies[0]
	target := policy.Spec.TargetRefs[0]
	if target.Group != gwapiv1.GroupName || target.Kind != "HTTPRoute" {
		t.Fatalf("policy targets %s/%s first, want the HTTPRoute", target.Group, target.Kind)
	}
	if g := policy.Spec.TargetRefs[1]; g.Group != gwapiv1.GroupName || g.Kind != "GRPCRoute" {
		t.Errorf("policy targets %s/%s second, want the GRPCRoute", g.Group, g.Kind)
	} else {
		checkGatewayGRPCRoute(t, r, string(g.Name), args)
	}
	route := one[gwapiv1.HTTPRoute](t, r, string(target.Name))
	ep := policy.Spec.ExtProc[0]

	// The ext_proc backend is the tfsbridge Service's gRPC port.
	if len(ep.BackendRefs) != 1 {
		t.Fatalf("extProc has %d backendRefs, want 1", len(ep.BackendRefs))
	}
	br := ep.BackendRefs[0].BackendObjectReference
	if (br.Kind != nil && *br.Kind != "Service") || (br.Group != nil && *br.Group != "") || br.Port == nil {
		t.Fatalf("extProc backendRef %+v: want a core Service with a port", br)
	}
	svc := one[corev1.Service](t, r, string(br.Name))
	checkExtProcServicePort(t, r, svc, int32(*br.Port), args)

	checkEnvoyGatewayExtProc(t, ep, ref, mode)

	bs := ep.BackendSettings
	if bs == nil || bs.CircuitBreaker == nil || bs.Connection == nil || bs.Connection.BufferLimit == nil ||
		bs.HealthCheck == nil || bs.HealthCheck.Active == nil {
		t.Fatal("extProc backendSettings need circuitBreaker, connection.bufferLimit and an active health check")
	}
	for name, v := range map[string]*int64{"maxParallelRequests": bs.CircuitBreaker.MaxParallelRequests, "maxPendingRequests": bs.CircuitBreaker.MaxPendingRequests} {
		if v == nil || *v < minStreams {
			t.Errorf("circuitBreaker.%s must be at least %d", name, minStreams)
		}
	}
	// The ext_proc connection carries a whole body per message when
	// buffered, chunks of at most 64 KiB when full-duplex.
	checkBufferLimit(t, "extProc connection", uint32(bs.Connection.BufferLimit.Value()), mode)
	if a := bs.HealthCheck.Active; a.Type != egv1a1.ActiveHealthCheckerTypeGRPC || a.GRPC == nil || a.GRPC.Service == nil || *a.GRPC.Service != extProcHealthSvc {
		t.Errorf("active health check must be GRPC on service %s", extProcHealthSvc)
	}

	// The route: /v1 to the same v2 server tfsbridge reads metadata from.
	if len(route.Spec.Rules) != 1 || len(route.Spec.Rules[0].BackendRefs) != 1 {
		t.Fatalf("HTTPRoute %s: want one rule with one backendRef", route.Name)
	}
	rule := route.Spec.Rules[0]
	var v1 bool
	for _, m := range rule.Matches {
		if m.Path != nil && m.Path.Type != nil && *m.Path.Type == gwapiv1.PathMatchPathPrefix && m.Path.Value != nil && *m.Path.Value == "/v1" {
			v1 = true
		}
	}
	if !v1 {
		t.Errorf("HTTPRoute %s must match PathPrefix /v1", route.Name)
	}
	backend := rule.BackendRefs[0].BackendObjectReference
	if backend.Port == nil || string(backend.Name) != args.backend.Hostname() || args.backend.Port() != itoa(int64(*backend.Port)) {
		t.Errorf("HTTPRoute sends /v1 to %s (port %s), tfsbridge --backend=%s", backend.Name, portString(backend.Port), args.backend)
	}
	if rule.Timeouts == nil || rule.Timeouts.Request == nil {
		t.Error("HTTPRoute needs an explicit request timeout (Envoy's default is 15 s)")
	} else if d, err := time.ParseDuration(string(*rule.Timeouts.Request)); err != nil || d != tfDeadline {
		t.Errorf("request timeout %s, want TF's deadline %v (tfsbridge --request-timeout)", *rule.Timeouts.Request, tfDeadline)
	}

	// The route's Gateway listens on 8501 and has its buffer limit raised.
	if len(route.Spec.ParentRefs) != 1 || route.Spec.ParentRefs[0].SectionName == nil {
		t.Fatalf("HTTPRoute %s: want one parentRef with a sectionName", route.Name)
	}
	parent := route.Spec.ParentRefs[0]
	gw := one[gwapiv1.Gateway](t, r, string(parent.Name))
	var listener *gwapiv1.Listener
	for i := range gw.Spec.Listeners {
		if gw.Spec.Listeners[i].Name == *parent.SectionName {
			listener = &gw.Spec.Listeners[i]
		}
	}
	if listener == nil || listener.Port != tfsPort || listener.Protocol != gwapiv1.HTTPProtocolType {
		t.Errorf("Gateway %s listener %s: want HTTP on %d", gw.Name, *parent.SectionName, tfsPort)
	}
	var raised bool
	for _, ctp := range all[egv1a1.ClientTrafficPolicy](r) {
		for _, tr := range ctp.Spec.TargetRefs {
			if tr.Kind != "Gateway" || tr.Name != parent.Name || ctp.Spec.Connection == nil || ctp.Spec.Connection.BufferLimit == nil {
				continue
			}
			limit := ctp.Spec.Connection.BufferLimit.Value()
			if limit < minBufferLimit || limit > args.maxBody {
				t.Errorf("ClientTrafficPolicy %s: bufferLimit %d, want %d..--max-body-bytes %d", ctp.Name, limit, minBufferLimit, args.maxBody)
			}
			raised = true
		}
	}
	if raised != (mode == buffered) {
		t.Errorf("a ClientTrafficPolicy raises Gateway %s's buffer limit: %v; want it exactly in buffered mode (Envoy Gateway's 32 KiB default answers 413 to buffered tensors)", gw.Name, raised)
	}
}

// checkEnvoyGatewayExtProc checks an EnvoyExtensionPolicy's extProc against
// the reference sidecar bootstrap of its body mode: the processing_mode
// Envoy Gateway renders from it, fail closed, and a mode override and
// message timeout exactly when buffered (Envoy honours neither in
// full-duplex mode; Envoy Gateway refuses failOpen with it).
func checkEnvoyGatewayExtProc(t *testing.T, ep egv1a1.ExtProc, ref *extprocv3.ExternalProcessor, mode bodyMode) {
	t.Helper()
	pm := ep.ProcessingMode
	rendered := egProcessingMode(pm)
	if got, err := bodyModeOf(rendered); err != nil || got != mode {
		t.Errorf("processingMode %+v is not %s: %v", pm, mode, err)
	}
	if diff := protoDiff(ref.GetProcessingMode(), rendered); diff != "" {
		t.Errorf("Envoy Gateway would render a processing_mode other than %s's:\n%s", referenceBootstraps[mode], diff)
	}
	if pm != nil && pm.AllowModeOverride != ref.GetAllowModeOverride() {
		t.Errorf("allowModeOverride %v, %s's allow_mode_override %v", pm.AllowModeOverride, referenceBootstraps[mode], ref.GetAllowModeOverride())
	}
	if ep.FailOpen == nil || *ep.FailOpen {
		t.Error("failOpen must be set to false")
	}
	if ep.ShadowMode != nil && *ep.ShadowMode {
		t.Error("shadowMode ignores every reply")
	}
	switch {
	case mode == fullDuplex && ep.MessageTimeout != nil:
		t.Errorf("messageTimeout %s: Envoy applies none in full-duplex mode", *ep.MessageTimeout)
	case mode == buffered && ep.MessageTimeout == nil:
		t.Error("messageTimeout unset: Envoy Gateway's default is 200 ms")
	case mode == buffered:
		if d, err := time.ParseDuration(string(*ep.MessageTimeout)); err != nil || d != ref.GetMessageTimeout().AsDuration() {
			t.Errorf("messageTimeout %s, want %s's %v", *ep.MessageTimeout, referenceBootstraps[mode], ref.GetMessageTimeout().AsDuration())
		}
	}
}

func portString(p *gwapiv1.PortNumber) string {
	if p == nil {
		return "unset"
	}
	return itoa(int64(*p))
}

// onlyTfsbridge returns the command line of the single tfsbridge Deployment
// of a build.
func onlyTfsbridge(t *testing.T, r *rendered) tfsbridgeArgs {
	t.Helper()
	deployments := tfsbridgeDeployments(t, r)
	if len(deployments) != 1 {
		t.Fatalf("%s: %d tfsbridge Deployments, want 1", r.dir, len(deployments))
	}
	for _, a := range deployments {
		return a
	}
	return tfsbridgeArgs{}
}

// checkExtProcServicePort checks that a Service port reaches tfsbridge's
// gRPC port and declares HTTP/2 for meshes.
func checkExtProcServicePort(t *testing.T, r *rendered, svc *corev1.Service, port int32, args tfsbridgeArgs) {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Port != port {
			continue
		}
		if p.AppProtocol == nil || *p.AppProtocol != "grpc" {
			t.Errorf("Service %s port %d: appProtocol must be grpc (HTTP/2)", svc.Name, port)
		}
		d := selectDeployment(t, r, svc.Spec.Selector)
		if d == nil {
			return
		}
		if _, cp, ok := serviceTarget(d, p); !ok || cp.ContainerPort != args.grpcPort {
			t.Errorf("Service %s port %d does not reach tfsbridge's --grpc-addr port %d", svc.Name, port, args.grpcPort)
		}
		return
	}
	t.Errorf("Service %s has no port %d", svc.Name, port)
}
