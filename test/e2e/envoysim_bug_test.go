package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestEnvoysimKeepAliveAfterLocalReply: a request body over Envoy's
// buffer limit gets Envoy's local 413 while part of the body is still
// unread; the next request on the same keep-alive connection must work
// (real Envoy answers and closes such an HTTP/1 connection).
//
// envoysim enables full duplex on every request and returns from its
// handler with the rest of such a body unread. Go's HTTP/1 server then
// trips over its own background read when the connection is reused
// (golang/go#68560): "invalid concurrent Body.Read call" panics either in
// the handler (recovered by net/http: the client gets EOF or a reset
// instead of an answer) or in envoysim's prefetch goroutine, which kills
// the whole test binary. The other tests avoid it by sending such bodies
// with "Connection: close".
func TestEnvoysimKeepAliveAfterLocalReply(t *testing.T) {
	if os.Getenv("E2E_ENVOYSIM_68560") == "" {
		t.Skip("BUG: envoysim's handler returns with a request body unread under EnableFullDuplex " +
			"(local 413 over BufferLimit, test/envoysim/http.go serve/prefetch); reusing the keep-alive " +
			"connection then panics in net/http (golang/go#68560): EOF for the client, or a crash of the " +
			"test binary. Fix: close the connection " +
			"(Connection: close) or drain/close r.Body before a local reply that leaves the body unread " +
			"— owner: test/envoysim. Set E2E_ENVOYSIM_68560=1 to run the reproducer (it crashes the binary).")
	}
	s := newStack(t, stackConfig{BufferLimit: 1024})
	for i := range 50 {
		over := s.do(t, viaExtproc, request{path: "/v1/models/half_plus_two:predict", body: repeatJSON(3 * 1024)})
		if over.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("round %d: %d %q, want 413", i, over.status, over.body)
		}
		next := s.do(t, viaExtproc, request{path: "/v1/models/half_plus_two:predict", body: readmeBody})
		checkResponse(t, next, ok(readmeResponse))
		if t.Failed() || strings.Contains(string(next.body), "panic") {
			return
		}
	}
}
