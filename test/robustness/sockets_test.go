package robustness

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/internal/racebuild"
	"github.com/tfsbridge/tfsbridge/translate"
	"github.com/tfsbridge/tfsbridge/translate/apierr"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// upstreamWant is what a client gets through each transport when the v2
// server misbehaves one way. 0 means the connection is reset without an
// answer: that is Envoy's own behaviour (and the stand-in's) when the
// upstream fails after its response headers went through the filter
// chain; the ext_proc service never sees a body and cannot answer.
type upstreamWant struct {
	proxy, extproc int
	prefix         string // of the TF error message, both transports
	// envoyOwn: through Envoy the answer is Envoy's own local reply, which
	// goes straight to the client, not a TF error: once ext_proc holds the
	// response headers (BUFFERED), Envoy's replies bypass it — a chunked
	// response over its buffer limit gets 500 "Internal Server Error", a
	// body still dripping at the route timeout 504 "upstream request
	// timeout" (envoyBody).
	envoyOwn  bool
	envoyBody string
	// orTimeout: on a slow machine (-race) the answer may instead be the
	// 504 of a timeout that passes first.
	orTimeout bool
	// bufferOnly: Envoy's own answer comes from its buffer limit, which
	// full-duplex mode does not have: there tfsbridge's own limit answers,
	// like the proxy's.
	bufferOnly bool
}

var upstreamWants = map[string]upstreamWant{
	"good":            {proxy: 200, extproc: 200},
	"continue_100":    {proxy: 200, extproc: 200},
	"hints_103":       {proxy: 200, extproc: 200},
	"many_1xx":        {proxy: 200, extproc: 200},
	"garbage_headers": {proxy: 503, extproc: 503},
	"bad_status_line": {proxy: 503, extproc: 503},
	"not_http":        {proxy: 503, extproc: 503},
	"huge_header":     {proxy: 503, extproc: 503, orTimeout: true},
	"bad_chunk":       {proxy: 502, extproc: 0, prefix: "Invalid response from the v2 inference server"},
	"close_mid_body":  {proxy: 502, extproc: 0, prefix: "Invalid response from the v2 inference server"},
	"long_length":     {proxy: 504, extproc: 504, envoyOwn: true, envoyBody: "upstream request timeout", prefix: "Timed out waiting for the v2 inference server"},
	"slowloris":       {proxy: 504, extproc: 504, envoyOwn: true, envoyBody: "upstream request timeout", prefix: "Timed out waiting for the v2 inference server"},
	"slow_headers":    {proxy: 504, extproc: 504, prefix: "Timed out waiting for the v2 inference server"},
	"ihcl_lie":        {proxy: 502, extproc: 502, prefix: "invalid response from inference server: Inference-Header-Content-Length 999999 exceeds the body length"},
	"ihcl_garbage":    {proxy: 502, extproc: 502, prefix: "invalid response from inference server: Inference-Header-Content-Length \"-12abc\": not a decimal number"},
	"ihcl_zero":       {proxy: 502, extproc: 502, prefix: "invalid response from inference server: Inference-Header-Content-Length \"0\""},
	"size_lie":        {proxy: 502, extproc: 502, prefix: "invalid response from inference server: output 'y' announces 4611686018427387904 bytes"},
	"zero_size_bomb":  {proxy: 502, extproc: 502, prefix: "invalid response from inference server: its outputs would expand"},
	"endless":         {proxy: 502, extproc: 500, envoyOwn: true, bufferOnly: true, prefix: "Response body exceeds the limit of 1048576 bytes"},
	"huge":            {proxy: 502, extproc: 502, prefix: "Response body exceeds the limit of 1048576 bytes"},
	"huge_error":      {proxy: 502, extproc: 502, prefix: "Response body exceeds the limit of 1048576 bytes"},
	"gzip_bomb":       {proxy: 502, extproc: 502, prefix: "Decompressed response body exceeds the limit of 1048576 bytes"},
	"short_length":    {proxy: 502, extproc: 502, prefix: "invalid response from inference server: malformed JSON"},
	"garbage_json":    {proxy: 502, extproc: 502, prefix: "invalid response from inference server: malformed JSON"},
	"empty_200":       {proxy: 502, extproc: 502, prefix: "invalid response from inference server: empty body"},
	"no_content":      {proxy: 502, extproc: 502, prefix: "invalid response from inference server: empty body"},
	"not_modified":    {proxy: 502, extproc: 502, prefix: "Not Modified"},
	"status_999":      {proxy: 502, extproc: 502, prefix: "HTTP status 999"},
	"html_error":      {proxy: 503, extproc: 503, prefix: "503 overloaded"},
	"meta_garbage":    {proxy: 502, extproc: 502, prefix: "invalid model metadata from inference server: "},
	"meta_close":      {proxy: 503, extproc: 503, prefix: "The v2 inference server is unavailable"},
	"meta_endless":    {proxy: 502, extproc: 502, prefix: "v2 inference server answer to GET /v2/models/meta_endless exceeds 1048576 bytes"}, // the body limit
	"meta_slow":       {proxy: 504, extproc: 504, prefix: "Timed out waiting for the v2 inference server"},
	"meta_500":        {proxy: 500, extproc: 500, prefix: "metadata exploded"},
	"meta_404":        {proxy: 404, extproc: 404, prefix: "Servable not found for request: Latest(meta_404)"},
}

