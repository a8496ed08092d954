package session

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/translate/oip"
	"github.com/tfsbridge/tfsbridge/translate/route"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

// hdr is a HeaderGetter for tests.
type hdr map[string]string

func (h hdr) Get(k string) string { return h[strings.ToLower(k)] }

// halfPlusTwo has a version that is not ready, for the status tests.
var halfPlusTwo = func() fakev2.Model {
	m := fakev2.HalfPlusTwo("1", "2", "10")
	m.NotReady = []string{"2"}
	return m
}()

var slashModel = fakev2.Model{
	Name:     "a/b",
	Versions: []string{"1"},
	Inputs:   []fakev2.Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}},
	Outputs:  []fakev2.Tensor{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}},
}

// env is one fake v2 server with a session config in front of it.
type env struct {
	srv     *fakev2.Server
	be      *backend.Client
	cfg     *Config
	metrics *observe.Metrics
}

func newEnv(t testing.TB, kind string, models ...fakev2.Model) *env {
	t.Helper()
	if models == nil {
		models = []fakev2.Model{halfPlusTwo, slashModel}
	}
	srv := fakev2.New(t, kind, models...)
	be, err := backend.New(backend.Config{BaseURL: srv.URL, Kind: kind, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := observe.NewMetrics()
	return &env{srv: srv, be: be, metrics: m, cfg: &Config{Backend: be, MaxBodyBytes: 1 << 20, Metrics: m}}
}

func tfError(msg string) string { return string(tfresponse.Error(nil, msg)) }

// notPassed is the body of a request the default pass-through policy
// refuses.
func notPassed(method, path string) string {
	return tfError("Not found: " + method + " " + path + " is not a TF Serving REST call or a v2 inference call")
}

// checkRespond asserts a Respond action with a TF JSON body.
func checkRespond(t *testing.T, a Action, status int, body string) {
	t.Helper()
	if a.Verdict != Respond || a.Status != status {
		t.Fatalf("action = %v %d (%s), want respond %d", a.Verdict, a.Status, a.Body, status)
	}
	if string(a.Body) != body {
		t.Errorf("body = %q, want %q", a.Body, body)
	}
	if ct, _ := a.Get("content-type"); body != "" && ct != "application/json" {
		t.Errorf("content-type = %q, want application/json", ct)
	}
}

func TestRequestHeaders(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		path    string
		headers hdr
		eos     bool
		policy  Passthrough
		verdict Verdict
		status  int
		body    string // Respond body
		path2   string // Continue: the rewritten :path
	}{
		{name: "v2 path passes", method: "POST", path: "/v2/models/m/infer", verdict: PassThrough},
		{name: "v2 health passes", method: "GET", path: "/v2/health/ready", verdict: PassThrough},
		{name: "v2 model ready passes", method: "GET", path: "/v2/models/m/versions/1/ready", verdict: PassThrough},
		{name: "other health refused", method: "GET", path: "/healthz", verdict: Respond, status: 404,
			body: notPassed("GET", "/healthz")},
		{name: "options elsewhere refused", method: "OPTIONS", path: "/v2", verdict: Respond, status: 404,
			body: notPassed("OPTIONS", "/v2")},
		{name: "triton unload refused", method: "POST", path: "/v2/repository/models/m/unload", verdict: Respond, status: 404,
			body: notPassed("POST", "/v2/repository/models/m/unload")},
		{name: "triton config refused", method: "GET", path: "/v2/models/m/config", verdict: Respond, status: 404,
			body: notPassed("GET", "/v2/models/m/config")},
		{name: "dot segments refused", method: "GET", path: "/v2/models/../repository/index", verdict: Respond, status: 404,
			body: notPassed("GET", "/v2/models/../repository/index")},
		{name: "policy none", method: "POST", path: "/v2/models/m/infer", policy: PassthroughNone, verdict: Respond, status: 404,
			body: tfError("Not found: POST /v2/models/m/infer is not a TF Serving REST call")},
		{name: "policy all", method: "POST", path: "/v2/repository/models/m/unload", policy: PassthroughAll, verdict: PassThrough},
		{name: "policy all, options", method: "OPTIONS", path: "/metrics", policy: PassthroughAll, verdict: PassThrough},
		{name: "policy none, still TF", method: "GET", path: "/v1/models", policy: PassthroughNone, verdict: Respond, status: 400,
			body: tfError("Missing model name in request.")},
		{name: "status of model ..", method: "GET", path: "/v1/models/..", verdict: Respond, status: 404,
			body: tfError("Could not find any versions of model ..")},
		{name: "status of model %2E%2E version", method: "GET", path: "/v1/models/%2E%2E/versions/3", verdict: Respond, status: 404,
			body: tfError("Could not find version 3 of model ..")},
		{name: "metadata of model %2e", method: "GET", path: "/v1/models/%2e/metadata", verdict: Respond, status: 404,
			body: tfError("Servable not found for request: Latest(.)")},
		{name: "predict model ..", method: "POST", path: "/v1/models/%2E%2E:predict", eos: true,
			verdict: Respond, status: 400, body: tfError("JSON Parse error: The document is empty")},
		{name: "malformed verb case", method: "POST", path: "/v1/models/m:PREDICT", verdict: Respond, status: 400,
			body: tfError("Malformed request: POST /v1/models/m:PREDICT")},
		{name: "query on predict", method: "POST", path: "/v1/models/m:predict?x=1", verdict: Respond, status: 400,
			body: tfError("Malformed request: POST /v1/models/m:predict?x=1")},
		{name: "missing model name", method: "GET", path: "/v1/models", verdict: Respond, status: 400,
			body: tfError("Missing model name in request.")},
		{name: "put", method: "PUT", path: "/v1/models/m", verdict: Respond, status: 400,
			body: tfError("Malformed request: PUT /v1/models/m")},
		{name: "classify", method: "POST", path: "/v1/models/half_plus_two:classify", verdict: Continue,
			path2: "/v2/models/half_plus_two/infer"},
		{name: "regress", method: "POST", path: "/v1/models/half_plus_two/versions/2:regress", verdict: Continue,
			path2: "/v2/models/half_plus_two/versions/2/infer"},
		{name: "preflight with origin", method: "OPTIONS", path: "/v1/models/m:predict",
			headers: hdr{"origin": "https://app.example"}, verdict: Respond, status: 200},
		{name: "preflight without origin", method: "OPTIONS", path: "/v1/models/m:predict", verdict: Respond, status: 400},
		{name: "predict", method: "POST", path: "/v1/models/half_plus_two:predict", verdict: Continue,
			path2: "/v2/models/half_plus_two/infer"},
		{name: "predict upper-case path", method: "POST", path: "/V1/MODELS/half_plus_two:predict", verdict: Continue,
			path2: "/v2/models/half_plus_two/infer"},
		{name: "predict version", method: "POST", path: "/v1/models/half_plus_two/versions/2:predict", verdict: Continue,
			path2: "/v2/models/half_plus_two/versions/2/infer"},
		{name: "predict escaped name", method: "POST", path: "/v1/models/a%2Fb:predict", verdict: Continue,
			path2: "/v2/models/a%2Fb/infer"},
		// Even for an unknown model: JSON errors come first, so the
		// model lookup's error waits for the body.
		{name: "predict unknown model", method: "POST", path: "/v1/models/nope:predict", verdict: Continue,
			path2: "/v2/models/nope/infer"},
		{name: "predict without body", method: "POST", path: "/v1/models/half_plus_two:predict", eos: true,
			verdict: Respond, status: 400, body: tfError("JSON Parse error: The document is empty")},
		{name: "predict without body, unknown model", method: "POST", path: "/v1/models/nope:predict", eos: true,
			verdict: Respond, status: 400, body: tfError("JSON Parse error: The document is empty")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			e.cfg.Passthrough = tt.policy
			s := New(e.cfg)
			defer s.Close()
			h := tt.headers
			if h == nil {
				h = hdr{}
			}
			a := s.RequestHeaders(context.Background(), tt.method, tt.path, h, tt.eos)
			if a.Verdict != tt.verdict {
				t.Fatalf("verdict = %v (%d %s), want %v", a.Verdict, a.Status, a.Body, tt.verdict)
			}
			switch tt.verdict {
			case Respond:
				if a.Status != tt.status || string(a.Body) != tt.body {
					t.Errorf("respond %d %q, want %d %q", a.Status, a.Body, tt.status, tt.body)
				}
			case Continue:
				if p, _ := a.Get(":path"); p != tt.path2 || len(a.Set) != 1 || a.ReplaceBody {
					t.Errorf("continue %+v, want only :path=%s", a, tt.path2)
				}
			case PassThrough:
				if len(a.Set)+len(a.Remove) != 0 || a.ReplaceBody {
					t.Errorf("pass-through carries changes: %+v", a)
				}
			}
			if s.RequestID() == "" {
				t.Error("no request id")
			}
		})
	}
}

