package extproc

import (
	"bytes"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tfsbridge/tfsbridge/proxy/session"
)

// frames cuts b into buffers of size n, as gRPC hands a message over.
func frames(b []byte, n int) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return out
}

// TestBodyCodecReceive: a large request body decodes to the same message
// as protobuf's own decoding, the body aliasing the frames (framed) or
// one fresh buffer, whatever the frame size; other messages as usual.
func TestBodyCodecReceive(t *testing.T) {
	body := bytes.Repeat([]byte("0.25,"), 40000)
	attrs, err := structpb.NewStruct(map[string]any{"request.path": "/v1/models/m:predict"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[string]*extprocv3.ProcessingRequest{
		"request body": {
			Request:           &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}},
			ObservabilityMode: false,
			MetadataContext:   &corev3.Metadata{FilterMetadata: nil},
		},
		"request body, fields after it": {
			Request:    &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}},
			Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": attrs},
		},
		"response body": {
			Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: body}},
		},
		"small body": {
			Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("{}"), EndOfStream: true}},
		},
	}
	c := newBodyCodec()
	for name, m := range msgs {
		wire, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 7, 16 << 10, 1 << 30} {
			got := &extprocv3.ProcessingRequest{}
			if err := c.Unmarshal(frames(wire, size), got); err != nil {
				t.Fatalf("%s, frames of %d: %v", name, size, err)
			}
			if !proto.Equal(got, m) {
				t.Errorf("%s, frames of %d: decoded differently", name, size)
			}
			for _, streamed := range []bool{false, true} {
				f := &framedRequest{ProcessingRequest: &extprocv3.ProcessingRequest{}, streamed: streamed}
				if err := c.Unmarshal(frames(wire, size), f); err != nil {
					t.Fatalf("%s, frames of %d: %v", name, size, err)
				}
				if f.chunks != nil {
					if f.ProcessingRequest.GetRequestBody().GetBody() != nil {
						t.Errorf("%s: a framed body also in the message", name)
					}
					f.ProcessingRequest.GetRequestBody().Body = bytes.Join(f.chunks, nil)
				} else if name == "request body" && size < len(wire) {
					t.Errorf("%s, frames of %d: not left in its frames", name, size)
				}
				f.free()
				if !proto.Equal(f.ProcessingRequest, m) {
					t.Errorf("%s, frames of %d, streamed %v: framed decoding differs", name, size, streamed)
				}
			}
		}
	}
}

// TestBodyCodecSend: a body reply sent by the codec, with its body whole
// or in parts, decodes (by protobuf, as Envoy's parser does) to the same
// message as the one protobuf encodes.
func TestBodyCodecSend(t *testing.T) {
	body := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 50000)
	parts := [][]byte{body[:10], body[10:100000], body[100000:]}
	reply := func(b []byte, request bool) *extprocv3.ProcessingResponse {
		return bodyReply(session.Action{Verdict: session.Continue, ReplaceBody: true, Body: b,
			Set: []session.Header{{Key: "content-type", Value: "application/octet-stream"}}, Remove: []string{"content-encoding"}}, request)
	}
	c := newBodyCodec()
	for _, request := range []bool{true, false} {
		want := reply(body, request)
		for name, v := range map[string]any{
			"whole": reply(body, request),
			"parts": &partsResponse{msg: reply(nil, request), parts: parts},
		} {
			data, err := c.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if name == "parts" && len(data) != 1+len(parts) {
				t.Errorf("%s: %d buffers, want the head and the parts", name, len(data))
			}
			got := &extprocv3.ProcessingResponse{}
			if err := proto.Unmarshal(data.Materialize(), got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("%s (request %v): decodes to another message", name, request)
			}
		}
	}
	// Small replies are protobuf's own bytes.
	small := reply([]byte("{}"), true)
	data, _ := c.Marshal(small)
	if want, _ := proto.Marshal(small); !bytes.Equal(data.Materialize(), want) {
		t.Errorf("small reply encoded differently")
	}
}

// TestBufferedBodyAnyCodec: a large buffered predict body gets the same
// reply, byte for byte once decoded, whether the server runs bodyCodec
// (the body read in its frames, the v2 body sent in parts) or grpc-go's
// own protobuf codec (a Processor on a server configured otherwise).
func TestBufferedBodyAnyCodec(t *testing.T) {
	body := []byte(`{"instances": [` + strings.TrimSuffix(strings.Repeat("1.5, ", 40000), ", ") + `]}`)
	var replies []*extprocv3.ProcessingResponse
	for _, opt := range []ServerOptions{{}, {GRPCOptions: []grpc.ServerOption{grpc.ForceServerCodecV2(encoding.GetCodecV2(protoenc.Name))}}} {
		h := startWith(t, opt)
		s := h.stream(t)
		exchange(t, s, requestHeaders(false, ":method", "POST", ":path", "/v1/models/half_plus_two:predict", "x-request-id", "r1"))
		replies = append(replies, exchange(t, s, requestBody(body, true)))
	}
	b := replies[0].GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	if len(b) < 4*40000 || !proto.Equal(replies[0], replies[1]) {
		t.Errorf("replies differ (a %d-byte v2 body with bodyCodec)", len(b))
	}
}
