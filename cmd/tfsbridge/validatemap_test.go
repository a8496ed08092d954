package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeMap(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "map.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fifo makes a named pipe no one writes to: reading it must not block.
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "map.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateMap(t *testing.T) {
	good := writeMap(t, "models:\n  mnist:\n    model: mnist_onnx\n    labels: {stable: 3}\n")
	two := writeMap(t, "servers:\n  onnx: {url: \"http://onnx:8000\"}\nmodels:\n  a: {server: onnx}\n  b: {}\n")
	bad := writeMap(t, "models:\n  mnist:\n    modle: mnist_onnx\n")
	for _, tc := range []struct {
		name        string
		args        []string
		env         map[string]string
		code        int
		out, errOut string
	}{
		{"valid", []string{"validate-map", good}, nil, 0, good + ": valid model map (1 model, no server besides default)\n", ""},
		{"valid, plural", []string{"validate-map", two}, nil, 0, two + ": valid model map (2 models, 1 server besides default)\n", ""},
		{"invalid", []string{"validate-map", bad}, nil, 2, "", bad + `: line 3: models.mnist: unknown key "modle" (want server, split, split_key, labels, model, inputs, outputs, metadata, signatures, shadow)`},
		{"a FIFO", []string{"validate-map", fifo(t)}, nil, 2, "", "not a regular file (a FIFO)"},
		{"missing file", []string{"validate-map", bad + ".nope"}, nil, 2, "", "no such file"},
		{"no argument", []string{"validate-map"}, nil, 2, "", "want exactly one FILE"},
		{"proxy with a bad map", []string{"proxy", "--model-map", bad}, nil, 2, "", "--model-map " + bad + ": line 3"},
		{"extproc with a bad map from the environment", []string{"extproc"}, map[string]string{"TFSBRIDGE_MODEL_MAP": bad}, 2, "", "line 3: models.mnist: unknown key"},
		{"demo with a bad map", []string{"demo", "--model-map", bad}, nil, 2, "", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, envOf(tc.env), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.errOut) {
				t.Errorf("code %d stdout %q stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tc.code, tc.out, tc.errOut)
			}
		})
	}
}

// TestStartLineNamesTheMap: the line a serving command logs when it starts
// says which model map is in force.
func TestStartLineNamesTheMap(t *testing.T) {
	const doc = "servers:\n  onnx: {url: \"http://onnx:8000\"}\nmodels:\n  a: {server: onnx}\n  b: {}\n"
	p := writeMap(t, doc)
	sum := sha256.Sum256([]byte(doc))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--http-addr", "127.0.0.1:0", "--model-map", p},
			fmt.Sprintf("model_map.file=%s model_map.models=2 model_map.servers=1 model_map.sha256=%x", p, sum)},
		{[]string{"extproc", "--grpc-addr", "127.0.0.1:0"}, "model_map=none"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var stderr syncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			args := append(tc.args, "--metrics-addr", "", "--backend", "http://127.0.0.1:1", "--drain-delay", "0s")
			go func() { done <- run(ctx, args, envOf(nil), io.Discard, &stderr) }()
			defer func() { cancel(); <-done }()
			// Generous: the command starts within milliseconds, but the machine may be busy.
			if !stderr.waitContains(" serving", 20*time.Second) {
				t.Fatalf("no start line in:\n%s", stderr.String())
			}
			line := stderr.String()[strings.Index(stderr.String(), "tfsbridge "+tc.args[0]+" serving"):]
			if line, _, _ = strings.Cut(line, "\n"); !strings.Contains(line, tc.want) {
				t.Errorf("start line %q does not contain %q", line, tc.want)
			}
		})
	}
}
