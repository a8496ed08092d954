package http1

import (
	"bytes"
	"net/http"
)

// readCommonHead parses the answer's head in c's buffer when it has the
// common form, every byte of it already buffered: "HTTP/1.1", a final
// status with a body (not 1xx, 204 or 304), one Content-Length, no
// Transfer-Encoding, Trailer or Pragma, at most one Connection that is
// "keep-alive" or "close", every line a well-formed "Name: value"
// ending in CRLF. It then consumes the head, keeping its header lines
// in c's buffer, and sets c.resp; otherwise it consumes nothing and
// returns false, and net/http's parser reads the answer. Within that
// form it gives what http.ReadResponse gives (FuzzCommonHead checks it
// against net/http), without a header map or a string per header: most
// servers answer in it, and the map, its keys and values are a dozen
// allocations per exchange.
func (c *conn) readCommonHead() bool {
	buf, _ := c.br.Peek(c.br.Buffered())
	h, ok := parseCommonHead(buf)
	if !ok {
		return false
	}
	r := &c.resp
	r.StatusCode, r.ContentLength, r.left, r.close = h.status, h.length, h.length, h.close
	r.eof = h.length == 0
	r.head = append(r.head[:0], buf[h.lines:h.linesEnd]...)
	_, _ = c.br.Discard(h.n) // buffered: cannot fail
	return true
}

// commonHead is a head of the common form.
type commonHead struct {
	status          int
	length          int64
	close           bool
	lines, linesEnd int // the header lines, each with its CRLF
	n               int // the head's length
}

// parseCommonHead parses a head of the common form (readCommonHead) at
// the start of b.
func parseCommonHead(b []byte) (commonHead, bool) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return commonHead{}, false
	}
	head := b[:end+2] // every line with its CRLF
	// The status line: "HTTP/1.1 ddd" then the end or " reason".
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return commonHead{}, false
	}
	status := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return commonHead{}, false
		}
		status = status*10 + int(d-'0')
	}
	if status < 200 || status > 599 || status == http.StatusNoContent || status == http.StatusNotModified || !validValue(line[12:]) {
		return commonHead{}, false
	}
	h := commonHead{status: status, length: -1, lines: len(line) + 2, linesEnd: end + 2, n: end + 4}
	var seenConn bool
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !validName(k) || !validValue(v) {
			return commonHead{}, false
		}
		v = bytes.Trim(v, " \t")
		switch {
		case equalFold(k, "Content-Length"):
			if h.length >= 0 {
				return commonHead{}, false
			}
			if h.length = parseLength(v); h.length < 0 {
				return commonHead{}, false
			}
		case equalFold(k, "Connection"):
			switch {
			case seenConn:
				return commonHead{}, false
			case equalFold(v, "close"):
				h.close = true
			case !equalFold(v, "keep-alive"):
				return commonHead{}, false
			}
			seenConn = true
		case equalFold(k, "Transfer-Encoding"), equalFold(k, "Trailer"), equalFold(k, "Pragma"):
			// net/http's reading of these changes the header.
			return commonHead{}, false
		}
	}
	if h.length < 0 {
		return commonHead{}, false
	}
	return h, true
}

// cutLine cuts the first CRLF-ended line off b.
func cutLine(b []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(b, []byte("\r\n"))
	return line, rest
}

// cutField splits a header line into its name and trimmed value.
func cutField(line []byte) (k, v []byte, ok bool) {
	k, v, ok = bytes.Cut(line, []byte(":"))
	return k, bytes.Trim(v, " \t"), ok
}

// internValue is a header value, the common ones without an allocation.
func internValue(v []byte) string {
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
func validName[T []byte | string](k T) bool {
	if len(k) == 0 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

// validValue reports a value without control characters other than tab.
func validValue[T []byte | string](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
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
