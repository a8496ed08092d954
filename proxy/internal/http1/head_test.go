package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// commonHeadSeeds are heads parseCommonHead takes (ok) or leaves to
// net/http; also FuzzCommonHead's seeds.
var commonHeadSeeds = []struct {
	head string
	ok   bool
}{
	{"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", true},
	{"HTTP/1.1 400 Bad Request\r\ncontent-length: 012\r\nConnection: close\r\nDate: x\r\n\r\n{\"error\":\"\"}", true},
	{"HTTP/1.1 200\r\nContent-Length: 3\r\nInference-Header-Content-Length:  1 \r\nContent-Encoding: gzip\r\nConnection: Keep-Alive\r\n\r\nabc", true},
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nx-a: 2\r\nContent-Type: a\r\nContent-Type: b\r\n\r\n{}", true},
	{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\n\r\n{}", false},                                                 // until close
	{"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", false},                            // not 1.1
	{"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n", false},                      // no body
	{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false}, // interim
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\n Content-Length: 2\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX: a\nY: b\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: upgrade\r\n\r\n{}", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nPragma: no-cache\r\n\r\n{}", false}, // net/http adds Cache-Control
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", false},                           // the head not all buffered
	{"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}", false},
}

func TestParseCommonHead(t *testing.T) {
	for _, tc := range commonHeadSeeds {
		_, ok := parseCommonHead([]byte(tc.head))
		if ok != tc.ok {
			t.Errorf("%q: ok %v, want %v", tc.head, ok, tc.ok)
		}
		if ok {
			checkCommonHead(t, []byte(tc.head))
		}
	}
}

// FuzzCommonHead: a head parseCommonHead takes is one net/http reads the
// same way: status, length, close, the header (whole, and by Get), and
// the body's bytes.
func FuzzCommonHead(f *testing.F) {
	for _, tc := range commonHeadSeeds {
		f.Add([]byte(tc.head))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, ok := parseCommonHead(b); ok {
			checkCommonHead(t, b)
		}
	})
}

// checkCommonHead compares parseCommonHead's reading of b with
// http.ReadResponse's.
func checkCommonHead(t *testing.T, b []byte) {
	t.Helper()
	h, _ := parseCommonHead(b)
	r := &Response{StatusCode: h.status, ContentLength: h.length, close: h.close, head: b[h.lines:h.linesEnd]}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatalf("%q: taken, but net/http fails: %v", b, err)
	}
	defer resp.Body.Close()
	if r.StatusCode != resp.StatusCode || r.ContentLength != resp.ContentLength || r.close != resp.Close {
		t.Fatalf("%q: got status %d length %d close %v, net/http %d length %d close %v",
			b, r.StatusCode, r.ContentLength, r.close, resp.StatusCode, resp.ContentLength, resp.Close)
	}
	for k := range resp.Header {
		if got, want := r.Get(k), resp.Header.Get(k); got != want {
			t.Fatalf("%q: Get(%q) = %q, net/http %q", b, k, got, want)
		}
	}
	if got := r.Header(); !reflect.DeepEqual(got, resp.Header) {
		t.Fatalf("%q: header %q, net/http %q", b, got, resp.Header)
	}
	wantBody, werr := io.ReadAll(resp.Body)
	got, gerr := io.ReadAll(io.LimitReader(bytes.NewReader(b[h.n:]), r.ContentLength))
	if !bytes.Equal(got, wantBody) || (werr == nil) != (int64(len(got)) == r.ContentLength) || gerr != nil {
		t.Fatalf("%q: body %q, net/http %q (%v)", b, got, wantBody, werr)
	}
}
