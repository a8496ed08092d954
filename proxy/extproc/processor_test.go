package extproc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procmodev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tfsbridge/tfsbridge/proxy/admission"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/fakev2"
	"github.com/tfsbridge/tfsbridge/proxy/observe"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/translate/tfresponse"
)

var halfPlusTwo = fakev2.HalfPlusTwo()

// harness is a real gRPC server on a loopback socket plus a client.
type harness struct {
	client  extprocv3.ExternalProcessorClient
	conn    *grpc.ClientConn
	srv     *Server
	metrics *observe.Metrics
	// results receives what each Process call returned.
	results chan error
}

func start(t testing.TB) *harness {
	t.Helper()
	return startWith(t, ServerOptions{})
}

// startWith is start with the server options given (the harness's
// interceptor is added to their GRPCOptions).
func startWith(t testing.TB, opt ServerOptions) *harness {
	t.Helper()
	return startOpts(t, opt, Options{})
}

// startOpts is startWith with the processor's options.
func startOpts(t testing.TB, opt ServerOptions, popt Options) *harness {
	t.Helper()
	v2srv := fakev2.New(t, "triton", halfPlusTwo)
	be, err := backend.New(backend.Config{BaseURL: v2srv.URL, Kind: "triton", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{metrics: observe.NewMetrics(), results: make(chan error, 16)}
	// A budget no test here exhausts, so that what exchanges reserve and
	// release shows in tfsbridge_inflight_bytes.
	cfg := &session.Config{Backend: be, Metrics: h.metrics, Admission: admission.New(1<<30, h.metrics)}
	opt.GRPCOptions = append(opt.GRPCOptions,
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			h.results <- err
			return err
		}))
	h.srv = NewServer(NewProcessor(cfg, popt), opt)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(ctx, lis, time.Second) }()
	h.conn, err = grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	h.client = extprocv3.NewExternalProcessorClient(h.conn)
	t.Cleanup(func() {
		h.conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

// stream opens a Process stream that is cancelled when the test ends.
func (h *harness) stream(t *testing.T) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := h.client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exchange sends one message and returns the one reply.
func exchange(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	if err := s.Send(req); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return resp
}

// processResult waits for the server's Process to return.
func (h *harness) processResult(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.results:
		return err
	case <-time.After(30 * time.Second): // a bound for a hang, generous for a busy machine
		t.Fatal("Process did not return")
		return nil
	}
}

// headers builds a header map; values go in raw_value like Envoy's.
func headers(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

func requestHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headers(kv...), EndOfStream: eos}}}
}

func responseHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(kv...), EndOfStream: eos}}}
}

func requestBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

func responseBody(b []byte) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: true}}}
}

// setHeaders returns a mutation's set headers as a map, failing the test
// unless every one uses raw_value only and OVERWRITE_IF_EXISTS_OR_ADD.
func setHeaders(t *testing.T, m *extprocv3.HeaderMutation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range m.GetSetHeaders() {
		h := o.GetHeader()
		if h.GetValue() != "" {
			t.Errorf("header %s: value %q set; only raw_value may be", h.GetKey(), h.GetValue())
		}
		if o.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("header %s: append action %v", h.GetKey(), o.GetAppendAction())
		}
		out[h.GetKey()] = string(h.GetRawValue())
	}
	return out
}

func TestPassThrough(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	resp := exchange(t, s, requestHeaders(true, ":method", "GET", ":path", "/v2/health/ready", "x-request-id", "r1"))
	rh := resp.GetRequestHeaders()
	if rh == nil {
		t.Fatalf("reply %T, want request_headers", resp.GetResponse())
	}
	if rh.GetResponse() != nil {
		t.Errorf("pass-through reply mutates: %v", rh.GetResponse())
	}
	want := &procmodev3.ProcessingMode{
		RequestBodyMode:    procmodev3.ProcessingMode_NONE,
		ResponseHeaderMode: procmodev3.ProcessingMode_SKIP,
		ResponseBodyMode:   procmodev3.ProcessingMode_NONE,
	}
	if !proto.Equal(resp.GetModeOverride(), want) {
		t.Errorf("mode_override = %v, want %v", resp.GetModeOverride(), want)
	}
	if got := gauge(t, h.metrics); got != 1 {
		t.Errorf("in-flight streams during the stream = %v, want 1", got)
	}
	// Envoy ends the stream with a half-close: a normal end.
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after CloseSend: Recv = %v, want EOF", err)
	}
	if err := h.processResult(t); err != nil {
		t.Errorf("Process returned %v after EOF, want nil", err)
	}
	if got := gauge(t, h.metrics); got != 0 {
		t.Errorf("in-flight streams after the stream = %v, want 0", got)
	}
}

