package httpproxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/internal/http1/http1test"
)

// scriptedV2 is a v2 server on a raw socket (http1test): it writes the
// raw answer a request's X-Case header names, and closes the connection
// after an answer that does not leave it usable (one that says so, ends
// early or is not HTTP/1.1), so that no exchange meets a connection
// closed while idle.
type scriptedV2 struct {
	*http1test.Server
	url   string
	taken int // requests read before the last takeAll
}

func newScriptedV2(t *testing.T, answers map[string]string) *scriptedV2 {
	t.Helper()
	s := http1test.Start(t, func(_ int, r *http.Request) (string, bool) {
		name := r.Header.Get("X-Case")
		return answers[name], lastAnswer(name, answers[name])
	})
	return &scriptedV2{Server: s, url: "http://" + s.Addr}
}

// lastAnswer reports an answer after which the connection is closed.
func lastAnswer(c, raw string) bool {
	switch c {
	case "short", "switch", "not http", "closed", "interim closed":
		return true
	}
	return strings.Contains(raw, "Connection: close")
}

// takeAll returns the last request the server read, its body and the
// number of requests read since the last call.
func (s *scriptedV2) takeAll() (*http.Request, string, int) {
	reqs, _ := s.Requests()
	n := len(reqs) - s.taken
	s.taken = len(reqs)
	if n == 0 {
		return nil, "", 0
	}
	last := reqs[len(reqs)-1]
	return last.Request, last.Body, n
}

// rawExchange sends a raw request to addr and returns every byte of the
// answers (interim ones included) with the Date line blanked.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &raw))
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			raw.WriteString("<" + err.Error() + ">")
			break
		}
		_, err = io.Copy(io.Discard, resp.Body)
		if err != nil {
			raw.WriteString("<" + err.Error() + ">")
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	return uuid.ReplaceAllString(dateLine.ReplaceAllString(raw.String(), "Date: -\r\n"), "<id>")
}

