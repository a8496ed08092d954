package envoysim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

const reqBody = `{"instances": [1.0]}`

// bigBody is over the 24-byte buffer limit of the 413 tests, whose reply body is not.
const bigBody = `{"instances": [1.0, 2.0, 3.0, 4.0]}`

func TestPassThroughSequence(t *testing.T) {
	ev := newEnv(t, Config{}, &procServer{respond: passThrough}, nil)
	code, hdr, body := ev.do("POST", "/v1/models/m:predict?x=1", reqBody, "Content-Type", "application/json", "X-Custom", "a", "Connection", "keep-alive", "User-Agent", "tf-client/1")
	if code != 200 || body != upstreamBody {
		t.Fatalf("got %d %q", code, body)
	}
	if hdr.Get("Server") != "envoy" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("downstream headers %v", hdr)
	}
	ps := ev.proc.stream(t, 0)
	waitEnd(t, ps)
	msgs := ps.messages()
	if got, want := kinds(msgs), []string{"request_headers", "request_body", "response_headers", "response_body"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}

	rh := msgs[0].GetRequestHeaders()
	if rh.GetEndOfStream() {
		t.Error("request_headers end_of_stream with a body")
	}
	for i, h := range rh.GetHeaders().GetHeaders() {
		if h.GetValue() != "" || h.GetKey() != strings.ToLower(h.GetKey()) {
			t.Errorf("header %v: want lower-case key and raw_value only", h)
		}
		if i < 4 && !strings.HasPrefix(h.GetKey(), ":") {
			t.Errorf("pseudo-headers must come first: %v", rh.GetHeaders())
		}
	}
	for key, want := range map[string]string{
		":path": "/v1/models/m:predict?x=1", ":method": "POST", ":scheme": "http", ":authority": strings.TrimPrefix(ev.envoy.URL(), "http://"),
		"content-length": fmt.Sprint(len(reqBody)), "x-custom": "a", "x-forwarded-proto": "http",
	} {
		if got, _ := hget(rh.GetHeaders(), key); got != want {
			t.Errorf("request header %s = %q, want %q", key, got, want)
		}
	}
	id, ok := hget(rh.GetHeaders(), "x-request-id")
	if !ok || len(id) != 36 {
		t.Errorf("x-request-id %q", id)
	}
	if _, ok := hget(rh.GetHeaders(), "connection"); ok {
		t.Error("hop-by-hop header forwarded to the processor")
	}
	pc := msgs[0].GetProtocolConfig()
	if pc.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED || pc.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED || msgs[1].GetProtocolConfig() != nil {
		t.Errorf("protocol_config: first %v, second %v", pc, msgs[1].GetProtocolConfig())
	}
	if b := msgs[1].GetRequestBody(); string(b.GetBody()) != reqBody || !b.GetEndOfStream() {
		t.Errorf("request_body %v", b)
	}
	resph := msgs[2].GetResponseHeaders()
	if s, _ := hget(resph.GetHeaders(), ":status"); s != "200" || resph.GetEndOfStream() {
		t.Errorf("response_headers %v", resph)
	}
	if _, ok := hget(resph.GetHeaders(), "x-envoy-upstream-service-time"); !ok {
		t.Error("x-envoy-upstream-service-time missing")
	}
	if cl, _ := hget(resph.GetHeaders(), "content-length"); cl != fmt.Sprint(len(upstreamBody)) {
		t.Errorf("response content-length %q", cl)
	}
	if b := msgs[3].GetResponseBody(); string(b.GetBody()) != upstreamBody || !b.GetEndOfStream() {
		t.Errorf("response_body %v", b)
	}

	ups := ev.up.requests()
	if len(ups) != 1 {
		t.Fatalf("upstream saw %d requests", len(ups))
	}
	up := ups[0]
	if up.uri != "/v1/models/m:predict?x=1" || up.body != reqBody || up.header.Get("X-Request-Id") != id || up.header.Get("X-Envoy-Expected-Rq-Timeout-Ms") != "15000" {
		t.Errorf("upstream request %+v", up)
	}
	if ua := up.header.Values("User-Agent"); !reflect.DeepEqual(ua, []string{"tf-client/1"}) {
		t.Errorf("user-agent %q, want the client's", ua)
	}

	ev.wantNoViolations()
	st := ev.envoy.Stats()
	if st.StreamsStarted != 1 || st.StreamMsgsSent != 4 || st.StreamMsgsReceived != 4 || st.SpuriousMsgsReceived != 0 || st.StreamsClosed != 1 {
		t.Errorf("stats %+v", st)
	}
	x := ev.lastExchange()
	wantTrace := []string{"> request_headers", "< request_headers", "> request_body", "< request_body", "> response_headers", "< response_headers", "> response_body", "< response_body"}
	if x.Status != 200 || x.Details != "via_upstream" || x.RequestID != id || !reflect.DeepEqual(x.Trace, wantTrace) {
		t.Errorf("exchange %+v", x)
	}
}

