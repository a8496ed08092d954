package robustness

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileServer is a v2 server built to misbehave, on a raw TCP listener
// so it can break HTTP itself. Model metadata and Triton config answers are
// correct for every model (x FP32 [-1] → y FP32 [-1], not batching), so a
// predict reaches the infer call, where the model's name picks the
// misbehaviour (see hostileAnswers); "bytes_*" models take BYTES x,
// "examples_*" ones are classify signatures (BYTES inputs → FP32 scores),
// and both infer like the rest of their name. Models named "meta_*" misbehave on
// their metadata call instead; "slowmeta_*" ones answer it correctly after
// 300 ms and infer like "good".
type hostileServer struct {
	ln   net.Listener
	stop chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup

	hits sync.Map // request path → *atomic.Int64
}

func startHostile(t *testing.T) *hostileServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hostileServer{ln: ln, stop: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

// URL is the server's root URL.
func (s *hostileServer) URL() string { return "http://" + s.ln.Addr().String() }

// Hits returns how many requests path received.
func (s *hostileServer) Hits(path string) int64 {
	if v, ok := s.hits.Load(path); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (s *hostileServer) close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *hostileServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers the requests of one keep-alive connection until an
// answer closes it (or the client does).
func (s *hostileServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		if len(req.URL.Path) <= 1024 { // long hostile names are not counted, nor kept
			v, _ := s.hits.LoadOrStore(req.URL.Path, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}
		if !s.answer(c, req) {
			return
		}
	}
}

// answer writes the answer to req and reports whether the connection may
// serve another request.
func (s *hostileServer) answer(c net.Conn, req *http.Request) bool {
	path := req.URL.Path
	model, rest, _ := strings.Cut(strings.TrimPrefix(path, "/v2/models/"), "/")
	switch {
	case path == "/v2":
		return writeJSON(c, 200, `{"name":"triton","version":"2.0","extensions":["binary_tensor_data"]}`)
	case path == "/v2/health/ready":
		return writeJSON(c, 200, "")
	case strings.HasPrefix(model, "meta_") && rest == "":
		return s.metaAnswer(c, model)
	case rest == "":
		if strings.HasPrefix(model, "slowmeta_") {
			// Slow enough that concurrent requests all miss the cache.
			s.wait(300 * time.Millisecond)
		}
		x, in, y := "x", "FP32", "y"
		switch {
		case strings.HasPrefix(model, "bytes_"):
			in = "BYTES"
		case strings.HasPrefix(model, "examples_"):
			x, in, y = "inputs", "BYTES", "scores" // a classify signature
		}
		return writeJSON(c, 200, `{"name":"`+model+`","versions":["1"],"platform":"hostile","inputs":[{"name":"`+x+`","datatype":"`+in+`","shape":[-1]}],"outputs":[{"name":"`+y+`","datatype":"FP32","shape":[-1]}]}`)
	case rest == "config":
		return writeJSON(c, 200, `{"name":"`+model+`","max_batch_size":0}`)
	case rest == "ready":
		return writeJSON(c, 200, "")
	case rest == "infer":
		if strings.HasPrefix(model, "slowmeta_") {
			model = "good"
		}
		model = strings.TrimPrefix(strings.TrimPrefix(model, "bytes_"), "examples_")
		if a, ok := hostileAnswers[model]; ok {
			return a.write(s, c)
		}
	}
	return writeJSON(c, 404, `{"error":"Not Found"}`)
}

// metaAnswer misbehaves on a model's metadata call.
func (s *hostileServer) metaAnswer(c net.Conn, model string) bool {
	switch model {
	case "meta_garbage":
		return writeJSON(c, 200, "this is not JSON")
	case "meta_slow":
		s.wait(time.Minute)
		return false
	case "meta_close":
		return false
	case "meta_endless":
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		s.endless(c, `{"name":"x","inputs":[`)
		return false
	case "meta_500":
		return writeJSON(c, 500, `{"error":"metadata exploded"}`)
	}
	return writeJSON(c, 404, `{"error":"Request for unknown model: '`+model+`' is not found"}`)
}

// wait sleeps for d or until the server stops.
func (s *hostileServer) wait(d time.Duration) {
	select {
	case <-s.stop:
	case <-time.After(d):
	}
}

// endless writes chunks of filler forever, until the peer or the server
// goes away.
func (s *hostileServer) endless(c net.Conn, head string) {
	chunk := []byte(head + strings.Repeat(" ", 64<<10-len(head)))
	for {
		if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
			return
		}
		chunk = bytes.Repeat([]byte{' '}, 64<<10)
		select {
		case <-s.stop:
			return
		default:
		}
	}
}

// writeJSON writes a complete, well-formed answer.
func writeJSON(c net.Conn, status int, body string) bool {
	_, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	return err == nil
}

// goodHeader is the JSON header of a correct binary answer for one FP32
// input element, y = [2.5].
const goodHeader = `{"model_name":"m","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}`

// goodBody is that answer's body.
var goodBody = append([]byte(goodHeader), f32bytes(2.5)...)

func f32bytes(vs ...float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// goodAnswer is the raw HTTP answer of a correct binary response.
func goodAnswer(status string) string {
	return fmt.Sprintf("HTTP/1.1 %s\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s",
		status, len(goodHeader), len(goodBody), goodBody)
}

// rawAnswer is a well-formed answer with any status and body.
func rawAnswer(status, contentType, body string) string {
	return fmt.Sprintf("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", status, contentType, len(body), body)
}

// hostileAnswer is one misbehaviour of the infer call: raw bytes to write
// (then keep or close the connection), or a function for the dynamic ones.
type hostileAnswer struct {
	raw   string
	close bool
	fn    func(s *hostileServer, c net.Conn) bool
}

func (a hostileAnswer) write(s *hostileServer, c net.Conn) bool {
	if a.fn != nil {
		return a.fn(s, c)
	}
	_, err := io.WriteString(c, a.raw)
	return err == nil && !a.close
}

// uint8Answer writes a correct binary answer of n UINT8 zeros.
func uint8Answer(n int) func(*hostileServer, net.Conn) bool {
	return func(_ *hostileServer, c net.Conn) bool {
		h := fmt.Sprintf(`{"outputs":[{"name":"y","datatype":"UINT8","shape":[%d],"parameters":{"binary_data_size":%d}}]}`, n, n)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(h), len(h)+n, h); err != nil {
			return false
		}
		_, err := c.Write(make([]byte, n))
		return err == nil
	}
}

// gzipBomb is 32 MiB of spaces, gzipped to a few tens of KiB.
var gzipBomb = func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(bytes.Repeat([]byte{' '}, 32<<20))
	_ = zw.Close()
	return b.Bytes()
}()

