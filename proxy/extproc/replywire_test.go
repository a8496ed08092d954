package extproc

import (
	"bytes"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// TestAppendReply: every reply shape the adapter builds in its rooms is
// encoded by appendReply to the bytes protobuf itself writes (so Envoy
// reads the same message), and the messages appendReply does not know
// are refused, for protobuf to encode.
func TestAppendReply(t *testing.T) {
	set := []session.Header{{Key: "content-type", Value: "application/json"}, {Key: "content-length", Value: "45"}}
	cont := session.Action{Verdict: session.Continue, Set: set, Remove: []string{"inference-header-content-length"}}
	withBody := cont
	withBody.ReplaceBody, withBody.Body = true, []byte(`{"predictions": [2.5]}`)
	emptyBody := session.Action{Verdict: session.Continue, ReplaceBody: true}
	routed := session.Action{Verdict: session.Continue, Set: set[:1], ClearRouteCache: true}
	pass := session.Action{Verdict: session.PassThrough}
	passRouted := session.Action{Verdict: session.PassThrough, Set: set[:1], ClearRouteCache: true}
	bare := session.Action{Verdict: session.Continue}
	long := session.Action{Verdict: session.Continue, Set: []session.Header{{Key: "x-long", Value: string(bytes.Repeat([]byte("v"), 300))}}}
	cases := map[string]*extprocv3.ProcessingResponse{
		"request headers, rewrite":     headersReply(routed, true),
		"request headers, bare":        headersReply(bare, true),
		"request headers, pass":        headersReply(pass, true),
		"request headers, pass routed": headersReply(passRouted, true),
		"response headers, local":      headersReply(pass, false),
		"response headers, set":        headersReply(cont, false),
		"headers, replace body":        headersReply(withBody, true),
		"duplex headers":               duplexHeadersReply(withBody, false),
		"request body":                 bodyReply(withBody, true),
		"response body":                bodyReply(withBody, false),
		"response body, empty body":    bodyReply(emptyBody, false),
		"body, unchanged":              bodyReply(bare, true),
		"body, long value":             bodyReply(long, false),
		"headers, no header":           withOption(func(o *corev3.HeaderValueOption) { o.Header = nil }),
		"gRPC mode":                    grpcMode(grpcSession(t), bare, headersReply(bare, true)),
		"chunk":                        streamedReply([]byte("abc"), false, true),
		"last chunk":                   streamedReply([]byte("abc"), true, false),
		"empty last chunk":             streamedReply(nil, true, false),
		"empty chunk":                  streamedReply(nil, false, true),
	}
	for name, r := range cases {
		got, ok := appendReply(nil, r)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: appendReply = %v, %x\nprotobuf writes %x", name, ok, got, want)
		}
		back := &extprocv3.ProcessingResponse{}
		if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, r) {
			t.Errorf("%s: decodes to %v (%v), want %v", name, back, err, r)
		}
	}
	refused := map[string]*extprocv3.ProcessingResponse{
		"immediate":        immediate(session.Action{Verdict: session.Respond, Status: 400, Body: []byte("x")}),
		"trailers":         {Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}},
		"nothing":          {},
		"metadata":         withTop(func(r *extprocv3.ProcessingResponse) { r.DynamicMetadata = &structpb.Struct{} }),
		"timeout":          withTop(func(r *extprocv3.ProcessingResponse) { r.OverrideMessageTimeout = durationpb.New(1) }),
		"drain":            withTop(func(r *extprocv3.ProcessingResponse) { r.RequestDrain = true }), //nolint:staticcheck // deprecated, still sent
		"header value":     withOption(func(o *corev3.HeaderValueOption) { o.Header.Value = "v" }),
		"append":           withOption(func(o *corev3.HeaderValueOption) { o.Append = wrapperspb.Bool(true) }), //nolint:staticcheck // deprecated, still sent
		"keep empty":       withOption(func(o *corev3.HeaderValueOption) { o.KeepEmptyValue = true }),
		"nil option":       withCommon(func(c *extprocv3.CommonResponse) { c.HeaderMutation.SetHeaders[0] = nil }),
		"trailer mutation": withCommon(func(c *extprocv3.CommonResponse) { c.Trailers = &corev3.HeaderMap{} }),
		"clear body": withCommon(func(c *extprocv3.CommonResponse) {
			c.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}
		}),
		"chunk without message": withChunk(func(s *extprocv3.StreamedBodyResponse) { s.EndOfStreamWithoutMessage = true }),
		"nil headers response":  {Response: &extprocv3.ProcessingResponse_RequestHeaders{}},
		"large body":            bodyReply(session.Action{Verdict: session.Continue, ReplaceBody: true, Body: make([]byte, largeBody)}, true),
	}
	for name, r := range refused {
		if _, ok := appendReply(nil, r); ok {
			t.Errorf("%s: appendReply encoded a message it does not know", name)
		}
	}
}

