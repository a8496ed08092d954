package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

const (
	alertsFile    = "observability/alerts.yaml"
	dashboardFile = "observability/dashboard.json"
)

// envoyExtProcStats are the ext_proc filter's counters as Envoy documents
// them (http.<stat_prefix>.ext_proc.<name>); Envoy's Prometheus endpoint
// names them envoy_http_ext_proc_<name> and moves the stat prefix into the
// envoy_http_conn_manager_prefix label. See docs/envoy-extproc.md.
var envoyExtProcStats = []string{
	"streams_started", "stream_msgs_sent", "stream_msgs_received", "spurious_msgs_received",
	"streams_closed", "streams_failed", "failure_mode_allowed", "message_timeouts",
	"rejected_header_mutations", "override_message_timeout_received", "override_message_timeout_ignored",
	"clear_route_cache_ignored", "clear_route_cache_disabled", "clear_route_cache_upstream_ignored",
	"send_immediate_resp_upstream_ignored",
}

// targetLabels are the labels Prometheus (and prometheus-operator's
// ServiceMonitor) attach to every scraped series.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// knownMetrics maps every metric name a query may use to its label names
// (nil: any label).
type knownMetrics map[string][]string

// collectKnownMetrics builds the metric catalogue: what observe.NewMetrics
// registers (every vector is touched once so the registry reports it) and
// Envoy's ext_proc statistics.
func collectKnownMetrics(t *testing.T) knownMetrics {
	t.Helper()
	m := observe.NewMetrics()
	m.Request("predict", "half_plus_two", 200)
	m.PassThrough()
	m.Translation(observe.DirRequest, time.Millisecond)
	m.BodySize(observe.StageTFRequest, 100)
	m.StreamStarted("extproc")
	m.CacheLookup(true)
	m.BackendError("default", "timeout")
	m.RequestDuration("predict", 200, time.Millisecond)
	m.BackendCall("default", observe.CallMetadata, time.Millisecond)
	m.ModelMap().State("0123", time.Now(), false) // registered only when a --model-map is configured
	sm := m.Shadow()                              // registered with a --model-map too
	sm.Comparison("half_plus_two", observe.ShadowMatch)
	sm.WorstRelative("half_plus_two", 1e-6)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := knownMetrics{}
	for _, f := range families {
		var labels []string
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		name := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			known[name+"_bucket"] = append(slices.Clone(labels), "le")
			known[name+"_sum"] = labels
			known[name+"_count"] = labels
		case dto.MetricType_SUMMARY:
			known[name] = append(slices.Clone(labels), "quantile")
			known[name+"_sum"] = labels
			known[name+"_count"] = labels
		default:
			known[name] = labels
		}
	}
	for _, want := range []string{"tfsbridge_requests_total", "tfsbridge_translation_duration_seconds_bucket", "process_resident_memory_bytes", "go_goroutines"} {
		if _, ok := known[want]; !ok {
			t.Fatalf("observe.NewMetrics does not report %s; the catalogue is broken", want)
		}
	}
	for _, s := range envoyExtProcStats {
		known["envoy_http_ext_proc_"+s] = []string{"envoy_http_conn_manager_prefix"}
	}
	// Prometheus' own series for every target: 1 when the scrape worked.
	known["up"] = []string{}
	return known
}

var promqlParser = parser.NewParser(parser.Options{})

