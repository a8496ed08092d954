package main

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out bytes.Buffer
		if code := run(context.Background(), args, envOf(nil), &out, io.Discard); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		if line := out.String(); !strings.HasPrefix(line, "tfsbridge ") || !strings.Contains(line, "(revision ") || strings.Count(line, "\n") != 1 {
			t.Errorf("%v printed %q, want one line \"tfsbridge VERSION (revision REV, GO)\"", args, line)
		}
	}
	if code := run(context.Background(), []string{"version", "extra"}, envOf(nil), io.Discard, io.Discard); code != 2 {
		t.Errorf("version with an argument: exit %d, want 2", code)
	}
}

// TestVersionLinkTime builds the binary as the release does and checks the
// values given to -ldflags -X reach "tfsbridge version".
func TestVersionLinkTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tfsbridge")
	const pkg = "github.com/tfsbridge/tfsbridge/internal/buildinfo"
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version=9.8.7 -X "+pkg+".revision=0123abc", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.HasPrefix(got, "tfsbridge 9.8.7 (revision 0123abc, go") {
		t.Errorf("tfsbridge --version = %q, want the link-time version and revision", got)
	}
}