// answerDeadline is how long any answer may take: one of the stack's
// timeouts, plus scheduling slack. The slack is generous (CI and developers
// run the suite on busy 2-core machines, where a burst of concurrent
// requests can take several seconds) and still catches what it is for: an
// exchange that hangs because a timeout never fires.
var answerDeadline = shortTimeout + 20*time.Second

// checkAnswer asserts one answer: the status, a TF error body for every
// failure, the prefix of its message, and the time it took.
func checkAnswer(t *testing.T, what string, a answer, status int, prefix string) {
	t.Helper()
	if a.elapsed > answerDeadline {
		t.Errorf("%s: answered after %v", what, a.elapsed)
	}
	if status == 0 {
		if a.err == nil {
			t.Errorf("%s: got %d %.200q, want the connection reset", what, a.status, a.body)
		}
		return
	}
	if a.err != nil {
		t.Errorf("%s: %v, want %d", what, a.err, status)
		return
	}
	if a.status != status {
		t.Errorf("%s: status %d (%.300q), want %d", what, a.status, a.body, status)
	}
	if status == 200 {
		if want := "{\n    \"predictions\": [2.5\n    ]\n}"; a.body != want {
			t.Errorf("%s: body %.300q, want %q", what, a.body, want)
		}
		return
	}
	msg, ok := tfErrorMessage(a.body)
	if !ok {
		t.Errorf("%s: body %.300q is not a TF error", what, a.body)
	}
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("%s: message %.300q, want it to start with %q", what, msg, prefix)
	}
}

// tfErrorMessage returns the message of a TF error body.
func tfErrorMessage(body string) (string, bool) {
	var e struct {
		Error *string `json:"error"`
	}
	if !isTFError(body) || json.Unmarshal([]byte(body), &e) != nil || e.Error == nil {
		return "", false
	}
	return *e.Error, true
}