// checkQuery parses one PromQL expression and checks that every selector
// names a known metric with known labels, and that every aggregation
// groups by labels its operands have.
func checkQuery(known knownMetrics, expr string) error {
	ast, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return err
	}
	var errs []string
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labels, ok := known[n.Name]
			if n.Name == "" || !ok {
				errs = append(errs, fmt.Sprintf("unknown metric %q", n.Name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !labelAllowed(labels, m.Name) {
					errs = append(errs, fmt.Sprintf("%s has no label %q", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			operandLabels := selectorLabels(known, n.Expr)
			for _, g := range n.Grouping {
				if !slices.ContainsFunc(operandLabels, func(labels []string) bool { return labelAllowed(labels, g) }) {
					errs = append(errs, fmt.Sprintf("%s groups by %q, which none of its metrics has", n.Op, g))
				}
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func labelAllowed(labels []string, name string) bool {
	return labels == nil || slices.Contains(labels, name) || slices.Contains(targetLabels, name)
}

// selectorLabels returns the label names of every metric selected under node.
func selectorLabels(known knownMetrics, node parser.Node) [][]string {
	var out [][]string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, known[vs.Name])
		}
		return nil
	})
	return out
}

// TestAlertRules loads the alert rules as Prometheus does (strict YAML,
// every expression parsed, annotation templates checked) and checks every
// metric they name exists, and that each alert is labelled and explained.
func TestAlertRules(t *testing.T) {
	known := collectKnownMetrics(t)
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	alerts := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: recording rule %q: this file holds alerts only", g.Name, r.Record)
				continue
			}
			alerts[r.Alert] = r.Expr
			if err := checkQuery(known, r.Expr); err != nil {
				t.Errorf("alert %s: %v\n%s", r.Alert, err, r.Expr)
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, sev)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
		}
	}
	// What the alerts must watch (issue 11): each needs an alert on it.
	for _, metric := range []string{
		`tfsbridge_requests_total{code=~"5.."}`,         // error ratio
		"tfsbridge_translation_duration_seconds_bucket", // latency
		"tfsbridge_backend_errors_total",
		"tfsbridge_model_map_reload_failing",
		"tfsbridge_admission_rejections_total",
		"envoy_http_ext_proc_spurious_msgs_received",
		// tfsbridge itself down: its own series vanish with it.
		`absent(up{job=~".*tfsbridge.*"} == 1)`,
		`up{job=~".*tfsbridge.*"} == 0`,
	} {
		if !slices.ContainsFunc(mapValues(alerts), func(expr string) bool { return strings.Contains(expr, metric) }) {
			t.Errorf("no alert watches %s", metric)
		}
	}
}

// TestDownAlertsSelectTfsbridge checks that the down alerts' job selector
// matches the job Prometheus gives tfsbridge's targets: prometheus-operator
// names it after the scraped Service, the chart's ServiceMonitor selects
// the release's Service (tfsbridge, models-tfsbridge, ...), and a static
// scrape config would name it tfsbridge.
func TestDownAlertsSelectTfsbridge(t *testing.T) {
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, promqlParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 || groups == nil {
		t.Fatalf("alerts: %v", errs)
	}
	jobs := []string{"tfsbridge"}
	for _, release := range []string{"tfsbridge", "models"} {
		r := renderChart(t, loadChart(t), release, releaseNS, "serviceMonitor: {enabled: true}\n")
		for _, sm := range all[monitoringv1.ServiceMonitor](r) {
			for _, svc := range all[corev1.Service](r) {
				if subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
					jobs = append(jobs, svc.Name)
				}
			}
		}
	}
	if len(jobs) != 3 {
		t.Fatalf("jobs %v: want the chart's ServiceMonitor to select one Service per release", jobs)
	}
	var checked int
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "TfsbridgeDown" && r.Alert != "TfsbridgeTargetDown" {
				continue
			}
			ast, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok || vs.Name != "up" {
					return nil
				}
				for _, m := range vs.LabelMatchers {
					if m.Name != "job" {
						continue
					}
					checked++
					for _, job := range jobs {
						if !m.Matches(job) {
							t.Errorf("alert %s: %s does not match job %q", r.Alert, m, job)
						}
					}
					if m.Matches("envoy") || m.Matches("triton") {
						t.Errorf("alert %s: %s matches other jobs", r.Alert, m)
					}
				}
				return nil
			})
		}
	}
	if checked != 2 {
		t.Errorf("found %d job selectors on up in TfsbridgeDown and TfsbridgeTargetDown, want 2", checked)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// dashboard is the part of Grafana's dashboard model the checks read;
// decoding is strict only where the field names are ours to get wrong.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Schema     int     `json:"schemaVersion"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// grafanaVars stands in for the variables Grafana expands before a query
// reaches Prometheus.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "${namespace}", ".*", "$namespace", ".*", "${datasource}", "prom",
)