func gauge(t *testing.T, m *observe.Metrics) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tfsbridge_inflight_streams" {
			for _, metric := range mf.GetMetric() {
				return metric.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func f32le(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestPredictExchange(t *testing.T) {
	h := start(t)
	s := h.stream(t)

	// 1. Request headers: :path rewritten, nothing else.
	resp := exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict",
		":authority", "example", "content-type", "application/json", "content-length", "30"))
	rh := resp.GetRequestHeaders()
	if rh == nil || resp.GetModeOverride() != nil {
		t.Fatalf("reply = %v, want request_headers without mode_override", resp)
	}
	if rh.GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE || rh.GetResponse().GetBodyMutation() != nil {
		t.Errorf("headers reply: %v", rh.GetResponse())
	}
	set := setHeaders(t, rh.GetResponse().GetHeaderMutation())
	if len(set) != 1 || set[":path"] != "/v2/models/half_plus_two/infer" {
		t.Errorf("headers reply sets %v, want only :path", set)
	}

	// 2. Request body: the v2 body and its headers, content-length exact.
	resp = exchange(t, s, requestBody([]byte(`{"instances": [1.0, 2.0, 5.0]}`), true))
	rb := resp.GetRequestBody()
	if rb == nil {
		t.Fatalf("reply %T, want request_body", resp.GetResponse())
	}
	body := rb.GetResponse().GetBodyMutation().GetBody()
	set = setHeaders(t, rb.GetResponse().GetHeaderMutation())
	if set["content-length"] != strconv.Itoa(len(body)) || len(body) == 0 {
		t.Errorf("content-length %q for a %d-byte body", set["content-length"], len(body))
	}
	ihcl, err := strconv.Atoi(set["inference-header-content-length"])
	if err != nil || ihcl <= 0 || ihcl >= len(body) || len(body)-ihcl != 12 {
		t.Errorf("inference-header-content-length %q for a %d-byte body with 12 binary bytes", set["inference-header-content-length"], len(body))
	}
	if !bytes.Equal(body[len(body)-12:], f32le(1, 2, 5)) {
		t.Errorf("binary block = %x, want the three float32s", body[len(body)-12:])
	}
	if set["accept-encoding"] != "identity" || set["content-type"] == "" {
		t.Errorf("body reply headers = %v", set)
	}

	// 3. Response headers: only the request id for the client (the body
	// is buffered).
	header := `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}}]}`
	resp = exchange(t, s, responseHeaders(false, ":status", "200", "content-type", "application/octet-stream",
		"Inference-Header-Content-Length", strconv.Itoa(len(header))))
	rhc := resp.GetResponseHeaders().GetResponse()
	if set := setHeaders(t, rhc.GetHeaderMutation()); resp.GetResponseHeaders() == nil || len(set) != 1 || len(set["x-request-id"]) != 36 ||
		rhc.GetBodyMutation() != nil || resp.GetModeOverride() != nil {
		t.Errorf("response headers reply = %v, want a response_headers setting only x-request-id", resp)
	}

	// 4. Response body: TF JSON, content-length exact, IHCL removed.
	resp = exchange(t, s, responseBody(append([]byte(header), f32le(2.5, 3, 4.5)...)))
	rsb := resp.GetResponseBody()
	if rsb == nil {
		t.Fatalf("reply %T, want response_body", resp.GetResponse())
	}
	want := "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
	if got := string(rsb.GetResponse().GetBodyMutation().GetBody()); got != want {
		t.Errorf("TF body = %q, want %q", got, want)
	}
	set = setHeaders(t, rsb.GetResponse().GetHeaderMutation())
	if set["content-length"] != strconv.Itoa(len(want)) || set["content-type"] != "application/json" {
		t.Errorf("response body headers = %v", set)
	}
	if rm := rsb.GetResponse().GetHeaderMutation().GetRemoveHeaders(); len(rm) != 1 || rm[0] != "inference-header-content-length" {
		t.Errorf("removed = %v, want inference-header-content-length", rm)
	}
	_ = s.CloseSend()
	if err := h.processResult(t); err != nil {
		t.Errorf("Process = %v", err)
	}
}

