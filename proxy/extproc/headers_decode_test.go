package extproc

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestUnmarshalHeaders: the codec decodes every headers message to what
// protobuf decodes (in one buffer or split in two anywhere), and leaves
// to protobuf the messages it does not read itself.
func TestUnmarshalHeaders(t *testing.T) {
	envoy := requestHeaders(false, ":authority", "localhost", ":path", "/v1/models/half_plus_two:predict", ":method", "POST",
		":scheme", "http", "user-agent", "Go-http-client/1.1", "content-length", "30", "x-forwarded-proto", "http",
		"x-request-id", "4f4e0a07-6ee1-4b0c-a7c8-6e8f3fbb8f04", "ünïcode", "välue", "empty", "")
	envoy.ProtocolConfig = fullDuplex
	envoy.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"f": {}}}
	envoy.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{"request.path": structpb.NewStringValue("/x")}}}
	both := responseHeaders(true, ":status", "200")
	both.GetResponseHeaders().Headers.Headers[0].Value = "200"
	noMap := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{EndOfStream: true}}}
	emptyMap := responseHeaders(false)
	observed := requestHeaders(true, ":method", "GET")
	observed.ObservabilityMode = true
	emptyKey := responseHeaders(false, "", "v")
	fast := map[string]*extprocv3.ProcessingRequest{
		"envoy's request headers": envoy,
		"value and raw_value":     both,
		"no header map":           noMap,
		"empty header map":        emptyMap,
		"observability":           observed,
		"empty key":               emptyKey,
	}
	for name, m := range fast {
		buf := marshal(t, m)
		got := &extprocv3.ProcessingRequest{}
		if ok, err := unmarshalHeaders(append([]byte(nil), buf...), got); !ok || err != nil || !proto.Equal(got, m) {
			t.Errorf("%s: unmarshalHeaders = %v, %v: %v, want %v", name, ok, err, got, m)
		}
		if !isHeaders(mem.BufferSlice{mem.SliceBuffer(buf)}) {
			t.Errorf("%s: not seen as headers", name)
		}
		for cut := 0; cut <= len(buf); cut++ {
			f := &framedRequest{ProcessingRequest: &extprocv3.ProcessingRequest{}}
			data := mem.BufferSlice{mem.SliceBuffer(buf[:cut]), mem.SliceBuffer(buf[cut:])}
			if err := newBodyCodec().Unmarshal(data, f); err != nil || !proto.Equal(f.ProcessingRequest, m) {
				t.Fatalf("%s cut at %d: %v, %v", name, cut, err, f.ProcessingRequest)
			}
		}
	}
	attrs := responseHeaders(false, "k", "v")
	attrs.GetResponseHeaders().Attributes = map[string]*structpb.Struct{"a": {}} //nolint:staticcheck // deprecated, still decoded
	// A key that is not UTF-8 (protobuf refuses to write one): "k"
	// written, then made a lone 0xff.
	badKey, err := proto.Marshal(responseHeaders(false, "k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	badKey[bytes.IndexByte(badKey, 'k')] = 0xff
	slow := map[string][]byte{
		"body":              marshal(t, requestBody([]byte("{}"), true)),
		"header attributes": marshal(t, attrs),
		"invalid UTF-8 key": badKey,
	}
	for name, buf := range slow {
		if ok, _ := unmarshalHeaders(append([]byte(nil), buf...), &extprocv3.ProcessingRequest{}); ok {
			t.Errorf("%s: decoded by unmarshalHeaders", name)
		}
		want := &extprocv3.ProcessingRequest{}
		wantErr := proto.Unmarshal(buf, want)
		f := &framedRequest{ProcessingRequest: &extprocv3.ProcessingRequest{}}
		err := newBodyCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(buf)}, f)
		if (err != nil) != (wantErr != nil) || (err == nil && !proto.Equal(f.ProcessingRequest, want)) {
			t.Errorf("%s: codec %v, %v; protobuf %v, %v", name, err, f.ProcessingRequest, wantErr, want)
		}
	}
	// Two members of the oneof: the last one wins, as protobuf has it.
	two := append(marshal(t, requestHeaders(false, "k", "v")), marshal(t, requestBody([]byte("x"), true))...)
	if ok, _ := unmarshalHeaders(two, &extprocv3.ProcessingRequest{}); ok {
		t.Error("headers and a body: decoded by unmarshalHeaders")
	}
	// The header map twice: protobuf merges them.
	twice := append(marshal(t, requestHeaders(false, "a", "1")), marshal(t, requestHeaders(false, "b", "2"))...)
	if ok, _ := unmarshalHeaders(twice, &extprocv3.ProcessingRequest{}); ok {
		t.Error("headers twice: decoded by unmarshalHeaders")
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
