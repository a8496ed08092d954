package envoysim

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamed is a body reply carrying one streamed_response chunk.
func streamed(req *extprocv3.ProcessingRequest, b []byte, eos bool) *extprocv3.ProcessingResponse {
	return common(req, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: eos}},
	}})
}

// streamedChunks splits body into streamed_response replies of at most size bytes, the
// last with end_of_stream eos (one empty reply for an empty body).
func streamedChunks(req *extprocv3.ProcessingRequest, body []byte, size int, eos bool) []*extprocv3.ProcessingResponse {
	var out []*extprocv3.ProcessingResponse
	for i := 0; ; i += size {
		end := min(i+size, len(body))
		out = append(out, streamed(req, body[i:end], eos && end == len(body)))
		if end == len(body) {
			return out
		}
	}
}

func bodyOf(req *extprocv3.ProcessingRequest) *extprocv3.HttpBody {
	if b := req.GetRequestBody(); b != nil {
		return b
	}
	return req.GetResponseBody()
}

// echoProc configures duplexEcho.
type echoProc struct {
	// chunk is the largest streamed_response it sends (default 64 KiB).
	chunk int
	// immediate answers headers at once and echoes each body chunk as it comes, instead
	// of withholding the headers reply until the end of the body.
	immediate bool
	// tweak edits each headers reply before it is sent.
	tweak func(req *extprocv3.ProcessingRequest, r *extprocv3.ProcessingResponse)
	// eosBeforeTrailers wrongly ends a body that has trailers with end_of_stream.
	eosBeforeTrailers bool
	// identity sends the bodies back unchanged (for gRPC messages, which transform
	// would corrupt).
	identity bool
}

// apply is what the echo processor does to body bytes.
func (o echoProc) apply(b []byte) []byte {
	if o.identity {
		return b
	}
	return transform(b)
}

// trailersReply answers a trailers message, adding x-proc: 1.
func trailersReply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	tr := &extprocv3.TrailersResponse{HeaderMutation: setHeaders(raw("x-proc", "1"))}
	if req.GetRequestTrailers() != nil {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: tr}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: tr}}
}

// transform is what the echo processor does to body bytes, so a body that bypassed the
// processor is noticed.
func transform(b []byte) []byte { return bytes.ToUpper(b) }

// duplexEcho is a compliant FULL_DUPLEX_STREAMED processor for both directions. By default
// it holds each headers reply until it has seen the whole body (as GIE's EPP does), then
// sends it and the transformed body in streamed_response chunks of at most o.chunk bytes.
// A message with trailers ends with the trailers reply (adding x-proc: 1), not with
// end_of_stream.
func duplexEcho(o echoProc) func() responder {
	if o.chunk == 0 {
		o.chunk = 64 << 10
	}
	return func() responder {
		var held *extprocv3.ProcessingResponse
		var body []byte
		return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			switch kindOf(req) {
			case "request_headers", "response_headers":
				r := common(req, &extprocv3.CommonResponse{})
				if o.tweak != nil {
					o.tweak(req, r)
				}
				if o.immediate || headersOf(req).GetEndOfStream() {
					return one(r)
				}
				held = r
				return nil
			case "request_body", "response_body":
				b := bodyOf(req)
				if o.immediate {
					return one(streamed(req, o.apply(b.GetBody()), b.GetEndOfStream()))
				}
				body = append(body, b.GetBody()...)
				if !b.GetEndOfStream() {
					return nil
				}
				out := append([]*extprocv3.ProcessingResponse{held}, streamedChunks(req, o.apply(body), o.chunk, true)...)
				held, body = nil, nil
				return out
			case "request_trailers", "response_trailers":
				var out []*extprocv3.ProcessingResponse
				if held != nil {
					bodyReq := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{}}
					if req.GetResponseTrailers() != nil {
						bodyReq.Request = &extprocv3.ProcessingRequest_ResponseBody{}
					}
					out = append(out, held)
					out = append(out, streamedChunks(bodyReq, o.apply(body), o.chunk, o.eosBeforeTrailers)...)
				}
				held, body = nil, nil
				return append(out, trailersReply(req))
			}
			return nil
		}
	}
}

// pattern is a deterministic body of n bytes.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i+int(seed))%36]
	}
	return b
}

// chunkedUpstream answers with body in flushed writes of at most size bytes.
func chunkedUpstream(body []byte, size int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for i := 0; i < len(body); i += size {
			_, _ = w.Write(body[i:min(i+size, len(body))])
			w.(http.Flusher).Flush()
		}
	}
}