// TestHostileUpstream sends a predict through both transports to a v2
// server that misbehaves in every way hostileAnswers lists: each gets a TF
// error with a sensible status within the deadline, and once everything
// is closed the goroutines are back to their baseline.
func TestHostileUpstream(t *testing.T) {
	base := runtime.NumGoroutine()
	h := startHostile(t)
	// The cases answered by a timeout run on a stack with short ones, so
	// the test stays short; the others on a patient one, so that a busy
	// machine cannot turn their answers into timeouts.
	quick := newStack(t, stackConfig{upstream: h.URL()})
	slow := newStack(t, patient(stackConfig{upstream: h.URL()}))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8) // parallel, but not all 70 at once on 2 cores
	for model, want := range upstreamWants {
		s := slow
		if want.proxy == 504 || want.extproc == 504 || want.orTimeout {
			s = quick
		}
		for _, via := range transports {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				a := s.post(via, "/v1/models/"+model+":predict", []byte(`{"instances":[1.0]}`))
				status := want.proxy
				envoy := throughEnvoy(via) && !(via == viaExtprocFD && want.bufferOnly)
				if envoy {
					status = want.extproc
				}
				if envoy && want.envoyOwn {
					// Or a reset, when the route timeout passes before the
					// buffer overflows (a slow machine, -race).
					if (a.err == nil && a.status != status) || a.elapsed > answerDeadline {
						t.Errorf("%s via %s: %d %v after %v, want Envoy's %d", model, via, a.status, a.err, a.elapsed, status)
					}
					if want.envoyBody != "" && (a.err != nil || a.body != want.envoyBody) {
						t.Errorf("%s via %s: %d %q %v, want Envoy's %q", model, via, a.status, a.body, a.err, want.envoyBody)
					}
					return
				}
				if want.orTimeout && a.status == 504 {
					status = 504
				}
				checkAnswer(t, model+" via "+via, a, status, want.prefix)
			}()
		}
	}
	wg.Wait()
	quick.close()
	slow.close()
	h.close()
	waitGoroutines(t, base+2, settleTimeout)
}

// mockBomb is a hostile TF request for a mockv2 model.
type mockBomb struct {
	name, model string
	body        []byte
	gzip        bool
}

func mockBombs() []mockBomb {
	deep := []byte(`{"instances":` + strings.Repeat("[", 100_000))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte(" "), 8<<20))
	_ = zw.Close()
	return []mockBomb{
		{name: "10^5 nested arrays", model: "half_plus_two", body: deep},
		{name: "1e999999", model: "half_plus_two", body: []byte(`{"instances":[1e999999]}`)},
		{name: "10^5-digit integer", model: "simple", body: []byte(`{"instances":[` + strings.Repeat("9", 100_000) + `]}`)},
		{name: "10^5 zero-size instances", model: "half_plus_two", body: []byte(`{"instances":` + list("[]", 100_000) + `}`)},
		{name: "8·10^4 empty b64 strings", model: "bytes_echo", body: []byte(`{"instances":` + list(`{"b64":""}`, 80_000) + `}`)},
		{name: "invalid UTF-8", model: "bytes_echo", body: []byte("{\"instances\":[\"\xff\xfe\"]}")},
		{name: "lone low surrogate", model: "bytes_echo", body: []byte(`{"instances":["\udc00"]}`)},
		{name: "lone high surrogate", model: "bytes_echo", body: []byte(`{"instances":["\ud800"]}`)},
		{name: "NUL ends the document", model: "half_plus_two", body: []byte("{\"instances\":[1.0]}\x00garbage")},
		{name: "BOM", model: "half_plus_two", body: []byte("\xef\xbb\xbf{\"instances\":[1.0]}")},
		{name: "duplicate keys", model: "half_plus_two", body: []byte(`{"instances":[1.0],"instances":"x"}`)},
		{name: "trailing garbage", model: "half_plus_two", body: []byte(`{"inputs":[1.0]}]]]}}}`)},
		{name: "null", model: "half_plus_two", body: []byte(`null`)},
		{name: "null instances", model: "half_plus_two", body: []byte(`{"instances":null}`)},
		{name: "null element", model: "simple", body: []byte(`{"instances":[{"INPUT0":null,"INPUT1":null}]}`)},
		{name: "empty body", model: "half_plus_two", body: nil},
		{name: "white space", model: "half_plus_two", body: bytes.Repeat([]byte(" "), 100_000)},
		{name: "ragged", model: "simple", body: []byte(`{"instances":[{"INPUT0":[1],"INPUT1":[1,2]}]}`)},
		{name: "unknown model", model: "no_such_model", body: []byte(`{"instances":[1.0]}`)},
		{name: "over the body limit", model: "half_plus_two", body: []byte(`{"instances":` + list("1.0", 300_000) + `}`)},
		{name: "gzip bomb", model: "half_plus_two", body: gz.Bytes(), gzip: true},
	}
}

