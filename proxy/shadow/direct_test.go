package shadow

import (
	"encoding/base64"
	"io"
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

// The engine's result for every form of answer its own client reads
// (proxy/internal/http1 tests the forms themselves): a body of declared
// length or chunked, within the body limit or over it, an answer the
// copy cannot compare.
func TestDirectClientAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  http.HandlerFunc
		maxBody int64
		result  string
	}{
		{"declared length", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, primaryOK) }, 0, observe.ShadowMatch},
		{"chunked", chunkedAnswer, 0, observe.ShadowMatch},
		{"another status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, `{"error": "x"}`, http.StatusNotFound) }, 0, observe.ShadowMismatch},
		{"over the body limit", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, primaryOK) }, 10, observe.ShadowError},
		{"chunked over the body limit", chunkedAnswer, 20, observe.ShadowError},
		{"a gzip answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = io.WriteString(w, primaryOK)
		}, 0, observe.ShadowError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.answer)
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			h := newHarness(t, Options{MaxBodyBytes: tc.maxBody}, 8)
			for range 2 {
				c := h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK))
				h.e.run(c)
				h.e.Release(c.Reserved)
			}
			h.expect(map[string]int{tc.result: 2})
			if h.e.Held() != 0 {
				t.Errorf("%d bytes held after the copies", h.e.Held())
			}
		})
	}
}

// chunkedAnswer answers primaryOK in two chunks.
func chunkedAnswer(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, primaryOK[:10])
	w.(http.Flusher).Flush()
	_, _ = io.WriteString(w, primaryOK[10:])
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
	var mu sync.Mutex
	var reqs []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		reqs = append(reqs, r)
		mu.Unlock()
		_, _ = io.WriteString(w, primaryOK)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
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
		target := Target{Name: "tf", Kind: KindTFServing, URL: u}
		if tc.token != "" {
			target.Backend = tokenBackend{tok: tc.token}
		}
		c := h.copyOf(target, predictPath+"?x=1", predictBody, ok(primaryOK))
		c.RequestID = tc.rid
		h.e.run(c)
		h.e.Release(c.Reserved)
	}
	h.expect(map[string]int{observe.ShadowMatch: len(tests)})
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != len(tests) {
		t.Fatalf("%d requests, want %d", len(reqs), len(tests))
	}
	for i, tc := range tests {
		r := reqs[i]
		got := []string{r.Method, r.RequestURI, r.Host, strconv.FormatInt(r.ContentLength, 10), r.Header.Get("Content-Type"),
			r.Header.Get("Accept-Encoding"), r.Header.Get("X-Request-Id"), r.Header.Get("X-Evil"), r.Header.Get("Authorization"),
			r.Header.Get("User-Agent")}
		want := []string{"POST", "/base" + predictPath, u.Host, strconv.Itoa(len(predictBody)), "application/json",
			"identity", tc.wantRID, "", tc.wantAuth, "tfsbridge-shadow"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("request %d: %q, want %q", i, got, want)
		}
	}
}

// Close ends a copy stalled on its shadow server at once (its connection
// closed), counting nothing for it.
func TestDirectClientClose(t *testing.T) {
	entered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body read first: the server then sees its client close
		// (r's context ends), and srv.Close does not wait for it.
		_, _ = io.Copy(io.Discard, r.Body)
		close(entered)
		<-r.Context().Done() // no answer: the copy waits until its connection closes
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	h := newHarness(t, Options{Timeout: time.Hour}, 8)
	h.e.Submit(h.copyOf(Target{Name: "tf", Kind: KindTFServing, URL: u}, predictPath, predictBody, ok(primaryOK)))
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
			direct := h.e.conns != nil && h.e.conns.Open() > 0
			if direct != tc.direct || wrapped.Load() != tc.wrapped {
				t.Errorf("own client used: %v, injected RoundTripper called %d times; want %v, %d", direct, wrapped.Load(), tc.direct, tc.wrapped)
			}
		})
	}
}
