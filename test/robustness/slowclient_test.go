package robustness

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/poll"
	"github.com/tfsbridge/tfsbridge/internal/racebuild"
)

// slowClient is a raw TCP client that can stall anywhere in a request.
type slowClient struct {
	t    *testing.T
	conn net.Conn
}

func dialSlow(t *testing.T, addr string) *slowClient {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &slowClient{t: t, conn: c}
}

// trickle writes s one byte every gap, until s is written or the server
// stops taking it; it reports whether all of s went out.
func (c *slowClient) trickle(s string, gap time.Duration) bool {
	for i := 0; i < len(s); i++ {
		if _, err := c.conn.Write([]byte{s[i]}); err != nil {
			return false
		}
		time.Sleep(gap)
	}
	return true
}

// response reads one answer, waiting at most d.
func (c *slowClient) response(d time.Duration) (*http.Response, string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c.conn), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// closedWithin reports whether the server closes the connection within d
// (reading nothing but, at most, an answer).
func (c *slowClient) closedWithin(d time.Duration) bool {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.conn)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestSlowClients: the standalone proxy bounds how long a client may take
// to send its headers and its body and how long an idle connection lives,
// and answers a body cut by the deadline with a TF error (translated) or
// 408 (pass-through). Every stalled connection is gone afterwards.
func TestSlowClients(t *testing.T) {
	base := runtime.NumGoroutine()
	mock := startMock(t, "triton")
	const timeout = 500 * time.Millisecond
	s := newStack(t, stackConfig{upstream: mock.URL, readTimeout: timeout, readHeader: timeout, idleTimeout: timeout})
	predict := "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: x\r\n"
	const bodyTimeout = "{\n    \"error\": \"Timed out reading the request body\"\n}"
	// How long to wait for what the deadline must cause: the deadline
	// plus generous slack, as a busy machine fires timers late. The waits
	// end as soon as the answer or the close comes.
	limit := timeout + answerDeadline

	t.Run("body trickled past the deadline", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		start := time.Now()
		// Trickled whole, the body would take 100 s: only the deadline
		// can answer it within limit. The trickle ends when the proxy
		// closes the connection.
		c.trickle(predict+"Content-Length: 2015\r\n\r\n", 0)
		c.trickle(`{"instances": [`+strings.Repeat("1.0, ", 400), 50*time.Millisecond)
		resp, body, err := c.response(limit)
		if err != nil || resp.StatusCode != 400 || body != bodyTimeout {
			t.Fatalf("answer %v %q %v, want 400 %q", resp, body, err, bodyTimeout)
		}
		if d := time.Since(start); d > limit {
			t.Errorf("answered after %v", d)
		}
	})
	t.Run("body never finished", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		c.trickle(predict+"Content-Length: 100\r\n\r\n"+`{"instances"`, 0)
		resp, body, err := c.response(limit)
		if err != nil || resp.StatusCode != 400 || body != bodyTimeout {
			t.Fatalf("answer %v %q %v, want 400 %q", resp, body, err, bodyTimeout)
		}
	})
	t.Run("chunked body never finished", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		c.trickle(predict+"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"ins\r\n", 0)
		resp, body, err := c.response(limit)
		if err != nil || resp.StatusCode != 400 || body != bodyTimeout {
			t.Fatalf("answer %v %q %v, want 400 %q", resp, body, err, bodyTimeout)
		}
	})
	t.Run("pass-through body never finished", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		c.trickle("POST /v2/models/half_plus_two/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", 0)
		resp, _, err := c.response(limit)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("answer %v %v, want 408", resp, err)
		}
	})
	t.Run("headers trickled past the deadline", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		start := time.Now()
		go c.trickle(predict+"X-Slow: "+strings.Repeat("a", 100), 50*time.Millisecond)
		if !c.closedWithin(limit) {
			t.Fatalf("connection still open %v after its headers began", time.Since(start))
		}
	})
	t.Run("idle keep-alive connection", func(t *testing.T) {
		c := dialSlow(t, s.proxyURL)
		body := `{"instances": [1.0]}`
		c.trickle(predict+"Content-Length: 20\r\n\r\n"+body, 0)
		resp, _, err := c.response(limit)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("answer %v %v, want 200", resp, err)
		}
		if !c.closedWithin(limit) {
			t.Fatal("idle connection still open")
		}
	})
	// Its own stack: 90 bytes 3 ms apart take 0.3 s on an idle machine
	// but can take seconds on a busy one, where each sleep lasts longer.
	// A generous deadline keeps "within the deadline" true there.
	steady := newStack(t, stackConfig{upstream: mock.URL, readTimeout: answerDeadline, readHeader: answerDeadline})
	t.Run("a slow but steady body within the deadline", func(t *testing.T) {
		c := dialSlow(t, steady.proxyURL)
		body := `{"instances": [1.0]}`
		c.trickle(predict+"Content-Length: 20\r\n\r\n"+body, 3*time.Millisecond)
		resp, got, err := c.response(limit)
		if want := "{\n    \"predictions\": [2.5\n    ]\n}"; err != nil || resp.StatusCode != 200 || got != want {
			t.Fatalf("answer %v %q %v, want 200 %q", resp, got, err, want)
		}
	})
	s.close()
	steady.close()
	mock.Close()
	waitGoroutines(t, base+2, settleTimeout)
}

