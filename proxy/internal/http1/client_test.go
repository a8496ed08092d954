package http1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/internal/http1/http1test"
)

// rawServer is a scripted HTTP/1.1 server (http1test) answering the
// i-th request with answer(i).
type rawServer struct {
	*http1test.Server
	addr string
}

func newRawServer(t *testing.T, answer func(i int) (string, bool)) *rawServer {
	t.Helper()
	s := http1test.Start(t, func(i int, _ *http.Request) (string, bool) { return answer(i) })
	return &rawServer{Server: s, addr: s.Addr}
}

// stats returns the requests read so far and the connections accepted.
func (s *rawServer) stats() (reqs []*http.Request, conns int) {
	got, conns := s.Requests()
	for _, r := range got {
		reqs = append(reqs, r.Request)
	}
	return reqs, conns
}

func withLength(head, body string) string {
	return head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// post sends body to s and reads the whole answer.
func post(ctx context.Context, cl *Client, s *rawServer, body string) (status int, ct, answer string, err error) {
	resp, err := cl.Do(ctx, &Request{Addr: s.addr, Target: "/v2/models/m/infer", Host: s.addr,
		Header: AppendHTTPHeader(nil, http.Header{"Content-Type": {"application/json"}})}, [][]byte{[]byte(body)})
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Close()
	b, err := io.ReadAll(resp)
	return resp.StatusCode, resp.Get("Content-Type"), string(b), ReadErr(ctx, err)
}

const answerBody = `{"outputs": [{"name": "y", "data": [2.5, 3.0, 4.5]}]}`

// The client reads every form of answer a server may give, and reuses a
// connection only when its answer was read to the end and the server
// keeps it.
func TestClientAnswers(t *testing.T) {
	chunked := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(answerBody[:10])), 16) + "\r\n" + answerBody[:10] + "\r\n" +
		strconv.FormatInt(int64(len(answerBody[10:])), 16) + "\r\n" + answerBody[10:] + "\r\n0\r\n\r\n"
	json := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct {
		name       string
		raw        string
		closeAfter bool
		status     int
		body       string
		err        string // a failed exchange's error, in part
		conns      int    // for two exchanges one after the other
	}{
		{"declared length", withLength(json, answerBody), false, 200, answerBody, "", 1},
		{"empty body", withLength(json, ""), false, 200, "", "", 1},
		{"chunked", chunked, false, 200, answerBody, "", 1},
		{"chunked with a trailer", strings.TrimSuffix(chunked, "\r\n") + "X-T: 1\r\n\r\n", false, 200, answerBody, "", 1},
		{"until the connection closes", json + "Connection: close\r\n\r\n" + answerBody, true, 200, answerBody, "", 2},
		{"connection: close with a length", withLength(json+"Connection: close\r\n", answerBody), true, 200, answerBody, "", 2},
		{"an interim answer first", "HTTP/1.1 100 Continue\r\n\r\n" + withLength(json, answerBody), false, 200, answerBody, "", 1},
		{"too many interim answers", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + withLength(json, answerBody), true, 0, "", "too many 1xx", 2},
		{"another status", withLength("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n", `{"error": "x"}`), false, 404, `{"error": "x"}`, "", 1},
		{"a short body", json + "Content-Length: 100\r\n\r\n" + answerBody, true, 200, answerBody, "unexpected EOF", 2},
		{"not HTTP", "hello\r\n\r\n", true, 0, "", "malformed HTTP", 2},
		{"a head over the bound", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", true, 0, "", "an answer head over", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(int) (string, bool) { return tc.raw, tc.closeAfter })
			cl := New(Limits{})
			defer cl.Close()
			for i := range 2 {
				status, ct, body, err := post(context.Background(), cl, s, "{}")
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("exchange %d: error %v, want one with %q", i, err, tc.err)
					}
					continue
				}
				if err != nil || status != tc.status || body != tc.body || ct != "application/json" {
					t.Fatalf("exchange %d: %d %q %q %v, want %d application/json %q", i, status, ct, body, err, tc.status, tc.body)
				}
			}
			if _, conns := s.stats(); conns != tc.conns {
				t.Errorf("%d connections, want %d", conns, tc.conns)
			}
		})
	}
}

