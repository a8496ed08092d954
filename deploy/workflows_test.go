package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	appsv1 "k8s.io/api/apps/v1"
)

const workflowsDir = "../.github/workflows"

// workflowFiles returns the repository's workflow files.
func workflowFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(workflowsDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no workflow in %s", workflowsDir)
	}
	return files
}

// TestWorkflowsLint runs actionlint over every workflow, offline: syntax,
// expressions and their types, job dependencies, known actions' inputs,
// permissions, glob patterns. (Its shellcheck and pyflakes passes need
// external programs and stay off.)
func TestWorkflowsLint(t *testing.T) {
	var out bytes.Buffer
	linter, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range workflowFiles(t) {
		errs, err := linter.LintFile(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			t.Errorf("%s:%d:%d: %s [%s]", filepath.Base(f), e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// TestWorkflowsLintRejects shows the linter is live: a misspelled input of
// a known action and an undefined job dependency are reported.
func TestWorkflowsLintRejects(t *testing.T) {
	linter, err := actionlint.NewLinter(&bytes.Buffer{}, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := readFile(t, filepath.Join(workflowsDir, "release.yaml"))
	for _, tc := range []struct{ old, new, want string }{
		{"go-version-file: go.mod", "go-version-fil: go.mod", "go-version-fil"},
		{"needs: test", "needs: tests", "tests"},
	} {
		broken := bytes.Replace(src, []byte(tc.old), []byte(tc.new), 1)
		errs, err := linter.Lint("release.yaml", broken, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(errs, func(e *actionlint.Error) bool { return strings.Contains(e.Message, tc.want) }) {
			t.Errorf("%q → %q: actionlint reports nothing about %s", tc.old, tc.new, tc.want)
		}
	}
}

// parseWorkflow parses one workflow with actionlint's parser.
func parseWorkflow(t *testing.T, name string) *actionlint.Workflow {
	t.Helper()
	w, errs := actionlint.Parse(readFile(t, filepath.Join(workflowsDir, name)))
	for _, e := range errs {
		t.Errorf("%s: %v", name, e)
	}
	if w == nil {
		t.FailNow()
	}
	return w
}

// steps returns the action and script steps of a job.
func steps(t *testing.T, w *actionlint.Workflow, job string) (actions map[string]*actionlint.ExecAction, scripts []string) {
	t.Helper()
	j, ok := w.Jobs[job]
	if !ok {
		t.Fatalf("no job %s", job)
	}
	actions = map[string]*actionlint.ExecAction{}
	for _, s := range j.Steps {
		switch e := s.Exec.(type) {
		case *actionlint.ExecAction:
			name, _, _ := strings.Cut(e.Uses.Value, "@")
			actions[name] = e
		case *actionlint.ExecRun:
			scripts = append(scripts, e.Run.Value)
		}
	}
	return actions, scripts
}

func input(a *actionlint.ExecAction, name string) string {
	if in, ok := a.Inputs[name]; ok && in.Value != nil {
		return in.Value.Value
	}
	return ""
}

// TestWorkflowsRelease checks what the release must do: test with .ci/run
// before anything is published, push the image for both architectures with
// the version and revision the Dockerfile expects, and build binaries
// stamped the same way.
func TestWorkflowsRelease(t *testing.T) {
	ci := parseWorkflow(t, "ci.yaml")
	_, scripts := steps(t, ci, "test")
	if !slices.Contains(scripts, "bash .ci/run") {
		t.Errorf("ci.yaml job test runs %q, want bash .ci/run", scripts)
	}

	w := parseWorkflow(t, "release.yaml")
	if len(w.On) != 1 {
		t.Fatalf("release.yaml has %d triggers, want the tag push only", len(w.On))
	}
	push, ok := w.On[0].(*actionlint.WebhookEvent)
	if !ok || push.Hook.Value != "push" || push.Tags.IsEmpty() || !push.Branches.IsEmpty() {
		t.Fatal("release.yaml must run on tag pushes only")
	}
	_, scripts = steps(t, w, "test")
	if !slices.Contains(scripts, "bash .ci/run") {
		t.Error("release.yaml job test must run bash .ci/run")
	}
	for _, job := range []string{"image", "binaries"} {
		j := w.Jobs[job]
		if j == nil || !slices.ContainsFunc(j.Needs, func(s *actionlint.String) bool { return s.Value == "test" }) {
			t.Errorf("release job %s must need test: nothing is published untested", job)
		}
	}

	actions, _ := steps(t, w, "image")
	build, ok := actions["docker/build-push-action"]
	if !ok {
		t.Fatal("job image does not use docker/build-push-action")
	}
	platforms := strings.Split(input(build, "platforms"), ",")
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("image platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	if input(build, "push") != "true" || !strings.HasPrefix(input(build, "tags"), "${{ env.IMAGE }}:${{ steps.version.outputs.version }}") {
		t.Errorf("image must push tag IMAGE:<version>, got push=%q tags=%q", input(build, "push"), input(build, "tags"))
	}
	if img := w.Env.Vars["image"]; img == nil || img.Value.Value != tfsbridgeImage {
		t.Errorf("env IMAGE must be %s", tfsbridgeImage)
	}
	args := input(build, "build-args")
	for _, arg := range []string{"VERSION=${{ steps.version.outputs.version }}", "REVISION=${{ github.sha }}"} {
		if !strings.Contains(args, arg) {
			t.Errorf("build-args lack %s: %q", arg, args)
		}
	}
	// The build args are the ones the Dockerfile declares.
	stages := parseDockerfile(t)
	for _, name := range []string{"VERSION", "REVISION"} {
		if find(stages[0], "ARG", name+"=") < 0 {
			t.Errorf("the Dockerfile's build stage declares no ARG %s", name)
		}
	}

	_, scripts = steps(t, w, "binaries")
	script := strings.Join(scripts, "\n")
	if b := w.Env.Vars["buildinfo"]; b == nil || b.Value.Value != buildinfoPkg {
		t.Errorf("env BUILDINFO must be %s", buildinfoPkg)
	}
	for _, want := range []string{
		"-X ${BUILDINFO}.version=${version}", "-X ${BUILDINFO}.revision=${REVISION}", "-s -w", "CGO_ENABLED=0",
		"./cmd/tfsbridge", "linux/amd64", "linux/arm64", "SHA256SUMS", "gh release create",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("job binaries lacks %q", want)
		}
	}
	checkBuildinfoVars(t)
}

// TestWorkflowFilesAreYAML keeps the workflow folder to workflows.
func TestWorkflowFilesAreYAML(t *testing.T) {
	entries, err := os.ReadDir(workflowsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".yaml" && ext != ".yml" {
			t.Errorf("%s in %s is not a workflow", e.Name(), workflowsDir)
		}
	}
}

// TestWorkflowInterop checks the real-interop run against what it tests:
// the Envoy is the sidecar pod's (a release with full duplex), the Triton
// image is the pod's release, each server of the matrix has its models in
// test/interop, and the TFSBRIDGE_E2E_* variables it sets are the ones
// the e2e harness reads.
func TestWorkflowInterop(t *testing.T) {
	w := parseWorkflow(t, "interop.yaml")
	r := kustomizeBuild(t, "kubernetes")
	d := one[appsv1.Deployment](t, r, "model-server")
	images := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		images[c.Name] = c.Image
	}
	env := func(name string) string {
		if v := w.Env.Vars[strings.ToLower(name)]; v != nil {
			return v.Value.Value
		}
		return ""
	}
	if got := env("ENVOY_IMAGE"); got != images["envoy"] {
		t.Errorf("ENVOY_IMAGE %q, want the sidecar pod's Envoy %q", got, images["envoy"])
	}
	release := func(image string) string {
		_, tag, _ := strings.Cut(image, ":")
		v, _, _ := strings.Cut(tag, "-")
		return v
	}
	if got, want := release(env("TRITON_IMAGE")), release(images["triton"]); got == "" || got != want {
		t.Errorf("TRITON_IMAGE %q is release %q, the sidecar pod runs %q", env("TRITON_IMAGE"), got, want)
	}

	j := w.Jobs["interop"]
	if j == nil || j.Strategy == nil || j.Strategy.Matrix == nil || j.Strategy.Matrix.Rows["server"] == nil {
		t.Fatal("interop.yaml needs a job interop with a server matrix")
	}
	var servers []string
	for _, v := range j.Strategy.Matrix.Rows["server"].Values {
		if s, ok := v.(*actionlint.RawYAMLString); ok {
			servers = append(servers, s.Value)
		}
	}
	slices.Sort(servers)
	if !slices.Equal(servers, []string{"kserve", "mlserver", "triton"}) {
		t.Errorf("matrix servers %v, want kserve, mlserver and triton", servers)
	}
	for _, p := range []string{"triton/half_plus_two/config.pbtxt", "mlserver/half_plus_two/model-settings.json", "mlserver/settings.json", "kserve/server.py"} {
		if _, err := os.Stat(filepath.Join("../test/interop", p)); err != nil {
			t.Errorf("test/interop lacks %s: %v", p, err)
		}
	}

	harness := string(readFile(t, "../test/e2e/external_test.go"))
	seen := map[string]bool{}
	for _, s := range j.Steps {
		if s.Env == nil {
			continue
		}
		for name := range s.Env.Vars {
			name = strings.ToUpper(name)
			if strings.HasPrefix(name, "TFSBRIDGE_E2E_") {
				seen[name] = true
				if !strings.Contains(harness, `"`+name+`"`) {
					t.Errorf("interop.yaml sets %s, which test/e2e does not read", name)
				}
			}
		}
	}
	for _, name := range []string{"TFSBRIDGE_E2E_V2", "TFSBRIDGE_E2E_EXTPROC_ADDR", "TFSBRIDGE_E2E_ENVOY", "TFSBRIDGE_E2E_ENVOY_FD"} {
		if !seen[name] {
			t.Errorf("interop.yaml does not set %s", name)
		}
	}
}
