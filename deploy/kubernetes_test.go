package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/protobuf/proto"
	istionetworking "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizations are the directories a user applies with kubectl apply -k.
var kustomizations = []string{"kubernetes", "envoy-gateway", "istio", "envoy-gateway-full-duplex", "istio-full-duplex"}

// partOfLabel is on every object tfsbridge's manifests create.
const partOfLabel = "app.kubernetes.io/part-of"

// object is one rendered resource, decoded strictly into its API type.
type object struct {
	kind string // "apps/v1/Deployment"
	name string
	ns   string
	obj  any
}

// istioObject is an Istio resource: Kubernetes metadata plus a spec decoded
// strictly into its istio.io/api proto (the client-go types decode specs
// leniently, with unknown fields allowed).
type istioObject struct {
	metav1.ObjectMeta
	Spec proto.Message
}

// decoders maps every kind the manifests may contain to a strict decoder; a
// rendered object of any other kind fails the build test.
var decoders = map[string]func([]byte) (any, error){
	"v1/Namespace":                                        k8sDecoder[corev1.Namespace],
	"v1/ConfigMap":                                        k8sDecoder[corev1.ConfigMap],
	"v1/Service":                                          k8sDecoder[corev1.Service],
	"apps/v1/Deployment":                                  k8sDecoder[appsv1.Deployment],
	"policy/v1/PodDisruptionBudget":                       k8sDecoder[policyv1.PodDisruptionBudget],
	"autoscaling/v2/HorizontalPodAutoscaler":              k8sDecoder[autoscalingv2.HorizontalPodAutoscaler],
	"monitoring.coreos.com/v1/ServiceMonitor":             k8sDecoder[monitoringv1.ServiceMonitor],
	"gateway.networking.k8s.io/v1/Gateway":                k8sDecoder[gwapiv1.Gateway],
	"gateway.networking.k8s.io/v1/HTTPRoute":              k8sDecoder[gwapiv1.HTTPRoute],
	"gateway.networking.k8s.io/v1/GRPCRoute":              k8sDecoder[gwapiv1.GRPCRoute],
	"gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy": k8sDecoder[egv1a1.EnvoyExtensionPolicy],
	"gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy":  k8sDecoder[egv1a1.ClientTrafficPolicy],
	"gateway.envoyproxy.io/v1alpha1/HTTPRouteFilter":      k8sDecoder[egv1a1.HTTPRouteFilter],
	"networking.istio.io/v1alpha3/EnvoyFilter": func(doc []byte) (any, error) {
		return decodeIstio(doc, &istionetworking.EnvoyFilter{})
	},
	"networking.istio.io/v1/DestinationRule": func(doc []byte) (any, error) {
		return decodeIstio(doc, &istionetworking.DestinationRule{})
	},
}

func k8sDecoder[T any](doc []byte) (any, error) {
	v := new(T)
	return v, decodeK8sStrict(doc, v)
}

func decodeIstio(doc []byte, spec proto.Message) (any, error) {
	var envelope struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              json.RawMessage `json:"spec"`
	}
	if err := decodeK8sStrict(doc, &envelope); err != nil {
		return nil, err
	}
	if err := decodeProtoStrict(envelope.Spec, spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return &istioObject{ObjectMeta: envelope.ObjectMeta, Spec: spec}, nil
}

// rendered is the output of one kustomization.
type rendered struct {
	dir     string
	objects []object
	// external names the ConfigMaps the user provides (a chart's
	// existingConfigMap): volumes may refer to them without a rendered object.
	external map[string]bool
}

// kustomizeBuild renders dir as `kubectl apply -k` would (default load
// restrictions: no file outside a kustomization's own directory) and decodes
// every object strictly.
func kustomizeBuild(t *testing.T, dir string) *rendered {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{dir: dir}
	for _, res := range resMap.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		gvk := res.GetGvk()
		kind := gvk.ApiVersion() + "/" + gvk.Kind
		decode, ok := decoders[kind]
		if !ok {
			t.Errorf("%s: %s %s: no strict decoder for this kind; add one", dir, kind, res.GetName())
			continue
		}
		obj, err := decode(doc)
		if err != nil {
			t.Errorf("%s: %s %s: %v", dir, kind, res.GetName(), err)
			continue
		}
		r.objects = append(r.objects, object{kind: kind, name: res.GetName(), ns: res.GetNamespace(), obj: obj})
	}
	return r
}