func TestImmediateResponses(t *testing.T) {
	status := string(tfresponse.Status(nil, []tfresponse.VersionStatus{{Version: "1", State: "AVAILABLE", ErrorCode: "OK"}}))
	tests := []struct {
		name    string
		req     *extprocv3.ProcessingRequest
		body    *extprocv3.ProcessingRequest // sent after the headers reply, if set
		status  int32
		resp    string
		details string
	}{
		{"status", requestHeaders(true, ":method", "GET", ":path", "/v1/models/half_plus_two"),
			nil, 200, status, "tfsbridge_status"},
		{"malformed", requestHeaders(false, ":method", "POST", ":path", "/v1/models/m:PREDICT"),
			nil, 400, string(tfresponse.Error(nil, "Malformed request: POST /v1/models/m:PREDICT")), "tfsbridge_INVALID_ARGUMENT"},
		{"unknown model", requestHeaders(false, ":method", "POST", ":path", "/v1/models/nope:predict"),
			requestBody([]byte(`{"instances": [1]}`), true),
			404, string(tfresponse.Error(nil, "Servable not found for request: Latest(nope)")), "tfsbridge_NOT_FOUND"},
		{"partial body", requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"),
			requestBody([]byte(`{"instances"`), false),
			500, string(tfresponse.Error(nil, "tfsbridge needs the ext_proc body mode BUFFERED or FULL_DUPLEX_STREAMED: received a partial body (STREAMED or BUFFERED_PARTIAL?)")), "tfsbridge_INTERNAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t)
			s := h.stream(t)
			resp := exchange(t, s, tt.req)
			if tt.body != nil {
				if resp.GetRequestHeaders() == nil {
					t.Fatalf("headers reply = %v", resp)
				}
				resp = exchange(t, s, tt.body)
			}
			ir := resp.GetImmediateResponse()
			if ir == nil {
				t.Fatalf("reply %T, want immediate_response", resp.GetResponse())
			}
			if int32(ir.GetStatus().GetCode()) != tt.status || string(ir.GetBody()) != tt.resp || ir.GetDetails() != tt.details {
				t.Errorf("immediate = %d %q %q, want %d %q %q", ir.GetStatus().GetCode(), ir.GetBody(), ir.GetDetails(),
					tt.status, tt.resp, tt.details)
			}
			if set := setHeaders(t, ir.GetHeaders()); set["content-type"] != "application/json" || len(set["x-request-id"]) != 36 || len(set) != 2 {
				t.Errorf("immediate headers = %v, want content-type: application/json and a generated x-request-id", set)
			}
		})
	}
}

func TestHeaderValueFallback(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	req := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":method", Value: "POST"}, {Key: ":path", Value: "/v1/models/half_plus_two:predict"},
		}}}}}
	resp := exchange(t, s, req)
	set := setHeaders(t, resp.GetRequestHeaders().GetResponse().GetHeaderMutation())
	if set[":path"] != "/v2/models/half_plus_two/infer" {
		t.Errorf("headers sent in value: reply sets %v, want the :path rewrite", set)
	}
}

func TestResponseHeadersFirst(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	resp := exchange(t, s, responseHeaders(false, ":status", "413", "content-type", "text/plain"))
	rh := resp.GetResponseHeaders()
	if rh == nil || rh.GetResponse() != nil {
		t.Fatalf("reply = %v, want an empty response_headers", resp)
	}
	want := &procmodev3.ProcessingMode{ResponseBodyMode: procmodev3.ProcessingMode_NONE}
	if !proto.Equal(resp.GetModeOverride(), want) {
		t.Errorf("mode_override = %v, want %v", resp.GetModeOverride(), want)
	}
	// If the body comes anyway, it passes untouched.
	resp = exchange(t, s, responseBody([]byte("Payload Too Large")))
	if resp.GetResponseBody() == nil || resp.GetResponseBody().GetResponse() != nil {
		t.Errorf("body reply = %v, want an empty response_body", resp)
	}
}

func TestTrailers(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v2/x"))
	resp := exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{}}})
	if resp.GetRequestTrailers() == nil {
		t.Errorf("reply %T, want request_trailers", resp.GetResponse())
	}
	resp = exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{}}})
	if resp.GetResponseTrailers() == nil {
		t.Errorf("reply %T, want response_trailers", resp.GetResponse())
	}
}