func TestRequestIDFromHeader(t *testing.T) {
	e := newEnv(t, "triton")
	s := New(e.cfg)
	s.RequestHeaders(context.Background(), "GET", "/x", hdr{"x-request-id": "abc-123"}, true)
	if s.RequestID() != "abc-123" {
		t.Errorf("RequestID = %q, want the x-request-id", s.RequestID())
	}
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func TestRequestBody(t *testing.T) {
	row := []byte(`{"instances": [1.0, 2.0, 5.0]}`)
	bomb := gz(t, bytes.Repeat([]byte(" "), 2<<20))
	tests := []struct {
		name     string
		kind     string
		path     string
		encoding string
		body     []byte
		status   int    // 0: Continue expected
		msg      string // TF error message ("" = do not check)
	}{
		{name: "triton binary", kind: "triton", path: "/v1/models/half_plus_two:predict", body: row},
		{name: "kserve binary", kind: "kserve", path: "/v1/models/half_plus_two:predict", body: row},
		{name: "mlserver json", kind: "mlserver", path: "/v1/models/half_plus_two:predict", body: row},
		{name: "columnar", kind: "triton", path: "/v1/models/half_plus_two:predict", body: []byte(`{"inputs": [1.0]}`)},
		{name: "default signature by name", kind: "triton", path: "/v1/models/half_plus_two:predict",
			body: []byte(`{"signature_name": "serving_default", "instances": [1.0]}`)},
		{name: "gzip", kind: "triton", path: "/v1/models/half_plus_two:predict", encoding: "gzip", body: gz(t, row)},
		{name: "gzip among encodings", kind: "triton", path: "/v1/models/half_plus_two:predict", encoding: "x-gzip", body: gz(t, row)},
		{name: "corrupt gzip is an empty body", kind: "triton", path: "/v1/models/half_plus_two:predict", encoding: "gzip",
			body: []byte("not gzip"), status: 400, msg: "JSON Parse error: The document is empty"},
		{name: "deflate is not decoded", kind: "triton", path: "/v1/models/half_plus_two:predict", encoding: "deflate",
			body: []byte("x"), status: 400, msg: "JSON Parse error: Invalid value. at offset: 0"},
		{name: "gzip bomb", kind: "triton", path: "/v1/models/half_plus_two:predict", encoding: "gzip", body: bomb,
			status: 413, msg: "Decompressed request body exceeds the limit of 1048576 bytes"},
		{name: "too large", kind: "triton", path: "/v1/models/half_plus_two:predict", body: make([]byte, 1<<20+1),
			status: 413, msg: "Request body exceeds the limit of 1048576 bytes"},
		{name: "syntax before unknown model", kind: "triton", path: "/v1/models/nope:predict", body: []byte("x"),
			status: 400, msg: "JSON Parse error: Invalid value. at offset: 0"},
		{name: "unknown model", kind: "triton", path: "/v1/models/nope:predict", body: row,
			status: 404, msg: "Servable not found for request: Latest(nope)"},
		{name: "unknown version", kind: "triton", path: "/v1/models/half_plus_two/versions/7:predict", body: row,
			status: 404, msg: "Servable not found for request: Specific(half_plus_two, 7)"},
		{name: "syntax before label", kind: "triton", path: "/v1/models/half_plus_two/labels/stable:predict",
			body: []byte("[1"), status: 400},
		{name: "label", kind: "triton", path: "/v1/models/half_plus_two/labels/stable:predict", body: row,
			status: 400, msg: "Unrecognized servable version label: stable"},
		{name: "unknown signature", kind: "triton", path: "/v1/models/half_plus_two:predict",
			body:   []byte(`{"signature_name": "foo", "instances": [1.0]}`),
			status: 400, msg: `Serving signature name: "foo" not found in signature def`},
		{name: "wrong type", kind: "triton", path: "/v1/models/half_plus_two:predict",
			body: []byte(`{"instances": ["a"]}`), status: 400},
		{name: "no keys", kind: "triton", path: "/v1/models/half_plus_two:predict",
			body: []byte(`{}`), status: 400, msg: "Missing 'inputs' or 'instances' key"},
	}
	for _, tt := range tests {
		// Whole (buffered) and streamed in chunks of several sizes: the
		// same answer and, streamed, the same bytes upstream.
		for _, chunk := range []int{0, 1, 7, 1 << 20} {
			t.Run(tt.name+"/"+chunkName(chunk), func(t *testing.T) {
				if chunk == 1 && len(tt.body) > 4096 {
					t.Skip("byte by byte is for the small bodies")
				}
				e := newEnv(t, tt.kind)
				s := New(e.cfg)
				defer s.Close()
				ctx := context.Background()
				h := hdr{"content-encoding": tt.encoding, "x-request-id": "r-1"}
				if a := s.RequestHeaders(ctx, "POST", tt.path, h, false); a.Verdict != Continue {
					t.Fatalf("headers: %v %s", a.Verdict, a.Body)
				}
				var a Action
				if chunk == 0 {
					a = s.bufferedRequest(ctx, tt.body)
				} else {
					a = streamRequest(t, s, tt.body, chunk)
				}
				checkRequestBody(t, a, tt.kind, tt.encoding != "", tt.status, tt.msg)
				if chunk != 0 && tt.status == 0 {
					whole := New(e.cfg)
					defer whole.Close()
					whole.RequestHeaders(ctx, "POST", tt.path, h, false)
					if w := whole.bufferedRequest(ctx, tt.body); !bytes.Equal(w.Body, a.Body) || !slices.Equal(w.Set, a.Set) {
						t.Errorf("streamed %v %q\nwhole %v %q", a.Set, a.Body, w.Set, w.Body)
					}
				}
			})
		}
	}
}

func chunkName(n int) string {
	switch n {
	case 0:
		return "whole"
	case partsChunk:
		return "parts"
	}
	return strconv.Itoa(n)
}

// recordSink is a Sink that records what a streamed exchange sends.
type recordSink struct {
	headers []Action
	body    []byte
	ends    int
	pieces  int
}

func (r *recordSink) Headers(a Action) error { r.headers = append(r.headers, a); return nil }

func (r *recordSink) Body(p []byte, end bool) error {
	if len(p) > MaxPiece {
		return fmt.Errorf("piece of %d bytes", len(p))
	}
	if len(r.headers) != 1 || r.ends > 0 {
		return fmt.Errorf("body piece after %d headers and %d ends", len(r.headers), r.ends)
	}
	r.body = append(r.body, p...)
	r.pieces++
	if end {
		r.ends++
	}
	return nil
}

// streamRequest feeds body to s in chunks of n bytes and returns what it
// sent as the equivalent buffered action (Continue with the body), or
// the Respond it answered.
func streamRequest(t *testing.T, s *Session, body []byte, n int) Action {
	t.Helper()
	return streamBody(t, s.RequestChunk, body, n)
}

// streamBody is streamRequest for either direction's event.
func streamBody(t *testing.T, event func(context.Context, []byte, bool, Sink) Action, body []byte, n int) Action {
	t.Helper()
	ctx := context.Background()
	var rec recordSink
	for i := 0; ; i += n {
		end := i+n >= len(body)
		a := event(ctx, body[min(i, len(body)):min(i+n, len(body))], end, &rec)
		if a.Verdict == Pending && !end {
			continue
		}
		if a.Verdict != Continue {
			return a
		}
		if len(rec.headers) != 1 || rec.ends != 1 {
			t.Fatalf("sent %d headers, %d ends", len(rec.headers), rec.ends)
		}
		out := rec.headers[0]
		out.Body, out.ReplaceBody = rec.body, true
		return out
	}
}

// checkRequestBody asserts a request body's action: an error (status) or
// a translated request.
func checkRequestBody(t *testing.T, a Action, kind string, encoded bool, status int, msg string) {
	t.Helper()
	if status == 0 {
		checkV2Request(t, a, kind, encoded)
		return
	}
	if a.Verdict != Respond || a.Status != status {
		t.Fatalf("action = %v %d %s, want respond %d", a.Verdict, a.Status, a.Body, status)
	}
	if msg != "" {
		checkRespond(t, a, status, tfError(msg))
	}
}

// checkV2Request asserts a translated request body and its headers.
func checkV2Request(t *testing.T, a Action, kind string, encoded bool) {
	t.Helper()
	if a.Verdict != Continue || !a.ReplaceBody {
		t.Fatalf("action = %v %d %s, want continue with a body", a.Verdict, a.Status, a.Body)
	}
	if cl, _ := a.Get("content-length"); cl != strconv.Itoa(len(a.Body)) {
		t.Errorf("content-length = %q, body is %d bytes", cl, len(a.Body))
	}
	if ae, _ := a.Get("accept-encoding"); ae != "identity" {
		t.Errorf("accept-encoding = %q, want identity", ae)
	}
	if slices.Contains(a.Remove, "content-encoding") != encoded {
		t.Errorf("remove = %v; content-encoding removed should be %v", a.Remove, encoded)
	}
	ct, _ := a.Get("content-type")
	ihcl, hasIHCL := a.Get("inference-header-content-length")
	if kind == "mlserver" {
		if hasIHCL || !slices.Contains(a.Remove, "inference-header-content-length") || ct != "application/json" {
			t.Errorf("mlserver: ihcl %q (%v), remove %v, content-type %q; want JSON only", ihcl, hasIHCL, a.Remove, ct)
		}
		if !json.Valid(a.Body) {
			t.Errorf("mlserver body is not JSON: %s", a.Body)
		}
		return
	}
	n, err := strconv.Atoi(ihcl)
	if err != nil || n <= 0 || n > len(a.Body) {
		t.Fatalf("inference-header-content-length = %q for a %d-byte body", ihcl, len(a.Body))
	}
	if !json.Valid(a.Body[:n]) || !bytes.Contains(a.Body[:n], []byte(`"binary_data_size"`)) {
		t.Errorf("binary header is not the v2 JSON header: %s", a.Body[:n])
	}
	if ct == "" || ct == "application/json" {
		t.Errorf("binary body sent as %q", ct)
	}
}

// predictSession returns a session that has translated a row-format
// request for half_plus_two.
func predictSession(t *testing.T, e *env, body string) *Session {
	t.Helper()
	s := New(e.cfg)
	t.Cleanup(s.Close)
	ctx := context.Background()
	s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
	if a := s.bufferedRequest(ctx, []byte(body)); a.Verdict != Continue {
		t.Fatalf("request body: %v %d %s", a.Verdict, a.Status, a.Body)
	}
	return s
}

func f32le(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestResponse(t *testing.T) {
	const want = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	jsonOK := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`
	binHeader := `{"model_name":"half_plus_two","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	binOK := append([]byte(binHeader), f32le(2.5, 3, 4.5)...)
	detail := `{"detail":[{"loc":["body","inputs",0,"datatype"],"msg":"Input should be 'BOOL'","type":"enum"}]}`
	tests := []struct {
		name    string
		status  int
		headers hdr
		body    []byte
		eos     bool
		// want: Continue with body (status 0), or Respond status+body
		wantStatus int
		wantBody   string
		removeCE   bool
	}{
		{name: "json 200", status: 200, headers: hdr{"content-type": "application/json"}, body: []byte(jsonOK), wantBody: want},
		{name: "binary 200", status: 200,
			headers: hdr{"content-type": "application/octet-stream", "inference-header-content-length": strconv.Itoa(len(binHeader))},
			body:    binOK, wantBody: want},
		{name: "gzip 200", status: 200, headers: hdr{"content-type": "application/json", "content-encoding": "gzip"},
			body: gz(t, []byte(jsonOK)), wantBody: want, removeCE: true},
		{name: "201 becomes 200", status: 201, body: []byte(jsonOK), wantStatus: 200, wantBody: want},
		{name: "triton 400", status: 400, headers: hdr{"content-type": "application/json"},
			body:       []byte(`{"error":"[request id: <id_unknown>] input byte size mismatch for input 'x' for model 'half_plus_two'. Expected 12, got 8"}`),
			wantStatus: 400, wantBody: tfError("[request id: <id_unknown>] input byte size mismatch for input 'x' for model 'half_plus_two'. Expected 12, got 8")},
		{name: "404 is TF's not found", status: 404, body: []byte(`{"error":"Request for unknown model: 'half_plus_two' is not found"}`),
			wantStatus: 404, wantBody: tfError("Servable not found for request: Latest(half_plus_two)")},
		{name: "422 becomes 400", status: 422, headers: hdr{"content-type": "application/json"}, body: []byte(detail),
			wantStatus: 400, wantBody: tfError(oip.DecodeError(422, "application/json", []byte(detail)))},
		{name: "plain 500", status: 500, headers: hdr{"content-type": "text/plain"}, body: []byte("Internal Server Error"),
			wantStatus: 500, wantBody: tfError("Internal Server Error")},
		{name: "503", status: 503, body: []byte(`{"error":"Server not ready"}`), wantStatus: 503, wantBody: tfError("Server not ready")},
		// Envoy's router replies itself when it cannot reach the v2
		// server or the route timeout passes: the client gets the
		// reverse proxy's TF error for the same failure.
		{name: "envoy connect failure", status: 503, headers: hdr{"content-type": "text/plain"},
			body:       []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure"),
			wantStatus: 503, wantBody: tfError(oip.MsgUnavailable)},
		{name: "envoy no healthy upstream", status: 503, headers: hdr{"content-type": "text/plain"},
			body: []byte("no healthy upstream"), wantStatus: 503, wantBody: tfError(oip.MsgUnavailable)},
		{name: "envoy route timeout", status: 504, headers: hdr{"content-type": "text/plain"},
			body: []byte("upstream request timeout"), wantStatus: 504, wantBody: tfError(oip.MsgTimeout)},
		{name: "empty 504", status: 504, wantStatus: 504, wantBody: tfError(oip.MsgTimeout)},
		// A v2 server's own JSON error keeps its message, and another
		// gateway's text is relayed.
		{name: "v2 504", status: 504, body: []byte(`{"error":"model timed out"}`), wantStatus: 504, wantBody: tfError("model timed out")},
		{name: "html 503", status: 503, headers: hdr{"content-type": "text/html"}, body: []byte("<h1>overloaded</h1>"),
			wantStatus: 503, wantBody: tfError("overloaded")},
		{name: "garbage 200", status: 200, body: []byte("<html>"), wantStatus: 502},
		{name: "empty 200 at headers", status: 200, eos: true, wantStatus: 502},
		{name: "bad ihcl", status: 200, headers: hdr{"inference-header-content-length": "abc"}, body: binOK, wantStatus: 502},
		{name: "unknown encoding", status: 200, headers: hdr{"content-encoding": "br"}, body: []byte(jsonOK), wantStatus: 502},
		{name: "too large", status: 200, body: make([]byte, 1<<20+1), wantStatus: 502,
			wantBody: tfError("Response body exceeds the limit of 1048576 bytes")},
	}
	for _, tt := range tests {
		for _, chunk := range []int{0, partsChunk, 1, 5, 1 << 20} {
			t.Run(tt.name+"/"+chunkName(chunk), func(t *testing.T) {
				if chunk == 1 && len(tt.body) > 4096 {
					t.Skip("byte by byte is for the small bodies")
				}
				e := newEnv(t, "triton")
				s := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
				h := tt.headers
				if h == nil {
					h = hdr{}
				}
				ctx := context.Background()
				a := s.ResponseHeaders(ctx, tt.status, h, tt.eos)
				if !tt.eos {
					if a.Verdict != Continue || len(a.Set)+len(a.Remove) != 0 {
						t.Fatalf("response headers: %+v, want a bare continue", a)
					}
					switch chunk {
					case 0:
						a = s.bufferedResponse(ctx, tt.body)
					case partsChunk:
						a = s.partsResponse(ctx, t, tt.body)
					default:
						a = streamBody(t, s.ResponseChunk, tt.body, chunk)
					}
				}
				if tt.wantStatus == 0 {
					if a.Verdict != Continue || !a.ReplaceBody || string(a.Body) != tt.wantBody {
						t.Fatalf("action = %v %d %q, want continue with %q", a.Verdict, a.Status, a.Body, tt.wantBody)
					}
					if ct, _ := a.Get("content-type"); ct != "application/json" {
						t.Errorf("content-type = %q", ct)
					}
					if cl, _ := a.Get("content-length"); cl != strconv.Itoa(len(a.Body)) {
						t.Errorf("content-length = %q, body %d bytes", cl, len(a.Body))
					}
					if !slices.Contains(a.Remove, "inference-header-content-length") {
						t.Errorf("remove = %v, want inference-header-content-length", a.Remove)
					}
					if slices.Contains(a.Remove, "content-encoding") != tt.removeCE {
						t.Errorf("remove = %v, content-encoding removal should be %v", a.Remove, tt.removeCE)
					}
					return
				}
				if a.Verdict != Respond || a.Status != tt.wantStatus {
					t.Fatalf("action = %v %d %s, want respond %d", a.Verdict, a.Status, a.Body, tt.wantStatus)
				}
				if tt.wantBody != "" {
					checkRespond(t, a, tt.wantStatus, tt.wantBody)
				}
			})
		}
	}
}

// A response whose declared length is over the limit is refused at its
// headers with the TF error, before any of it is buffered. Regression:
// behind Envoy such an answer reached the client as Envoy's own bare 500
// (its response buffer overflowed) instead of a TF 502.
func TestResponseDeclaredTooLarge(t *testing.T) {
	e := newEnv(t, "triton")
	s := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
	a := s.ResponseHeaders(context.Background(), 500, hdr{"content-length": strconv.Itoa(1<<20 + 1)}, false)
	checkRespond(t, a, 502, tfError("Response body exceeds the limit of 1048576 bytes"))
	if s.AwaitingBody() {
		t.Error("the session still awaits the response body")
	}
}

func TestColumnarResponse(t *testing.T) {
	e := newEnv(t, "triton")
	s := predictSession(t, e, `{"inputs": [1.0, 2.0]}`)
	ctx := context.Background()
	s.ResponseHeaders(ctx, 200, hdr{}, false)
	a := s.bufferedResponse(ctx, []byte(`{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[2.5,3.0]}]}`))
	want := "{\n    \"outputs\": [\n        2.5,\n        3.0\n    ]\n}"
	if a.Verdict != Continue || string(a.Body) != want {
		t.Errorf("columnar response = %v %q, want %q", a.Verdict, a.Body, want)
	}
}

func TestStreamOrderAndPassThrough(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()

	// A stream that starts at the response headers is another filter's
	// local reply: untouched.
	s := New(e.cfg)
	if a := s.ResponseHeaders(ctx, 413, hdr{}, false); a.Verdict != PassThrough {
		t.Errorf("response headers first: %v, want pass-through", a.Verdict)
	}
	// A body the session does not translate is answered PassThrough
	// (forward it unchanged), whole or streamed alike.
	if a := s.bufferedResponse(ctx, []byte("Payload Too Large")); a.Verdict != PassThrough || a.ReplaceBody || len(a.Set) != 0 {
		t.Errorf("its body: %+v, want pass-through", a)
	}
	var rec recordSink
	if a := s.ResponseChunk(ctx, []byte("Payload"), false, &rec); a.Verdict != PassThrough || len(rec.headers) != 0 {
		t.Errorf("its body streamed: %+v, want pass-through", a)
	}
	s.Close()

	// A pass-through exchange ignores every later event.
	s = New(e.cfg)
	s.RequestHeaders(ctx, "POST", "/v2/models/half_plus_two/infer", hdr{}, false)
	for _, a := range []Action{
		s.bufferedRequest(ctx, []byte("{}")),
		s.ResponseHeaders(ctx, 200, hdr{}, false),
		s.bufferedResponse(ctx, []byte("{}")),
	} {
		if a.ReplaceBody || len(a.Set)+len(a.Remove) != 0 || a.Verdict == Respond {
			t.Errorf("pass-through event changed something: %+v", a)
		}
	}
	s.Close()

}

// A response that arrives while a predict's request body is awaited is
// Envoy's own reply (the request never left it): an error status becomes
// the TF error the reverse proxy gives in the same situation.
func TestLocalReplyBeforeRequestBody(t *testing.T) {
	e := newEnv(t, "triton")
	for _, tt := range []struct {
		name   string
		status int
		want   string // "" means pass-through
		code   int
	}{
		{name: "buffer limit", status: 413, code: 413, want: tfError("Request body exceeds the limit of 1048576 bytes")},
		{name: "request timeout", status: 408, code: 400, want: tfError("Timed out reading the request body")},
		{name: "overload", status: 503, code: 503, want: tfError("Service Unavailable")},
		{name: "odd status", status: 599, code: 500, want: tfError("HTTP status 599")},
		{name: "not an error", status: 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := New(e.cfg)
			defer s.Close()
			s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{}, false)
			a := s.ResponseHeaders(ctx, tt.status, hdr{"content-type": "text/plain"}, false)
			if tt.want == "" {
				if a.Verdict != PassThrough || s.AwaitingBody() {
					t.Errorf("%d before the request body: %+v, want pass-through", tt.status, a)
				}
				return
			}
			checkRespond(t, a, tt.code, tt.want)
			if s.AwaitingBody() {
				t.Error("the session still awaits a body")
			}
		})
	}
}

// A predict whose declared content-length is over the limit is refused at
// its headers, so that Envoy never buffers it (and the gRPC message that
// would carry it never exists); at the limit it goes on.
func TestRequestDeclaredTooLarge(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()
	for _, tt := range []struct {
		cl   string
		want Verdict
	}{
		{cl: "1048577", want: Respond},
		{cl: "99999999999999999999", want: Continue}, // unparsable: the body decides
		{cl: "1048576", want: Continue},
	} {
		s := New(e.cfg)
		a := s.RequestHeaders(ctx, "POST", "/v1/models/half_plus_two:predict", hdr{"content-length": tt.cl}, false)
		if a.Verdict != tt.want {
			t.Errorf("content-length %s: %v, want %v", tt.cl, a.Verdict, tt.want)
		}
		if tt.want == Respond {
			checkRespond(t, a, 413, tfError("Request body exceeds the limit of 1048576 bytes"))
		}
		s.Close()
	}
}

func TestStatus(t *testing.T) {
	vs := func(pairs ...string) string {
		var out []tfresponse.VersionStatus
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, tfresponse.VersionStatus{Version: pairs[i], State: pairs[i+1], ErrorCode: "OK"})
		}
		return string(tfresponse.Status(nil, out))
	}
	noVersions := fakev2.Model{Name: "kmodel", Inputs: halfPlusTwo.Inputs, Outputs: halfPlusTwo.Outputs}
	tests := []struct {
		name   string
		kind   string
		path   string
		status int
		body   string
	}{
		{"all versions, descending", "triton", "/v1/models/half_plus_two", 200,
			vs("10", "AVAILABLE", "2", "LOADING", "1", "AVAILABLE")},
		{"one version", "triton", "/v1/models/half_plus_two/versions/2", 200, vs("2", "LOADING")},
		{"label ignored", "triton", "/v1/models/half_plus_two/labels/whatever", 200,
			vs("10", "AVAILABLE", "2", "LOADING", "1", "AVAILABLE")},
		{"unknown model", "triton", "/v1/models/nope", 404, tfError("Could not find any versions of model nope")},
		{"unknown version", "triton", "/v1/models/half_plus_two/versions/7", 404,
			tfError("Could not find version 7 of model half_plus_two")},
		{"no versions listed", "kserve", "/v1/models/kmodel", 200, vs("0", "AVAILABLE")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.kind, halfPlusTwo, noVersions)
			s := New(e.cfg)
			defer s.Close()
			a := s.RequestHeaders(context.Background(), "GET", tt.path, hdr{}, true)
			checkRespond(t, a, tt.status, tt.body)
		})
	}
}