// all returns the objects of type T.
func all[T any](r *rendered) []*T {
	var out []*T
	for _, o := range r.objects {
		if v, ok := o.obj.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the only object of type T with that name.
func one[T any](t *testing.T, r *rendered, name string) *T {
	t.Helper()
	var found *T
	for _, o := range r.objects {
		if v, ok := o.obj.(*T); ok && o.name == name {
			if found != nil {
				t.Fatalf("%s: two %T named %s", r.dir, v, name)
			}
			found = v
		}
	}
	if found == nil {
		t.Fatalf("%s: no %T named %s", r.dir, found, name)
	}
	return found
}

func TestKustomizationsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob("*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(kustomizations) {
		t.Fatalf("found %v", files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			var k kustomizetypes.Kustomization
			if err := decodeK8sStrict(readFile(t, f), &k); err != nil {
				t.Fatal(err)
			}
			if k.Kind != kustomizetypes.KustomizationKind || k.APIVersion != kustomizetypes.KustomizationVersion {
				t.Errorf("%s/%s, want %s/%s", k.APIVersion, k.Kind, kustomizetypes.KustomizationVersion, kustomizetypes.KustomizationKind)
			}
		})
	}
}

// coveredElsewhere lists the directories whose YAML is not kustomize input,
// with the test that checks each of their files.
var coveredElsewhere = map[string]string{
	"helm":          "TestHelmChart renders every template and TestHelmChartFiles checks every file",
	"observability": "TestAlertRules and TestDashboard parse every file",
	"compose":       "TestCompose loads compose.yaml with the compose-spec loader",
}

// TestEveryManifestIsRendered makes sure no YAML file escapes the tests:
// each one is a kustomization, an Envoy bootstrap, or a resource or
// generator input of some kustomization.
func TestEveryManifestIsRendered(t *testing.T) {
	referenced := map[string]bool{}
	kfiles, _ := filepath.Glob("*/kustomization.yaml")
	for _, kf := range kfiles {
		var k kustomizetypes.Kustomization
		if err := decodeK8sStrict(readFile(t, kf), &k); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(kf)
		for _, r := range k.Resources {
			referenced[filepath.Join(dir, r)] = true
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.FileSources {
				_, file, _ := strings.Cut(f, "=")
				if file == "" {
					file = f
				}
				referenced[filepath.Join(dir, file)] = true
			}
		}
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && coveredElsewhere[path] != "" {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		if filepath.Base(path) != "kustomization.yaml" && !referenced[path] {
			t.Errorf("%s is not part of any kustomization, so nothing checks it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range referenced {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("a kustomization references %s: %v", path, err)
		}
	}
}

// TestKustomizationsRender renders every kustomization and checks what must
// hold for any workload: strict types, security, resources, probes, and
// Services, PodDisruptionBudgets and ConfigMap volumes that point at
// something real.
func TestKustomizationsRender(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			checkWorkloads(t, kustomizeBuild(t, dir))
		})
	}
}

