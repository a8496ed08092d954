package docsref

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// root is the repository root, from this package's directory.
const root = "../.."

// otherTools are flags the docs give to programs other than tfsbridge
// (Envoy, docker, helm, go, kind, curl), by the tool; any other --flag must
// be tfsbridge's.
var otherTools = map[string]string{
	"concurrency": "envoy", "disable-hot-restart": "envoy", "drain-strategy": "envoy", "drain-time-s": "envoy",
	"log-level": "envoy, and tfsbridge's", "base-id": "envoy", "service-cluster": "envoy",
	"build-arg": "docker", "platform": "docker", "build": "docker compose", "set": "helm", "namespace": "helm",
	"values": "helm", "create-namespace": "helm", "data": "curl", "header": "curl",
	"http-max-input-size": "triton", "http-header-forward-pattern": "triton",
}

// known is what the docs may name.
type known struct {
	flags   map[string]bool // tfsbridge's flags, without "--"
	metrics map[string]bool // tfsbridge_* series names, histogram suffixes included
}

// docFiles are the documents checked, relative to the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	for _, pattern := range []string{"docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	for _, dir := range []string{"deploy", "test"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "README.md" {
				rel, _ := filepath.Rel(root, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestDocsReference checks every document against the repository.
func TestDocsReference(t *testing.T) {
	k := collectKnown(t)
	files := docFiles(t)
	if len(files) < 8 {
		t.Fatalf("only %d documents found: %v", len(files), files)
	}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range check(f, string(text), k, exists) {
			t.Errorf("%s: %s", f, problem)
		}
	}
}

// TestDocsReferenceRejects shows the check is live: each document names one
// thing that does not exist, and must be reported for it, and nothing else.
func TestDocsReferenceRejects(t *testing.T) {
	k := collectKnown(t)
	tests := []struct{ doc, text, want string }{
		{"README.md", "See `deploy/envoy/two-servers.yaml`.", "deploy/envoy/two-servers.yaml"},
		{"README.md", "Run `docker compose -f deploy/compose/nope.yaml up`.", "deploy/compose/nope.yaml"},
		{"README.md", "The [map](docs/missing.md#x) explains.", "docs/missing.md"},
		{"deploy/README.md", "`envoy/envoy-missing.yaml` is the sidecar's.", "deploy/envoy/envoy-missing.yaml"},
		{"README.md", "Set `--backend-kindd=triton`.", "--backend-kindd"},
		{"README.md", "```sh\ntfsbridge proxy --no-such-flag\n```", "--no-such-flag"},
		{"README.md", "Alert on `tfsbridge_requests_failed_total`.", "tfsbridge_requests_failed_total"},
		{"README.md", "Watch `tfsbridge_model_map_reload_failng`.", "tfsbridge_model_map_reload_failng"},
		{"README.md", "`rate(tfsbridge_reqests_total[5m])`", "tfsbridge_reqests_total"},
	}
	for _, tt := range tests {
		got := check(tt.doc, tt.text, k, exists)
		if len(got) != 1 || !strings.Contains(got[0], tt.want) {
			t.Errorf("%s %q: problems %q, want one naming %s", tt.doc, tt.text, got, tt.want)
		}
	}
	// What exists passes.
	ok := "`deploy/envoy/envoy.yaml`, [arch](docs/architecture.md), `--grpc-addr=unix:///x`, " +
		"`tfsbridge_request_duration_seconds_bucket`, `/v1/models/m:predict`, `linux/amd64`, `--set backend.url=x`, " +
		"`--rest_api_timeout_in_ms`, cluster `tfsbridge_extproc`"
	if got := check("README.md", ok, k, exists); len(got) > 0 {
		t.Errorf("existing references reported: %q", got)
	}
}

var (
	fence    = regexp.MustCompile("(?ms)^[ \t]*```[^\n]*\n(.*?)^[ \t]*```")
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A flag word ends where a flag name cannot go on: TF Serving's own
	// --rest_api_timeout_in_ms is not a --rest.
	flagWord = regexp.MustCompile(`(?:^|[\s(\[,"'])--([a-z][a-z0-9-]*[a-z0-9])(?:[^A-Za-z0-9_-]|$)`)
	// A metric name has at least two words after the prefix (a unit or
	// a noun and a verb); tfsbridge_extproc (an Envoy cluster) and
	// tfsbridge_ok (a response detail) are not metrics.
	metricWord = regexp.MustCompile(`\btfsbridge_[a-z0-9]+_[a-z0-9_]*[a-z0-9]`)
	pathWord   = regexp.MustCompile(`^\.?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*/?$`)
	// placeholder marks a path pattern, not a path: tfsbridge_<version>_…
	placeholder = regexp.MustCompile(`[<>{}*…]|X\.Y\.Z|\.\.\.`)
)

