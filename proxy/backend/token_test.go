package backend

import (
	"bytes"
	"io"
	"log/slog"
	"syscall"
	"time"

	"context"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/apierr"
)

func TestBearerTokenFile(t *testing.T) {
	old := tokenRecheck
	tokenRecheck = 0
	t.Cleanup(func() { tokenRecheck = old })

	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "token")
	write := func(tok string) {
		if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-secret\n")
	c, err := New(Config{BaseURL: srv.URL, Kind: "triton", BearerTokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	for _, tc := range []struct {
		token string // "" removes the file
		want  string
	}{
		{"first-secret\n", "Bearer first-secret"},
		{"rotated-secret-2", "Bearer rotated-secret-2"},
		// A file gone bad keeps the last good token in use.
		{"", "Bearer rotated-secret-2"},
		{"   \n", "Bearer rotated-secret-2"},
		{"third", "Bearer third"},
	} {
		if tc.token == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else {
			write(tc.token)
		}
		err := c.Health(context.Background())
		if err != nil || last() != tc.want {
			t.Errorf("token %q: err %v, sent %q", tc.token, err, last())
		}
	}
	// A server whose file was never good answers 503, without the path's
	// content in the error.
	missing, err := New(Config{BaseURL: srv.URL, Kind: "triton", BearerTokenFile: filepath.Join(t.TempDir(), "none")})
	if err != nil {
		t.Fatal(err)
	}
	if err := missing.Health(context.Background()); err == nil || apierr.As(err).Code != apierr.Unavailable {
		t.Errorf("missing token file: %v", err)
	}
	// Without a token file nothing is sent.
	plain, err := New(Config{BaseURL: srv.URL, Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Health(context.Background()); err != nil || last() != "" {
		t.Errorf("no token file: err %v, sent %q", err, last())
	}
}

// TestBearerTokenFileHostile swaps the token file for files that would
// block or never end: a FIFO with no writer, /dev/zero (through a
// symlink, as a mounted Secret's file is), a directory and an oversized
// file. Every call must come back at once with the last good token, and
// each problem is logged and counted once.
func TestBearerTokenFileHostile(t *testing.T) {
	old := tokenRecheck
	tokenRecheck = 0
	t.Cleanup(func() { tokenRecheck = old })
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	put := func(write func(string) error) {
		t.Helper()
		_ = os.RemoveAll(path)
		if err := write(path); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	m := observe.NewMetrics()
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
	tf := newTokenFile(path, "onnx", log, m)
	put(func(p string) error { return os.WriteFile(p, []byte("s3cr3t-good"), 0o600) })
	if tok, err := tf.get(); tok != "s3cr3t-good" || err != nil {
		t.Fatalf("first read: %q, %v", tok, err)
	}
	for _, tc := range []struct {
		name string
		make func(string) error
		want string // in the log line
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file (a FIFO)"},
		{"dev-zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "a character device"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "a directory"},
		{"huge", func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("x"), maxTokenBytes+1), 0o600) }, "file too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			put(tc.make)
			before := m.Value("tfsbridge_file_reloads_total", "file", "bearer_token", "result", "failure")
			// Generous: the calls must not block at all; a hang would
			// run into the deadline instead of the test's timeout.
			done := make(chan struct{})
			var tok string
			var err error
			go func() {
				defer close(done)
				for range 3 {
					tok, err = tf.get()
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("reading the token file blocked")
			}
			if tok != "s3cr3t-good" || err != nil {
				t.Errorf("got %q, %v; want the last good token", tok, err)
			}
			if got := m.Value("tfsbridge_file_reloads_total", "file", "bearer_token", "result", "failure") - before; got != 1 {
				t.Errorf("failures counted: %v, want 1 (once per problem)", got)
			}
			if !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "server=onnx") {
				t.Errorf("log lacks %q and the server: %s", tc.want, logs.String())
			}
		})
	}
	put(func(p string) error { return os.WriteFile(p, []byte("new"), 0o600) })
	if tok, err := tf.get(); tok != "new" || err != nil {
		t.Errorf("after repair: %q, %v", tok, err)
	}
	if got := m.Value("tfsbridge_file_reloads_total", "file", "bearer_token", "result", "success"); got != 1 {
		t.Errorf("successful reloads: %v, want 1", got)
	}
	if strings.Contains(logs.String(), "s3cr3t") {
		t.Errorf("a token was logged: %s", logs.String())
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
