package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// parseDockerfile splits the Dockerfile into stages of instructions. It
// knows what this Dockerfile uses (comments, line continuations); a full
// parser would pull in BuildKit.
func parseDockerfile(t *testing.T) [][]instruction {
	t.Helper()
	var stages [][]instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(readFile(t, "../Dockerfile")), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(strings.Join(strings.Fields(cur.String()), " "), " ")
		cur.Reset()
		ins := instruction{cmd: strings.ToUpper(cmd), args: args}
		if ins.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("instruction %s before FROM", ins.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], ins)
	}
	if cur.Len() > 0 {
		t.Fatal("Dockerfile ends inside a continued line")
	}
	return stages
}

// find returns the index of the first instruction of a stage with that
// command whose arguments contain every part, or -1.
func find(stage []instruction, cmd string, parts ...string) int {
	return slices.IndexFunc(stage, func(ins instruction) bool {
		if ins.cmd != cmd {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(ins.args, p) {
				return false
			}
		}
		return true
	})
}

// dockerfileExposed returns the ports the final image EXPOSEs.
func dockerfileExposed(t *testing.T) []int {
	t.Helper()
	stages := parseDockerfile(t)
	var ports []int
	for _, ins := range stages[len(stages)-1] {
		if ins.cmd != "EXPOSE" {
			continue
		}
		for _, f := range strings.Fields(ins.args) {
			p, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
			if err != nil {
				t.Fatalf("EXPOSE %s", f)
			}
			ports = append(ports, p)
		}
	}
	return ports
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("%d stages, want build + final", len(stages))
	}
	build, final := stages[0], stages[1]

	// The builder's Go is the one go.mod asks for.
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(readFile(t, "../go.mod"))
	if goVersion == nil {
		t.Fatal("no go directive in go.mod")
	}
	if find(build, "FROM", "golang:"+string(goVersion[1])+" ", " AS build") != 0 {
		t.Errorf("first stage must be FROM golang:%s AS build: %q", goVersion[1], build[0].args)
	}

	// Module download cached in its own layer, before the sources arrive.
	copyMod := find(build, "COPY", "go.mod", "go.sum")
	download := find(build, "RUN", "go mod download")
	copyAll := find(build, "COPY", ". .")
	compile := find(build, "RUN", "go build")
	if copyMod < 0 || download < copyMod || copyAll < download || compile < copyAll {
		t.Errorf("want COPY go.mod go.sum, RUN go mod download, COPY . ., RUN go build in that order (got %d %d %d %d)", copyMod, download, copyAll, compile)
	}
	var out string
	if compile >= 0 {
		args := build[compile].args
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w `, "./cmd/tfsbridge",
			"-X " + buildinfoPkg + ".version=${VERSION}", "-X " + buildinfoPkg + ".revision=${REVISION}"} {
			if !strings.Contains(args, want) {
				t.Errorf("go build lacks %s: %s", want, args)
			}
		}
		if m := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(args); m != nil {
			out = m[1]
		} else {
			t.Error("go build has no -o")
		}
	}
	if _, err := os.Stat("../cmd/tfsbridge"); err != nil {
		t.Errorf("the Dockerfile builds ./cmd/tfsbridge: %v", err)
	}

	checkVersionStamp(t, build, final)

	if final[0].args != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static-debian12:nonroot", final[0].args)
	}
	if find(final, "COPY", "--from=build", out+" /tfsbridge") < 0 {
		t.Errorf("final stage must COPY --from=build %s /tfsbridge", out)
	}
	// Numeric, so that runAsNonRoot alone (no runAsUser) admits the pod:
	// the kubelet cannot tell whether a named user is root.
	if want := strconv.Itoa(distrolessUID) + ":" + strconv.Itoa(distrolessUID); find(final, "USER") < 0 || final[find(final, "USER")].args != want {
		t.Errorf("final stage must run as USER %s (distroless's nonroot, by number)", want)
	}
	if find(final, "RUN") >= 0 {
		t.Error("distroless has no shell: no RUN in the final stage")
	}
	exposed := dockerfileExposed(t)
	slices.Sort(exposed)
	if want := []int{tfsPort, extProcPort, metricsPort}; !slices.Equal(exposed, want) {
		t.Errorf("EXPOSE %v, want %v", exposed, want)
	}
	for cmd, want := range map[string][]string{"ENTRYPOINT": {"/tfsbridge"}, "CMD": {"extproc"}} {
		i := find(final, cmd)
		var got []string
		if i < 0 || json.Unmarshal([]byte(final[i].args), &got) != nil || !slices.Equal(got, want) {
			t.Errorf("%s must be the exec form %q", cmd, want)
		}
	}
	for _, stage := range stages {
		if i := find(stage, "ADD", "://"); i >= 0 {
			t.Errorf("ADD from the network: %s", stage[i].args)
		}
	}
}

// buildinfoPkg is the package whose variables the build sets with -X.
const buildinfoPkg = "github.com/tfsbridge/tfsbridge/internal/buildinfo"

// checkVersionStamp checks that both stages take the VERSION and REVISION
// build args, that the linker receives them (above) for variables that
// exist, and that the image carries them as OCI labels.
func checkVersionStamp(t *testing.T, build, final []instruction) {
	t.Helper()
	for name, stage := range map[string][]instruction{"build": build, "final": final} {
		for _, arg := range []string{"VERSION", "REVISION"} {
			if find(stage, "ARG", arg+"=") < 0 {
				t.Errorf("%s stage lacks ARG %s=default", name, arg)
			}
		}
	}
	checkBuildinfoVars(t)
	label := find(final, "LABEL")
	if label < 0 {
		t.Fatal("final stage has no LABEL")
	}
	for key, want := range map[string]string{
		"org.opencontainers.image.version":  "${VERSION}",
		"org.opencontainers.image.revision": "${REVISION}",
		"org.opencontainers.image.source":   "https://github.com/tfsbridge/tfsbridge",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if !strings.Contains(final[label].args, key+`="`+want+`"`) {
			t.Errorf("LABEL lacks %s=%q: %s", key, want, final[label].args)
		}
	}
}

// checkBuildinfoVars checks that the variables the builds set with -X
// exist: the linker ignores -X for a missing one, silently.
func checkBuildinfoVars(t *testing.T) {
	t.Helper()
	src := string(readFile(t, "../internal/buildinfo/buildinfo.go"))
	for _, v := range []string{"version", "revision"} {
		if !regexp.MustCompile(`(?m)^\s+` + v + `\s+string$`).MatchString(src) {
			t.Errorf("internal/buildinfo declares no string variable %s for -X", v)
		}
	}
}

// TestDockerignore checks that the build context keeps every Go source the
// build needs and drops what it does not.
func TestDockerignore(t *testing.T) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(readFile(t, "../.dockerignore")))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(path string) bool {
		ok, err := pm.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	keep := []string{"go.mod", "go.sum", "cmd/tfsbridge/main.go", "translate/tensor/tensor.go"}
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if d.IsDir() && (rel == ".git" || rel == "deploy" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			keep = append(keep, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range keep {
		if excluded(path) {
			t.Errorf(".dockerignore drops %s, which the build needs", path)
		}
	}
	for _, path := range []string{".git/HEAD", "deploy/envoy/envoy.yaml", "translate/tensor/tensor_test.go", "tfsbridge", "Dockerfile"} {
		if !excluded(path) {
			t.Errorf(".dockerignore keeps %s in the build context", path)
		}
	}
}