func TestDuplexEcho(t *testing.T) {
	tests := []struct {
		name      string
		readSize  int
		reqLen    int
		respLen   int
		upWrite   int
		chunk     int
		immediate bool
	}{
		{"small body, default reads", 0, 20, 30, 1 << 20, 0, false},
		{"1 KiB reads, 200 KiB both ways", 1 << 10, 200 << 10, 200 << 10, 7 << 10, 0, false},
		{"16 KiB reads, 62000-byte replies", 16 << 10, 300 << 10, 150 << 10, 64 << 10, 62000, false},
		{"reads larger than the body", 1 << 20, 100 << 10, 10, 1 << 20, 0, false},
		{"odd sizes, 1000-byte replies", 3333, 50001, 70007, 4097, 1000, false},
		{"headers answered at once, chunks echoed as they come", 4 << 10, 100 << 10, 100 << 10, 8 << 10, 0, true},
		{"bodyless request", 0, 0, 5000, 1000, 0, false},
		{"empty response", 0, 1000, 0, 1, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqBody, respBody := pattern(tc.reqLen, 1), pattern(tc.respLen, 7)
			ev := newEnv(t, Config{Mode: FullDuplexMode(), DownstreamReadSize: tc.readSize, MessageTimeout: 50 * time.Millisecond},
				&procServer{perStream: duplexEcho(echoProc{chunk: tc.chunk, immediate: tc.immediate})}, chunkedUpstream(respBody, tc.upWrite))
			method := "POST"
			if tc.reqLen == 0 {
				method = "GET"
			}
			code, hdr, body := ev.do(method, "/v1/models/m:predict", string(reqBody), "Content-Type", "application/json")
			if code != 200 || body != string(transform(respBody)) {
				t.Fatalf("got %d, %d bytes (want %d); details %q", code, len(body), len(respBody), ev.lastExchange().Details)
			}
			if hdr.Get("Content-Length") != "" && tc.respLen > 0 {
				t.Errorf("response content-length %q: Envoy strips it in full duplex", hdr.Get("Content-Length"))
			}
			ups := ev.up.requests()
			if len(ups) != 1 || ups[0].body != string(transform(reqBody)) {
				t.Fatalf("upstream saw %d requests", len(ups))
			}
			if tc.reqLen > 0 && (ups[0].contentLength != -1 || !reflect.DeepEqual(ups[0].transferEncoding, []string{"chunked"})) {
				t.Errorf("upstream framing: content-length %d, transfer-encoding %v; want chunked", ups[0].contentLength, ups[0].transferEncoding)
			}
			ev.wantNoViolations()

			ps := ev.proc.stream(t, 0)
			waitEnd(t, ps)
			msgs := ps.messages()
			pc := msgs[0].GetProtocolConfig()
			if pc.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED || pc.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
				t.Errorf("protocol_config %v", pc)
			}
			if cl, _ := hget(msgs[0].GetRequestHeaders().GetHeaders(), "content-length"); tc.reqLen > 0 && cl != fmt.Sprint(tc.reqLen) {
				t.Errorf("the processor must see the client's content-length, got %q", cl)
			}
			// The bodies the processor saw, chunk by chunk.
			var sent [2][]byte
			var sizes [2][]int
			var eos [2]int
			for _, m := range msgs {
				if b := bodyOf(m); b != nil {
					i := 0
					if m.GetResponseBody() != nil {
						i = 1
					}
					sent[i] = append(sent[i], b.GetBody()...)
					sizes[i] = append(sizes[i], len(b.GetBody()))
					if b.GetEndOfStream() {
						eos[i]++
					}
				}
			}
			if !bytes.Equal(sent[0], reqBody) || !bytes.Equal(sent[1], respBody) {
				t.Errorf("processor saw %d/%d request and %d/%d response bytes", len(sent[0]), len(reqBody), len(sent[1]), len(respBody))
			}
			readSize := tc.readSize
			if readSize == 0 {
				readSize = DefaultDownstreamReadSize
			}
			for _, n := range sizes[0] {
				if n > readSize {
					t.Errorf("request chunk of %d bytes over the read size %d", n, readSize)
				}
			}
			if want := (tc.reqLen + readSize - 1) / readSize; len(sizes[0]) < want {
				t.Errorf("%d request chunks, want at least %d", len(sizes[0]), want)
			}
			if tc.reqLen > 0 && eos[0] != 1 || tc.respLen > 0 && eos[1] != 1 {
				t.Errorf("end_of_stream on %v chunks, want exactly one per body", eos)
			}
			st := ev.envoy.Stats()
			if st.SpuriousMsgsReceived != 0 || st.RequestChunksSent != uint64(len(sizes[0])) || st.ResponseChunksSent != uint64(len(sizes[1])) || st.MessageTimeouts != 0 {
				t.Errorf("stats %+v", st)
			}
			chunk := tc.chunk
			if chunk == 0 {
				chunk = 64 << 10
			}
			if st.LargestChunkReceived > uint64(chunk) || (tc.reqLen > 0 && st.RequestChunksReceived == 0) || (tc.respLen > 0 && st.ResponseChunksReceived == 0) {
				t.Errorf("received chunks: stats %+v", st)
			}
		})
	}
}

