package comparerun

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// chromium is Debian's headless browser. The test skips without it,
// unless $TFSBRIDGE_REQUIRE_CHROMIUM is 1: .ci/run installs the browser
// and sets it, so that a browser missing in CI fails instead of passing
// unseen.
const chromium = "/usr/bin/chromium"

// A browser draws the report's histograms: a screenshot has the red of
// bars over the tolerance (the perturbed output) and the blue of the
// others.
func TestReportScreenshot(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("TFSBRIDGE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("TFSBRIDGE_REQUIRE_CHROMIUM=1 and no browser: %v", err)
		}
		t.Skip("no " + chromium)
	}
	base := startTF(t, nil)
	reqs, err := Generate(t.Context(), testClient, base, GenerateOptions{
		Models: []string{"half_plus_two", "simple"}, N: 3, Seed: 1, Batch: 2, MaxElements: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rep := runAgainst(t, reqs, map[string]float64{"half_plus_two": 0.25})
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "report.html"), filepath.Join(dir, "shot.png")
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// A browser's start on a busy 2-core machine takes seconds; the
	// deadline only guards against a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The network flags keep the browser from reaching out at start: the
	// page is a local file and needs nothing from anywhere.
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1400,1000", "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	var red, blue int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case near(r, 0xd0) && near(g, 0x4a) && near(bl, 0x4a):
				red++
			case near(r, 0x4a) && near(g, 0x7b) && near(bl, 0xd0):
				blue++
			}
		}
	}
	// A 110-pixel bar at least a few tens of pixels wide is thousands of
	// pixels; text or borders in these colours are not.
	if red < 2000 || blue < 2000 {
		t.Errorf("screenshot has %d red and %d blue pixels, want the bars' thousands of each", red, blue)
	}
}

func near(a, b uint32) bool { return a+8 >= b && a <= b+8 }