func TestCancelIsANormalEnd(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := h.client.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"))
	cancel() // Envoy resets side streams when the request ends
	if err := h.processResult(t); err != nil {
		t.Errorf("Process after cancel = %v, want nil", err)
	}
}

func TestLargeBody(t *testing.T) {
	h := start(t)
	s := h.stream(t)
	exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v2/models/x/infer"))
	// Over grpc-go's 4 MiB default receive limit.
	resp := exchange(t, s, requestBody(make([]byte, 6<<20), true))
	if resp.GetRequestBody() == nil {
		t.Errorf("reply %T, want request_body", resp.GetResponse())
	}
}

// TestRecvLimit: by default the gRPC receive limit is no limit of ours
// (Envoy's buffer limit bounds what it sends), so a body over the body
// limit reaches the session, which answers TF's 413/502; with
// MaxRecvMsgBytes set, a larger message fails the stream with
// RESOURCE_EXHAUSTED (what Envoy turns into a bare 500).
func TestRecvLimit(t *testing.T) {
	tests := []struct {
		name    string
		opt     ServerOptions
		body    int
		wantErr bool
	}{
		{"default, far over the body limit", ServerOptions{MaxBodyBytes: 1 << 20}, 8 << 20, false},
		{"set, under", ServerOptions{MaxBodyBytes: 2 << 20, MaxRecvMsgBytes: 3 << 20}, 2<<20 + 512<<10, false},
		{"set, over", ServerOptions{MaxBodyBytes: 2 << 20, MaxRecvMsgBytes: 3 << 20}, 4 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startWith(t, tt.opt)
			s := h.stream(t)
			exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v2/models/x/infer"))
			if err := s.Send(requestBody(make([]byte, tt.body), true)); err != nil {
				t.Fatalf("send: %v", err)
			}
			resp, err := s.Recv()
			if tt.wantErr {
				if status.Code(err) != codes.ResourceExhausted {
					t.Errorf("reply %v, %v; want RESOURCE_EXHAUSTED", resp, err)
				}
				return
			}
			if err != nil || resp.GetRequestBody() == nil {
				t.Errorf("reply %v, %v; want request_body", resp, err)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	h := start(t)
	hc := healthpb.NewHealthClient(h.conn)
	for _, svc := range []string{"", "envoy.service.ext_proc.v3.ExternalProcessor"} {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v; want SERVING", svc, r.GetStatus(), err)
		}
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("health of an unknown service: %v, want NotFound", err)
	}
}

// closeSignal closes closed when the listener is closed: gRPC's graceful
// stop does that first, after Shutdown began the drain, so a stream used
// after it is one the drain has to spare.
type closeSignal struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeSignal) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func TestGracefulStopDrains(t *testing.T) {
	v2srv := fakev2.New(t, "triton", halfPlusTwo)
	be, _ := backend.New(backend.Config{BaseURL: v2srv.URL, Kind: "triton"})
	srv := NewServer(NewProcessor(&session.Config{Backend: be}, Options{}), ServerOptions{})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &closeSignal{Listener: tcp, closed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The drain timeout leaves a busy machine time to finish the
	// in-flight exchange below after the drain began.
	const drain = 2 * time.Second
	go func() { done <- srv.Serve(ctx, lis, drain) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := extprocv3.NewExternalProcessorClient(conn).Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict"))

	// SIGTERM with a stream in flight: the stream may finish...
	cancel()
	select {
	case <-lis.closed:
	case <-time.After(30 * time.Second): // a bound for a hang
		t.Fatal("the graceful stop never closed the listener")
	}
	resp := exchange(t, s, requestBody([]byte(`{"instances": [1.0]}`), true))
	if resp.GetRequestBody() == nil {
		t.Errorf("in-flight stream during drain: reply %T, want request_body", resp.GetResponse())
	}
	// ...and one that does not is cut after the drain timeout.
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(drain + 30*time.Second): // the stream never ends by itself: only the cut returns
		t.Fatal("Serve did not return after the drain timeout")
	}
	t.Logf("Serve returned %v after the in-flight exchange", time.Since(start))
	if _, err := s.Recv(); err == nil {
		t.Error("stream still open after shutdown")
	}
	if st := srv.Stats(); st.Cut != 1 || st.Drained != 0 {
		t.Errorf("stats %+v, want the one stream cut", st)
	}
}