func TestBodylessMessages(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		body      string
		upStatus  int
		upBody    string
		wantKinds []string
		wantEOS   [2]bool // end_of_stream of request_headers, response_headers
	}{
		{"GET with JSON answer", "GET", "", 200, `{"a":1}`, []string{"request_headers", "response_headers", "response_body"}, [2]bool{true, false}},
		{"POST answered 204", "POST", reqBody, 204, "", []string{"request_headers", "request_body", "response_headers"}, [2]bool{false, true}},
		{"GET answered empty 200", "GET", "", 200, "", []string{"request_headers", "response_headers"}, [2]bool{true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, Config{}, &procServer{respond: passThrough}, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(tc.upBody)))
				w.WriteHeader(tc.upStatus)
				_, _ = io.WriteString(w, tc.upBody)
			})
			code, _, body := ev.do(tc.method, "/v1/models/m", tc.body)
			if code != tc.upStatus || body != tc.upBody {
				t.Fatalf("got %d %q", code, body)
			}
			ps := ev.proc.stream(t, 0)
			waitEnd(t, ps)
			msgs := ps.messages()
			if got := kinds(msgs); !reflect.DeepEqual(got, tc.wantKinds) {
				t.Fatalf("messages %v, want %v", got, tc.wantKinds)
			}
			var eos []bool
			for _, m := range msgs {
				if h := headersOf(m); h != nil {
					eos = append(eos, h.GetEndOfStream())
				}
			}
			if !reflect.DeepEqual(eos, tc.wantEOS[:]) {
				t.Errorf("headers end_of_stream %v, want %v", eos, tc.wantEOS)
			}
			ev.wantNoViolations()
		})
	}
}

func TestHead(t *testing.T) {
	ev := newEnv(t, Config{}, &procServer{respond: passThrough}, nil)
	code, hdr, body := ev.do("HEAD", "/v1/models/m", "")
	if code != 200 || body != "" || hdr.Get("Content-Length") != fmt.Sprint(len(upstreamBody)) {
		t.Fatalf("got %d %q %v", code, body, hdr)
	}
	ps := ev.proc.stream(t, 0)
	waitEnd(t, ps)
	msgs := ps.messages()
	if got := kinds(msgs); !reflect.DeepEqual(got, []string{"request_headers", "response_headers"}) || !msgs[1].GetResponseHeaders().GetEndOfStream() {
		t.Errorf("messages %v", msgs)
	}
	ev.wantNoViolations()
}

func TestRequestHeaderMutations(t *testing.T) {
	tests := []struct {
		name          string
		mutation      *extprocv3.HeaderMutation
		wantStatus    int
		check         func(t *testing.T, up upRequest)
		wantRejected  uint64
		wantViolation string
	}{
		{
			name:       "rewrite :path and add a header",
			mutation:   setHeaders(raw(":path", "/v2/models/m/infer"), raw("inference-header-content-length", "42")),
			wantStatus: 200,
			check: func(t *testing.T, up upRequest) {
				if up.uri != "/v2/models/m/infer" || up.header.Get("Inference-Header-Content-Length") != "42" {
					t.Errorf("upstream %s %v", up.uri, up.header)
				}
			},
		},
		{
			name:       "append and remove",
			mutation:   &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{appended("x-custom", "b")}, RemoveHeaders: []string{"x-drop"}},
			wantStatus: 200,
			check: func(t *testing.T, up upRequest) {
				if got := up.header.Values("X-Custom"); !reflect.DeepEqual(got, []string{"a", "b"}) || up.header.Get("X-Drop") != "" {
					t.Errorf("upstream headers %v", up.header)
				}
			},
		},
		{
			name:         "routing and x-envoy headers are ignored, not fatal",
			mutation:     setHeaders(raw("host", "evil"), raw(":authority", "evil"), raw(":method", "DELETE"), raw(":scheme", "https"), raw("x-envoy-retry-on", "5xx")),
			wantStatus:   200,
			wantRejected: 5,
			check: func(t *testing.T, up upRequest) {
				if up.method != "POST" || up.host == "evil" || up.header.Get("X-Envoy-Retry-On") != "" {
					t.Errorf("upstream %s host %s %v", up.method, up.host, up.header)
				}
			},
		},
		{
			name:          "value-only header arrives empty",
			mutation:      setHeaders(&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-model", Value: "resnet"}}),
			wantStatus:    200,
			wantViolation: "raw_value only",
			check: func(t *testing.T, up upRequest) {
				if v, ok := up.header["X-Model"]; !ok || v[0] != "" {
					t.Errorf("x-model = %q, want present and empty", v)
				}
			},
		},
		{
			name:          "value and raw_value both set",
			mutation:      setHeaders(&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-model", Value: "a", RawValue: []byte("a")}}),
			wantStatus:    500,
			wantRejected:  1,
			wantViolation: "Only one of value or raw_value",
		},
		{
			name:          "invalid character",
			mutation:      setHeaders(raw("x-model", "a\nb")),
			wantStatus:    500,
			wantRejected:  1,
			wantViolation: "Invalid character in set_headers mutation.",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: on("request_headers", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(common(req, &extprocv3.CommonResponse{HeaderMutation: tc.mutation}))
			})}
			ev := newEnv(t, Config{}, proc, nil)
			code, _, body := ev.do("POST", "/v1/models/m:predict", reqBody, "X-Custom", "a", "X-Drop", "1")
			if code != tc.wantStatus {
				t.Fatalf("status %d (%q), want %d", code, body, tc.wantStatus)
			}
			if got := ev.envoy.Stats().RejectedHeaderMutations; got != tc.wantRejected {
				t.Errorf("rejected_header_mutations = %d, want %d (notes %q)", got, tc.wantRejected, ev.envoy.Notes())
			}
			if tc.wantViolation == "" {
				ev.wantNoViolations()
			} else {
				ev.wantViolation(tc.wantViolation)
			}
			ups := ev.up.requests()
			if tc.wantStatus != 200 {
				if len(ups) != 0 {
					t.Errorf("upstream called after a rejected mutation")
				}
				if body != "" || ev.lastExchange().Details == "" {
					t.Errorf("local reply body %q details %q", body, ev.lastExchange().Details)
				}
				return
			}
			if len(ups) != 1 {
				t.Fatalf("upstream saw %d requests", len(ups))
			}
			tc.check(t, ups[0])
		})
	}
}

