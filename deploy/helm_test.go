package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	istionetworking "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "helm/tfsbridge"
	// The release the comparisons with the kustomize layouts use: its
	// objects are then named as theirs (tfsbridge, namespace inference).
	releaseName = "tfsbridge"
	releaseNS   = "inference"
)

// modelMapYAML stands for a user's model map; the chart only carries it.
const modelMapYAML = `models:
  mnist:
    model: mnist_onnx
    labels: {stable: 3, canary: 4}
`

// chartCase is one set of values the chart must render correctly.
type chartCase struct {
	name   string
	values string // YAML, merged over values.yaml as helm install -f would
	// wantKinds are the kinds rendered, sorted.
	wantKinds []string
}

var chartCases = []chartCase{
	{
		name:      "defaults",
		wantKinds: []string{"apps/v1/Deployment", "policy/v1/PodDisruptionBudget", "v1/Service"},
	},
	{
		name: "everything on",
		values: `
autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12}
podDisruptionBudget: {minAvailable: 2}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
modelMap:
  content: |
` + indent(modelMapYAML, "    ") + `
tls: {enabled: true, secretName: tfsbridge-tls, clientCA: true}
envoyGateway: {enabled: true}
istio: {enabled: true}
`,
		wantKinds: []string{
			"apps/v1/Deployment", "autoscaling/v2/HorizontalPodAutoscaler",
			"gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy", "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy",
			"monitoring.coreos.com/v1/ServiceMonitor",
			"networking.istio.io/v1/DestinationRule", "networking.istio.io/v1alpha3/EnvoyFilter",
			"policy/v1/PodDisruptionBudget", "v1/ConfigMap", "v1/Service",
		},
	},
	{
		name: "own model map ConfigMap, TLS without client auth, no PDB, other backend",
		values: `
modelMap: {existingConfigMap: my-model-map}
tls: {enabled: true, secretName: tfsbridge-tls}
podDisruptionBudget: {enabled: false}
replicaCount: 1
backend: {url: "http://kserve-predictor:8080", kind: kserve}
image: {tag: 0.1.1}
`,
		wantKinds: []string{"apps/v1/Deployment", "v1/Service"},
	},
	{
		name: "full duplex with both data planes",
		values: `
bodyMode: full-duplex
envoyGateway: {enabled: true}
istio: {enabled: true}
`,
		// No ClientTrafficPolicy: streamed bodies need no raised Gateway buffer.
		wantKinds: []string{
			"apps/v1/Deployment",
			"gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy",
			"networking.istio.io/v1/DestinationRule", "networking.istio.io/v1alpha3/EnvoyFilter",
			"policy/v1/PodDisruptionBudget", "v1/Service",
		},
	},
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// loadChart loads the chart as helm install would from its directory.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renderChart renders the chart for a release with the given values in
// strict mode (a missing value is an error) and decodes every object
// strictly into its API type, as kustomizeBuild does for the layouts.
func renderChart(t *testing.T, c *chart.Chart, release, namespace, values string) *rendered {
	t.Helper()
	user, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
	vals, err := chartutil.ToRenderValues(c, user, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	r := &rendered{dir: fmt.Sprintf("chart (release %s/%s)", namespace, release), external: map[string]bool{}}
	if cm, _ := vals.PathValue("Values.modelMap.existingConfigMap"); cm != "" && cm != nil {
		r.external[cm.(string)] = true
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path.Ext(name) != ".yaml" {
			continue // NOTES.txt, _helpers.tpl
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			doc := docs[k]
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				metav1.TypeMeta `json:",inline"`
				Metadata        metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			kind := head.APIVersion + "/" + head.Kind
			decode, ok := decoders[kind]
			if !ok {
				t.Errorf("%s: %s: no strict decoder for this kind; add one", name, kind)
				continue
			}
			obj, err := decode([]byte(doc))
			if err != nil {
				t.Errorf("%s: %s %s: %v\n%s", name, kind, head.Metadata.Name, err, doc)
				continue
			}
			if head.Metadata.Namespace != namespace {
				t.Errorf("%s: %s %s in namespace %q, want the release's %q", name, kind, head.Metadata.Name, head.Metadata.Namespace, namespace)
			}
			r.objects = append(r.objects, object{kind: kind, name: head.Metadata.Name, ns: head.Metadata.Namespace, obj: obj})
		}
	}
	return r
}

// chartAppVersion is the release every manifest deploys.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var meta chart.Metadata
	if err := decodeK8sStrict(readFile(t, chartDir+"/Chart.yaml"), &meta); err != nil {
		t.Fatal(err)
	}
	return meta.AppVersion
}

// TestHelmChart renders the chart for every value set, lints it with helm
// lint's rules, decodes every object strictly and cross-checks ports,
// probes, labels, flags and volumes, and the data-plane objects against the
// tested kustomize layouts.
func TestHelmChart(t *testing.T) {
	c := loadChart(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != c.Metadata.AppVersion {
		t.Errorf("chart version %s, appVersion %s: released together, they move together", c.Metadata.Version, c.Metadata.AppVersion)
	}
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			user, err := chartutil.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			linter := lint.AllWithKubeVersion(chartDir, user.AsMap(), releaseNS, nil)
			for _, m := range linter.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %v", m)
				}
			}

			r := renderChart(t, c, releaseName, releaseNS, tc.values)
			var kinds []string
			for _, o := range r.objects {
				kinds = append(kinds, o.kind)
			}
			sort.Strings(kinds)
			if !slices.Equal(kinds, tc.wantKinds) {
				t.Errorf("rendered %v, want %v", kinds, tc.wantKinds)
			}
			checkWorkloads(t, r)
			d := one[appsv1.Deployment](t, r, releaseName)
			args := tfsbridgeDeployments(t, r)[d]
			vals := mergedValues(t, c, tc.values)
			checkChartDeployment(t, r, d, args, vals)
			svc := one[corev1.Service](t, r, releaseName)
			checkExtProcServicePort(t, r, svc, int32(vals.int(t, "service.grpcPort")), args)
			for _, p := range all[policyv1.PodDisruptionBudget](r) {
				if !subset(p.Spec.Selector.MatchLabels, svc.Spec.Selector) || !subset(svc.Spec.Selector, p.Spec.Selector.MatchLabels) {
					t.Errorf("PodDisruptionBudget %s selects %v, the Service %v", p.Name, p.Spec.Selector.MatchLabels, svc.Spec.Selector)
				}
			}
			for _, h := range all[autoscalingv2.HorizontalPodAutoscaler](r) {
				if len(h.Spec.Metrics) == 0 {
					t.Errorf("HorizontalPodAutoscaler %s has no metric", h.Name)
				}
			}
			for _, sm := range all[monitoringv1.ServiceMonitor](r) {
				checkServiceMonitor(t, sm, svc)
			}
			mode := bodyMode(vals.str(t, "bodyMode"))
			if pols := all[egv1a1.EnvoyExtensionPolicy](r); len(pols) > 0 {
				checkChartEnvoyGateway(t, r, pols, mode)
			}
			if efs := all[istioObject](r); len(efs) > 0 {
				checkChartIstio(t, r, mode)
			}
		})
	}
}

