package shadow

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/observe"
)

// rawServer is a scripted HTTP/1.1 shadow server: it reads each request
// with net/http's parser and writes answer's raw bytes for it, closing
// the connection after when answer says so. It keeps the requests and
// counts the connections it accepted.
type rawServer struct {
	url    *url.URL
	answer func(i int) (raw string, closeAfter bool)

	mu    sync.Mutex
	reqs  []*http.Request
	conns int
}

func newRawServer(t *testing.T, answer func(i int) (string, bool)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{answer: answer}
	s.url, _ = url.Parse("http://" + ln.Addr().String())
	var wg sync.WaitGroup
	var open []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			open = append(open, c)
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					s.mu.Lock()
					i := len(s.reqs)
					s.reqs = append(s.reqs, r)
					s.mu.Unlock()
					raw, closeAfter := s.answer(i)
					if _, err := io.WriteString(c, raw); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *rawServer) stats() (reqs []*http.Request, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs, s.conns
}

func withLength(head, body string) string {
	return head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// The engine's own client reads every form of answer a server may give,
// reuses a connection only when its answer was read to the end and the
// server keeps it, and takes a failed one for a shadow error.
func TestDirectClientAnswers(t *testing.T) {
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(primaryOK[:10])), 16) + "\r\n" + primaryOK[:10] + "\r\n" +
		strconv.FormatInt(int64(len(primaryOK[10:])), 16) + "\r\n" + primaryOK[10:] + "\r\n0\r\n\r\n"
	for _, tc := range []struct {
		name       string
		raw        string
		closeAfter bool
		maxBody    int64
		result     string
		conns      int // for two copies one after the other
	}{
		{"declared length", withLength("HTTP/1.1 200 OK\r\n", primaryOK), false, 0, observe.ShadowMatch, 1},
		{"chunked", chunked, false, 0, observe.ShadowMatch, 1},
		{"chunked with a trailer", strings.TrimSuffix(chunked, "\r\n") + "X-T: 1\r\n\r\n", false, 0, observe.ShadowMatch, 1},
		{"until the connection closes", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + primaryOK, true, 0, observe.ShadowMatch, 2},
		{"connection: close with a length", withLength("HTTP/1.1 200 OK\r\nConnection: close\r\n", primaryOK), true, 0, observe.ShadowMatch, 2},
		{"an interim answer first", "HTTP/1.1 100 Continue\r\n\r\n" + withLength("HTTP/1.1 200 OK\r\n", primaryOK), false, 0, observe.ShadowMatch, 1},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", false, 0, observe.ShadowMismatch, 2},
		{"another status", withLength("HTTP/1.1 404 Not Found\r\n", `{"error": "x"}`), false, 0, observe.ShadowMismatch, 1},
		{"over the body limit", withLength("HTTP/1.1 200 OK\r\n", primaryOK), false, 10, observe.ShadowError, 2},
		{"chunked over the body limit", chunked, false, 20, observe.ShadowError, 2},
		{"a gzip answer", withLength("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", primaryOK), false, 0, observe.ShadowError, 1},
		{"not HTTP", "hello\r\n\r\n", true, 0, observe.ShadowError, 2},
		{"a head over the bound", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", maxHeadBytes) + "\r\n\r\n", true, 0, observe.ShadowError, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(int) (string, bool) { return tc.raw, tc.closeAfter })
			h := newHarness(t, Options{MaxBodyBytes: tc.maxBody}, 8)
			for range 2 {
				c := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: s.url}, predictPath, predictBody, ok(primaryOK))
				h.e.run(c)
				h.e.Release(c.Reserved)
			}
			h.expect(map[string]int{tc.result: 2})
			if h.e.Held() != 0 {
				t.Errorf("%d bytes held after the copies", h.e.Held())
			}
			if _, conns := s.stats(); conns != tc.conns {
				t.Errorf("%d connections, want %d", conns, tc.conns)
			}
		})
	}
}

// A pooled connection the server closed while it was idle (without
// saying so) costs the next copy nothing: it is sent again on a new one.
func TestDirectClientStaleConnection(t *testing.T) {
	s := newRawServer(t, func(int) (string, bool) {
		return withLength("HTTP/1.1 200 OK\r\n", primaryOK), true
	})
	h := newHarness(t, Options{}, 8)
	for range 3 {
		c := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: s.url}, predictPath, predictBody, ok(primaryOK))
		h.e.run(c)
		h.e.Release(c.Reserved)
	}
	h.expect(map[string]int{observe.ShadowMatch: 3})
	if reqs, conns := s.stats(); len(reqs) != 3 || conns != 3 {
		t.Errorf("%d requests over %d connections, want 3 over 3", len(reqs), conns)
	}
}

