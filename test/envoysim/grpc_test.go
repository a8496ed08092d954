package envoysim

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The gRPC tests run a real grpc-go client through the stand-in (h2c downstream) to a real
// grpc-go server (an h2c cluster): grpc.health.v1.Health is the service, because its
// messages are small protos both ends know. A service "tfs" is SERVING on upstream A and
// NOT_SERVING on upstream B; anything else is NOT_FOUND, which grpc-go answers
// trailers-only.

const healthCheck = "/grpc.health.v1.Health/Check"

// startGRPCUpstream serves grpc.health.v1 on a loopback port with "tfs" in status st and
// returns the cluster URL.
func startGRPCUpstream(t *testing.T, st healthpb.HealthCheckResponse_ServingStatus) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("tfs", st)
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	grpcUpstreams.add(t, gs)
	return "http://" + lis.Addr().String()
}

// grpcUpstreams remembers each test's gRPC upstreams, so that grpcEnv stops them before
// the stand-in's leak check: their server transports would otherwise wait for the
// stand-in's connections to close.
var grpcUpstreams upstreamsByTest

type upstreamsByTest struct {
	mu sync.Mutex
	m  map[*testing.T][]*grpc.Server
}

func (u *upstreamsByTest) add(t *testing.T, gs *grpc.Server) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[*testing.T][]*grpc.Server{}
	}
	u.m[t] = append(u.m[t], gs)
}

// stopAll stops t's gRPC upstreams (Stop closes their connections at once).
func (u *upstreamsByTest) stopAll(t *testing.T) {
	u.mu.Lock()
	servers := u.m[t]
	delete(u.m, t)
	u.mu.Unlock()
	for _, gs := range servers {
		gs.Stop()
	}
}