// values is a rendered chart's merged values.
type values chartutil.Values

func mergedValues(t *testing.T, c *chart.Chart, user string) values {
	t.Helper()
	u, err := chartutil.ReadValues([]byte(user))
	if err != nil {
		t.Fatal(err)
	}
	v, err := chartutil.CoalesceValues(c, u)
	if err != nil {
		t.Fatal(err)
	}
	return values(v)
}

func (v values) get(t *testing.T, key string) any {
	t.Helper()
	x, err := chartutil.Values(v).PathValue(key)
	if err != nil {
		t.Fatalf("value %s: %v", key, err)
	}
	return x
}

func (v values) str(t *testing.T, key string) string {
	t.Helper()
	s, _ := v.get(t, key).(string)
	return s
}

func (v values) bool(t *testing.T, key string) bool {
	t.Helper()
	b, _ := v.get(t, key).(bool)
	return b
}

func (v values) int(t *testing.T, key string) int64 {
	t.Helper()
	switch n := v.get(t, key).(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	t.Fatalf("value %s is not a number", key)
	return 0
}

// checkChartDeployment checks the tfsbridge container against the values:
// image, backend, limits, and the optional model map and TLS wiring, each
// present exactly when enabled and pointing into a mounted volume.
func checkChartDeployment(t *testing.T, r *rendered, d *appsv1.Deployment, args tfsbridgeArgs, vals values) {
	t.Helper()
	c := container(t, d, "tfsbridge")
	wantTag := vals.str(t, "image.tag")
	if wantTag == "" {
		wantTag = chartAppVersion(t)
	}
	if c.Image != tfsbridgeImage+":"+wantTag {
		t.Errorf("image %s, want %s:%s", c.Image, tfsbridgeImage, wantTag)
	}
	if args.subcommand != "extproc" {
		t.Errorf("subcommand %s, want extproc", args.subcommand)
	}
	if got, want := args.backend.String(), vals.str(t, "backend.url"); got != want {
		t.Errorf("--backend=%s, values say %s", got, want)
	}
	if got, want := args.flags["backend-kind"], vals.str(t, "backend.kind"); got != want {
		t.Errorf("--backend-kind=%s, values say %s", got, want)
	}
	if args.maxBody != vals.int(t, "maxBodyBytes") {
		t.Errorf("--max-body-bytes=%d, values say %d", args.maxBody, vals.int(t, "maxBodyBytes"))
	}
	// Explicit, so that a data plane announcing another mode is refused
	// rather than followed.
	if got, want := args.flags["body-mode"], vals.str(t, "bodyMode"); got != want {
		t.Errorf("--body-mode=%q, values say %q", got, want)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Error("no preStop sleep: Envoy would still send streams to a stopping pod")
	} else if grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds; grace == nil || c.Lifecycle.PreStop.Sleep.Seconds+15 > *grace {
		t.Errorf("terminationGracePeriodSeconds %v leaves no time for the preStop sleep (%ds) and the 15s drain", grace, c.Lifecycle.PreStop.Sleep.Seconds)
	}

	// The model map: flag, volume and content together or not at all.
	mapCM := vals.str(t, "modelMap.existingConfigMap")
	if mapCM == "" && vals.str(t, "modelMap.content") != "" {
		mapCM = releaseName + "-model-map"
	}
	mapFile, hasMap := args.flags["model-map"]
	if hasMap != (mapCM != "") {
		t.Errorf("--model-map given: %v, model map configured: %v", hasMap, mapCM != "")
	}
	if hasMap {
		v := mountedVolume(t, d, c, mapFile)
		if v.ConfigMap == nil || v.ConfigMap.Name != mapCM {
			t.Errorf("--model-map=%s is not in ConfigMap %s", mapFile, mapCM)
		}
		if m := mountFor(c, mapFile); m != nil && m.SubPath != "" {
			t.Error("model map mounted with subPath: the kubelet never updates such a file, so no reload would happen")
		}
		if content := vals.str(t, "modelMap.content"); content != "" && vals.str(t, "modelMap.existingConfigMap") == "" {
			if got := mountedConfigMap(t, r, d, c, mapFile); got != content {
				t.Errorf("the mounted model map is %q, values hold %q", got, content)
			}
		}
	}

	// TLS: the three flags read files of the Secret's volume.
	tlsOn := vals.bool(t, "tls.enabled")
	clientCA := tlsOn && vals.bool(t, "tls.clientCA")
	for flag, want := range map[string]bool{"tls-cert-file": tlsOn, "tls-key-file": tlsOn, "tls-client-ca-file": clientCA} {
		file, ok := args.flags[flag]
		if ok != want {
			t.Errorf("--%s given: %v, want %v", flag, ok, want)
			continue
		}
		if !ok {
			continue
		}
		v := mountedVolume(t, d, c, file)
		if v.Secret == nil || v.Secret.SecretName != vals.str(t, "tls.secretName") {
			t.Errorf("--%s=%s is not in Secret %s", flag, file, vals.str(t, "tls.secretName"))
			continue
		}
		key := filepath.Base(file)
		if !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Key == key && k.Path == key }) {
			t.Errorf("--%s=%s: the Secret volume does not project key %s", flag, file, key)
		}
	}
}

