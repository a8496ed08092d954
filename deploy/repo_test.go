package deploy

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// testLine is the one command that runs every test of both modules.
const testLine = "go test -count=1 ./... && (cd deploy && go test -count=1 ./...)"

// TestTestCommand checks that the README's Quickstart gives the test
// command and that .ci/run runs exactly that line (from its fresh clone),
// so what a newcomer types is what CI proves.
func TestTestCommand(t *testing.T) {
	readme := string(readFile(t, "../README.md"))
	quick, _, _ := strings.Cut(readme[strings.Index(readme, "## Quickstart"):], "\n## ")
	if !strings.Contains(quick, "\n"+testLine+" ") && !strings.Contains(quick, "\n"+testLine+"\n") {
		t.Errorf("README's Quickstart does not give the test command %q", testLine)
	}
	run := string(readFile(t, "../.ci/run"))
	lines := regexp.MustCompile(`(?m)^\s*`+regexp.QuoteMeta(testLine)+`\s*$`).FindAllString(run, -1)
	if len(lines) != 1 {
		t.Errorf(".ci/run runs the README's test command %d times, want once", len(lines))
	}
	// No path into a folder beside the repository (CI happens to keep one).
	if !strings.Contains(run, "git clone") || regexp.MustCompile(`\.\.[/]shared`).MatchString(run) {
		t.Error(".ci/run must test a fresh clone and need nothing beside the repository")
	}
}

// TestLicense checks the repository carries the Apache License 2.0 text
// that the image label and the chart declare.
func TestLicense(t *testing.T) {
	text := readFile(t, "../LICENSE")
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS"} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("LICENSE lacks %q: not the full Apache-2.0 text", want)
		}
	}
	if c := loadChart(t); c.Metadata.Annotations["licenses"] != "Apache-2.0" {
		t.Errorf("chart licenses annotation %q", c.Metadata.Annotations["licenses"])
	}
}

// TestReleaseStory checks that the version everything pins is one story:
// CHANGELOG.md has a section for the chart's appVersion (what the next
// tag releases, and what every manifest pins: TestHelmChartFiles), and
// README's Quickstart installs the binary at that version's tag.
func TestReleaseStory(t *testing.T) {
	version := chartAppVersion(t)
	changelog := string(readFile(t, "../CHANGELOG.md"))
	if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(version) + `( |$)`).MatchString(changelog) {
		t.Errorf("CHANGELOG.md has no section \"## %s\", the version the chart and manifests pin", version)
	}
	if !regexp.MustCompile(`(?m)^## Unreleased$`).MatchString(changelog) {
		t.Error(`CHANGELOG.md has no "## Unreleased" section for what comes after it`)
	}
	readme := string(readFile(t, "../README.md"))
	quick, _, _ := strings.Cut(readme[strings.Index(readme, "## Quickstart"):], "\n## ")
	if install := "go install github.com/tfsbridge/tfsbridge/cmd/tfsbridge@v" + version; !strings.Contains(quick, "\n"+install+"\n") {
		t.Errorf("README's Quickstart does not give the install line %q", install)
	}
}
