package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/proxy/internal/testcerts"
	"github.com/tfsbridge/tfsbridge/proxy/tlsconfig"
)

// eventually waits, up to within, for cond to hold, checking it every few
// milliseconds: for effects that happen on the servers' goroutines after
// the client saw its answer. within is generous (tens of seconds) so a
// busy machine never fails the test; a broken cond fails it at the end.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Until(within, cond) {
		t.Fatalf("%s: not seen within %v", what, within)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An idle keep-alive connection is closed with a FIN when serving stops,
// never reset: a client reading it sees a clean end of stream.
func TestIdleKeepAliveClosedGracefully(t *testing.T) {
	up := &slowUpstream{started: make(chan struct{}), release: make(chan struct{})}
	_, l, cancel, done := startServing(t, up, 10*time.Second)
	conn, err := net.Dial("tcp", l.Proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Generous: only a hang would reach it.
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first answer: %d, close %v; want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	cancel()
	n, err := br.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("idle connection at shutdown: read %d, %v; want io.EOF (a FIN, not a reset)", n, err)
	}
	waitServe(t, done, 30*time.Second)
}

// A reload request (SIGHUP in cmd/tfsbridge) re-reads the model map and
// the TLS key pairs at once, with the map's poll far away, and is logged;
// serving goes on.
func TestReloadRequest(t *testing.T) {
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "map.yaml")
	writeMap := func(doc string) {
		if err := os.WriteFile(mapFile, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeMap("servers:\n  a: {url: \"http://a:1\"}\nmodels:\n  m: {server: a}\n")
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", "tfsbridge")
	logs := &lockedBuffer{}
	up := &slowUpstream{started: make(chan struct{}), release: make(chan struct{})}
	v2 := httptest.NewServer(up)
	t.Cleanup(v2.Close)
	o := DefaultOptions()
	o.BackendURL, o.BackendKind, o.DrainDelay = v2.URL, "triton", 0
	o.ModelMapFile, o.ModelMapPollInterval = mapFile, time.Hour
	o.TLS.Extproc = tlsconfig.ServerFiles{CertFile: srv.CertFile, KeyFile: srv.KeyFile}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(Addrs{Extproc: "127.0.0.1:0", Proxy: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	reloads := NewReloads()
	ctx, cancel := context.WithCancel(WithReloads(context.Background(), reloads))
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l) }()
	defer func() { cancel(); waitServe(t, done, 60*time.Second) }()

	inflight := getAsync("http://" + l.Proxy.Addr().String() + "/v2/models/slow")
	<-up.started
	writeMap("servers:\n  a: {url: \"http://a:1\"}\nmodels:\n  m: {server: a}\n  n: {server: a}\n")
	// Serve subscribes as it starts: ask until the reload is seen.
	eventually(t, 30*time.Second, "the map reloaded on request", func() bool {
		reloads.Notify()
		return len(b.Session.Mapping().Map.Models) == 2
	})
	eventually(t, 30*time.Second, "the TLS pair reloaded on request", func() bool {
		return b.Metrics.Value("tfsbridge_file_reloads_total", "file", "tls_certificate", "result", "success") >= 1
	})
	if !strings.Contains(logs.String(), "reload requested (SIGHUP)") {
		t.Errorf("the reload was not logged:\n%s", logs.String())
	}
	// A bad certificate on reload keeps the old one, logged and counted.
	if err := os.WriteFile(srv.KeyFile, []byte("truncated"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloads.Notify()
	eventually(t, 30*time.Second, "the bad TLS pair refused", func() bool {
		return b.Metrics.Value("tfsbridge_file_reloads_total", "file", "tls_certificate", "result", "failure") == 1
	})
	close(up.release)
	if r := <-inflight; r.err != nil || r.code != http.StatusOK {
		t.Errorf("request in flight across the reload: %d %q, %v", r.code, r.body, r.err)
	}
}

// A TF request whose body is still arriving when the shutdown timeout
// runs out is answered TF's 503 too, and counted as cut.
func TestCutWhileBodyArrives(t *testing.T) {
	up := &slowUpstream{started: make(chan struct{}), release: make(chan struct{})}
	b, l, cancel, done := startServingWith(t, up, func(o *Options) { o.ShutdownTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", l.Proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // only a hang reaches it
	if _, err := io.WriteString(conn, "POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"instances\": "); err != nil {
		t.Fatal(err)
	}
	// Wait until the exchange is in progress, then stop.
	eventually(t, 30*time.Second, "the exchange in flight", func() bool {
		return b.Metrics.Value("tfsbridge_inflight_streams", "adapter", "http") == 1
	})
	cancel()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "tfsbridge is shutting down") {
		t.Errorf("answer %d %s, want TF's 503", resp.StatusCode, body)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrCut) {
			t.Errorf("Serve = %v, want ErrCut", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return")
	}
	if got := b.Metrics.Value("tfsbridge_shutdown_cut_exchanges_total", "adapter", "http"); got != 1 {
		t.Errorf("cut counted %v, want 1", got)
	}
}
