package shadow

import (
	"bytes"
	"io"
	"net/http"
)

// answerHead is what a copy uses of its answer's head.
type answerHead struct {
	status          int
	contentType     string
	contentEncoding string
	headerLength    string // Inference-Header-Content-Length
}

// headOf is an answer's head as net/http parsed it.
func headOf(status int, h http.Header) answerHead {
	return answerHead{
		status: status, contentType: h.Get("Content-Type"), contentEncoding: h.Get("Content-Encoding"),
		headerLength: h.Get("Inference-Header-Content-Length"),
	}
}

// response is an answer read on one of the engine's connections: its
// head, and its body to read from the connection.
type response struct {
	answerHead
	length int64 // the body's declared length; -1 when not declared
	close  bool  // the server closes the connection after this answer
	body   io.Reader
}

// readCommonHead parses the answer's head in c's buffer when it has the
// common form, every byte of it already buffered: "HTTP/1.1", a final
// status with a body (not 1xx, 204 or 304), one Content-Length, no
// Transfer-Encoding or Trailer, at most one Connection that is
// "keep-alive" or "close", at most one of each header the copy reads,
// every line a well-formed "Name: value" ending in CRLF. It then
// consumes the head and sets c.resp, its body c.body; otherwise it
// consumes nothing and returns false, and net/http's parser reads the
// answer. Within that form it gives what http.ReadResponse gives
// (FuzzCommonHead checks it against net/http), without a header map or
// a string per header: most shadow servers answer in it, and the map,
// its keys and values were 11 allocations of a copy.
func (c *clientConn) readCommonHead() bool {
	buf, _ := c.br.Peek(c.br.Buffered())
	r, n, ok := parseCommonHead(buf)
	if !ok {
		return false
	}
	_, _ = c.br.Discard(n) // buffered: cannot fail
	c.body = io.LimitedReader{R: c.br, N: r.length}
	r.body = &c.body
	c.resp = r
	return true
}

// parseCommonHead parses a head of the common form (readCommonHead)
// at the start of b: the answer without its body, and the head's length.
func parseCommonHead(b []byte) (response, int, bool) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return response{}, 0, false
	}
	head := b[:end+2] // every line with its CRLF
	n := end + 4
	// The status line: "HTTP/1.1 ddd" then the end or " reason".
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return response{}, 0, false
	}
	status := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return response{}, 0, false
		}
		status = status*10 + int(d-'0')
	}
	if status < 200 || status > 599 || status == http.StatusNoContent || status == http.StatusNotModified || !validValue(line[12:]) {
		return response{}, 0, false
	}
	r := response{answerHead: answerHead{status: status}, length: -1}
	var seenType, seenEnc, seenIHCL, seenConn bool
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !validName(k) || !validValue(v) {
			return response{}, 0, false
		}
		v = bytes.Trim(v, " \t")
		switch {
		case equalFold(k, "Content-Length"):
			if r.length >= 0 {
				return response{}, 0, false
			}
			if r.length = parseLength(v); r.length < 0 {
				return response{}, 0, false
			}
		case equalFold(k, "Content-Type"):
			if seenType {
				return response{}, 0, false
			}
			seenType, r.contentType = true, internType(v)
		case equalFold(k, "Content-Encoding"):
			if seenEnc {
				return response{}, 0, false
			}
			seenEnc, r.contentEncoding = true, string(v)
		case equalFold(k, "Inference-Header-Content-Length"):
			if seenIHCL {
				return response{}, 0, false
			}
			seenIHCL, r.headerLength = true, string(v)
		case equalFold(k, "Connection"):
			switch {
			case seenConn:
				return response{}, 0, false
			case equalFold(v, "close"):
				r.close = true
			case !equalFold(v, "keep-alive"):
				return response{}, 0, false
			}
			seenConn = true
		case equalFold(k, "Transfer-Encoding"), equalFold(k, "Trailer"):
			return response{}, 0, false
		}
	}
	if r.length < 0 {
		return response{}, 0, false
	}
	return r, n, true
}

// internType is a Content-Type value, the common ones without an
// allocation.
func internType(v []byte) string {
	switch string(v) {
	case "application/json":
		return "application/json"
	case "application/octet-stream":
		return "application/octet-stream"
	}
	return string(v)
}

// parseLength is a Content-Length value of 1 to 18 digits; -1 otherwise.
func parseLength(v []byte) int64 {
	if len(v) == 0 || len(v) > 18 {
		return -1
	}
	var n int64
	for _, d := range v {
		if d < '0' || d > '9' {
			return -1
		}
		n = n*10 + int64(d-'0')
	}
	return n
}

// validName reports a header name of token characters (RFC 9110).
func validName(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, c := range k {
		if c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

// validValue reports a value without control characters other than tab.
func validValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// equalFold is an ASCII case-insensitive comparison.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// tokenChar marks the characters of an HTTP token.
var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