// TestDashboard parses every query of the Grafana dashboard with
// Prometheus' parser (after Grafana's variable expansion) and checks the
// metrics exist; and that panels are laid out, unique and described.
func TestDashboard(t *testing.T) {
	known := collectKnownMetrics(t)
	raw := readFile(t, dashboardFile)
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || d.Schema < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a current schema", d.UID, d.Title, d.Schema)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			m := regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`).FindStringSubmatch(v.Definition)
			if m == nil || known[m[1]] == nil && !slices.Contains(targetLabels, m[2]) {
				t.Errorf("variable %s: %q, want label_values(<known metric>, <label>)", v.Name, v.Definition)
			}
		}
	}
	for _, v := range []string{"datasource", "namespace"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}

	ids := map[int]bool{}
	queries := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if ids[p.ID] {
				t.Errorf("%s: id used twice", name)
			}
			ids[p.ID] = true
			if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
				t.Errorf("%s: gridPos %+v outside Grafana's 24 columns", name, p.GridPos)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Description == "" || p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: needs a title, a description and a unit", name)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource must be the $datasource Prometheus variable", name)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", name)
			}
			refs := map[string]bool{}
			for _, q := range p.Targets {
				queries++
				if refs[q.RefID] {
					t.Errorf("%s: refId %s used twice", name, q.RefID)
				}
				refs[q.RefID] = true
				if !strings.Contains(q.Expr, `namespace=~"$namespace"`) {
					t.Errorf("%s: %s ignores the $namespace variable", name, q.RefID)
				}
				if err := checkQuery(known, grafanaVars.Replace(q.Expr)); err != nil {
					t.Errorf("%s %s: %v\n%s", name, q.RefID, err, q.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}

	// Every tfsbridge metric and the ext_proc failure counters are on it.
	for name := range known {
		isOurs := strings.HasPrefix(name, "tfsbridge_") && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count")
		if (isOurs || name == "envoy_http_ext_proc_spurious_msgs_received") && !bytes.Contains(raw, []byte(name)) {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
}

// TestCheckQueryRejects shows the metric checks can fail.
func TestCheckQueryRejects(t *testing.T) {
	known := collectKnownMetrics(t)
	tests := []struct{ expr, want string }{
		{`rate(tfsbridge_request_total[5m])`, `unknown metric "tfsbridge_request_total"`},
		{`sum(rate(tfsbridge_requests_total{status="500"}[5m]))`, `has no label "status"`},
		{`sum by (direction) (rate(tfsbridge_requests_total[5m]))`, `groups by "direction"`},
		{`histogram_quantile(0.9, rate(tfsbridge_translation_duration_seconds[5m]))`, `unknown metric`},
		{`envoy_http_ext_proc_streams_msgs_sent`, `unknown metric`},
		{`sum(rate(tfsbridge_requests_total[5m])`, `unclosed left parenthesis`},
	}
	for _, tt := range tests {
		if err := checkQuery(known, tt.expr); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.expr, err, tt.want)
		}
	}
	if err := checkQuery(known, `sum by (code) (rate(tfsbridge_requests_total{namespace="x"}[5m]))`); err != nil {
		t.Errorf("a valid query is rejected: %v", err)
	}
}

// TestObservabilityFiles makes sure nothing in observability/ escapes the
// checks above.
func TestObservabilityFiles(t *testing.T) {
	entries, err := os.ReadDir("observability")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.ToSlash(filepath.Join("observability", e.Name()))
		if p != alertsFile && p != dashboardFile && e.Name() != "README.md" {
			t.Errorf("%s is checked by no test", p)
		}
	}
}
