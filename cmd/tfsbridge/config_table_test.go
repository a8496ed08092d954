package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite README's generated Configuration table from the flags")

// TestReadmeConfiguration holds README's Configuration table to the
// command tree: the table between the markers is exactly what
// "tfsbridge docs config" prints. -update rewrites it.
func TestReadmeConfiguration(t *testing.T) {
	root, _ := newTree(envOf(nil))
	table, err := configTable(root, servingCommands)
	if err != nil {
		t.Fatal(err)
	}
	const path = "../../README.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := spliceTable(string(doc), table)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## Configuration\n")
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, readmeTableBegin) {
		t.Error("the generated table is not in README's Configuration section")
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := string(doc); got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("README line %d differs from the flags' table; run go test ./cmd/tfsbridge -run TestReadmeConfiguration -update\nREADME: %s\nflags:  %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("README's table length differs from the flags' (%d vs %d lines); run go test ./cmd/tfsbridge -run TestReadmeConfiguration -update", len(gl), len(wl))
	}
}

// The table is the hidden "docs config" command's output, and its rows
// are what the flags say: one variable per row, computed defaults in
// words (the table must not depend on the machine that generated it).
func TestDocsConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"docs", "config"}, envOf(nil), &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("docs config: exit %d, stderr %q", code, errOut.String())
	}
	for _, row := range []string{
		"| `--backend` | `TFSBRIDGE_BACKEND` | `http://127.0.0.1:8000` | extproc, proxy | ",
		"| `--max-inflight-bytes` | `TFSBRIDGE_MAX_INFLIGHT_BYTES` | derived | extproc, proxy, demo | ",
		"| `--log-level` | `TFSBRIDGE_LOG_LEVEL` | `info` | extproc, proxy, mock, demo | ",
		"| `--http-addr` | `TFSBRIDGE_MOCK_HTTP_ADDR` | `127.0.0.1:8000` | mock | ",
		"| `--drain-delay` | `TFSBRIDGE_DEMO_DRAIN_DELAY` | `0s` | demo | ",
		"| `--model-map` | `TFSBRIDGE_MODEL_MAP` | none | extproc, proxy, demo | ",
	} {
		if !strings.Contains(out.String(), "\n"+row) {
			t.Errorf("docs config lacks the row %q", row)
		}
	}
	if code := run(context.Background(), []string{"docs"}, envOf(nil), &out, &errOut); code != 2 {
		t.Errorf("docs without config: exit %d, want 2", code)
	}
}

// configTable refuses a variable that two commands read with different
// meanings: the naming rule's check can fail.
func TestConfigTableNamingRule(t *testing.T) {
	root := &cobra.Command{Use: "tfsbridge"}
	for _, c := range []struct{ name, def string }{{"a", ":1"}, {"b", ":2"}} {
		addr := c.def
		cmd := &cobra.Command{Use: c.name, RunE: func(*cobra.Command, []string) error { return nil }}
		register(cmd, []binding{stringFlag(&addr, "http-addr", "Listen address.")})
		root.AddCommand(cmd)
	}
	_, err := configTable(root, []string{"a", "b"})
	if err == nil || !strings.Contains(err.Error(), "TFSBRIDGE_HTTP_ADDR is read by --http-addr of [a] and --http-addr of b") {
		t.Errorf("configTable = %v, want the naming rule's error", err)
	}
}