// expectedVerdict is the pure pipeline's answer to a bomb: a TF error
// (status and exact body), or nil when TF Serving accepts the body and the
// v2 server's answer decides.
func expectedVerdict(t *testing.T, s *stack, b mockBomb) *apierr.Error {
	t.Helper()
	if len(b.body) > defaultTestMaxBody {
		return apierr.Errorf(apierr.PayloadTooLarge, "Request body exceeds the limit of %d bytes", defaultTestMaxBody)
	}
	if b.gzip {
		return apierr.Errorf(apierr.PayloadTooLarge, "Decompressed request body exceeds the limit of %d bytes", defaultTestMaxBody)
	}
	r, err := route.Parse("POST", "/v1/models/"+b.model+":predict")
	if err != nil {
		t.Fatal(err)
	}
	kind, err := s.backend.Kind(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(string) (*tensor.Signature, error) { return s.backend.Signature(context.Background(), r) }
	_, _, err = predictPipeline.Request(b.body, resolve, translate.RequestOptions{Kind: kind, Limits: s.cfg.limits})
	if err == nil {
		return nil
	}
	var e *apierr.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: the predict pipeline's Request error %v is not an *apierr.Error", b.name, err)
	}
	return e
}

// TestRequestBombsOverSockets sends the request bombs through both
// transports in front of mockv2 (as Triton, KServe and MLServer): the
// client gets exactly the pure pipeline's TF error, or an answer of the v2
// server, within the deadline.
func TestRequestBombsOverSockets(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, kind := range []string{"triton", "kserve", "mlserver"} {
		t.Run(kind, func(t *testing.T) {
			mock := startMock(t, kind)
			// Patient: mockv2 answers every bomb without delay, so no
			// answer may be a timeout's, however busy the machine.
			s := newStack(t, patient(stackConfig{upstream: mock.URL, kind: kind}))
			for _, b := range mockBombs() {
				want := expectedVerdict(t, s, b)
				for _, via := range transports {
					hdr := map[string]string{}
					if b.gzip {
						hdr["Content-Encoding"] = "gzip"
					}
					a := s.send(via, "POST", "/v1/models/"+b.model+":predict", b.body, hdr)
					what := b.name + " via " + via
					if a.elapsed > answerDeadline {
						t.Errorf("%s: answered after %v", what, a.elapsed)
					}
					if a.err != nil {
						t.Errorf("%s: %v", what, a.err)
						continue
					}
					if testing.Verbose() {
						t.Logf("%s: %d %.120q", what, a.status, a.body)
					}
					if want != nil {
						if wantBody := string(tfresponse.Error(nil, want.Msg)); a.status != want.HTTPStatus() || a.body != wantBody {
							t.Errorf("%s: %d %.300q, want %d %.300q", what, a.status, a.body, want.HTTPStatus(), wantBody)
						}
						continue
					}
					ok := a.status == 200 && (strings.HasPrefix(a.body, "{\n    \"predictions\": [") || strings.HasPrefix(a.body, "{\n    \"outputs\": "))
					if _, isErr := tfErrorMessage(a.body); !ok && !(a.status >= 400 && isErr) {
						t.Errorf("%s: %d %.300q is neither a prediction nor a TF error", what, a.status, a.body)
					}
				}
			}
			s.close()
			mock.Close()
		})
	}
	waitGoroutines(t, base+2, settleTimeout)
}