// TestDuplexUpstreamChunking checks that the response body reaches the processor as the
// upstream writes it: one response_body message per flushed write.
func TestDuplexUpstreamChunking(t *testing.T) {
	got := make(chan struct{}, 16)
	echo := duplexEcho(echoProc{})
	ev := newEnv(t, Config{Mode: FullDuplexMode()}, &procServer{perStream: func() responder {
		r := echo()
		return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if kindOf(req) == "response_body" {
				got <- struct{}{}
			}
			return r(n, req)
		}
	}}, func(w http.ResponseWriter, _ *http.Request) {
		for i := range 4 {
			_, _ = w.Write(pattern(1000+i, byte(i)))
			w.(http.Flusher).Flush()
			select {
			case <-got: // the processor has this chunk: write the next
			case <-time.After(2 * time.Second):
				return
			}
		}
	})
	code, _, body := ev.do("POST", "/v1/models/m:predict", "{}")
	if code != 200 || len(body) != 4006 {
		t.Fatalf("got %d, %d bytes", code, len(body))
	}
	ps := ev.proc.stream(t, 0)
	waitEnd(t, ps)
	var sizes []int
	last := false
	for _, m := range ps.messages() {
		if b := m.GetResponseBody(); b != nil {
			sizes = append(sizes, len(b.GetBody()))
			last = b.GetEndOfStream()
		}
	}
	// The chunked terminator may come alone: then an empty end_of_stream chunk follows.
	if want := []int{1000, 1001, 1002, 1003}; !reflect.DeepEqual(sizes[:min(4, len(sizes))], want) || len(sizes) > 5 || !last {
		t.Errorf("response chunks %v (end_of_stream on the last: %v), want %v", sizes, last, want)
	}
	ev.wantNoViolations()
}

// TestDuplexBodyFlowsBeforeHeadersReply checks that Envoy keeps sending body chunks while
// the processor withholds the headers reply, and that nothing goes upstream before it.
func TestDuplexBodyFlowsBeforeHeadersReply(t *testing.T) {
	ev := newEnv(t, Config{Mode: FullDuplexMode(), DownstreamReadSize: 100}, &procServer{perStream: duplexEcho(echoProc{})}, nil)
	reqBody := pattern(1000, 3)
	if code, _, _ := ev.do("POST", "/v1/models/m:predict", string(reqBody)); code != 200 {
		t.Fatalf("status %d", code)
	}
	x := ev.lastExchange()
	first := -1
	sentBefore := 0
	for i, s := range x.Trace {
		if s == "< request_headers" {
			first = i
			break
		}
		if s == "> request_body" {
			sentBefore++
		}
	}
	if first < 0 || sentBefore < 10 {
		t.Errorf("%d request_body messages before the headers reply, want all 10+: %v", sentBefore, x.Trace)
	}
	ev.wantNoViolations()
}

