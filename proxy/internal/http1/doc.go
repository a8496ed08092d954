// Package http1 is the proxy's own small HTTP/1.1 client, for upstream
// servers reached over plain http: the reverse proxy's small translated
// requests (proxy/httpproxy) and the shadow engine's copies
// (proxy/shadow). TLS, HTTP/2, streamed and large bodies stay on
// net/http's Transport, whose features are worth more there than what
// this client saves.
//
// net/http's Transport runs a reader and a writer goroutine per
// connection and hands every exchange between them and the caller over
// channels, with a timer per request: goroutine wake-ups the caller
// waits for, each a scheduling round on a busy machine. Here the
// caller's goroutine writes the request (head and body in one writev)
// and reads the answer itself, on a keep-alive connection from a small
// pool per server address, bounded by a deadline set on the connection.
// A cancellation sets a past deadline through context.AfterFunc (no
// goroutine until it fires); Client.Close ends every exchange at once.
//
// Without a reader goroutine nobody watches an idle connection, so one
// is checked before reuse with a non-blocking peek where the platform
// has one (a server's idle close or reset shows there). A request is
// sent twice only when the caller allows it (Request.Retry, which skips
// the check) and a reused connection failed before any byte of its
// answer.
//
// The answer's head is read by a parser of the common form (head.go:
// HTTP/1.1, a final status, one Content-Length, the whole head
// buffered), which allocates no header map; every other answer (chunked,
// until close, interim 1xx, a head larger than the buffer) is read on
// the same connection by net/http's own parser, http.ReadResponse.
// A connection whose answer was not read to its end, or that failed, is
// closed, never reused.
package http1