func TestStatusReadyCallsAreBounded(t *testing.T) {
	m := halfPlusTwo
	m.NotReady = nil
	m.Versions = nil
	for i := 1; i <= 40; i++ {
		m.Versions = append(m.Versions, strconv.Itoa(i))
	}
	e := newEnv(t, "triton", m)
	s := New(e.cfg)
	defer s.Close()
	a := s.RequestHeaders(context.Background(), "GET", "/v1/models/half_plus_two", hdr{}, true)
	if a.Status != 200 {
		t.Fatalf("status = %d %s", a.Status, a.Body)
	}
	calls := e.srv.Hits("/v2/models/half_plus_two/ready")
	for i := 1; i <= 40; i++ {
		calls += e.srv.Hits("/v2/models/half_plus_two/versions/" + strconv.Itoa(i) + "/ready")
	}
	if calls != maxReadyChecks+1 {
		t.Errorf("readiness calls = %d, want %d", calls, maxReadyChecks+1)
	}
	if !strings.Contains(string(a.Body), `"version": "40"`) || strings.Contains(string(a.Body), "LOADING") {
		t.Errorf("body does not list 40 available versions: %s", a.Body)
	}
}

func TestMetadata(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()
	sig, err := e.be.Signature(ctx, route.Route{Model: "half_plus_two"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		status int
		body   string
	}{
		{"latest is the highest version", "/v1/models/half_plus_two/metadata", 200, string(tfresponse.Metadata(nil, sig, "10"))},
		{"versioned", "/v1/models/half_plus_two/versions/2/metadata", 200, string(tfresponse.Metadata(nil, sig, "2"))},
		{"unknown model", "/v1/models/nope/metadata", 404, tfError("Servable not found for request: Latest(nope)")},
		{"unknown version", "/v1/models/half_plus_two/versions/9/metadata", 404,
			tfError("Servable not found for request: Specific(half_plus_two, 9)")},
		{"label", "/v1/models/half_plus_two/labels/canary/metadata", 400, tfError("Unrecognized servable version label: canary")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(e.cfg)
			defer s.Close()
			checkRespond(t, s.RequestHeaders(ctx, "GET", tt.path, hdr{}, true), tt.status, tt.body)
		})
	}
}