func TestBodyReplacementAndContentLength(t *testing.T) {
	const translated = "binary-v2-body"
	tests := []struct {
		name        string
		kind        string // which body reply carries the mutation
		cr          *extprocv3.CommonResponse
		wantStatus  int
		wantDetails string
		check       func(t *testing.T, ev *env, body string)
	}{
		{
			name: "request body replaced with the exact content-length",
			kind: "request_body",
			cr: &extprocv3.CommonResponse{
				HeaderMutation: setHeaders(raw("content-type", "application/octet-stream"), raw("content-length", fmt.Sprint(len(translated)))),
				BodyMutation:   newBody(translated),
			},
			wantStatus: 200,
			check: func(t *testing.T, ev *env, _ string) {
				up := ev.up.requests()[0]
				if up.body != translated || up.contentLength != int64(len(translated)) || up.header.Get("Content-Type") != "application/octet-stream" {
					t.Errorf("upstream %+v", up)
				}
			},
		},
		{
			name:        "request body replaced, stale content-length",
			kind:        "request_body",
			cr:          &extprocv3.CommonResponse{BodyMutation: newBody(translated)},
			wantStatus:  500,
			wantDetails: "mismatch between content length and the length of the mutated body",
			check: func(t *testing.T, ev *env, _ string) {
				if n := len(ev.up.requests()); n != 0 {
					t.Errorf("upstream called %d times", n)
				}
				ev.wantViolation("does not match the 14-byte mutated body")
			},
		},
		{
			name:       "request body replaced, content-length removed: chunked upstream",
			kind:       "request_body",
			cr:         &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}, BodyMutation: newBody(translated)},
			wantStatus: 200,
			check: func(t *testing.T, ev *env, _ string) {
				up := ev.up.requests()[0]
				if up.body != translated || up.contentLength != -1 || !reflect.DeepEqual(up.transferEncoding, []string{"chunked"}) {
					t.Errorf("upstream %+v", up)
				}
			},
		},
		{
			name:        "clear_body with a stale content-length",
			kind:        "request_body",
			cr:          &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}},
			wantStatus:  500,
			wantDetails: "mismatch between content length and the length of the mutated body",
		},
		{
			name:       "clear_body with content-length 0",
			kind:       "request_body",
			cr:         &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw("content-length", "0")), BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}},
			wantStatus: 200,
			check: func(t *testing.T, ev *env, _ string) {
				if up := ev.up.requests()[0]; up.body != "" || up.contentLength != 0 {
					t.Errorf("upstream %+v", up)
				}
			},
		},
		{
			name: "response body replaced with the exact content-length",
			kind: "response_body",
			cr: &extprocv3.CommonResponse{
				HeaderMutation: setHeaders(raw("content-length", "22"), raw("content-type", "application/json")),
				BodyMutation:   newBody(`{"predictions": [1.5]}`),
			},
			wantStatus: 200,
			check: func(t *testing.T, _ *env, body string) {
				if body != `{"predictions": [1.5]}` {
					t.Errorf("body %q", body)
				}
			},
		},
		{
			name:        "request content-length changed without a body mutation",
			kind:        "request_body",
			cr:          &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw("content-length", "3"))},
			wantStatus:  500,
			wantDetails: "envoysim_content_length_mismatch",
		},
		{
			name:        "response content-length changed without a body mutation",
			kind:        "response_body",
			cr:          &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw("content-length", "3"))},
			wantStatus:  500,
			wantDetails: "envoysim_content_length_mismatch",
		},
		{
			name:        "response body replaced, stale content-length",
			kind:        "response_body",
			cr:          &extprocv3.CommonResponse{BodyMutation: newBody(`{"predictions": [1.5, 2.5]}`)},
			wantStatus:  500,
			wantDetails: "mismatch between content length and the length of the mutated body",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: on(tc.kind, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(common(req, tc.cr))
			})}
			ev := newEnv(t, Config{}, proc, nil)
			code, _, body := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantStatus {
				t.Fatalf("status %d (%q), want %d", code, body, tc.wantStatus)
			}
			x := ev.lastExchange()
			if tc.wantDetails != "" && x.Details != tc.wantDetails {
				t.Errorf("details %q, want %q", x.Details, tc.wantDetails)
			}
			if tc.wantStatus == 200 {
				ev.wantNoViolations()
			} else if len(ev.envoy.Violations()) == 0 {
				t.Error("no violation recorded")
			}
			if tc.check != nil {
				tc.check(t, ev, body)
			}
		})
	}
}