// mountFor returns the container's mount holding file.
func mountFor(c corev1.Container, file string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if rel, err := filepath.Rel(m.MountPath, file); err == nil && !strings.HasPrefix(rel, "..") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// mountedVolume returns the pod volume a container sees file in.
func mountedVolume(t *testing.T, d *appsv1.Deployment, c corev1.Container, file string) corev1.Volume {
	t.Helper()
	m := mountFor(c, file)
	if m == nil {
		t.Fatalf("container %s: nothing mounted at %s", c.Name, file)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == m.Name {
			return v
		}
	}
	t.Fatalf("container %s mounts unknown volume %s", c.Name, m.Name)
	return corev1.Volume{}
}

// checkServiceMonitor checks that Prometheus scrapes /metrics on the
// Service's metrics port.
func checkServiceMonitor(t *testing.T, sm *monitoringv1.ServiceMonitor, svc *corev1.Service) {
	t.Helper()
	if !subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor %s selects %v, Service %s has labels %v", sm.Name, sm.Spec.Selector.MatchLabels, svc.Name, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %s: %d endpoints, want 1", sm.Name, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if p := servicePort(t, svc, ep.Port); p.TargetPort.StrVal != "metrics" {
		t.Errorf("ServiceMonitor %s scrapes port %s, which targets %s, not metrics", sm.Name, ep.Port, p.TargetPort.String())
	}
	if ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor %s scrapes %s, want /metrics", sm.Name, ep.Path)
	}
}