func TestBackendDown(t *testing.T) {
	be, err := backend.New(backend.Config{BaseURL: "http://127.0.0.1:1", Kind: "triton", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Backend: be}
	ctx := context.Background()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/models/m"},
		{"GET", "/v1/models/m/metadata"},
		{"POST", "/v1/models/m:predict"},
	} {
		s := New(cfg)
		a := s.RequestHeaders(ctx, tc.method, tc.path, hdr{}, false)
		if a.Verdict == Continue {
			a = s.bufferedRequest(ctx, []byte(`{"instances": [1]}`))
		}
		if a.Verdict != Respond || a.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the backend down: %v %d %s, want 503", tc.method, tc.path, a.Verdict, a.Status, a.Body)
		}
		s.Close()
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, "triton")
	ctx := context.Background()
	run := func(method, path, body string) {
		s := New(e.cfg)
		a := s.RequestHeaders(ctx, method, path, hdr{}, body == "")
		if a.Verdict == Continue && body != "" {
			s.bufferedRequest(ctx, []byte(body))
		}
		s.Close()
	}
	run("POST", "/v1/models/nope:predict", `{"instances": [1]}`)
	run("GET", "/v1/models/half_plus_two", "")
	run("POST", "/v1/models/half_plus_two:predict", `{"instances": [1]}`) // abandoned: no response
	run("GET", "/v2", "")

	if n := series(t, e.metrics, "tfsbridge_requests_total"); n != 3 {
		t.Errorf("request series = %d, want 3", n)
	}
	for _, c := range []struct {
		verb, model, code string
		want              float64
	}{
		{"predict", observe.ModelUnknown, "404", 1},
		{"status", "half_plus_two", "200", 1},
		{"predict", "half_plus_two", "499", 1},
	} {
		if got := e.metrics.Value("tfsbridge_requests_total", "verb", c.verb, "model", c.model, "code", c.code); got != c.want {
			t.Errorf("requests{%s,%s,%s} = %v, want %v", c.verb, c.model, c.code, got, c.want)
		}
	}
	if got := e.metrics.Value("tfsbridge_passthrough_total"); got != 1 {
		t.Errorf("passthrough_total = %v, want 1", got)
	}
}

