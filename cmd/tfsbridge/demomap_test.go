package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
)

// runningDemo is a demo started by startDemo.
type runningDemo struct {
	out  string // what it printed until it was serving
	stop func() int
}

// startDemo runs the demo on free ports (metrics on metricsAddr, "" for
// none) and returns it once it is serving. Its stop ends it like Ctrl-C
// and returns its exit code, failing the test when it does not stop; the
// test's cleanup calls it too, so every test that starts a demo ends it.
func startDemo(t *testing.T, metricsAddr string) *runningDemo {
	t.Helper()
	var stdout syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	args := []string{"demo", "--mock-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--grpc-addr", "127.0.0.1:0", "--mock-grpc-addr", "127.0.0.1:0", "--tf-grpc-addr", "127.0.0.1:0",
		"--mock-tf-addr", "127.0.0.1:0", "--mock-perturbed-addr", "127.0.0.1:0", "--metrics-addr", metricsAddr, "--log-level", "error"}
	go func() { done <- run(ctx, args, envOf(nil), &stdout, io.Discard) }()
	stop := sync.OnceValue(func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second): // a bound for a hang
			t.Error("demo did not stop")
			return -1
		}
	})
	t.Cleanup(func() { stop() })
	// The bound is for a hang: a busy machine can start it slowly.
	if !poll.Until(time.Minute, func() bool { return strings.Contains(stdout.String(), "Press Ctrl-C") }) {
		t.Fatalf("demo did not start; output:\n%s", stdout.String())
	}
	return &runningDemo{out: stdout.String(), stop: stop}
}

// TestDemoMap runs the demo and pastes each of its model map's curl
// commands.
func TestDemoMap(t *testing.T) {
	out := startDemo(t, "").out
	_, section, ok := strings.Cut(out, "The model map")
	if !ok {
		t.Fatalf("no model map section in:\n%s", out)
	}
	section, _, ok = strings.Cut(section, "\nMigration:")
	if !ok {
		t.Fatalf("no migration section after the model map's in:\n%s", out)
	}
	post := regexp.MustCompile(`curl -d '([^']*)' -X POST (http://\S+)`).FindAllStringSubmatch(section, -1)
	get := regexp.MustCompile(`curl (http://\S+/metadata)`).FindAllStringSubmatch(section, -1)
	if len(post) != 2 || len(get) != 1 {
		t.Fatalf("want 2 POST and 1 GET curl commands in:\n%s", section)
	}
	for i, want := range []string{
		"{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}",
		`"total": 3.0`,
	} {
		resp, err := http.Post(post[i][2], "application/x-www-form-urlencoded", strings.NewReader(post[i][1]))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s → %d %s, want %q", post[i][2], resp.StatusCode, body, want)
		}
	}
	resp, err := http.Get(get[0][1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"pair": {`) || !strings.Contains(string(body), `"total": {`) {
		t.Errorf("metadata → %d %s", resp.StatusCode, body)
	}
}