// grpcEnv is a stand-in in GRPCMode (unless cfg.Mode says otherwise) with an h2c cluster
// (upstream A) and a gRPC client connected to it over h2c.
func grpcEnv(t *testing.T, cfg Config, proc *procServer) (*env, *grpc.ClientConn) {
	t.Helper()
	if cfg.Upstream == "" {
		cfg.Upstream = startGRPCUpstream(t, healthpb.HealthCheckResponse_SERVING)
	}
	if cfg.Mode == nil {
		cfg.Mode = GRPCMode()
	}
	cfg.UpstreamHTTP2 = true
	ev := newEnv(t, cfg, proc, nil)
	t.Cleanup(func() { grpcUpstreams.stopAll(t) }) // runs before newEnv's leak check
	conn, err := grpc.NewClient(strings.TrimPrefix(ev.envoy.URL(), "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return ev, conn
}

// check calls method (the health Check by default) for service through conn. The
// deadline only bounds a hang on a busy machine.
func check(t *testing.T, conn *grpc.ClientConn, method, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if method == "" {
		method = healthCheck
	}
	out := &healthpb.HealthCheckResponse{}
	err := conn.Invoke(ctx, method, &healthpb.HealthCheckRequest{Service: service}, out)
	return out.GetStatus(), err
}

// grpcFrame is one uncompressed gRPC Length-Prefixed-Message holding m.
func grpcFrame(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return string(append(out, b...))
}

// TestGRPCPassThrough: the message sequence of a unary gRPC call in GRPCMode, and what each
// message carries (spec §5.1, §5.2).
func TestGRPCPassThrough(t *testing.T) {
	proc := &procServer{respond: passThrough}
	ev, conn := grpcEnv(t, Config{}, proc)
	st, err := check(t, conn, "", "tfs")
	if err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", st, err)
	}
	ps := proc.stream(t, 0)
	waitEnd(t, ps)
	msgs := ps.messages()
	want := []string{"request_headers", "request_body", "response_headers", "response_body", "response_trailers"}
	if got := kinds(msgs); !reflect.DeepEqual(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	rh := msgs[0].GetRequestHeaders()
	for k, v := range map[string]string{":path": healthCheck, ":method": "POST", "content-type": "application/grpc", "te": "trailers"} {
		if got, _ := hget(rh.GetHeaders(), k); got != v {
			t.Errorf("request header %s = %q, want %q", k, got, v)
		}
	}
	if _, ok := hget(rh.GetHeaders(), "content-length"); ok || rh.GetEndOfStream() {
		t.Errorf("request headers: content-length present or end_of_stream set: %v", rh)
	}
	if rb := msgs[1].GetRequestBody(); !rb.GetEndOfStream() || string(rb.GetBody()) != grpcFrame(t, &healthpb.HealthCheckRequest{Service: "tfs"}) {
		t.Errorf("request body %x, end_of_stream %v", rb.GetBody(), rb.GetEndOfStream())
	}
	if rb := msgs[3].GetResponseBody(); rb.GetEndOfStream() || string(rb.GetBody()) != grpcFrame(t, &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}) {
		t.Errorf("response body %x, end_of_stream %v (want false: trailers follow)", rb.GetBody(), rb.GetEndOfStream())
	}
	if gs, _ := hget(msgs[4].GetResponseTrailers().GetTrailers(), "grpc-status"); gs != "0" {
		t.Errorf("response trailers grpc-status %q", gs)
	}
	if x := ev.lastExchange(); x.Proto != "HTTP/2.0" || x.Status != 200 || x.Details != "via_upstream" {
		t.Errorf("exchange %+v", x)
	}
	ev.wantNoViolations()
}

// TestGRPCTrailerModes: trailers reach the processor only with trailer mode SEND, and an
// upstream trailers-only answer is one response_headers message with end_of_stream.
func TestGRPCTrailerModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    *extprocfilterv3.ProcessingMode
		service string
		want    []string
	}{
		{"SEND", GRPCMode(), "tfs", []string{"request_headers", "request_body", "response_headers", "response_body", "response_trailers"}},
		{"SKIP", DefaultMode(), "tfs", []string{"request_headers", "request_body", "response_headers", "response_body"}},
		{"trailers-only", GRPCMode(), "nope", []string{"request_headers", "request_body", "response_headers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: passThrough}
			ev, conn := grpcEnv(t, Config{Mode: tc.mode}, proc)
			_, err := check(t, conn, "", tc.service)
			wantCode := codes.OK
			if tc.service == "nope" {
				wantCode = codes.NotFound
			}
			if status.Code(err) != wantCode {
				t.Fatalf("Check: %v, want %v", err, wantCode)
			}
			ps := proc.stream(t, 0)
			waitEnd(t, ps)
			msgs := ps.messages()
			if got := kinds(msgs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages %v, want %v", got, tc.want)
			}
			if tc.service == "nope" {
				h := msgs[2].GetResponseHeaders()
				if gs, _ := hget(h.GetHeaders(), "grpc-status"); gs != "5" || !h.GetEndOfStream() {
					t.Errorf("trailers-only headers: grpc-status %q, end_of_stream %v", gs, h.GetEndOfStream())
				}
			}
			ev.wantNoViolations()
		})
	}
}

// TestGRPCStatusRewrite: grpc-status and grpc-message rewritten where they are, in the
// trailers reply or in the headers reply of a trailers-only answer, reach the client.
func TestGRPCStatusRewrite(t *testing.T) {
	rewrite := setHeaders(raw("grpc-status", "9"), raw("grpc-message", "rewritten%20here"))
	for _, tc := range []struct {
		name, service, kind string
	}{
		{"trailers", "tfs", "response_trailers"},
		{"trailers-only headers", "nope", "response_headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := &procServer{respond: on(tc.kind, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(common(req, &extprocv3.CommonResponse{HeaderMutation: rewrite}))
			})}
			ev, conn := grpcEnv(t, Config{}, proc)
			_, err := check(t, conn, "", tc.service)
			if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "rewritten here" {
				t.Fatalf("Check: %v, want FailedPrecondition %q", err, "rewritten here")
			}
			ev.wantNoViolations()
		})
	}
}

