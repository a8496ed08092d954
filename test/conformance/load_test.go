package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVectorsShip checks that the vectors the suites load are inside the
// repository, that every file is documented in testdata/README.md and that
// each vector has a unique id, a source and a known basis.
func TestVectorsShip(t *testing.T) {
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, dataDir); dir != want {
		t.Errorf("Dir() = %s, want %s (inside the repository)", dir, want)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("%d vector files in %s, want tfserving_cases.json and oip_cases.json at least", len(files), dir)
	}
	bases := map[string]bool{"test-assertion": true, "derived-from-source": true, "code-reading": true, "design-decision": true}
	for _, f := range files {
		name := filepath.Base(f)
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("testdata/README.md does not describe %s", name)
		}
		seen := map[string]bool{}
		for _, c := range MustLoad(t, name) {
			if c.ID == "" || seen[c.ID] {
				t.Errorf("%s: empty or repeated id %q", name, c.ID)
			}
			seen[c.ID] = true
			if c.Source == "" || !bases[c.Basis] {
				t.Errorf("%s %s: source %q, basis %q", name, c.ID, c.Source, c.Basis)
			}
		}
	}
}