// send is post with a method and extra request headers; a
// "Transfer-Encoding: chunked" one sends the body without a length.
func (s *stack) send(via, method, path string, body []byte, hdr map[string]string) answer {
	start := time.Now()
	req, err := http.NewRequest(method, s.url(via)+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range hdr {
		if k == "Transfer-Encoding" && v == "chunked" {
			req.ContentLength = -1 // unknown: net/http sends chunks
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return answer{status: resp.StatusCode, body: string(b), elapsed: time.Since(start), err: err}
}

// TestHeapStaysFlat repeats 200 bad requests of every kind through both
// transports and checks that the live heap after a collection does not
// grow: nothing a bad request leaves behind survives it.
func TestHeapStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	if racebuild.Enabled {
		// The race runtime keeps shadow memory and drops pooled objects:
		// heap readings mean nothing there, and 100 MiB of requests take a
		// minute.
		t.Skip("heap measurement under -race")
	}
	h := startHostile(t)
	s := newStack(t, stackConfig{upstream: h.URL()})
	bad := []string{"garbage_headers", "ihcl_lie", "endless", "huge", "gzip_bomb", "zero_size_bomb", "close_mid_body",
		"meta_garbage", "meta_close", "no_content", "size_lie", "garbage_json"}
	bodies := [][]byte{[]byte(`{"instances":[1.0]}`), []byte(`{"instances":` + strings.Repeat("[", 5000)), []byte("\x00")}
	round := func(n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				via := transports[i%len(transports)]
				a := s.post(via, "/v1/models/"+bad[i%len(bad)]+":predict", bodies[i%len(bodies)])
				if a.err == nil && (a.status < 400 || a.elapsed > answerDeadline) {
					t.Errorf("request %d: %d after %v", i, a.status, a.elapsed)
				}
			}()
		}
		wg.Wait()
		s.dropIdle()
	}
	round(40) // warm pools, caches and connections
	before := heapInUse()
	round(200)
	after := settledHeap(before+4<<20, settleTimeout, s.dropIdle)
	t.Logf("live heap %d KiB before, %d KiB after 200 bad requests", before>>10, after>>10)
	// The body limit is 1 MiB and pooled buffers are dropped by the
	// collections: anything kept per request would show as megabytes.
	if after > before+4<<20 {
		t.Errorf("live heap grew from %d to %d bytes across 200 bad requests", before, after)
	}

	// 200 requests for distinct models with 512 KiB names (a request line
	// may hold 1 MiB), which this v2 server confirms and then fails to
	// run: nothing may keep them. Regressions: the metadata cache kept each
	// name twice (key and error text) until 1024 entries accumulated, and
	// the metrics kept 100 of them as label values, each pinning its whole
	// request line. 200 names are 100 MiB; the bound leaves room for the
	// few recent requests Go's HTTP clients still reference (about one per
	// concurrent connection: 8 here, 4 MiB).
	// Its own stack with generous timeouts: this part measures memory, and
	// on a busy machine eight concurrent 512 KiB metadata round trips can
	// take longer than the short timeouts the first part relies on.
	s.close() // nothing of the first part's stack lingers into this one's measurement
	s = newStack(t, stackConfig{upstream: h.URL(), backendTimeout: 30 * time.Second, requestTimeout: 30 * time.Second,
		readTimeout: 30 * time.Second, readHeader: 30 * time.Second})
	long := strings.Repeat("m", 512<<10)
	for i := range 8 { // warm the new stack's pools and connections
		s.post(viaProxy, "/v1/models/w"+strconv.Itoa(i)+long+":predict", []byte(`{"instances":[1.0]}`))
	}
	idle := stableGoroutines(s.dropIdle) // closed connections' goroutines have ended
	before = heapInUse()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 200 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			a := s.post(viaProxy, "/v1/models/"+strconv.Itoa(i)+long+":predict", []byte(`{"instances":[1.0]}`))
			if a.err != nil || a.status != 404 {
				t.Errorf("unknown model %d: %d %v", i, a.status, a.err)
			}
		}()
	}
	wg.Wait()
	waitGoroutines(t, idle, settleTimeout, s.dropIdle) // closed connections have let go
	after = settledHeap(before+16<<20, settleTimeout, s.dropIdle)
	t.Logf("live heap %d KiB before, %d KiB after 200 long model names", before>>10, after>>10)
	if after > before+16<<20 {
		t.Errorf("live heap grew from %d to %d bytes across 200 unknown long model names", before, after)
	}
}