// TestGRPCLocalReplies: immediate_response and Envoy's own local replies to a gRPC request
// are trailers-only answers (Utility::prepareLocalReply with is_grpc).
func TestGRPCLocalReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ir       *extprocv3.ImmediateResponse
		upstream func(t *testing.T) string // nil: a serving cluster
		code     codes.Code
		msg      string
	}{
		{"grpc_status wins over status", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 400}, GrpcStatus: &extprocv3.GrpcStatus{Status: 3}, Body: []byte("bad 100% \u00e9")}, nil, codes.InvalidArgument, "bad 100% \u00e9"},
		{"status 404 is UNIMPLEMENTED", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 404}}, nil, codes.Unimplemented, ""},
		{"status 400 is INTERNAL", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 400}, Body: []byte("no")}, nil, codes.Internal, "no"},
		{"header mutation wins", &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: 503}, GrpcStatus: &extprocv3.GrpcStatus{Status: 3}, Headers: setHeaders(raw("grpc-status", "8"))}, nil, codes.ResourceExhausted, ""},
		{"upstream refused", nil, refusedURL, codes.Unavailable, "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: delayed connect error: Connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			respond := responder(passThrough)
			if tc.ir != nil {
				respond = on("request_headers", func(*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse { return one(immediate(tc.ir)) })
			}
			cfg := Config{}
			if tc.upstream != nil {
				cfg.Upstream = tc.upstream(t)
			}
			proc := &procServer{respond: respond}
			ev, conn := grpcEnv(t, cfg, proc)
			_, err := check(t, conn, "", "tfs")
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
				t.Fatalf("Check: %v, want %v %q", err, tc.code, tc.msg)
			}
			ps := proc.stream(t, 0)
			waitEnd(t, ps)
			if tc.ir == nil {
				// Envoy's own local reply on the request path runs through ext_proc.
				msgs := ps.messages()
				last := msgs[len(msgs)-1].GetResponseHeaders()
				ct, _ := hget(last.GetHeaders(), "content-type")
				gs, _ := hget(last.GetHeaders(), "grpc-status")
				st, _ := hget(last.GetHeaders(), ":status")
				if !last.GetEndOfStream() || ct != "application/grpc" || gs != "14" || st != "200" {
					t.Errorf("local reply seen by the processor: %v", last)
				}
			}
			ev.wantNoViolations()
		})
	}
}

