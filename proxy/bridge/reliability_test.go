package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// eventually waits, up to within, for cond to hold, checking it every few
// milliseconds: for effects that happen on the servers' goroutines after
// the client saw its answer. within is generous (tens of seconds) so a
// busy machine never fails the test; a broken cond fails it at the end.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
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