// check returns the problems of one document: repository paths (in code
// spans, code blocks and relative links) that do not exist, --flags in code
// spans (and on tfsbridge command lines of code blocks) that are neither
// tfsbridge's nor another tool's, and tfsbridge_* metric names that
// proxy/observe does not register.
func check(doc, text string, k known, exists func(string) bool) []string {
	var problems []string
	report := func(format string, args ...any) {
		p := fmt.Sprintf(format, args...)
		if !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
	}
	dir := path.Dir(doc)
	checkPath := func(word string) {
		word = strings.Trim(word, `"',;:.()`)
		if word == "" || placeholder.MatchString(word) || !pathWord.MatchString(word) {
			return
		}
		if p, ok := repoPath(dir, word, exists); ok && !exists(p) {
			report("names %s, which does not exist", p)
		}
	}
	checkFlag := func(name string) {
		if !k.flags[name] && otherTools[name] == "" {
			report("names --%s, which no tfsbridge command has", name)
		}
	}
	checkMetrics := func(s string) {
		for _, m := range metricWord.FindAllString(s, -1) {
			if !k.metrics[m] {
				report("names the metric %s, which proxy/observe does not register", m)
			}
		}
	}

	// Code blocks: paths anywhere, flags on tfsbridge's command lines.
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			for _, w := range strings.Fields(line) {
				checkPath(w)
			}
			fields := strings.Fields(line)
			if len(fields) > 0 && (path.Base(fields[0]) == "tfsbridge" || strings.Contains(line, "./cmd/tfsbridge")) {
				for _, f := range flagWord.FindAllStringSubmatch(line, -1) {
					checkFlag(f[1])
				}
			}
			checkMetrics(line)
		}
	}
	prose := fence.ReplaceAllString(text, "")
	for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
		span := m[1]
		for _, w := range strings.Fields(span) {
			checkPath(w)
		}
		for _, f := range flagWord.FindAllStringSubmatch(span, -1) {
			checkFlag(f[1])
		}
		checkMetrics(span)
	}
	for _, m := range link.FindAllStringSubmatch(prose, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		if p := path.Clean(path.Join(dir, target)); !exists(p) {
			report("links to %s, which does not exist", p)
		}
	}
	return problems
}

// repoPath resolves a path-like word of a document in dir: from the root
// when its first segment is a top-level entry of the repository, from the
// document's directory when it is an entry there; otherwise it is no
// repository path (linux/amd64, application/json, an upstream file).
func repoPath(dir, word string, exists func(string) bool) (string, bool) {
	first, _, hasSlash := strings.Cut(word, "/")
	if !hasSlash && !strings.Contains(word, ".") {
		return "", false
	}
	if !hasSlash {
		// A bare file name: only the documents' neighbours are checked
		// (values.yaml in the root README is the chart's, for one).
		if dir != "." && exists(path.Join(dir, word)) {
			return path.Join(dir, word), true
		}
		return "", false
	}
	switch {
	case exists(first) && isTopLevel(first):
		return path.Clean(word), true
	case dir != "." && exists(path.Join(dir, first)):
		return path.Clean(path.Join(dir, word)), true
	}
	return "", false
}

// isTopLevel reports entries of the repository root that paths in the docs
// start from (not "go.mod"-like files that never take a slash).
func isTopLevel(name string) bool {
	switch name {
	case "cmd", "deploy", "docs", "internal", "proxy", "test", "translate", ".github", ".ci":
		return true
	}
	return false
}

// exists reports whether a repository path (relative to the root) exists.
func exists(p string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
	return err == nil
}

// collectKnown gathers tfsbridge's flags from cmd/tfsbridge's source and
// the metric names proxy/observe registers.
func collectKnown(t *testing.T) known {
	t.Helper()
	k := known{flags: sourceFlags(t), metrics: map[string]bool{}}
	// cobra's own.
	k.flags["help"], k.flags["version"] = true, true
	for _, want := range []string{"grpc-addr", "backend", "model-map", "body-mode", "metrics-addr"} {
		if !k.flags[want] {
			t.Fatalf("cmd/tfsbridge defines no --%s: the flag scan is broken (%d flags found)", want, len(k.flags))
		}
	}
	for name, histogram := range sourceMetrics(t) {
		k.metrics[name] = true
		if histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				k.metrics[name+suffix] = true
			}
		}
	}
	// The scan must see every family the registry gathers.
	m := observe.NewMetrics()
	m.Request("predict", "m", 200)
	m.RequestDuration("predict", 200, 0)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "tfsbridge_") && !k.metrics[f.GetName()] {
			t.Fatalf("proxy/observe registers %s, which the source scan missed", f.GetName())
		}
	}
	return k
}

// flagDefiners are pflag's flag-defining methods (FlagSet.StringVar,
// Var, DurationP, ...): their first string literal argument is a flag name.
var flagDefiners = regexp.MustCompile(`^(Bool|String|Int|Int32|Int64|Uint|Uint32|Uint64|Float32|Float64|Duration|StringSlice|StringArray|StringToString|Count|Var|Text|Func|BoolFunc|IP|BytesHex)(Var)?P?$`)

// flagHelpers are the binary's own flag-defining helpers, by the usual
// naming (sizeVar, durationFlag, ...), so that a flag defined through one
// is found too.
var flagHelpers = regexp.MustCompile(`(Var|Flag)P?$`)

// sourceFlags parses cmd/tfsbridge's non-test files and returns every flag
// name a pflag method defines there.
func sourceFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	eachFile(t, "cmd/tfsbridge", func(f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if !flagDefiners.MatchString(name) && !flagHelpers.MatchString(name) {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil && regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
						flags[name] = true
					}
					break
				}
			}
			return true
		})
	})
	return flags
}

// sourceMetrics parses proxy/observe's non-test files and returns every
// metric name given as Name in a prometheus options literal, with whether
// it is a histogram's.
func sourceMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	eachFile(t, "proxy/observe", func(f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if id, isID := kv.Key.(*ast.Ident); !ok || !isID || id.Name != "Name" {
					continue
				}
				if v, ok := kv.Value.(*ast.BasicLit); ok && v.Kind == token.STRING {
					if name, err := strconv.Unquote(v.Value); err == nil {
						out[name] = sel.Sel.Name == "HistogramOpts"
					}
				}
			}
			return true
		})
	})
	if len(out) < 10 {
		t.Fatalf("proxy/observe: only %d metric names found; the scan is broken", len(out))
	}
	return out
}

// eachFile parses every non-test Go file of a repository directory.
func eachFile(t *testing.T, dir string, fn func(*ast.File)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		fn(f)
	}
}