// TestGRPCMutations: :path rewrites, body replacement, mode_override and clear_route_cache
// after a body reply, on gRPC traffic.
func TestGRPCMutations(t *testing.T) {
	frame := func(service string) string {
		return grpcFrame(t, &healthpb.HealthCheckRequest{Service: service})
	}
	reply := func(kind string, cr func(t *testing.T) *extprocv3.CommonResponse) responder {
		return on(kind, func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return one(common(req, cr(t)))
		})
	}
	for _, tc := range []struct {
		name            string
		method, service string
		respond         responder
		routes          bool // upstream B behind x-cluster: b
		want            healthpb.HealthCheckResponse_ServingStatus
		code            codes.Code
		kinds           []string
	}{
		{name: "unknown method without rewrite", method: "/tensorflow.serving.PredictionService/Predict", service: "tfs", respond: passThrough, code: codes.Unimplemented},
		{name: ":path rewritten", method: "/tensorflow.serving.PredictionService/Predict", service: "tfs",
			respond: reply("request_headers", func(*testing.T) *extprocv3.CommonResponse {
				return &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw(":path", healthCheck))}
			}), want: healthpb.HealthCheckResponse_SERVING},
		{name: "request body replaced", service: "nope",
			respond: reply("request_body", func(*testing.T) *extprocv3.CommonResponse {
				return &extprocv3.CommonResponse{BodyMutation: newBody(frame("tfs"))}
			}), want: healthpb.HealthCheckResponse_SERVING},
		{name: "response body replaced", service: "tfs",
			respond: reply("response_body", func(t *testing.T) *extprocv3.CommonResponse {
				return &extprocv3.CommonResponse{BodyMutation: newBody(grpcFrame(t, &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN}))}
			}), want: healthpb.HealthCheckResponse_SERVICE_UNKNOWN},
		{name: "mode_override: response body NONE, trailers still SEND", service: "tfs",
			respond: func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				r := common(req, &extprocv3.CommonResponse{})
				if kindOf(req) == "request_headers" {
					r.ModeOverride = &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE}
				}
				return one(r)
			}, want: healthpb.HealthCheckResponse_SERVING,
			kinds: []string{"request_headers", "request_body", "response_headers", "response_trailers"}},
		{name: "clear_route_cache in the body reply", service: "tfs", routes: true,
			respond: reply("request_body", func(*testing.T) *extprocv3.CommonResponse {
				return &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw("x-cluster", "b")), ClearRouteCache: true}
			}), want: healthpb.HealthCheckResponse_NOT_SERVING},
		{name: "header without clear_route_cache keeps the route", service: "tfs", routes: true,
			respond: reply("request_body", func(*testing.T) *extprocv3.CommonResponse {
				return &extprocv3.CommonResponse{HeaderMutation: setHeaders(raw("x-cluster", "b"))}
			}), want: healthpb.HealthCheckResponse_SERVING},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AllowModeOverride: true}
			if tc.routes {
				cfg.HeaderRoutes = []HeaderRoute{{Header: "x-cluster", Value: "b", Upstream: startGRPCUpstream(t, healthpb.HealthCheckResponse_NOT_SERVING)}}
			}
			proc := &procServer{respond: tc.respond}
			ev, conn := grpcEnv(t, cfg, proc)
			st, err := check(t, conn, tc.method, tc.service)
			if status.Code(err) != tc.code || (tc.code == codes.OK && st != tc.want) {
				t.Fatalf("Check: %v %v, want %v %v", st, err, tc.want, tc.code)
			}
			if tc.kinds != nil {
				ps := proc.stream(t, 0)
				waitEnd(t, ps)
				if got := kinds(ps.messages()); !reflect.DeepEqual(got, tc.kinds) {
					t.Errorf("messages %v, want %v", got, tc.kinds)
				}
			}
			ev.wantNoViolations()
		})
	}
}