// checkWorkloads checks what must hold for any rendered set of objects
// (a kustomization or a Helm release): the part-of label, Deployments,
// Services, and PodDisruptionBudgets that leave room for an eviction of the
// fewest replicas the Deployment can have (its HorizontalPodAutoscaler's
// minimum when one owns the replica count).
func checkWorkloads(t *testing.T, r *rendered) {
	t.Helper()
	if len(all[appsv1.Deployment](r)) == 0 {
		t.Fatal("no Deployment")
	}
	for _, o := range r.objects {
		if o.kind == "v1/Namespace" {
			continue
		}
		if labels := objectLabels(o.obj); labels[partOfLabel] != "tfsbridge" {
			t.Errorf("%s %s: label %s=%q, want tfsbridge", o.kind, o.name, partOfLabel, labels[partOfLabel])
		}
	}
	for _, d := range all[appsv1.Deployment](r) {
		checkDeployment(t, r, d)
	}
	for _, s := range all[corev1.Service](r) {
		checkService(t, r, s)
	}
	for _, p := range all[policyv1.PodDisruptionBudget](r) {
		d := selectDeployment(t, r, p.Spec.Selector.MatchLabels)
		if d == nil || p.Spec.MinAvailable == nil {
			continue
		}
		replicas := minReplicas(t, r, d)
		if int32(p.Spec.MinAvailable.IntValue()) >= replicas {
			t.Errorf("PodDisruptionBudget %s: minAvailable %s blocks every eviction of %d replicas", p.Name, p.Spec.MinAvailable, replicas)
		}
	}
}

// minReplicas is the fewest replicas d runs: its HorizontalPodAutoscaler's
// minimum when one scales it (then d must leave replicas unset, or every
// rollout would reset the HPA's choice), else spec.replicas.
func minReplicas(t *testing.T, r *rendered, d *appsv1.Deployment) int32 {
	t.Helper()
	for _, h := range all[autoscalingv2.HorizontalPodAutoscaler](r) {
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
			continue
		}
		if d.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas although HorizontalPodAutoscaler %s scales it", d.Name, h.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: minReplicas %v, maxReplicas %d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
			return 1
		}
		return *h.Spec.MinReplicas
	}
	if d.Spec.Replicas == nil {
		return 1 // the API server's default
	}
	return *d.Spec.Replicas
}

func objectLabels(obj any) map[string]string {
	// An *istioObject embeds ObjectMeta, so it is a metav1.Object too.
	if o, ok := obj.(metav1.Object); ok {
		return o.GetLabels()
	}
	return nil
}

// checkDeployment checks a Deployment's selector, pod security, containers
// and volumes.
func checkDeployment(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	name := "Deployment " + d.Name
	pod := &d.Spec.Template.Spec
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 || !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: selector %v does not select its own pod labels %v", name, d.Spec.Selector, d.Spec.Template.Labels)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false: nothing here uses the API", name)
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks must be false: a Service named tfsbridge injects TFSBRIDGE_* variables", name)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot must be true", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile must be RuntimeDefault", name)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.ConfigMap != nil && !r.external[v.ConfigMap.Name] {
			cm := one[corev1.ConfigMap](t, r, v.ConfigMap.Name)
			for _, item := range v.ConfigMap.Items {
				if _, ok := cm.Data[item.Key]; !ok {
					t.Errorf("%s: volume %s wants key %s, ConfigMap %s has none", name, v.Name, item.Key, cm.Name)
				}
			}
		}
	}
	for _, c := range pod.Containers {
		cname := name + "/" + c.Name
		checkContainerSecurity(t, cname, psc, c.SecurityContext)
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: needs cpu and memory requests and a memory limit", cname)
		}
		if c.Resources.Limits.Memory().Cmp(*c.Resources.Requests.Memory()) < 0 {
			t.Errorf("%s: memory limit below request", cname)
		}
		if _, tag, ok := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":"); !ok || tag == "" {
			t.Errorf("%s: image %s has no tag", cname, c.Image)
		}
		if c.ReadinessProbe == nil {
			t.Errorf("%s: no readiness probe", cname)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p != nil {
				probePort(t, cname, c, p)
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: mounts unknown volume %s", cname, m.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.ContainerName != c.Name {
				t.Errorf("%s: env %s reads the resources of container %s", cname, e.Name, e.ValueFrom.ResourceFieldRef.ContainerName)
			}
		}
	}
}