func TestSpuriousReplies(t *testing.T) {
	wrongKind := func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}})
	}
	tests := []struct {
		name        string
		fma         bool
		reply       func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse
		wantStatus  int
		wantDetails string
	}{
		{"body reply to request headers", false, wrongKind, 500, "spurious message"},
		{"response reply to request headers", false, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}})
		}, 500, "spurious message"},
		{"empty reply", false, func(*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return one(&extprocv3.ProcessingResponse{})
		}, 500, "unhandled message"},
		{"two replies to one message", false, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return []*extprocv3.ProcessingResponse{common(req, &extprocv3.CommonResponse{}), common(req, &extprocv3.CommonResponse{})}
		}, 500, "spurious message"},
		{"fail open ignores the processor", true, wrongKind, 200, "via_upstream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, Config{FailureModeAllow: tc.fma}, &procServer{respond: on("request_headers", tc.reply)}, nil)
			code, _, _ := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d", code, tc.wantStatus)
			}
			if d := ev.lastExchange().Details; d != tc.wantDetails {
				t.Errorf("details %q, want %q", d, tc.wantDetails)
			}
			st := ev.envoy.Stats()
			if st.SpuriousMsgsReceived != 1 || len(ev.envoy.Violations()) != 1 {
				t.Errorf("spurious %d, violations %q", st.SpuriousMsgsReceived, ev.envoy.Violations())
			}
			if tc.fma {
				if st.FailureModeAllowed != 1 || ev.up.requests()[0].body != reqBody {
					t.Errorf("fail open: stats %+v", st)
				}
			} else if len(ev.up.requests()) != 0 {
				t.Error("upstream called after a spurious reply")
			}
		})
	}
}