// checkChartEnvoyGateway compares the chart's Envoy Gateway policies with
// the Envoy Gateway layout of the same body mode, which TestEnvoyGateway
// checks in depth: the ext_proc settings must be the same, and the buffer
// limit, raised only for buffered bodies, equal to --max-body-bytes.
func checkChartEnvoyGateway(t *testing.T, r *rendered, pols []*egv1a1.EnvoyExtensionPolicy, mode bodyMode) {
	t.Helper()
	layout := layoutOf(t, gatewayLayouts, mode)
	ref := kustomizeBuild(t, layout)
	want := all[egv1a1.EnvoyExtensionPolicy](ref)
	if len(pols) != 1 || len(want) != 1 {
		t.Fatalf("%d EnvoyExtensionPolicies, want 1", len(pols))
	}
	if !reflect.DeepEqual(pols[0].Spec.ExtProc, want[0].Spec.ExtProc) {
		got, _ := json.Marshal(pols[0].Spec.ExtProc)
		exp, _ := json.Marshal(want[0].Spec.ExtProc)
		t.Errorf("EnvoyExtensionPolicy extProc differs from deploy/%s's:\n got %s\nwant %s", layout, got, exp)
	}
	if tr := pols[0].Spec.TargetRefs; len(tr) != 1 || tr[0].Kind != "HTTPRoute" {
		t.Errorf("EnvoyExtensionPolicy targets %v, want one HTTPRoute", tr)
	}
	args := onlyTfsbridge(t, r)
	ctps := all[egv1a1.ClientTrafficPolicy](r)
	if mode == fullDuplex {
		if len(ctps) != 0 {
			t.Errorf("%d ClientTrafficPolicies: streamed bodies need no raised Gateway buffer", len(ctps))
		}
		return
	}
	if len(ctps) != 1 || ctps[0].Spec.Connection == nil || ctps[0].Spec.Connection.BufferLimit == nil {
		t.Fatal("want one ClientTrafficPolicy raising connection.bufferLimit")
	}
	if tr := ctps[0].Spec.TargetRefs; len(tr) != 1 || tr[0].Kind != "Gateway" {
		t.Errorf("ClientTrafficPolicy targets %v, want one Gateway", tr)
	}
	if limit := ctps[0].Spec.Connection.BufferLimit.Value(); limit != args.maxBody {
		t.Errorf("Gateway buffer limit %d, --max-body-bytes %d: keep them equal", limit, args.maxBody)
	}
}

// checkChartIstio compares the chart's Istio objects with the Istio layout
// of the same body mode, which TestIstio checks in depth against the sidecar
// bootstraps: with the same release name and namespace they must be
// identical.
func checkChartIstio(t *testing.T, r *rendered, mode bodyMode) {
	t.Helper()
	layout := layoutOf(t, istioLayouts, mode)
	ref := kustomizeBuild(t, layout)
	for _, kind := range []string{"networking.istio.io/v1alpha3/EnvoyFilter", "networking.istio.io/v1/DestinationRule"} {
		got, want := istioSpec[proto.Message](t, r, kind), istioSpec[proto.Message](t, ref, kind)
		if !proto.Equal(got, want) {
			t.Errorf("%s differs from deploy/%s's:\n%s", kind, layout, protoDiff(want, got))
		}
	}
}