// checkContainerSecurity checks the effective (pod, then container) security
// settings of one container.
func checkContainerSecurity(t *testing.T, name string, pod *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s: no securityContext", name)
		return
	}
	if uid := effectiveUID(pod, sc); uid == nil || *uid == 0 {
		t.Errorf("%s: needs a numeric non-root runAsUser (images name their user, which runAsNonRoot cannot check)", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation must be false", name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem must be true", name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities must drop ALL and add none", name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
}

func effectiveUID(pod *corev1.PodSecurityContext, sc *corev1.SecurityContext) *int64 {
	if sc != nil && sc.RunAsUser != nil {
		return sc.RunAsUser
	}
	if pod != nil {
		return pod.RunAsUser
	}
	return nil
}

// probePort resolves a probe's port against the container's own ports.
func probePort(t *testing.T, name string, c corev1.Container, p *corev1.Probe) int32 {
	t.Helper()
	var port intstr.IntOrString
	switch {
	case p.HTTPGet != nil:
		port = p.HTTPGet.Port
	case p.TCPSocket != nil:
		port = p.TCPSocket.Port
	case p.GRPC != nil:
		port = intstr.FromInt32(p.GRPC.Port)
	default:
		t.Errorf("%s: probe without a network check", name)
		return 0
	}
	cp, ok := containerPort(c, port)
	if !ok {
		t.Errorf("%s: probe port %s is not a port of the container", name, port.String())
	}
	return cp.ContainerPort
}

// containerPort finds a container port by name or number.
func containerPort(c corev1.Container, port intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// selectDeployment returns the one Deployment whose pods carry all of the
// selector's labels.
func selectDeployment(t *testing.T, r *rendered, selector map[string]string) *appsv1.Deployment {
	t.Helper()
	var found []*appsv1.Deployment
	for _, d := range all[appsv1.Deployment](r) {
		if len(selector) > 0 && subset(selector, d.Spec.Template.Labels) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Errorf("selector %v matches %d Deployments, want 1", selector, len(found))
		return nil
	}
	return found[0]
}

// checkService checks that a Service selects one Deployment and that every
// port lands on a container port of the same protocol.
func checkService(t *testing.T, r *rendered, s *corev1.Service) {
	t.Helper()
	d := selectDeployment(t, r, s.Spec.Selector)
	if d == nil {
		return
	}
	if !subset(s.Spec.Selector, d.Labels) {
		t.Errorf("Service %s: Deployment %s lacks the selector labels on itself", s.Name, d.Name)
	}
	for _, p := range s.Spec.Ports {
		if p.Name == "" {
			t.Errorf("Service %s: port %d has no name", s.Name, p.Port)
		}
		if _, cp, ok := serviceTarget(d, p); !ok {
			t.Errorf("Service %s: port %s targets %s, which no container of %s exposes", s.Name, p.Name, p.TargetPort.String(), d.Name)
		} else if cp.Protocol != p.Protocol {
			t.Errorf("Service %s: port %s is %s, container port %s", s.Name, p.Name, p.Protocol, cp.Protocol)
		}
	}
}

// serviceTarget resolves a Service port to the container and container port
// it reaches.
func serviceTarget(d *appsv1.Deployment, p corev1.ServicePort) (string, corev1.ContainerPort, bool) {
	target := p.TargetPort
	if target.Type == intstr.Int && target.IntVal == 0 {
		target = intstr.FromInt32(p.Port)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if cp, ok := containerPort(c, target); ok {
			return c.Name, cp, true
		}
	}
	return "", corev1.ContainerPort{}, false
}

// servicePort returns a Service's port by name.
func servicePort(t *testing.T, s *corev1.Service, name string) corev1.ServicePort {
	t.Helper()
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("Service %s has no port %s", s.Name, name)
	return corev1.ServicePort{}
}

func subset(small, big map[string]string) bool {
	for k, v := range small {
		if big[k] != v {
			return false
		}
	}
	return true
}

// container returns the container with that name.
func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// tfsbridgeArgs is a tfsbridge container's command line, checked against the
// binary's flags.
type tfsbridgeArgs struct {
	subcommand  string
	flags       map[string]string
	grpcPort    int32  // 0 when --grpc-addr is a Unix socket
	grpcSocket  string // the socket's path, "" for TCP
	metricsPort int32
	backend     *url.URL
	maxBody     int64
}

// checkTfsbridgeContainer checks a tfsbridge container against the binary's
// subcommands and flags, the Dockerfile, and its own ports and probes.
func checkTfsbridgeContainer(t *testing.T, d *appsv1.Deployment, c corev1.Container) tfsbridgeArgs {
	t.Helper()
	name := d.Name + "/" + c.Name
	if repo, _, _ := strings.Cut(c.Image, ":"); repo != tfsbridgeImage {
		t.Errorf("%s: image %s, want %s:<tag>", name, c.Image, tfsbridgeImage)
	}
	if len(c.Command) > 0 {
		t.Errorf("%s: command %v overrides the image's ENTRYPOINT /tfsbridge; use args", name, c.Command)
	}
	if uid := effectiveUID(d.Spec.Template.Spec.SecurityContext, c.SecurityContext); uid == nil || *uid != distrolessUID {
		t.Errorf("%s: runAsUser must be %d, distroless's nonroot", name, distrolessUID)
	}
	exposed := dockerfileExposed(t)
	for _, p := range c.Ports {
		if !slices.Contains(exposed, int(p.ContainerPort)) {
			t.Errorf("%s: port %d is not EXPOSEd by the Dockerfile %v", name, p.ContainerPort, exposed)
		}
	}

	a := tfsbridgeArgs{flags: map[string]string{}}
	if len(c.Args) == 0 {
		t.Fatalf("%s: no args; the subcommand must be explicit", name)
	}
	a.subcommand = c.Args[0]
	known, ok := tfsbridgeFlags[a.subcommand]
	if !ok {
		t.Fatalf("%s: unknown subcommand %q", name, a.subcommand)
	}
	for _, arg := range c.Args[1:] {
		flag, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") || !ok {
			t.Errorf("%s: arg %q: write flags as --name=value", name, arg)
			continue
		}
		if !slices.Contains(known, flag) {
			t.Errorf("%s: %s has no flag --%s", name, a.subcommand, flag)
		}
		if _, dup := a.flags[flag]; dup {
			t.Errorf("%s: --%s given twice", name, flag)
		}
		a.flags[flag] = value
	}
	for _, e := range c.Env {
		if rest, ok := strings.CutPrefix(e.Name, "TFSBRIDGE_"); ok {
			if flag := strings.ReplaceAll(strings.ToLower(rest), "_", "-"); !slices.Contains(known, flag) {
				t.Errorf("%s: env %s names no flag of %s", name, e.Name, a.subcommand)
			}
		}
	}

	a.metricsPort = addrPort(t, name, a.flags["metrics-addr"])
	if a.metricsPort != metricsPort {
		t.Errorf("%s: metrics port %d, want the default %d", name, a.metricsPort, metricsPort)
	}
	if sock, ok := strings.CutPrefix(a.flags["grpc-addr"], "unix://"); ok {
		// A Unix socket: in a volume the container mounts (the root
		// filesystem is read-only, and Envoy must reach it), no port.
		a.grpcSocket = sock
		if !path.IsAbs(sock) {
			t.Errorf("%s: --grpc-addr=%s, want unix:///absolute/path", name, a.flags["grpc-addr"])
		}
		if _, ok := socketVolume(d, c, sock); !ok {
			t.Errorf("%s: no emptyDir volume mounted at the socket's directory %s", name, path.Dir(sock))
		}
		if _, ok := containerPort(c, intstr.FromString("grpc-ext-proc")); ok {
			t.Errorf("%s: container port grpc-ext-proc declared, but --grpc-addr is a Unix socket", name)
		}
	} else {
		a.grpcPort = addrPort(t, name, a.flags["grpc-addr"])
		if a.grpcPort != extProcPort {
			t.Errorf("%s: gRPC port %d, want the default %d", name, a.grpcPort, extProcPort)
		}
		if p, ok := containerPort(c, intstr.FromString("grpc-ext-proc")); !ok || p.ContainerPort != a.grpcPort {
			t.Errorf("%s: container port grpc-ext-proc must be --grpc-addr's %d", name, a.grpcPort)
		}
	}
	if p, ok := containerPort(c, intstr.FromString("metrics")); !ok || p.ContainerPort != a.metricsPort {
		t.Errorf("%s: container port metrics must be --metrics-addr's %d", name, a.metricsPort)
	}
	for probe, path := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probePort(t, name, c, probe) != a.metricsPort {
			t.Errorf("%s: want an HTTP probe on %s at --metrics-addr", name, path)
		}
	}
	if mode, ok := a.flags["body-mode"]; ok && !slices.Contains(bodyModeFlagValues, mode) {
		t.Errorf("%s: --body-mode=%s, want one of %v", name, mode, bodyModeFlagValues)
	}
	if kind := a.flags["backend-kind"]; kind != "" && !slices.Contains(backendKinds, kind) {
		t.Errorf("%s: --backend-kind=%s, want one of %v", name, kind, backendKinds)
	}
	u, err := url.Parse(a.flags["backend"])
	if err != nil || u.Scheme != "http" || u.Port() == "" || u.Path != "" {
		t.Errorf("%s: --backend=%s, want http://host:port", name, a.flags["backend"])
	}
	a.backend = u
	a.maxBody, err = strconv.ParseInt(a.flags["max-body-bytes"], 10, 64)
	if err != nil || a.maxBody < minBufferLimit {
		t.Errorf("%s: --max-body-bytes=%s, want bytes >= %d", name, a.flags["max-body-bytes"], minBufferLimit)
	}
	return a
}