func TestProcessorFailures(t *testing.T) {
	silent := func(int, *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse { return nil }
	tests := []struct {
		name         string
		cfg          Config
		proc         *procServer
		wantStatus   int
		wantDetails  string
		wantUpstream bool
		wantStats    func(Stats) bool
	}{
		{
			name:        "no reply within message_timeout",
			cfg:         Config{MessageTimeout: 100 * time.Millisecond},
			proc:        &procServer{respond: silent},
			wantStatus:  504,
			wantDetails: "ext_proc_error_per-message_timeout_exceeded",
			wantStats:   func(s Stats) bool { return s.MessageTimeouts == 1 },
		},
		{
			name:         "timeout, fail open",
			cfg:          Config{MessageTimeout: 100 * time.Millisecond, FailureModeAllow: true},
			proc:         &procServer{respond: silent},
			wantStatus:   200,
			wantDetails:  "via_upstream",
			wantUpstream: true,
			wantStats:    func(s Stats) bool { return s.MessageTimeouts == 1 && s.FailureModeAllowed == 1 },
		},
		{
			name: "gRPC error fails closed",
			proc: &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, _ *procStream) error {
				_, _ = s.Recv()
				return status.Error(codes.Internal, "boom bang")
			}},
			wantStatus:  500,
			wantDetails: "ext_proc_error_gRPC_error_13{boom bang}",
			wantStats:   func(s Stats) bool { return s.StreamsFailed == 1 },
		},
		{
			name: "clean close continues unprocessed",
			proc: &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, _ *procStream) error {
				_, _ = s.Recv()
				return nil
			}},
			wantStatus:   200,
			wantDetails:  "via_upstream",
			wantUpstream: true,
			wantStats:    func(s Stats) bool { return s.StreamMsgsReceived == 0 && s.StreamsFailed == 0 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.cfg, tc.proc, nil)
			code, _, _ := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d", code, tc.wantStatus)
			}
			if d := ev.lastExchange().Details; d != tc.wantDetails {
				t.Errorf("details %q, want %q", d, tc.wantDetails)
			}
			if got := len(ev.up.requests()) == 1; got != tc.wantUpstream {
				t.Errorf("upstream called: %v, want %v", got, tc.wantUpstream)
			}
			if st := ev.envoy.Stats(); !tc.wantStats(st) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestOverrideMessageTimeout(t *testing.T) {
	// The processor asks for a longer timer before every reply, then takes
	// longer than message_timeout over its first one. The timer is 2 s, so
	// that even a busy machine gets the override to the stand-in before it
	// fires; after that nothing races it:
	//   - honoured: the processor waits until the stand-in has taken the
	//     override (its stats say so), then until message_timeout has
	//     passed, then replies; every message has a 30 s timer.
	//   - ignored: the first message times out, and the processor waits
	//     until the stand-in gives up on the stream.
	const timer, overrideTo = 2 * time.Second, 30 * time.Second
	var overrides atomic.Int64
	var ev *env
	slow := func(s extprocv3.ExternalProcessor_ProcessServer, _ *procStream) error {
		for n := 0; ; n++ {
			req, err := s.Recv()
			if err != nil {
				return nil
			}
			start := time.Now()
			if err := s.Send(&extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(overrideTo)}); err != nil {
				return nil
			}
			overrides.Add(1)
			if n == 0 {
				for ev.envoy.Stats().OverrideMessageTimeoutReceived == 0 || time.Since(start) < timer+100*time.Millisecond {
					select {
					case <-s.Context().Done(): // ignored: the stand-in timed out
						return nil
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			if err := s.Send(common(req, &extprocv3.CommonResponse{})); err != nil {
				return nil
			}
		}
	}
	tests := []struct {
		name       string
		max        time.Duration
		wantStatus int
		want       func(Stats, int64) bool
	}{
		{"honoured", time.Minute, 200, func(s Stats, sent int64) bool {
			return sent > 1 && s.OverrideMessageTimeoutReceived == uint64(sent) && s.MessageTimeouts == 0
		}},
		{"ignored without max_message_timeout", 0, 504, func(s Stats, _ int64) bool {
			return s.OverrideMessageTimeoutIgnored == 1 && s.MessageTimeouts == 1
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			overrides.Store(0)
			ev = newEnv(t, Config{MessageTimeout: timer, MaxMessageTimeout: tc.max}, &procServer{custom: slow}, nil)
			if code, _, _ := ev.do("POST", "/v1/models/m:predict", reqBody); code != tc.wantStatus {
				t.Fatalf("status %d, want %d", code, tc.wantStatus)
			}
			if st := ev.envoy.Stats(); !tc.want(st, overrides.Load()) {
				t.Errorf("stats %+v after %d overrides sent", st, overrides.Load())
			}
		})
	}
}

func TestProcessorUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	ev := newEnv(t, Config{ProcessorAddr: addr}, &procServer{respond: passThrough}, nil)
	code, _, _ := ev.do("GET", "/v1/models/m", "")
	if code != 500 {
		t.Fatalf("status %d", code)
	}
	if d := ev.lastExchange().Details; !strings.HasPrefix(d, "ext_proc_error_gRPC_error_14{") {
		t.Errorf("details %q", d)
	}
	if len(ev.up.requests()) != 0 || ev.envoy.Stats().StreamsFailed != 1 {
		t.Errorf("upstream %d, stats %+v", len(ev.up.requests()), ev.envoy.Stats())
	}
}

func TestModeOverride(t *testing.T) {
	none := extprocfilterv3.ProcessingMode_NONE
	buffered := extprocfilterv3.ProcessingMode_BUFFERED
	tests := []struct {
		name        string
		allow       bool
		onKind      string
		override    *extprocfilterv3.ProcessingMode
		wantKinds   []string
		wantStatus  int
		wantIgnored uint64
	}{
		{"both bodies to NONE", true, "request_headers", &extprocfilterv3.ProcessingMode{RequestBodyMode: none, ResponseBodyMode: none},
			[]string{"request_headers", "response_headers"}, 200, 0},
		{"request body only: the response body goes NONE too", true, "request_headers", &extprocfilterv3.ProcessingMode{RequestBodyMode: none},
			[]string{"request_headers", "response_headers"}, 200, 0},
		{"request NONE, response kept BUFFERED", true, "request_headers", &extprocfilterv3.ProcessingMode{RequestBodyMode: none, ResponseBodyMode: buffered},
			[]string{"request_headers", "response_headers", "response_body"}, 200, 0},
		{"response headers SKIP", true, "request_headers", &extprocfilterv3.ProcessingMode{ResponseHeaderMode: extprocfilterv3.ProcessingMode_SKIP, RequestBodyMode: buffered},
			[]string{"request_headers", "request_body"}, 200, 0},
		{"not allowed", false, "request_headers", &extprocfilterv3.ProcessingMode{RequestBodyMode: none, ResponseBodyMode: none},
			[]string{"request_headers", "request_body", "response_headers", "response_body"}, 200, 1},
		{"in a body reply", true, "request_body", &extprocfilterv3.ProcessingMode{ResponseBodyMode: none},
			[]string{"request_headers", "request_body", "response_headers", "response_body"}, 200, 1},
		{"to an unmodelled mode", true, "request_headers", &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
			[]string{"request_headers"}, 500, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: on(tc.onKind, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				r := common(req, &extprocv3.CommonResponse{})
				r.ModeOverride = tc.override
				return one(r)
			})}
			ev := newEnv(t, Config{AllowModeOverride: tc.allow}, proc, nil)
			code, _, body := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantStatus {
				t.Fatalf("status %d, want %d", code, tc.wantStatus)
			}
			ps := ev.proc.stream(t, 0)
			waitEnd(t, ps)
			if got := kinds(ps.messages()); !reflect.DeepEqual(got, tc.wantKinds) {
				t.Errorf("messages %v, want %v", got, tc.wantKinds)
			}
			if got := ev.envoy.Stats().ModeOverridesIgnored; got != tc.wantIgnored {
				t.Errorf("ignored overrides %d, want %d", got, tc.wantIgnored)
			}
			if tc.wantStatus == 200 {
				ev.wantNoViolations()
				if body != upstreamBody || ev.up.requests()[0].body != reqBody {
					t.Errorf("body %q, upstream %+v", body, ev.up.requests())
				}
			} else {
				ev.wantViolation("not modelled")
			}
		})
	}
}

