// Package conformance loads the test vectors transcribed from TF Serving's,
// Triton's, KServe's and MLServer's own test suites for the tests of every
// package. The vectors ship with the repository (testdata/ beside this
// file; its README says where each family comes from), so a bare clone
// runs every test.
package conformance

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Case is one vector. Input and Expected stay raw because their shape
// depends on the direction and target; each test decodes what it needs.
type Case struct {
	ID          string          `json:"id"`
	Source      string          `json:"source"`
	Basis       string          `json:"basis"`
	Direction   string          `json:"direction"`
	Description string          `json:"description"`
	Uncertain   bool            `json:"uncertain"`
	Notes       string          `json:"notes"`
	Input       json.RawMessage `json:"input"`
	Expected    json.RawMessage `json:"expected"`
}

// dataDir is where the vectors live, relative to the repository root.
var dataDir = filepath.Join("test", "conformance", "testdata")

// Dir returns the conformance vectors' folder, found by walking up from the
// working directory (a test runs in its package's folder) to the first
// folder holding test/conformance/testdata: the repository root.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("conformance: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		dir := filepath.Join(d, dataDir)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("conformance: no %s above %s", dataDir, wd)
		}
	}
}

// Load reads one vector file ("tfserving_cases.json", "oip_cases.json").
func Load(file string) ([]Case, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var cases []Case
	if err := json.Unmarshal(raw, &cases); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", file, err)
	}
	return cases, nil
}

// MustLoad is Load for tests: it fails the test when the file is missing,
// because a conformance test that silently runs no vector cannot fail.
func MustLoad(t testing.TB, file string) []Case {
	t.Helper()
	cases, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("conformance: %s holds no cases", file)
	}
	return cases
}

// Decode unmarshals raw into v, failing the test on error.
func Decode(t testing.TB, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("conformance: decoding %s: %v", raw, err)
	}
}

// Float decodes a float value of a vector: a JSON number (meaning the
// nearest value of the given bit size, 32 or 64), or one of the strings
// "NaN", "Infinity", "-Infinity" and "-0.0" that the vectors use for what
// JSON cannot spell. A bare unquoted token is accepted too.
func Float(raw json.RawMessage, bits int) (float64, error) {
	text := string(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text = s
	}
	switch text {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	case "-0.0":
		return math.Copysign(0, -1), nil
	}
	f, err := strconv.ParseFloat(text, bits)
	if err != nil {
		return 0, fmt.Errorf("conformance: float value %s: %w", raw, err)
	}
	return f, nil
}

// MustFloat is Float for tests.
func MustFloat(t testing.TB, raw json.RawMessage, bits int) float64 {
	t.Helper()
	f, err := Float(raw, bits)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