func TestDuplexRules(t *testing.T) {
	reqBody := string(pattern(10000, 5))
	chunkEcho := func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(streamed(req, bodyOf(req).GetBody(), bodyOf(req).GetEndOfStream()))
	}
	// headersThen answers the request headers at once and request body chunks with body.
	headersThen := func(body func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse) func() responder {
		return func() responder {
			return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				switch kindOf(req) {
				case "request_body":
					return body(req)
				case "response_body":
					return chunkEcho(req)
				}
				return one(common(req, &extprocv3.CommonResponse{}))
			}
		}
	}
	tests := []struct {
		name          string
		fma           bool
		proc          func() responder
		wantStatus    int // 0: the stream is reset
		wantDetails   string
		wantViolation string
		wantUpstream  bool // the upstream got the whole request body
		check         func(t *testing.T, st Stats, up []upRequest)
	}{
		{
			name: "body reply before the withheld headers reply",
			proc: func() responder {
				return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
					if kindOf(req) == "request_body" {
						return chunkEcho(req)
					}
					return nil
				}
			},
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "before the request_headers reply",
			check: func(t *testing.T, st Stats, _ []upRequest) {
				if st.SpuriousMsgsReceived != 1 {
					t.Errorf("spurious %d", st.SpuriousMsgsReceived)
				}
			},
		},
		{
			name: "fail open does not apply once the body streamed",
			fma:  true,
			proc: func() responder {
				return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
					if kindOf(req) == "request_body" {
						return chunkEcho(req)
					}
					return nil
				}
			},
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "protocol order",
		},
		{
			name: "empty CommonResponse as a body reply",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(common(req, &extprocv3.CommonResponse{}))
			}),
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "GIE PR #3028",
		},
		{
			name: "body_mutation.body instead of streamed_response",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(common(req, &extprocv3.CommonResponse{BodyMutation: newBody("x")}))
			}),
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "body_mutation.body",
		},
		{
			name: "header mutation in a body reply is ignored",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				r := chunkEcho(req)
				r[0].GetRequestBody().Response.HeaderMutation = setHeaders(raw("x-late", "1"))
				return r
			}),
			wantStatus: 200, wantDetails: "via_upstream", wantUpstream: true,
			check: func(t *testing.T, st Stats, up []upRequest) {
				if st.BodyHeaderMutationsIgnored == 0 || up[0].header.Get("X-Late") != "" || up[0].body != reqBody {
					t.Errorf("ignored %d, upstream header %q", st.BodyHeaderMutationsIgnored, up[0].header.Get("X-Late"))
				}
			},
		},
		{
			name: "content-length from the processor is dropped",
			proc: duplexEcho(echoProc{chunk: 4096, tweak: func(req *extprocv3.ProcessingRequest, r *extprocv3.ProcessingResponse) {
				if kindOf(req) == "request_headers" {
					r.GetRequestHeaders().Response.HeaderMutation = setHeaders(raw("content-length", fmt.Sprint(len(reqBody))), raw("x-seen", "1"))
				}
			}}),
			wantStatus: 200, wantDetails: "via_upstream", wantUpstream: true,
			check: func(t *testing.T, st Stats, up []upRequest) {
				if st.ContentLengthSetsDropped != 1 || up[0].contentLength != -1 || up[0].header.Get("X-Seen") != "1" {
					t.Errorf("dropped %d, upstream content-length %d, x-seen %q", st.ContentLengthSetsDropped, up[0].contentLength, up[0].header.Get("X-Seen"))
				}
			},
		},
		{
			name: "mode_override is ignored",
			proc: duplexEcho(echoProc{chunk: 4096, tweak: func(_ *extprocv3.ProcessingRequest, r *extprocv3.ProcessingResponse) {
				r.ModeOverride = &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED}
			}}),
			wantStatus: 200, wantDetails: "via_upstream", wantUpstream: true,
			check: func(t *testing.T, st Stats, _ []upRequest) {
				if st.ModeOverridesIgnored != 2 || st.ModeOverrides != 0 || st.ResponseChunksSent == 0 {
					t.Errorf("stats %+v", st)
				}
			},
		},
		{
			name:       "oversized streamed chunk",
			proc:       duplexEcho(echoProc{chunk: 1 << 20}),
			wantStatus: 200, wantDetails: "via_upstream", wantViolation: "exceeds 4096 bytes", wantUpstream: true,
			check: func(t *testing.T, st Stats, _ []upRequest) {
				if st.LargestChunkReceived != uint64(len(reqBody)) {
					t.Errorf("largest chunk %d", st.LargestChunkReceived)
				}
			},
		},
		{
			name: "second headers reply",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}})
			}),
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "no headers message is outstanding",
		},
		{
			name: "reply of the other direction",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}})
			}),
			wantStatus: 500, wantDetails: "spurious message", wantViolation: "response_body reply while streaming the request_body",
		},
		{
			name: "immediate_response while the headers reply is withheld",
			proc: func() responder {
				return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
					if kindOf(req) == "request_body" {
						return one(immediate(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 400}, Body: []byte(`{"error": "bad"}`)}))
					}
					return nil
				}
			},
			wantStatus: 400,
			check: func(t *testing.T, st Stats, _ []upRequest) {
				if st.ImmediateResponses != 1 || st.SpuriousMsgsReceived != 0 {
					t.Errorf("stats %+v", st)
				}
			},
		},
		{
			name: "immediate_response after the request went upstream",
			proc: headersThen(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				if bodyOf(req).GetEndOfStream() {
					return one(immediate(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 413}}))
				}
				return chunkEcho(req)
			}),
			wantStatus: 413,
		},
		{
			name: "immediate_response while the response headers are withheld",
			proc: func() responder {
				echo := duplexEcho(echoProc{chunk: 4096})()
				return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
					if kindOf(req) == "response_body" {
						return one(immediate(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 503}, Body: []byte("busy")}))
					}
					return echo(n, req)
				}
			},
			wantStatus: 503, wantUpstream: true,
		},
		{
			name: "immediate_response after the response headers went downstream",
			proc: func() responder {
				return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
					switch kindOf(req) {
					case "request_body":
						return chunkEcho(req)
					case "response_body":
						return one(immediate(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 503}, Details: "too late"}))
					}
					return one(common(req, &extprocv3.CommonResponse{}))
				}
			},
			wantStatus: 0, wantDetails: "too_late", wantUpstream: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Mode: FullDuplexMode(), DownstreamReadSize: 1000, MaxStreamedChunk: 4096, FailureModeAllow: tc.fma, AllowModeOverride: true}
			ev := newEnv(t, cfg, &procServer{perStream: tc.proc}, chunkedUpstream(pattern(3000, 2), 1000))
			req, err := http.NewRequest("POST", ev.envoy.URL()+"/v1/models/m:predict", strings.NewReader(reqBody))
			if err != nil {
				t.Fatal(err)
			}
			resp, _, err := ev.send(req)
			code := 0
			if err == nil {
				code = resp.StatusCode
			}
			if code != tc.wantStatus {
				t.Fatalf("status %d (err %v), want %d; violations %q", code, err, tc.wantStatus, ev.envoy.Violations())
			}
			x := ev.lastExchange()
			if tc.wantDetails != "" && x.Details != tc.wantDetails {
				t.Errorf("details %q, want %q", x.Details, tc.wantDetails)
			}
			if tc.wantViolation != "" {
				ev.wantViolation(tc.wantViolation)
			} else {
				ev.wantNoViolations()
			}
			up := ev.up.requests()
			if whole := len(up) == 1 && len(up[0].body) == len(reqBody); whole != tc.wantUpstream {
				t.Errorf("upstream saw %d requests, want the whole body: %v", len(up), tc.wantUpstream)
			}
			if tc.check != nil {
				tc.check(t, ev.envoy.Stats(), up)
			}
		})
	}
}