// TestHelmChartFollowsRelease renders the chart as another release in
// another namespace: every name and the Istio cluster names follow.
func TestHelmChartFollowsRelease(t *testing.T) {
	c := loadChart(t)
	r := renderChart(t, c, "models", "ml", "istio: {enabled: true}\nenvoyGateway: {enabled: true}\n")
	checkWorkloads(t, r)
	for _, o := range r.objects {
		if !strings.HasPrefix(o.name, "models-tfsbridge") {
			t.Errorf("%s %s: name does not follow the release (models-tfsbridge...)", o.kind, o.name)
		}
	}
	const cluster = "outbound|9002||models-tfsbridge.ml.svc.cluster.local"
	ef := istioSpec[*istionetworking.EnvoyFilter](t, r, "networking.istio.io/v1alpha3/EnvoyFilter")
	for _, cp := range ef.GetConfigPatches() {
		if cp.GetApplyTo() == istionetworking.EnvoyFilter_CLUSTER && cp.GetMatch().GetCluster().GetName() != cluster {
			t.Errorf("EnvoyFilter patches cluster %q, want %q", cp.GetMatch().GetCluster().GetName(), cluster)
		}
	}
	dr := istioSpec[*istionetworking.DestinationRule](t, r, "networking.istio.io/v1/DestinationRule")
	if dr.GetHost() != "models-tfsbridge.ml.svc.cluster.local" {
		t.Errorf("DestinationRule host %s", dr.GetHost())
	}
	pol := one[egv1a1.EnvoyExtensionPolicy](t, r, "models-tfsbridge")
	if br := pol.Spec.ExtProc[0].BackendRefs[0]; br.Name != "models-tfsbridge" {
		t.Errorf("EnvoyExtensionPolicy backend %s, want the release's Service", br.Name)
	}
}

// TestHelmChartRefuses checks values that cannot work fail before
// anything is deployed, with a message naming the problem: in
// values.schema.json (what helm install, template and lint check first) or
// at render time.
func TestHelmChartRefuses(t *testing.T) {
	c := loadChart(t)
	if c.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	tests := []struct{ values, want string }{
		{"tls: {enabled: true}", "tls.secretName"},
		{"replicaCount: 1", "would block every eviction"},
		{"autoscaling: {enabled: true, minReplicas: 1}", "would block every eviction"},
		// The schema's refusals.
		{"bodyMode: streamed", "/bodyMode"},
		{"bodyMode: auto", "/bodyMode"},
		// tfsbridge would refuse a --backend without a scheme at start,
		// after the rollout: the schema refuses it at install.
		{"backend: {url: triton:8000}", "/backend/url"},
		{"backend: {url: 'ftp://triton:8000'}", "/backend/url"},
		{"backend: {kind: trition}", "/backend/kind"},
		{"backendd: {url: 'http://triton:8000'}", "backendd"},
		{"image: {tag: latest}", "/image/tag"},
		{"serviceMonitor: {interval: 30}", "/serviceMonitor/interval"},
	}
	for _, tt := range tests {
		user, err := chartutil.ReadValues([]byte(tt.values))
		if err != nil {
			t.Fatal(err)
		}
		vals, err := chartutil.ToRenderValues(c, user, chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNS}, nil)
		if err == nil {
			_, err = engine.Engine{Strict: true}.Render(c, vals)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("values %q: render error %v, want one mentioning %q", tt.values, err, tt.want)
		}
	}
}

// TestHelmChartFiles checks that every file of the chart is one helm loads
// (nothing stray that a template might be thought to use) and that every
// manifest of the repository pins the chart's appVersion, never latest.
func TestHelmChartFiles(t *testing.T) {
	c := loadChart(t)
	loaded := map[string]bool{"Chart.yaml": true, "values.yaml": true, "values.schema.json": c.Schema != nil}
	for _, f := range c.Templates {
		loaded[f.Name] = true
	}
	for _, f := range c.Files {
		loaded[f.Name] = true
	}
	err := filepath.WalkDir(chartDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if !loaded[filepath.ToSlash(rel)] {
			t.Errorf("%s is not part of the loaded chart", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	version := chartAppVersion(t)
	for _, dir := range kustomizations {
		for d := range tfsbridgeDeployments(t, kustomizeBuild(t, dir)) {
			if c := sidecar(t, d); c.Image != tfsbridgeImage+":"+version {
				t.Errorf("%s: %s image %s, want %s:%s (the chart's appVersion)", dir, d.Name, c.Image, tfsbridgeImage, version)
			}
		}
	}
}

// sidecar returns the tfsbridge container of a Deployment.
func sidecar(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if strings.HasPrefix(c.Image, tfsbridgeImage+":") {
			return c
		}
	}
	t.Fatalf("%s has no tfsbridge container", d.Name)
	return corev1.Container{}
}