// socketVolume returns the emptyDir volume c mounts, writable, at the
// directory of the Unix socket sock.
func socketVolume(d *appsv1.Deployment, c corev1.Container, sock string) (string, bool) {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Dir(sock) || m.ReadOnly || m.SubPath != "" {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return v.Name, true
			}
		}
	}
	return "", false
}

// addrPort returns the port of a listen address like ":9002".
func addrPort(t *testing.T, name, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(port)
	if err != nil || err2 != nil {
		t.Errorf("%s: listen address %q", name, addr)
	}
	return int32(n)
}

// tfsbridgeDeployments returns each Deployment running tfsbridge with its
// checked command line.
func tfsbridgeDeployments(t *testing.T, r *rendered) map[*appsv1.Deployment]tfsbridgeArgs {
	t.Helper()
	out := map[*appsv1.Deployment]tfsbridgeArgs{}
	for _, d := range all[appsv1.Deployment](r) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, tfsbridgeImage+":") {
				out[d] = checkTfsbridgeContainer(t, d, c)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no tfsbridge container", r.dir)
	}
	return out
}

// TestKubernetesSidecar cross-checks the sidecar pod with the Envoy
// bootstrap it mounts: the ConfigMap holds deploy/envoy/envoy.yaml byte for
// byte, and ports, addresses, probes and limits agree.
func TestKubernetesSidecar(t *testing.T) {
	r := kustomizeBuild(t, "kubernetes")
	d := one[appsv1.Deployment](t, r, "model-server")
	args := tfsbridgeDeployments(t, r)[d]
	envoy := container(t, d, "envoy")
	triton := container(t, d, "triton")

	if !strings.HasPrefix(envoy.Image, "envoyproxy/envoy:distroless-v1.") {
		t.Errorf("envoy image %s, want envoyproxy/envoy:distroless-v1.x.y", envoy.Image)
	}
	i := slices.Index(envoy.Args, "-c")
	if i < 0 || i+1 >= len(envoy.Args) {
		t.Fatalf("envoy args %v: no -c <bootstrap>", envoy.Args)
	}
	cm := mountedConfigMap(t, r, d, envoy, envoy.Args[i+1])
	want := readFile(t, "envoy/envoy.yaml")
	if cm != string(want) {
		t.Fatal("the ConfigMap Envoy reads is not deploy/envoy/envoy.yaml")
	}
	b, err := parseBootstrap([]byte(cm))
	if err != nil {
		t.Fatal(err)
	}
	s := checkSidecarBootstrap(t, b, buffered)

	var envoyPorts []uint32
	for _, p := range envoy.Ports {
		envoyPorts = append(envoyPorts, uint32(p.ContainerPort))
	}
	slices.Sort(envoyPorts)
	slices.Sort(s.listenerPorts)
	if !slices.Equal(envoyPorts, s.listenerPorts) {
		t.Errorf("envoy container ports %v, bootstrap listens on %v", envoyPorts, s.listenerPorts)
	}
	rp := envoy.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != s.readyPath || uint32(probePort(t, "envoy", envoy, rp)) != s.readyPort {
		t.Errorf("envoy readiness must GET %s on %d (the health_check listener)", s.readyPath, s.readyPort)
	}

	// Envoy dials the socket tfsbridge creates, through the same volume.
	pipe := s.extProcAddr.GetPipe().GetPath()
	if args.grpcSocket == "" || pipe != args.grpcSocket {
		t.Errorf("tfsbridge --grpc-addr=%s, Envoy's ext_proc cluster dials %v: want the same Unix socket", args.flags["grpc-addr"], s.extProcAddr)
	}
	bridgeVol, _ := socketVolume(d, container(t, d, "tfsbridge"), args.grpcSocket)
	if envoyVol, ok := socketVolume(d, envoy, pipe); !ok || envoyVol != bridgeVol {
		t.Errorf("envoy mounts volume %q at %s, tfsbridge %q: the socket must be in one shared emptyDir", envoyVol, path.Dir(pipe), bridgeVol)
	}
	if args.backend.Hostname() != s.backendAddr.GetAddress() || args.backend.Port() != fmt.Sprint(s.backendAddr.GetPortValue()) {
		t.Errorf("tfsbridge --backend=%s, Envoy routes to %s:%d", args.backend, s.backendAddr.GetAddress(), s.backendAddr.GetPortValue())
	}
	if args.maxBody < int64(s.bufferLimit) {
		t.Errorf("tfsbridge --max-body-bytes=%d below Envoy's buffer limit %d: bodies Envoy accepts would fail in tfsbridge", args.maxBody, s.bufferLimit)
	}
	if !slices.Contains(triton.Args, fmt.Sprintf("--http-port=%d", s.backendAddr.GetPortValue())) {
		t.Errorf("triton args %v: want --http-port=%d (Envoy's v2_backend)", triton.Args, s.backendAddr.GetPortValue())
	}
	if p, ok := containerPort(triton, intstr.FromInt32(int32(s.backendAddr.GetPortValue()))); !ok || p.Name == "" {
		t.Errorf("triton does not declare port %d", s.backendAddr.GetPortValue())
	}
	if rp := triton.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/v2/health/ready" {
		t.Error("triton readiness must be GET /v2/health/ready")
	}

	svc := one[corev1.Service](t, r, "model-server")
	p := servicePort(t, svc, "http-tfs")
	if c, cp, ok := serviceTarget(d, p); p.Port != tfsPort || !ok || c != "envoy" || cp.ContainerPort != tfsPort {
		t.Errorf("Service port http-tfs must be %d on Envoy's %d, got %d -> %s:%d", tfsPort, tfsPort, p.Port, c, cp.ContainerPort)
	}
}

// mountedConfigMap returns the content of the ConfigMap key a container sees
// at path.
func mountedConfigMap(t *testing.T, r *rendered, d *appsv1.Deployment, c corev1.Container, path string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm := one[corev1.ConfigMap](t, r, v.ConfigMap.Name)
			key := rel
			for _, item := range v.ConfigMap.Items {
				if item.Path == rel {
					key = item.Key
				}
			}
			data, ok := cm.Data[key]
			if !ok {
				t.Fatalf("ConfigMap %s has no key %s for %s", cm.Name, key, path)
			}
			return data
		}
	}
	t.Fatalf("container %s: no ConfigMap mounted at %s", c.Name, path)
	return ""
}