// hostileAnswers are the infer misbehaviours, by model name.
var hostileAnswers = map[string]hostileAnswer{
	"good":            {raw: goodAnswer("200 OK")},
	"garbage_headers": {raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\nthis is not a header line\r\n\r\nhello", close: true},
	"bad_status_line": {raw: "HTTP/1.1 two hundred OK\r\nContent-Length: 0\r\n\r\n", close: true},
	"not_http":        {raw: "\x00\x01\x02\x03 garbage garbage\r\n\r\n", close: true},
	"ihcl_lie":        {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: 999999\r\nContent-Length: %d\r\n\r\n%s", len(goodBody), goodBody)},
	"ihcl_garbage":    {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: -12abc\r\nContent-Length: %d\r\n\r\n%s", len(goodBody), goodBody)},
	"ihcl_zero":       {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: 0\r\nContent-Length: %d\r\n\r\n%s", len(goodBody), goodBody)},
	"size_lie": {raw: func() string {
		h := `{"outputs":[{"name":"y","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4611686018427387904}}]}`
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s\x00\x00\x20\x40", len(h), len(h)+4, h)
	}()},
	"zero_size_bomb": {raw: func() string {
		h := `{"outputs":[{"name":"y","datatype":"FP32","shape":[60000000,0],"parameters":{"binary_data_size":0}}]}`
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(h), len(h), h)
	}()},
	"endless": {fn: func(s *hostileServer, c net.Conn) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
		s.endless(c, `{"outputs":[`)
		return false
	}},
	"slow_headers": {fn: func(s *hostileServer, c net.Conn) bool {
		s.wait(time.Minute)
		return false
	}},
	"slowloris": {fn: func(s *hostileServer, c net.Conn) bool {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(goodHeader), len(goodBody))
		for i := range goodBody {
			if _, err := c.Write(goodBody[i : i+1]); err != nil {
				return false
			}
			s.wait(200 * time.Millisecond)
			select {
			case <-s.stop:
				return false
			default:
			}
		}
		return true
	}},
	// A well-formed answer far over the body limit, with its length.
	"huge": {fn: uint8Answer(8 << 20)},
	// A correct answer whose TF rendering is about 9 MiB: 3 MiB of UINT8
	// zeros, each printed as "0, ".
	"wide":           {fn: uint8Answer(3 << 20)},
	"wider":          {fn: uint8Answer(6 << 20)}, // 18 MiB of TF JSON: more than the kernels buffer
	"gzip_bomb":      {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(gzipBomb), gzipBomb)},
	"close_mid_body": {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(goodHeader), len(goodBody), goodHeader[:40]), close: true},
	"short_length":   {raw: fmt.Sprintf("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n%s", goodHeader), close: true},
	"long_length": {fn: func(s *hostileServer, c net.Conn) bool {
		// Announces more than it sends, and keeps the connection open.
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(goodHeader), len(goodBody)+1000, goodBody)
		s.wait(time.Minute)
		return false
	}},
	"bad_chunk":    {raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", close: true},
	"continue_100": {raw: "HTTP/1.1 100 Continue\r\n\r\n" + goodAnswer("200 OK")},
	"hints_103":    {raw: "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + goodAnswer("200 OK")},
	"many_1xx":     {raw: strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 50) + goodAnswer("200 OK")},
	"no_content":   {raw: "HTTP/1.1 204 No Content\r\n\r\n"},
	"not_modified": {raw: "HTTP/1.1 304 Not Modified\r\n\r\n"},
	"status_999":   {raw: "HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n"},
	"html_error":   {raw: rawAnswer("503 Service Unavailable", "text/html", "<html><body><h1>503 overloaded</h1></body></html>")},
	"huge_error": {fn: func(s *hostileServer, c net.Conn) bool {
		const n = 4 << 20
		if _, err := fmt.Fprintf(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", n); err != nil {
			return false
		}
		_, err := c.Write(bytes.Repeat([]byte("boom "), n/5+1)[:n])
		return err == nil
	}},
	"garbage_json": {raw: rawAnswer("200 OK", "application/json", "<html>x</html>")},
	"empty_200":    {raw: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	"huge_header": {fn: func(s *hostileServer, c net.Conn) bool {
		// 16 MiB of one header line: more than the transport reads.
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "); err != nil {
			return false
		}
		line := bytes.Repeat([]byte{'a'}, 1<<20)
		for range 16 {
			if _, err := c.Write(line); err != nil {
				return false
			}
		}
		_, _ = io.WriteString(c, "\r\nContent-Length: 0\r\n\r\n")
		return false
	}},
}