// TestDuplexStreamFailures covers the side stream ending mid-exchange.
func TestDuplexStreamFailures(t *testing.T) {
	reqBody := pattern(20000, 9)
	t.Run("gRPC error after a body chunk fails closed despite failure_mode_allow", func(t *testing.T) {
		ev := newEnv(t, Config{Mode: FullDuplexMode(), DownstreamReadSize: 1000, FailureModeAllow: true}, &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, ps *procStream) error {
			for {
				req, ok := ps.recv(s)
				if !ok {
					return nil
				}
				if kindOf(req) == "request_body" {
					return status.Error(codes.Internal, "boom")
				}
			}
		}}, nil)
		code, _, _ := ev.do("POST", "/v1/models/m:predict", string(reqBody))
		if code != 500 || ev.lastExchange().Details != "ext_proc_error_gRPC_error_13{boom}" || len(ev.up.requests()) != 0 {
			t.Fatalf("status %d, details %q", code, ev.lastExchange().Details)
		}
		if st := ev.envoy.Stats(); st.FailureModeAllowed != 0 || st.StreamsFailed != 1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("gRPC error before any body fails open", func(t *testing.T) {
		ev := newEnv(t, Config{Mode: FullDuplexMode(), FailureModeAllow: true}, &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, ps *procStream) error {
			ps.recv(s)
			return status.Error(codes.Unavailable, "down")
		}}, nil)
		code, _, body := ev.do("GET", "/v1/models/m", "")
		if code != 200 || body != upstreamBody {
			t.Fatalf("status %d %q", code, body)
		}
		if st := ev.envoy.Stats(); st.FailureModeAllowed != 1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("clean close mid-body loses what the processor held", func(t *testing.T) {
		ev := newEnv(t, Config{Mode: FullDuplexMode(), DownstreamReadSize: 1000}, &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, ps *procStream) error {
			for {
				req, ok := ps.recv(s)
				if !ok || kindOf(req) == "request_body" {
					return nil
				}
			}
		}}, nil)
		code, _, _ := ev.do("POST", "/v1/models/m:predict", string(reqBody))
		if code != 200 {
			t.Fatalf("status %d", code)
		}
		up := ev.up.requests()
		if len(up) != 1 || len(up[0].body) >= len(reqBody) || !strings.HasSuffix(string(reqBody), up[0].body) {
			t.Errorf("upstream body of %d bytes, want a strict suffix of the %d sent", len(up[0].body), len(reqBody))
		}
		ev.wantViolation("closed the stream after")
	})
}

