package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestEnvoysimKeepAliveAfterLocalReply: a request body over Envoy's
// buffer limit gets Envoy's local 413 while part of the body is still
// unread; the next request on the same keep-alive connection must work
// (real Envoy answers and closes such an HTTP/1 connection).
//
// envoysim enables full duplex on every request; a handler that returned
// with the rest of such a body unread let Go's HTTP/1 server trip over its
// own background read when the connection was reused (golang/go#68560:
// "invalid concurrent Body.Read call"). envoysim now closes the
// connection after a response sent before the body was read, as Envoy's
// HTTP/1 codec does; this is the regression test.
func TestEnvoysimKeepAliveAfterLocalReply(t *testing.T) {
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