func TestImmediateResponse(t *testing.T) {
	jsonErr := `{ "error": "Servable not found for request: Latest(m)" }`
	tests := []struct {
		name        string
		kind        string
		ir          *extprocv3.ImmediateResponse
		wantStatus  int
		wantBody    string
		wantCT      string
		wantDetails string
		wantKinds   []string
		wantRej     uint64
	}{
		{
			name: "at request headers, with headers",
			kind: "request_headers",
			ir: &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_NotFound}, Body: []byte(jsonErr),
				Headers: setHeaders(raw("content-type", "application/json"), raw("x-envoy-hack", "1")), Details: "tfsbridge model not found"},
			wantStatus: 404, wantBody: jsonErr, wantCT: "application/json", wantDetails: "tfsbridge_model_not_found",
			wantKinds: []string{"request_headers"}, wantRej: 1,
		},
		{
			name:       "missing status means 200, body is text/plain",
			kind:       "request_headers",
			ir:         &extprocv3.ImmediateResponse{Body: []byte("hi")},
			wantStatus: 200, wantBody: "hi", wantCT: "text/plain",
			wantKinds: []string{"request_headers"},
		},
		{
			name:       "status below 200 means 200",
			kind:       "request_headers",
			ir:         &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_Continue}},
			wantStatus: 200, wantBody: "",
			wantKinds: []string{"request_headers"},
		},
		{
			name:       "at request body",
			kind:       "request_body",
			ir:         &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_BadRequest}, Body: []byte(`{"error": "bad"}`)},
			wantStatus: 400, wantBody: `{"error": "bad"}`, wantCT: "text/plain",
			wantKinds: []string{"request_headers", "request_body"},
		},
		{
			name:       "at response headers",
			kind:       "response_headers",
			ir:         &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_BadGateway}, Body: []byte("x")},
			wantStatus: 502, wantBody: "x", wantCT: "text/plain",
			wantKinds: []string{"request_headers", "request_body", "response_headers"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: on(tc.kind, func(*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(immediate(tc.ir))
			})}
			ev := newEnv(t, Config{}, proc, nil)
			code, hdr, body := ev.do("POST", "/v1/models/m:predict", reqBody)
			if code != tc.wantStatus || body != tc.wantBody || hdr.Get("Content-Type") != tc.wantCT {
				t.Fatalf("got %d %q %q", code, body, hdr.Get("Content-Type"))
			}
			if hdr.Get("X-Envoy-Hack") != "" || hdr.Get("Content-Length") != fmt.Sprint(len(tc.wantBody)) {
				t.Errorf("headers %v", hdr)
			}
			ps := ev.proc.stream(t, 0)
			if end := waitEnd(t, ps); end == nil {
				t.Error("stream not closed after the immediate response")
			}
			if got := kinds(ps.messages()); !reflect.DeepEqual(got, tc.wantKinds) {
				t.Errorf("messages %v, want %v", got, tc.wantKinds)
			}
			x := ev.lastExchange()
			if x.Details != tc.wantDetails {
				t.Errorf("details %q, want %q", x.Details, tc.wantDetails)
			}
			st := ev.envoy.Stats()
			if st.ImmediateResponses != 1 || st.RejectedHeaderMutations != tc.wantRej {
				t.Errorf("stats %+v", st)
			}
			ev.wantNoViolations()
		})
	}
}

