package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
)

// mockURL serves a v2 mock (perturbed as given) for the test.
func mockURL(t *testing.T, perturb map[string]float64) string {
	t.Helper()
	s, err := mockv2.New(mockv2.Options{Perturb: perturb})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// fields is text with its runs of spaces made single, so that table rows
// can be matched whatever the column widths.
func fields(text string) string {
	var lines []string
	for line := range strings.Lines(text) {
		lines = append(lines, strings.Join(strings.Fields(line), " "))
	}
	return strings.Join(lines, "\n")
}

// "tfsbridge compare" on the mock: identical models exit 0 with every row
// identical; a perturbed output exits 1 with its error in the table and
// the report; usage errors exit 2.
func TestCompareCommand(t *testing.T) {
	same, drifted := mockURL(t, nil), mockURL(t, map[string]float64{"fixed3": 0.5})
	dir := t.TempDir()
	requests := filepath.Join(dir, "requests.jsonl")
	if err := os.WriteFile(requests, []byte(`{"model": "fixed3", "body": {"inputs": {"x": [1.0, 2.0, 4.0]}}}
{"model": "linear_classifier", "verb": "classify", "body": {"examples": [{"x": 0}, {"x": 2}]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.html")
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string // lines of stdout, spaces collapsed
		err  string
	}{
		{
			name: "identical", code: 0,
			args: []string{"--reference", "v2:" + same + ",kind=triton", "--candidate", "v2:" + mockURL(t, nil), "--generate", "3", "--model", "half_plus_two,simple"},
			out:  []string{"half_plus_two outputs float 3 3 0 0 0 0 0 0 -", "simple OUTPUT0 int 3 3 0 0 0 0 0 0 -", "simple OUTPUT1 int 3 3 0 0 0 0 0 0 -", "0 mismatched: within tolerance"},
		},
		{
			name: "perturbed", code: 1,
			args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + drifted, "--requests", requests, "--report", report},
			out:  []string{"fixed3 reversed float 1 0 0 1 0.5 0.5 0.5 0.5 -", "fixed3 total float 1 0 0 1 0.5 0.5 0.0714 0.0714 -", "linear_classifier scores float 1 1 0 0 0 0 0 0 2/2", "1 mismatched: OVER TOLERANCE"},
			err:  "tfsbridge compare: 1 of 2 requests over tolerance",
		},
		{
			name: "within a loose tolerance", code: 0,
			args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + drifted, "--requests", requests, "--tolerance-abs", "0.5"},
			out:  []string{"fixed3 reversed float 1 0 1 0 0.5"},
		},
		{name: "no requests", code: 2, args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + same}, err: "--requests or --generate N: give exactly one"},
		{name: "generate without models", code: 2, args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + same, "--generate", "2"}, err: "--model is required with --generate"},
		{name: "bad endpoint", code: 2, args: []string{"--reference", same, "--candidate", "v2:" + same, "--generate", "2", "--model", "x"}, err: "--reference endpoint"},
		{name: "negative tolerance", code: 2, args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + same, "--requests", requests, "--tolerance-rel", "-1"}, err: "--tolerance-rel must not be negative"},
		{name: "missing file", code: 2, args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + same, "--requests", filepath.Join(dir, "nope")}, err: "--requests"},
		{name: "report in a missing directory", code: 2, args: []string{"--reference", "v2:" + same, "--candidate", "v2:" + same, "--requests", requests, "--report", filepath.Join(dir, "no", "r.html")}, err: "--report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"compare"}, tc.args...), envOf(nil), &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
			got := fields(out.String())
			for _, line := range tc.out {
				if !strings.Contains(got, line) {
					t.Errorf("stdout lacks %q:\n%s", line, out.String())
				}
			}
			if !strings.Contains(errOut.String(), tc.err) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.err)
			}
		})
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n != 4 || !strings.Contains(string(page), `data-output="reversed"`) {
		t.Errorf("the report has %d histograms, want 4 (fixed3's two outputs, the classifier's two)", n)
	}
}