// The request's head: what net/http's Request.Write sends of it, a
// field that could cut the head left out.
func TestClientRequestHead(t *testing.T) {
	s := newRawServer(t, func(int) (string, bool) { return withLength("HTTP/1.1 200 OK\r\n", ""), false })
	cl := New(Limits{})
	defer cl.Close()
	resp, err := cl.Do(context.Background(), &Request{Addr: s.addr, Target: "/a%20b?x=1", Host: "up.example", Close: true,
		Header: AppendHTTPHeader(nil, http.Header{"X-Request-Id": {"r1"}, "X-Evil": {"a\r\nX-Injected: 1"}, "User-Agent": {""},
			"X-Two": {"1", "2"}, "Content-Length": {"99"}, "Bad Name": {"x"}})},
		[][]byte{[]byte("ab"), nil, []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp)
	_ = resp.Close()
	reqs, _ := s.stats()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	got := []string{r.Method, r.RequestURI, r.Host, strconv.FormatInt(r.ContentLength, 10), strconv.FormatBool(r.Close),
		r.Header.Get("X-Request-Id"), strings.Join(r.Header["X-Two"], ","), r.Header.Get("X-Evil"), r.Header.Get("X-Injected"),
		strconv.Itoa(len(r.Header["User-Agent"])), strconv.Itoa(len(r.Header["Bad Name"]))}
	want := []string{"POST", "/a%20b?x=1", "up.example", "3", "true", "r1", "1,2", "", "", "0", "0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("request %q, want %q", got, want)
	}
}

// A reused connection the server closed while idle (without saying so)
// costs the next exchange nothing: the idle check sees the close, or the
// request is sent again on a new connection when it may be.
func TestClientStaleConnection(t *testing.T) {
	s := newRawServer(t, func(int) (string, bool) { return withLength("HTTP/1.1 200 OK\r\n", answerBody), true })
	cl := New(Limits{})
	defer cl.Close()
	for i := range 3 {
		resp, err := cl.Do(context.Background(), &Request{Addr: s.addr, Host: s.addr, Retry: true}, nil)
		if err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
		b, err := io.ReadAll(resp)
		_ = resp.Close()
		if err != nil || string(b) != answerBody {
			t.Fatalf("exchange %d: %q %v", i, b, err)
		}
	}
	if reqs, conns := s.stats(); len(reqs) != 3 || conns != 3 {
		t.Errorf("%d requests over %d connections, want 3 over 3", len(reqs), conns)
	}
}

// stalled is a server that reads a request and never answers; entered
// is closed once it has.
func stalled(t *testing.T) (s *rawServer, entered chan struct{}) {
	entered = make(chan struct{})
	var once sync.Once
	block := make(chan struct{})
	s = newRawServer(t, func(int) (string, bool) {
		once.Do(func() { close(entered) })
		<-block
		return "", true
	})
	t.Cleanup(func() { close(block) }) // before the server's own cleanup, which waits for its handlers
	return s, entered
}

// An exchange stalled on its server ends at once when its context is
// cancelled (its error the context's cause), or when the Client closes.
func TestClientCancel(t *testing.T) {
	cause := errors.New("the client went away")
	for _, tc := range []struct {
		name    string
		end     func(cl *Client, cancel context.CancelCauseFunc)
		wantErr error
	}{
		{"context cancelled", func(_ *Client, cancel context.CancelCauseFunc) { cancel(cause) }, cause},
		{"client closed", func(cl *Client, _ context.CancelCauseFunc) { cl.Close() }, net.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, entered := stalled(t)
			cl := New(Limits{})
			defer cl.Close()
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			done := make(chan error, 1)
			go func() {
				_, _, _, err := post(ctx, cl, s, "{}")
				done <- err
			}()
			<-entered
			tc.end(cl, cancel)
			// Generous: the exchange would otherwise wait forever.
			select {
			case err := <-done:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v, want %v", err, tc.wantErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the stalled exchange did not end")
			}
			if n := cl.Open(); n != 0 {
				t.Errorf("%d connections open after the exchange ended", n)
			}
		})
	}
}

// The deadline ends a stalled exchange.
func TestClientDeadline(t *testing.T) {
	s, _ := stalled(t)
	cl := New(Limits{})
	defer cl.Close()
	_, err := cl.Do(context.Background(), &Request{Addr: s.addr, Host: s.addr, Deadline: time.Now().Add(50 * time.Millisecond)}, nil)
	if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("error %v, want a timeout", err)
	}
}

// A body not read to its end closes its connection: the next exchange
// takes a new one.
func TestClientUnreadBody(t *testing.T) {
	s := newRawServer(t, func(int) (string, bool) { return withLength("HTTP/1.1 200 OK\r\n", answerBody), false })
	cl := New(Limits{})
	defer cl.Close()
	for range 2 {
		resp, err := cl.Do(context.Background(), &Request{Addr: s.addr, Host: s.addr}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = resp.Read(make([]byte, 3))
		_ = resp.Close()
		if _, err := resp.Read(make([]byte, 3)); err == nil {
			t.Error("a read after Close succeeded")
		}
	}
	if _, conns := s.stats(); conns != 2 {
		t.Errorf("%d connections, want 2", conns)
	}
}

func TestAddr(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://mock:8000/v2", "mock:8000"},
		{"http://mock/v2", "mock:80"},
		{"http://[::1]/v2", "[::1]:80"},
		{"http://[::1]:9/v2", "[::1]:9"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := Addr(u); got != tc.want {
			t.Errorf("Addr(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// Request.Interim is given each interim answer, in order, with its
// header, and its error ends the exchange.
func TestClientInterim(t *testing.T) {
	json := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	raw := "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + withLength(json, answerBody)
	s := newRawServer(t, func(int) (string, bool) { return raw, false })
	cl := New(Limits{})
	defer cl.Close()
	for _, fail := range []bool{false, true} {
		var got []string
		resp, err := cl.Do(context.Background(), &Request{Addr: s.addr, Host: s.addr, Interim: func(code int, h http.Header) error {
			got = append(got, strconv.Itoa(code)+" "+h.Get("Link"))
			if fail {
				return errors.New("no hints")
			}
			return nil
		}}, [][]byte{[]byte("{}")})
		if fail {
			if err == nil || err.Error() != "no hints" || len(got) != 1 {
				t.Errorf("a failing Interim: %v after %q, want its error after the first", err, got)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		status := resp.StatusCode
		b, err := io.ReadAll(resp)
		resp.Close()
		if err != nil || string(b) != answerBody || status != 200 {
			t.Errorf("answer %d %q %v", status, b, err)
		}
		if want := []string{"103 </a>", "100 "}; !slices.Equal(got, want) {
			t.Errorf("interim answers %q, want %q", got, want)
		}
	}
}