func TestLocalRepliesRunThroughExtProc(t *testing.T) {
	deadUpstream := refusedURL(t)
	slowUpstream := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}
	tests := []struct {
		name       string
		cfg        Config
		upHandler  http.HandlerFunc
		body       string
		wantStatus int
		wantBody   string
		wantKinds  []string
	}{
		{
			name:       "request body over the buffer limit: 413 after request headers",
			cfg:        Config{BufferLimit: 24},
			body:       bigBody,
			wantStatus: 413, wantBody: "Payload Too Large",
			wantKinds: []string{"request_headers", "response_headers", "response_body"},
		},
		{
			name:       "buffer filter in front: the stream starts at response headers",
			cfg:        Config{BufferFilterMaxBytes: 24},
			body:       bigBody,
			wantStatus: 413, wantBody: "Payload Too Large",
			wantKinds: []string{"response_headers", "response_body"},
		},
		{
			name:       "upstream unreachable",
			cfg:        Config{Upstream: deadUpstream},
			body:       reqBody,
			wantStatus: 503, wantBody: "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused",
			wantKinds: []string{"request_headers", "request_body", "response_headers", "response_body"},
		},
		{
			name:       "upstream timeout",
			cfg:        Config{UpstreamTimeout: 100 * time.Millisecond},
			upHandler:  slowUpstream,
			wantStatus: 504, wantBody: "upstream request timeout",
			wantKinds: []string{"request_headers", "response_headers", "response_body"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.cfg, &procServer{respond: passThrough}, tc.upHandler)
			method := "GET"
			if tc.body != "" {
				method = "POST"
			}
			code, hdr, body := ev.do(method, "/v1/models/m:predict", tc.body)
			if code != tc.wantStatus || body != tc.wantBody || hdr.Get("Content-Type") != "text/plain" {
				t.Fatalf("got %d %q %v", code, body, hdr)
			}
			ps := ev.proc.stream(t, 0)
			waitEnd(t, ps)
			msgs := ps.messages()
			if got := kinds(msgs); !reflect.DeepEqual(got, tc.wantKinds) {
				t.Fatalf("messages %v, want %v", got, tc.wantKinds)
			}
			rh := msgs[len(msgs)-2].GetResponseHeaders()
			st, _ := hget(rh.GetHeaders(), ":status")
			cl, _ := hget(rh.GetHeaders(), "content-length")
			if st != fmt.Sprint(tc.wantStatus) || cl != fmt.Sprint(len(tc.wantBody)) {
				t.Errorf("response_headers %v", rh)
			}
			if b := msgs[len(msgs)-1].GetResponseBody().GetBody(); string(b) != tc.wantBody {
				t.Errorf("response_body %q", b)
			}
			ev.wantNoViolations()
		})
	}
}

func TestProcessorRewritesLocalReply(t *testing.T) {
	tfErr := `{ "error": "Payload Too Large" }`
	proc := &procServer{respond: on("response_body", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(common(req, &extprocv3.CommonResponse{
			HeaderMutation: setHeaders(raw("content-type", "application/json"), raw("content-length", fmt.Sprint(len(tfErr)))),
			BodyMutation:   newBody(tfErr),
		}))
	})}
	ev := newEnv(t, Config{BufferLimit: 24}, proc, nil)
	code, hdr, body := ev.do("POST", "/v1/models/m:predict", bigBody)
	if code != 413 || body != tfErr || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q %v", code, body, hdr)
	}
	ev.wantNoViolations()
}

func TestResponseOverBufferLimit(t *testing.T) {
	ev := newEnv(t, Config{BufferLimit: 8}, &procServer{respond: passThrough}, nil)
	code, _, body := ev.do("GET", "/v1/models/m", "")
	if code != 500 || body != "Internal Server Error" {
		t.Fatalf("got %d %q", code, body)
	}
	if d := ev.lastExchange().Details; d != "response_payload_too_large" {
		t.Errorf("details %q", d)
	}
	ps := ev.proc.stream(t, 0)
	waitEnd(t, ps)
	// The local reply bypasses the filters: the processor never sees the body.
	if got := kinds(ps.messages()); !reflect.DeepEqual(got, []string{"request_headers", "response_headers"}) {
		t.Errorf("messages %v", got)
	}
}

