package extproc

import (
	"bytes"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// FuzzCodecUnmarshal: whatever bytes arrive, the codec's own decoders (the
// headers slab, the framed body) decode a ProcessingRequest to what
// protobuf decodes, or fail where protobuf fails, in frames of any size.
// The message is the fuzzer's bytes alone (the small and headers paths)
// and those bytes wrapped around a body large enough for the framed path
// (head, then a request_body or response_body whose HttpBody is inner
// followed by the body, then tail): Envoy is trusted, but a decoder that
// panics or reads past a frame on a malformed message is a defect all the
// same.
func FuzzCodecUnmarshal(f *testing.F) {
	hdr := marshal(f, requestHeaders(false, ":path", "/v1/models/m:predict", ":method", "POST"))
	f.Add(hdr, []byte{}, []byte{}, uint16(0), uint8(0), false, false)
	f.Add([]byte{}, []byte{0x18, 1}, []byte{0x40, 1}, uint16(100), uint8(3), true, false)
	f.Add(hdr[:len(hdr)/2], []byte{0x12, 2, 'h', 'i'}, hdr[len(hdr)/2:], uint16(7), uint8(255), false, true)
	f.Fuzz(func(t *testing.T, head, inner, tail []byte, bodyLen uint16, size uint8, streamed, response bool) {
		frameSize := (int(size) + 1) * 97
		check := func(what string, wire []byte) {
			want := &extprocv3.ProcessingRequest{}
			wantErr := proto.Unmarshal(wire, want)
			got := &framedRequest{ProcessingRequest: &extprocv3.ProcessingRequest{}, streamed: streamed}
			err := newBodyCodec().Unmarshal(frames(wire, frameSize), got)
			defer got.free()
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s: codec error %v, protobuf error %v", what, err, wantErr)
			}
			if err != nil {
				return
			}
			if got.chunks != nil {
				rb := got.GetRequestBody()
				if rb == nil || rb.Body != nil {
					t.Fatalf("%s: framed chunks without a request body to hold them: %v", what, got.ProcessingRequest)
				}
				rb.Body = bytes.Join(got.chunks, nil)
			}
			if !proto.Equal(got.ProcessingRequest, want) {
				t.Fatalf("%s: codec decoded %v, protobuf %v", what, got.ProcessingRequest, want)
			}
		}
		check("the bytes alone", append(append(append([]byte(nil), head...), inner...), tail...))

		body := bytes.Repeat([]byte("0.5,"), (largeBody+int(bodyLen))/4)
		hb := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), inner...), hbBody, protowire.BytesType), body)
		field := prRequestBody
		if response {
			field = prResponseBody
		}
		wire := protowire.AppendTag(append([]byte(nil), head...), field, protowire.BytesType)
		wire = append(protowire.AppendBytes(wire, hb), tail...)
		check("around a large body", wire)
	})
}