// TestH2DownstreamREST: a plain HTTP/2 (h2c) client through the stand-in to an HTTP/1.1
// upstream; HTTP/2 carries no connection header and no invented content-length.
func TestH2DownstreamREST(t *testing.T) {
	proc := &procServer{respond: on("response_body", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(common(req, &extprocv3.CommonResponse{
			HeaderMutation: setHeaders(raw("content-length", "5")),
			BodyMutation:   newBody("fixed"),
		}))
	})}
	ev := newEnv(t, Config{}, proc, nil)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	ev.client = &http.Client{Transport: tr, Timeout: time.Minute} // a bound for a hang
	req, err := http.NewRequest("POST", ev.envoy.URL()+"/v1/models/m:predict", strings.NewReader(`{"instances": [1]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, body, err := ev.send(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || body != "fixed" || resp.Header.Get("Content-Length") != "5" || resp.Header.Get("Connection") != "" {
		t.Fatalf("got %s %d %q %v", resp.Proto, resp.StatusCode, body, resp.Header)
	}
	if up := ev.up.requests(); len(up) != 1 || up[0].body != `{"instances": [1]}` {
		t.Errorf("upstream saw %+v", up)
	}
	if x := ev.lastExchange(); x.Proto != "HTTP/2.0" {
		t.Errorf("exchange proto %q", x.Proto)
	}
	ev.wantNoViolations()
}

// TestGRPCLocalReplyEncoding pins the helpers of the trailers-only local reply.
func TestGRPCLocalReplyEncoding(t *testing.T) {
	for in, want := range map[string]string{"plain text": "plain text", "100%": "100%25", "é\n": "%C3%A9%0A", "": ""} {
		if got := percentEncode([]byte(in)); got != want {
			t.Errorf("percentEncode(%q) = %q, want %q", in, got, want)
		}
	}
	for code, want := range map[int]uint32{400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14, 413: 2, 500: 2} {
		if got := httpToGRPCStatus(code); got != want {
			t.Errorf("httpToGRPCStatus(%d) = %d, want %d", code, got, want)
		}
	}
	for ct, want := range map[string]bool{"application/grpc": true, "application/grpc+proto": true, "application/grpc;x=y": true, "application/grpc-web": false, "application/json": false} {
		h := &headerMap{}
		h.add("content-type", ct)
		if got := isGRPCRequest(h); got != want {
			t.Errorf("isGRPCRequest(%q) = %v", ct, got)
		}
	}
}

// TestGRPCFullDuplex: a unary gRPC call in FULL_DUPLEX_STREAMED: the request body ends
// with end_of_stream (gRPC clients send no request trailers), the response body is
// followed by the trailers message, whose reply ends the response; a trailers-only
// answer is one headers message.
func TestGRPCFullDuplex(t *testing.T) {
	for _, tc := range []struct {
		service string
		code    codes.Code
		want    []string
	}{
		{"tfs", codes.OK, []string{"request_headers", "request_body", "response_headers", "response_body", "response_trailers"}},
		{"nope", codes.NotFound, []string{"request_headers", "request_body", "response_headers"}},
	} {
		t.Run(tc.service, func(t *testing.T) {
			proc := &procServer{perStream: duplexEcho(echoProc{identity: true})}
			ev, conn := grpcEnv(t, Config{Mode: FullDuplexMode()}, proc)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound for a hang
			defer cancel()
			var trailer metadata.MD
			out := &healthpb.HealthCheckResponse{}
			err := conn.Invoke(ctx, healthCheck, &healthpb.HealthCheckRequest{Service: tc.service}, out, grpc.Trailer(&trailer))
			if status.Code(err) != tc.code {
				t.Fatalf("Check: %v, want %v", err, tc.code)
			}
			if tc.code == codes.OK && (out.GetStatus() != healthpb.HealthCheckResponse_SERVING || strings.Join(trailer.Get("x-proc"), ",") != "1") {
				t.Errorf("status %v, trailers %v (want x-proc: 1 from the trailers reply)", out.GetStatus(), trailer)
			}
			ps := proc.stream(t, 0)
			waitEnd(t, ps)
			// Body chunks are as the codec hands them over: grpc-go ends its request
			// with an empty DATA frame, so the message and end_of_stream may come
			// apart; runs of one kind count once.
			msgs := ps.messages()
			var got []string
			for _, k := range kinds(msgs) {
				if len(got) == 0 || got[len(got)-1] != k {
					got = append(got, k)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages %v, want runs of %v", kinds(msgs), tc.want)
			}
			var reqBody []byte
			var reqEOS, respEOS bool
			for _, m := range msgs {
				if b := m.GetRequestBody(); b != nil {
					reqBody, reqEOS = append(reqBody, b.GetBody()...), b.GetEndOfStream()
				}
				respEOS = respEOS || m.GetResponseBody().GetEndOfStream()
			}
			if !reqEOS || string(reqBody) != grpcFrame(t, &healthpb.HealthCheckRequest{Service: tc.service}) {
				t.Errorf("request body %x, last end_of_stream %v", reqBody, reqEOS)
			}
			if respEOS {
				t.Error("response body with end_of_stream: trailers follow")
			}
			ev.wantNoViolations()
		})
	}
}