// series counts the label sets of metric name.
func series(t *testing.T, m *observe.Metrics, name string) int {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// A binary answer larger than a piece streams out in pieces, without a
// content-length, byte-identical to the whole translation; one cut short
// after its first bytes went out can only be reset.
func TestResponseStreamsLarge(t *testing.T) {
	const n = 60000
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i) + 0.5
	}
	header := fmt.Sprintf(`{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[%d],"parameters":{"binary_data_size":%d}}]}`, n, 4*n)
	body := append([]byte(header), f32le(vals...)...)
	h := hdr{"content-type": "application/octet-stream", "inference-header-content-length": strconv.Itoa(len(header))}
	ctx := context.Background()

	e := newEnv(t, "triton")
	whole := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
	whole.ResponseHeaders(ctx, 200, h, false)
	want := whole.bufferedResponse(ctx, body)
	if want.Verdict != Continue || len(want.Body) < 2*MaxPiece {
		t.Fatalf("whole: %v, %d bytes; want a multi-piece answer", want.Verdict, len(want.Body))
	}

	for _, chunk := range []int{1000, 16 << 10, len(body)} {
		t.Run(chunkName(chunk), func(t *testing.T) {
			s := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
			s.ResponseHeaders(ctx, 200, h, false)
			var rec recordSink
			var a Action
			for i := 0; i < len(body); i += chunk {
				end := i+chunk >= len(body)
				a = s.ResponseChunk(ctx, body[i:min(i+chunk, len(body))], end, &rec)
				if a.Verdict != Pending && !end {
					t.Fatalf("chunk at %d: %v", i, a.Verdict)
				}
			}
			if a.Verdict != Continue || !bytes.Equal(rec.body, want.Body) || rec.ends != 1 || rec.pieces < 2 {
				t.Fatalf("%v: %d bytes in %d pieces (%d ends), want the %d whole bytes", a.Verdict, len(rec.body), rec.pieces, rec.ends, len(want.Body))
			}
			if _, ok := rec.headers[0].Get("content-length"); ok || !slices.Contains(rec.headers[0].Remove, "content-length") {
				t.Errorf("streamed headers %+v: want content-length removed", rec.headers[0])
			}
		})
	}

	t.Run("cut short", func(t *testing.T) {
		s := predictSession(t, e, `{"instances": [1.0, 2.0, 5.0]}`)
		s.ResponseHeaders(ctx, 200, h, false)
		var rec recordSink
		cut := len(body) - 1000
		if a := s.ResponseChunk(ctx, body[:cut], false, &rec); a.Verdict != Pending || len(rec.body) == 0 {
			t.Fatalf("first part: %v, %d bytes out; want pending with output", a.Verdict, len(rec.body))
		}
		if a := s.ResponseChunk(ctx, nil, true, &rec); a.Verdict != Reset {
			t.Errorf("end after a cut: %v %d %s, want reset", a.Verdict, a.Status, a.Body)
		}
	})
}

// bufferedRequest passes a whole request body as ext_proc BUFFERED does:
// one chunk with end set, to Whole.
func (s *Session) bufferedRequest(ctx context.Context, body []byte) Action {
	return s.RequestChunk(ctx, body, true, Whole)
}

// bufferedResponse is bufferedRequest for the response body.
func (s *Session) bufferedResponse(ctx context.Context, body []byte) Action {
	return s.ResponseChunk(ctx, body, true, Whole)
}

// partsChunk is chunkName's and TestResponse's mark for a whole response
// body given to ResponseParts.
const partsChunk = -1

// partsResponse passes a whole response body to ResponseParts and
// returns the action with the answer's parts joined into its Body (then
// released): an action carries a body, or the answer does, never both.
func (s *Session) partsResponse(ctx context.Context, t *testing.T, body []byte) Action {
	t.Helper()
	a, ans := s.ResponseParts(ctx, body)
	if ans.Len() > 0 {
		if a.Body != nil || !a.ReplaceBody {
			t.Errorf("ResponseParts: a body in the action (%d bytes, replace %v) and %d in the answer", len(a.Body), a.ReplaceBody, ans.Len())
		}
		a.Body = ans.AppendTo(nil)
	}
	ans.Release()
	return a
}