// TestDuplexConfig checks Envoy's config rule and the mixed modes.
func TestDuplexConfig(t *testing.T) {
	base := Config{ProcessorAddr: "127.0.0.1:1", Upstream: "http://127.0.0.1:2"}
	for _, tc := range []struct {
		name string
		mut  func(m *extprocfilterv3.ProcessingMode)
		ok   bool
	}{
		{"both directions", func(*extprocfilterv3.ProcessingMode) {}, true},
		{"request trailers SKIP", func(m *extprocfilterv3.ProcessingMode) { m.RequestTrailerMode = extprocfilterv3.ProcessingMode_SKIP }, false},
		{"response trailers DEFAULT", func(m *extprocfilterv3.ProcessingMode) {
			m.ResponseTrailerMode = extprocfilterv3.ProcessingMode_DEFAULT
		}, false},
		{"response BUFFERED with trailers SEND", func(m *extprocfilterv3.ProcessingMode) { m.ResponseBodyMode = extprocfilterv3.ProcessingMode_BUFFERED }, true},
		{"response BUFFERED, trailers SKIP", func(m *extprocfilterv3.ProcessingMode) {
			m.ResponseBodyMode = extprocfilterv3.ProcessingMode_BUFFERED
			m.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SKIP
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.Mode = FullDuplexMode()
			tc.mut(c.Mode)
			_, _, err := c.normalized()
			if (err == nil) != tc.ok {
				t.Errorf("normalized: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	got, _, err := Config{ProcessorAddr: "x:1", Upstream: "http://x:2", Mode: FullDuplexMode()}.normalized()
	if err != nil || got.DownstreamReadSize != DefaultDownstreamReadSize || got.MaxStreamedChunk != DefaultMaxStreamedChunk {
		t.Errorf("defaults: %v %+v", err, got)
	}
}

// TestDuplexRequestBufferedResponse mixes a full-duplex request with a BUFFERED response.
func TestDuplexRequestBufferedResponse(t *testing.T) {
	mode := FullDuplexMode()
	mode.ResponseBodyMode, mode.ResponseTrailerMode = extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_SKIP
	echo := duplexEcho(echoProc{})
	ev := newEnv(t, Config{Mode: mode, DownstreamReadSize: 512}, &procServer{perStream: func() responder {
		r := echo()
		return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			switch kindOf(req) {
			case "response_headers": // BUFFERED: Envoy waits for this reply before the body
				return one(common(req, &extprocv3.CommonResponse{}))
			case "response_body":
				b := transform(req.GetResponseBody().GetBody())
				return one(common(req, &extprocv3.CommonResponse{
					HeaderMutation: setHeaders(raw("content-length", fmt.Sprint(len(b)))),
					BodyMutation:   newBody(string(b)),
				}))
			}
			return r(n, req)
		}
	}}, nil)
	reqBody := pattern(5000, 4)
	code, hdr, body := ev.do("POST", "/v1/models/m:predict", string(reqBody))
	if code != 200 || body != strings.ToUpper(upstreamBody) || hdr.Get("Content-Length") != fmt.Sprint(len(upstreamBody)) {
		t.Fatalf("got %d %q %v", code, body, hdr)
	}
	if up := ev.up.requests(); up[0].body != string(transform(reqBody)) {
		t.Errorf("upstream body of %d bytes", len(up[0].body))
	}
	ev.wantNoViolations()
}

// TestDuplexStrayReplyAfterBody catches a body reply after the processor ended the body.
func TestDuplexStrayReplyAfterBody(t *testing.T) {
	echo := duplexEcho(echoProc{})
	// The stand-in finds the stray reply when it sends the response headers, so the upstream
	// answers only once the stray is in.
	strayIn := make(chan struct{})
	var once sync.Once
	cfg := Config{Mode: FullDuplexMode()}
	cfg.onInbox = func(resp *extprocv3.ProcessingResponse) {
		if string(resp.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()) == "more" {
			once.Do(func() { close(strayIn) })
		}
	}
	ev := newEnv(t, cfg, &procServer{perStream: func() responder {
		r := echo()
		return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			out := r(n, req)
			if kindOf(req) == "request_body" && len(out) > 0 {
				out = append(out, streamed(req, []byte("more"), false))
			}
			return out
		}
	}}, func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-strayIn:
		case <-time.After(30 * time.Second): // a bound for a hang: the test then fails below
		}
		_, _ = io.WriteString(w, upstreamBody)
	})
	code, _, _ := ev.do("POST", "/v1/models/m:predict", reqBody)
	if code != 500 || ev.envoy.Stats().SpuriousMsgsReceived != 1 {
		t.Fatalf("status %d, stats %+v", code, ev.envoy.Stats())
	}
	ev.wantViolation("no message was outstanding")
}

// TestDuplexBodyEndedEarly: a processor that ends the body before Envoy sent its end.
func TestDuplexBodyEndedEarly(t *testing.T) {
	replied := make(chan struct{})
	ev := newEnv(t, Config{Mode: FullDuplexMode()}, &procServer{perStream: func() responder {
		return func(_ int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if kindOf(req) != "request_body" {
				return nil
			}
			defer close(replied)
			return []*extprocv3.ProcessingResponse{common(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{}}, &extprocv3.CommonResponse{}), streamed(req, bodyOf(req).GetBody(), true)}
		}
	}}, nil)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"instances": [`))
		<-replied
		// The rest of the body only once the stand-in has seen the early
		// end (its violation is recorded on arrival), however long the
		// replies take to reach it; the bound is for a broken stand-in.
		// (A timeout only lets the test go on to fail on wantViolation.)
		_ = waitFor(30*time.Second, func() bool { return len(ev.envoy.Violations()) > 0 })
		_, _ = pw.Write([]byte(`1.0]}`))
		_ = pw.Close()
	}()
	req, err := http.NewRequest("POST", ev.envoy.URL()+"/v1/models/m:predict", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := ev.send(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || ev.lastExchange().Details != "envoysim_streamed_body_ended_early" {
		t.Fatalf("status %d, details %q", resp.StatusCode, ev.lastExchange().Details)
	}
	ev.wantViolation("before Envoy sent the end of the body")
}

// TestDuplexLocalReplies: Envoy's own replies run through a full-duplex response path.
func TestDuplexLocalReplies(t *testing.T) {
	deadUpstream := refusedURL(t)
	tests := []struct {
		name      string
		cfg       Config
		wantCode  int
		wantBody  string
		wantKinds []string
	}{
		{"upstream unreachable", Config{Upstream: deadUpstream}, 503, "UPSTREAM CONNECT ERROR",
			[]string{"request_headers", "request_body", "response_headers", "response_body"}},
		{"buffer filter in front", Config{BufferFilterMaxBytes: 10}, 413, "PAYLOAD TOO LARGE",
			[]string{"response_headers", "response_body"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Mode = FullDuplexMode()
			ev := newEnv(t, tc.cfg, &procServer{perStream: duplexEcho(echoProc{})}, nil)
			code, hdr, body := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantCode || !strings.HasPrefix(body, tc.wantBody) || hdr.Get("Content-Length") != "" {
				t.Fatalf("got %d %q %v", code, body, hdr)
			}
			ps := ev.proc.stream(t, 0)
			waitEnd(t, ps)
			if got := kinds(ps.messages()); !reflect.DeepEqual(got, tc.wantKinds) {
				t.Errorf("messages %v, want %v", got, tc.wantKinds)
			}
			ev.wantNoViolations()
		})
	}
}

// TestBufferedRequestDuplexResponse mixes a BUFFERED request with a full-duplex response.
func TestBufferedRequestDuplexResponse(t *testing.T) {
	mode := FullDuplexMode()
	mode.RequestBodyMode, mode.RequestTrailerMode = extprocfilterv3.ProcessingMode_BUFFERED, extprocfilterv3.ProcessingMode_SKIP
	echo := duplexEcho(echoProc{chunk: 1000})
	respBody := pattern(10000, 8)
	ev := newEnv(t, Config{Mode: mode}, &procServer{perStream: func() responder {
		r := echo()
		return func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			switch kindOf(req) {
			case "request_headers":
				return one(common(req, &extprocv3.CommonResponse{}))
			case "request_body":
				b := transform(req.GetRequestBody().GetBody())
				return one(common(req, &extprocv3.CommonResponse{
					HeaderMutation: setHeaders(raw("content-length", fmt.Sprint(len(b)))),
					BodyMutation:   newBody(string(b)),
				}))
			}
			return r(n, req)
		}
	}}, chunkedUpstream(respBody, 3000))
	code, hdr, body := ev.do("POST", "/v1/models/m:predict", reqBody)
	if code != 200 || body != string(transform(respBody)) || hdr.Get("Content-Length") != "" {
		t.Fatalf("got %d, %d bytes, %v", code, len(body), hdr)
	}
	up := ev.up.requests()
	if up[0].body != strings.ToUpper(reqBody) || up[0].contentLength != int64(len(reqBody)) {
		t.Errorf("upstream %q, content-length %d", up[0].body, up[0].contentLength)
	}
	if st := ev.envoy.Stats(); st.RequestChunksSent != 0 || st.ResponseChunksReceived != 10 || st.ResponseChunksSent == 0 || st.LargestChunkSent > upstreamReadSize {
		t.Errorf("stats %+v", st)
	}
	ev.wantNoViolations()
}

// TestDuplexTrailers: a message with trailers ends with a trailers message, and the
// trailers reply (not end_of_stream) ends it.
func TestDuplexTrailers(t *testing.T) {
	respBody := pattern(5000, 6)
	upstreamWithTrailers := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Trailer", "X-Resp")
		_, _ = w.Write(respBody)
		w.Header().Set("X-Resp", "v")
	}
	send := func(ev *env) (*http.Response, string) {
		req, err := http.NewRequest("POST", ev.envoy.URL()+"/v1/models/m:predict", io.MultiReader(strings.NewReader(reqBody)))
		if err != nil {
			t.Fatal(err)
		}
		req.Trailer = http.Header{"X-Checksum": {"abc"}}
		resp, b, err := ev.send(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	t.Run("compliant", func(t *testing.T) {
		ev := newEnv(t, Config{Mode: FullDuplexMode(), DownstreamReadSize: 8}, &procServer{perStream: duplexEcho(echoProc{})}, upstreamWithTrailers)
		resp, body := send(ev)
		if resp.StatusCode != 200 || body != string(transform(respBody)) {
			t.Fatalf("got %d, %d bytes", resp.StatusCode, len(body))
		}
		if got := resp.Trailer; got.Get("X-Resp") != "v" || got.Get("X-Proc") != "1" {
			t.Errorf("response trailers %v", got)
		}
		up := ev.up.requests()
		if up[0].body != strings.ToUpper(reqBody) || up[0].trailer.Get("X-Checksum") != "abc" || up[0].trailer.Get("X-Proc") != "1" {
			t.Errorf("upstream %q, trailers %v", up[0].body, up[0].trailer)
		}
		ps := ev.proc.stream(t, 0)
		waitEnd(t, ps)
		var tk []string
		for _, m := range ps.messages() {
			if b := bodyOf(m); b != nil && b.GetEndOfStream() {
				t.Errorf("%s with end_of_stream on a message with trailers", kindOf(m))
			}
			if k := kindOf(m); strings.HasSuffix(k, "_trailers") {
				tk = append(tk, k)
			}
		}
		if !reflect.DeepEqual(tk, []string{"request_trailers", "response_trailers"}) {
			t.Errorf("trailers messages %v", tk)
		}
		if v, _ := hget(ps.messages()[len(ps.messages())-1].GetResponseTrailers().GetTrailers(), "x-resp"); v != "v" {
			t.Errorf("response_trailers carry x-resp %q", v)
		}
		ev.wantNoViolations()
	})
	t.Run("end_of_stream before the trailers", func(t *testing.T) {
		ev := newEnv(t, Config{Mode: FullDuplexMode()}, &procServer{perStream: duplexEcho(echoProc{eosBeforeTrailers: true})}, upstreamWithTrailers)
		resp, _ := send(ev)
		if resp.StatusCode != 500 || ev.lastExchange().Details != "envoysim_streamed_body_ended_before_trailers" {
			t.Fatalf("status %d, details %q", resp.StatusCode, ev.lastExchange().Details)
		}
		ev.wantViolation("ends with trailers")
	})
}