// The route timeout passes while a slow upstream body is buffered: the
// response headers are in the filter chain (held by ext_proc) but not sent
// downstream, so the router's 504 goes straight to the client and the
// processor never sees it (FilterManager::sendLocalReply → sendDirectLocalReply).
// With body mode NONE the headers were already sent: the stream is reset.
func TestRouteTimeoutDuringResponseBody(t *testing.T) {
	drip := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for range 100 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	}
	t.Run("buffered", func(t *testing.T) {
		ev := newEnv(t, Config{UpstreamTimeout: 200 * time.Millisecond}, &procServer{respond: passThrough}, drip)
		code, hdr, body := ev.do("GET", "/v1/models/m", "")
		if code != 504 || body != "upstream request timeout" || hdr.Get("Content-Type") != "text/plain" {
			t.Fatalf("got %d %q %v", code, body, hdr)
		}
		if d := ev.lastExchange().Details; d != "upstream_response_timeout" {
			t.Errorf("details %q", d)
		}
		ps := ev.proc.stream(t, 0)
		waitEnd(t, ps)
		if got := kinds(ps.messages()); !reflect.DeepEqual(got, []string{"request_headers", "response_headers"}) {
			t.Errorf("messages %v", got)
		}
		ev.wantNoViolations()
	})
	t.Run("streamed through", func(t *testing.T) {
		mode := DefaultMode()
		mode.ResponseBodyMode = extprocfilterv3.ProcessingMode_NONE
		ev := newEnv(t, Config{UpstreamTimeout: 200 * time.Millisecond, Mode: mode}, &procServer{respond: passThrough}, drip)
		resp, err := ev.client.Get(ev.envoy.URL() + "/v1/models/m")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); resp.StatusCode != 200 || err == nil {
			t.Fatalf("got %d and %v, want 200 then a reset", resp.StatusCode, err)
		}
	})
}

func TestContinueAndReplace(t *testing.T) {
	proc := &procServer{respond: on("request_headers", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(common(req, &extprocv3.CommonResponse{
			Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: setHeaders(raw(":method", "POST"), raw(":path", "/v2/models/m/infer")),
			BodyMutation:   newBody(`{"inputs": []}`),
		}))
	})}
	ev := newEnv(t, Config{}, proc, nil)
	if code, _, _ := ev.do("GET", "/v1/models/m", ""); code != 200 {
		t.Fatalf("status %d", code)
	}
	up := ev.up.requests()[0]
	if up.method != "POST" || up.uri != "/v2/models/m/infer" || up.body != `{"inputs": []}` || up.contentLength != -1 {
		t.Errorf("upstream %+v", up)
	}
	ps := ev.proc.stream(t, 0)
	waitEnd(t, ps)
	if got := kinds(ps.messages()); !reflect.DeepEqual(got, []string{"request_headers", "response_headers", "response_body"}) {
		t.Errorf("messages %v", got)
	}
	ev.wantNoViolations()
}

func TestHeaderMutationInBodyReplyApplies(t *testing.T) {
	proc := &procServer{respond: on("request_body", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(common(req, &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw(":path", "/v2/models/m/infer"), raw("x-late", "1"))}))
	})}
	ev := newEnv(t, Config{}, proc, nil)
	if code, _, _ := ev.do("POST", "/v1/models/m:predict", reqBody); code != 200 {
		t.Fatalf("status %d", code)
	}
	if up := ev.up.requests()[0]; up.uri != "/v2/models/m/infer" || up.header.Get("X-Late") != "1" {
		t.Errorf("upstream %+v", up)
	}
	ev.wantNoViolations()
}

func TestDownstreamCancelResetsStream(t *testing.T) {
	proc := &procServer{custom: func(s extprocv3.ExternalProcessor_ProcessServer, ps *procStream) error {
		for {
			if _, ok := ps.recv(s); !ok {
				return nil
			}
		}
	}}
	ev := newEnv(t, Config{}, proc, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ev.envoy.URL()+"/v1/models/m:predict", strings.NewReader(reqBody))
	done := make(chan error, 1)
	go func() {
		resp, err := ev.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if !waitFor(30*time.Second, func() bool { return ev.proc.streamCount() > 0 && len(ev.proc.stream(t, 0).messages()) > 0 }) {
		t.Fatal("no message reached the processor")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v", err)
	}
	end := waitEnd(t, ev.proc.stream(t, 0))
	if status.Code(end) != codes.Canceled && !errors.Is(end, io.EOF) {
		t.Errorf("processor saw %v, want Canceled or EOF", end)
	}
	if st := ev.envoy.Stats(); st.MessageTimeouts != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestConcurrentExchanges(t *testing.T) {
	ev := newEnv(t, Config{}, &procServer{respond: passThrough}, nil)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest("POST", ev.envoy.URL()+fmt.Sprintf("/v1/models/m%d:predict", i), strings.NewReader(reqBody))
			resp, err := ev.client.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != upstreamBody {
				errs <- fmt.Sprintf("%d %q", resp.StatusCode, b)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	ev.wantNoViolations()
	if st := ev.envoy.Stats(); st.StreamsStarted != n || st.StreamMsgsSent != 4*n || st.StreamMsgsReceived != 4*n {
		t.Errorf("stats %+v", st)
	}
}