// TestSlowReadersCut: clients that ask the proxy for a large translated
// answer and never read it are cut at --write-timeout, each cut is counted,
// and their buffers and goroutines are freed (issue 13: ten such clients
// held 5.6 GiB for minutes). A client that reads gets the whole answer.
func TestSlowReadersCut(t *testing.T) {
	if racebuild.Enabled {
		t.Skip("heap measurement under -race")
	}
	base := runtime.NumGoroutine()
	h := startHostile(t)
	// The write deadline covers the streamed translation of the answer as
	// well as its writing: long enough that a reading client gets its
	// 9 MiB on a loaded 2-core machine.
	const writeTimeout = 5 * time.Second
	// Patient but for the write timeout: with the short defaults, four
	// 3 MiB answers fetched and translated at once on a busy machine ran
	// into the request timeout, and its small 504 needs no reader.
	s := newStack(t, patient(stackConfig{upstream: h.URL(), maxBody: 4 << 20, writeTimeout: writeTimeout}))
	predict := "POST /v1/models/wide:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 19\r\n\r\n{\"instances\":[1.0]}"

	a := s.post(viaProxy, "/v1/models/wide:predict", []byte(`{"instances":[1.0]}`))
	if a.err != nil || a.status != 200 || len(a.body) < 9<<20 || !strings.HasPrefix(a.body, "{\n    \"predictions\": [0, 0, ") {
		t.Fatalf("a reading client: %d, %d bytes %.60q, %v; want 200 and the whole answer", a.status, len(a.body), a.body, a.err)
	}
	s.dropIdle()
	before := heapInUse()

	const readers = 4
	clients := make([]*slowClient, readers)
	for i := range clients {
		// The answer is larger than the kernel buffers it may fill (4 MiB
		// of send buffer, 128 KiB of receive window that grows only as
		// the client reads), so the proxy's writes block.
		clients[i] = dialSlow(t, s.proxyURL)
		clients[i].trickle(predict, 0)
	}
	// The cuts are counted as they happen; the deadline only bounds a
	// failure: four 9 MiB answers are translated before their write
	// deadline starts, which takes seconds on a loaded 2-core machine.
	const cutDeadline = writeTimeout + 30*time.Second
	poll.Until(cutDeadline, func() bool { return s.metrics.Value("tfsbridge_response_write_timeouts_total") >= readers })
	if got := s.metrics.Value("tfsbridge_response_write_timeouts_total"); got != readers {
		t.Fatalf("%v answers cut after %v, want %d (answers 200: %v, 504: %v)", got, cutDeadline, readers,
			s.metrics.Value("tfsbridge_requests_total", "code", "200"), s.metrics.Value("tfsbridge_requests_total", "code", "504"))
	}
	for i, c := range clients {
		// What the kernels buffered is readable; then the connection ends.
		if !c.closedWithin(answerDeadline) {
			t.Errorf("client %d: connection still open after its answer was cut", i)
		}
	}
	after := settledHeap(before+8<<20, settleTimeout, s.dropIdle)
	t.Logf("live heap %d KiB before, %d KiB after %d cut readers", before>>10, after>>10, readers)
	if after > before+8<<20 {
		t.Errorf("live heap grew from %d to %d bytes: the cut answers are still held", before, after)
	}
	s.close()
	h.close()
	waitGoroutines(t, base+2, settleTimeout)
}