var (
	dateLine = regexp.MustCompile(`Date: [^\r]*\r\n`)
	// uuid is a request id the proxy made (random).
	uuid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// TestSmallPathSameAsReverseProxy: a small translated exchange served by
// serveSmall gives the client the same bytes, and the v2 server the same
// request, as through ReverseProxy, for every kind of answer (the ones
// serveSmall hands to ReverseProxy included) and requests with hop-by-hop,
// forwarding and expectation headers.
func TestSmallPathSameAsReverseProxy(t *testing.T) {
	binHeader := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	bin := binHeader + string(f32le(2.5, 3, 4.5))
	json := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`
	ok := func(extra, body string) string {
		return "HTTP/1.1 200 OK\r\n" + extra + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	binHead := "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: " + strconv.Itoa(len(binHeader)) + "\r\n"
	jsonHead := "Content-Type: application/json\r\n"
	big := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}],"pad":"` +
		strings.Repeat("x", 40<<10) + `"}`
	answers := map[string]string{
		"binary":     ok(binHead, bin),
		"json":       ok(jsonHead, json),
		"extras":     ok(jsonHead+"Server: triton\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Request-Id: up\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\n", json),
		"connection": ok(jsonHead+"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n", json),
		"close":      ok(jsonHead+"Connection: close\r\n", json),
		"ihcl named": ok("Content-Type: application/octet-stream\r\nConnection: Inference-Header-Content-Length\r\nInference-Header-Content-Length: "+strconv.Itoa(len(binHeader))+"\r\n", bin),
		"hints":      "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + ok(jsonHead, json),
		"continue":   "HTTP/1.1 100 Continue\r\n\r\n" + ok(binHead, bin),
		"error 400":  "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"error\":\"bad x\"}",
		"html 503":   "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\nContent-Length: 14\r\n\r\n<b>overload</b",
		"events":     ok("Content-Type: text/event-stream\r\n", json),
		"chunked":    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(json)), 16) + "\r\n" + json + "\r\n0\r\n\r\n",
		"empty":      ok(jsonHead, ""),
		"big":        ok(jsonHead, big),
		"short":      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n" + json,
		"switch":     "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"not http":   "SSH-2.0-OpenSSH\r\n\r\n",
		"garbage":    ok(jsonHead, `{"outputs": [`),
		// The connection closed before any answer, or after an interim
		// one only: the same error answer both ways, the request sent once.
		"closed":         "",
		"interim closed": "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n",
	}
	up := newScriptedV2(t, answers)
	v2 := fakev2.New(t, "triton", halfPlusTwo) // the metadata
	var proxies [2]*setup
	for i := range proxies {
		proxies[i] = &setup{v2: v2, upstream: up.url, noSmall: i == 1}
		proxies[i].start(t)
	}
	body := `{"instances": [1.0, 2.0, 5.0]}`
	requests := map[string]func(c string) string{
		"plain": func(c string) string {
			return "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf\r\nContent-Type: application/json\r\nX-Case: " + c +
				"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		},
		"headers": func(c string) string {
			return "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf:8501\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n" +
				"Keep-Alive: timeout=9\r\nTe: trailers\r\nX-Forwarded-For: 10.0.0.1\r\nForwarded: for=x\r\nX-Forwarded-Proto: https\r\n" +
				"User-Agent: tfclient\r\nX-Request-Id: rid-1\r\nAccept-Encoding: gzip\r\nExpect: 100-continue\r\nX-Case: " + c +
				"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		},
		"chunked": func(c string) string {
			return "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: tf\r\nTransfer-Encoding: chunked\r\nX-Case: " + c + "\r\n\r\n" +
				strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
		},
	}
	for name, req := range requests {
		for c := range answers {
			var got [2]string
			var sent [2]*http.Request
			var sentBody [2]string
			for i, s := range proxies {
				got[i] = rawExchange(t, strings.TrimPrefix(s.proxy.URL, "http://"), req(c))
				var n int
				sent[i], sentBody[i], n = up.takeAll()
				if n > 1 {
					t.Errorf("%s request, %s answer: the v2 server got the POST %d times (noSmall %v)", name, c, n, s.noSmall)
				}
				if sent[i] != nil {
					sentBody[i] = uuid.ReplaceAllString(sentBody[i], "<id>")
					if id := sent[i].Header["X-Request-Id"]; len(id) == 1 {
						id[0] = uuid.ReplaceAllString(id[0], "<id>")
					}
				}
			}
			if got[0] != got[1] {
				t.Errorf("%s request, %s answer: the client got\n%q\nby serveSmall,\n%q\nthrough ReverseProxy", name, c, got[0], got[1])
			}
			if sent[0] == nil || sent[1] == nil {
				t.Errorf("%s request, %s answer: the v2 server got no request (%v, %v)", name, c, sent[0] != nil, sent[1] != nil)
				continue
			}
			for _, r := range sent {
				r.Body = nil // read into sentBody
			}
			if sent[0].RequestURI != sent[1].RequestURI || sent[0].Host != sent[1].Host ||
				!reflect.DeepEqual(sent[0].Header, sent[1].Header) || sentBody[0] != sentBody[1] {
				t.Errorf("%s request, %s answer: the v2 server got\n%s %s %v %q\nby serveSmall,\n%s %s %v %q\nthrough ReverseProxy", name, c,
					sent[0].RequestURI, sent[0].Host, sent[0].Header, sentBody[0], sent[1].RequestURI, sent[1].Host, sent[1].Header, sentBody[1])
			}
		}
	}
}

// requestURI gives the small path's request target exactly as
// upstreamURL's RequestURI does, fast path or not.
func TestRequestURI(t *testing.T) {
	for _, base := range []string{"http://v2:8000", "http://v2:8000/", "http://v2/root", "http://v2/root/",
		"http://v2/a%20b/", "http://v2/r?", "http://v2/r;x"} {
		b, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"/v2/models/half_plus_two/infer", "/v2/models/m/versions/1/infer?x=1",
			"/v2/models/m/infer?", "/v2/models/a%2Fb/infer", "/v2/models/a b/infer", "/v2/models/caf%C3%A9/infer",
			"/v2/models/m%zz/infer", "/v2/models/m+n/infer", "", "?q", "/v2/models/%2e%2e/infer"} {
			want := upstreamURL(b, target).RequestURI()
			if got := requestURI(b, target); got != want {
				t.Errorf("requestURI(%q, %q) = %q, want %q", base, target, got, want)
			}
		}
	}
}