func withTop(f func(*extprocv3.ProcessingResponse)) *extprocv3.ProcessingResponse {
	r := bodyReply(session.Action{Verdict: session.Continue}, true)
	f(r)
	return r
}

func withCommon(f func(*extprocv3.CommonResponse)) *extprocv3.ProcessingResponse {
	r := bodyReply(session.Action{Verdict: session.Continue, Set: []session.Header{{Key: "k", Value: "v"}}}, true)
	f(r.GetRequestBody().GetResponse())
	return r
}

func withOption(f func(*corev3.HeaderValueOption)) *extprocv3.ProcessingResponse {
	return withCommon(func(c *extprocv3.CommonResponse) { f(c.HeaderMutation.SetHeaders[0]) })
}

func withChunk(f func(*extprocv3.StreamedBodyResponse)) *extprocv3.ProcessingResponse {
	r := streamedReply([]byte("x"), false, true)
	f(r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse())
	return r
}

// grpcSession is a session of a TF gRPC exchange (grpcMode's test).
func grpcSession(t *testing.T) *session.Session {
	t.Helper()
	s := session.New(&session.Config{})
	h := headerMap{{Key: "content-type", RawValue: []byte("application/grpc")}}
	s.RequestHeaders(t.Context(), "POST", "/tensorflow.serving.PredictionService/Predict", h, false)
	if !s.GRPC() {
		t.Fatal("not a gRPC exchange")
	}
	return s
}

// TestAppendReplyFields pins the fields of the messages appendReply
// encodes: each is written or refused by it. A field a newer
// go-control-plane adds fails here until appendReply knows it (else it
// would be dropped silently).
func TestAppendReplyFields(t *testing.T) {
	for _, tc := range []struct {
		m    proto.Message
		want []string
	}{
		{&extprocv3.ProcessingResponse{}, []string{"request_headers", "response_headers", "request_body", "response_body",
			"request_trailers", "response_trailers", "immediate_response", "streamed_immediate_response", "dynamic_metadata",
			"typed_dynamic_metadata", "mode_override", "request_drain", "request_drain_requests", "request_drain_responses",
			"override_message_timeout", "server_window_update"}},
		{&extprocv3.HeadersResponse{}, []string{"response"}},
		{&extprocv3.BodyResponse{}, []string{"response"}},
		{&extprocv3.CommonResponse{}, []string{"status", "header_mutation", "body_mutation", "trailers", "clear_route_cache"}},
		{&extprocv3.HeaderMutation{}, []string{"set_headers", "remove_headers"}},
		{&extprocv3.BodyMutation{}, []string{"body", "clear_body", "streamed_response"}},
		{&extprocv3.StreamedBodyResponse{}, []string{"body", "end_of_stream", "end_of_stream_without_message", "grpc_message_compressed", "drain_complete"}},
		{&corev3.HeaderValueOption{}, []string{"header", "append", "append_action", "keep_empty_value"}},
		{&corev3.HeaderValue{}, []string{"key", "value", "raw_value"}},
	} {
		fs := tc.m.ProtoReflect().Descriptor().Fields()
		var got []string
		for i := range fs.Len() {
			got = append(got, string(fs.Get(i).Name()))
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s has fields %q, appendReply knows %q", tc.m.ProtoReflect().Descriptor().FullName(), got, tc.want)
		}
	}
}

// BenchmarkMarshalReply: the translated request's body reply (four
// headers set, one removed, the v2 body) encoded by bodyCodec (wire) and
// by grpc-go's protobuf codec.
func BenchmarkMarshalReply(b *testing.B) {
	r := bodyReply(session.Action{Verdict: session.Continue, ReplaceBody: true, Body: make([]byte, 150),
		Set: []session.Header{{Key: "content-type", Value: "application/octet-stream"}, {Key: "content-length", Value: "150"},
			{Key: "accept-encoding", Value: "identity"}, {Key: "inference-header-content-length", Value: "138"}},
		Remove: []string{"content-encoding"}}, true)
	c := newBodyCodec().(bodyCodec)
	for _, tc := range []struct {
		name  string
		codec interface {
			Marshal(any) (mem.BufferSlice, error)
		}
	}{{"wire", c}, {"protobuf", c.std}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := tc.codec.Marshal(r)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
			}
		})
	}
}