// tokenBackend is a server's control client with a bearer token.
type tokenBackend struct {
	Backend
	tok string
}

func (b tokenBackend) BearerToken() (string, error) { return b.tok, nil }

// The request's head: what net/http would send of it, the server's
// bearer token before the URL's user info, a header value that could cut
// the head left out.
func TestDirectClientRequestHead(t *testing.T) {
	s := newRawServer(t, func(int) (string, bool) { return withLength("HTTP/1.1 200 OK\r\n", primaryOK), false })
	u := *s.url
	u.Path = "/base/"
	u.User = url.UserPassword("u", "p:w")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p:w"))
	tests := []struct {
		rid, token        string
		wantRID, wantAuth string
	}{
		{"rid-1", "", "rid-1", basic},
		{"bad\r\nX-Evil: 1", "", "", basic},
		{"rid-3", "tok", "rid-3", "Bearer tok"},
	}
	h := newHarness(t, Options{}, 8)
	for _, tc := range tests {
		target := Target{Name: "tf", Kind: KindTFServing, URL: &u}
		if tc.token != "" {
			target.Backend = tokenBackend{tok: tc.token}
		}
		c := h.copyOf(target, predictPath+"?x=1", predictBody, ok(primaryOK))
		c.RequestID = tc.rid
		h.e.run(c)
		h.e.Release(c.Reserved)
	}
	h.expect(map[string]int{observe.ShadowMatch: len(tests)})
	reqs, _ := s.stats()
	if len(reqs) != len(tests) {
		t.Fatalf("%d requests, want %d", len(reqs), len(tests))
	}
	for i, tc := range tests {
		r := reqs[i]
		got := []string{r.Method, r.RequestURI, r.Host, strconv.FormatInt(r.ContentLength, 10), r.Header.Get("Content-Type"),
			r.Header.Get("Accept-Encoding"), r.Header.Get("X-Request-Id"), r.Header.Get("X-Evil"), r.Header.Get("Authorization")}
		want := []string{"POST", "/base" + predictPath, u.Host, strconv.Itoa(len(predictBody)), "application/json",
			"identity", tc.wantRID, "", tc.wantAuth}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("request %d: %q, want %q", i, got, want)
		}
	}
}

// Close ends a copy stalled on its shadow server at once (its connection
// closed), counting nothing for it.
func TestDirectClientClose(t *testing.T) {
	entered := make(chan struct{})
	s := newRawServer(t, func(int) (string, bool) {
		close(entered)
		return "", false // no answer: the copy waits until its connection closes
	})
	h := newHarness(t, Options{Timeout: time.Hour}, 8)
	h.e.Submit(h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: s.url}, predictPath, predictBody, ok(primaryOK)))
	<-entered
	closed := make(chan struct{})
	go func() {
		h.e.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(settle): // the copy would wait an hour
		t.Fatal("Close did not end the stalled copy")
	}
	h.expect(map[string]int{})
}

// roundTripFunc is an injected RoundTripper that is not net/http's.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Which client carries a copy: https goes through the transport (its
// TLS), plain http through the engine's own client, and everything
// through an injected RoundTripper that is not an *http.Transport.
func TestEngineClientChoice(t *testing.T) {
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, primaryOK) })
	tlsSrv := httptest.NewTLSServer(answer)
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(answer)
	defer plainSrv.Close()
	var wrapped atomic.Int32
	wrapper := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		wrapped.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})
	for _, tc := range []struct {
		name      string
		url       string
		transport http.RoundTripper
		direct    bool // the engine's own client
		wrapped   int32
	}{
		{"https through the transport", tlsSrv.URL, tlsSrv.Client().Transport, false, 0},
		{"http through the engine's client", plainSrv.URL, tlsSrv.Client().Transport, true, 0},
		{"http through an injected RoundTripper", plainSrv.URL, wrapper, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrapped.Store(0)
			u, _ := url.Parse(tc.url)
			h := newHarness(t, Options{Transport: tc.transport}, 8)
			c := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK))
			h.e.run(c)
			h.e.Release(c.Reserved)
			h.expect(map[string]int{observe.ShadowMatch: 1})
			direct := false
			if h.e.conns != nil {
				h.e.conns.mu.Lock()
				direct = len(h.e.conns.open) > 0
				h.e.conns.mu.Unlock()
			}
			if direct != tc.direct || wrapped.Load() != tc.wrapped {
				t.Errorf("own client used: %v, injected RoundTripper called %d times; want %v, %d", direct, wrapped.Load(), tc.direct, tc.wrapped)
			}
		})
	}
}
