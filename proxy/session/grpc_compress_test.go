package session

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

func deflated(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// flagged is one gRPC message with its compressed flag set.
func flagged(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = 1
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	return append(out, msg...)
}

// TestGRPCCompression is spec §5.5 both ways: a message whose flag says
// compressed is inflated with the grpc-encoding's algorithm (gzip or
// deflate), one whose flag is 0 is read as it is whatever the header says;
// the v2 call asks for identity, and the TF client's answer goes
// uncompressed, its grpc-encoding dropped.
func TestGRPCCompression(t *testing.T) {
	req := predictMsg(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", f32Content)
	v2, outs := v2Answer(2.5, 3)
	want := grpcFrame(tfgrpc.AppendPredictResponse(nil, outs,
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 10, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields))
	tests := []struct {
		name         string
		reqEncoding  string
		reqBody      []byte
		respEncoding string
		respBody     []byte
	}{
		{"gzip both ways", "gzip", flagged(gzipped(t, req)), "gzip", flagged(gzipped(t, v2))},
		{"deflate both ways", "deflate", flagged(deflated(t, req)), "deflate", flagged(deflated(t, v2))},
		{"header says gzip, flags say plain", "gzip", grpcFrame(req), "gzip", grpcFrame(v2)},
		{"upper-case algorithm names", "GZIP", flagged(gzipped(t, req)), "Deflate", flagged(deflated(t, v2))},
		{"plain request, compressed answer", "", grpcFrame(req), "gzip", flagged(gzipped(t, v2))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "triton")
			ctx := context.Background()
			h := grpcHeaders(predictPath)
			if tt.reqEncoding != "" {
				h["grpc-encoding"] = tt.reqEncoding
			}
			s, a := grpcRequestAction(t, e, h, tt.reqBody)
			if a.Verdict != Continue || !a.ReplaceBody {
				t.Fatalf("request: %v %+v", a.Verdict, a.Set)
			}
			if !slicesHas(a.Remove, "grpc-encoding") {
				t.Errorf("request remove = %v, want grpc-encoding dropped (the v2 message goes uncompressed)", a.Remove)
			}
			if v, _ := a.Get("grpc-accept-encoding"); v != "identity" {
				t.Errorf("v2 call's grpc-accept-encoding = %q, want identity", v)
			}
			if a.Body[0] != 0 {
				t.Errorf("v2 message flag %d, want 0", a.Body[0])
			}
			got, err := oipgrpc.DecodeInferRequest(a.Body[5:], tensor.Limits{})
			if err != nil || got.ModelName != "half_plus_two" || len(got.Tensors) != 1 || !bytes.Equal(got.Tensors[0].Data, f32le(1, 2)) {
				t.Fatalf("v2 request %+v %v", got, err)
			}

			ha := s.ResponseHeaders(ctx, 200, hdr{"content-type": "application/grpc", "grpc-encoding": tt.respEncoding}, false)
			if ha.Verdict != Continue || !slicesHas(ha.Remove, "grpc-encoding") {
				t.Fatalf("response headers: %+v, want grpc-encoding dropped", ha)
			}
			ba := s.ResponseChunk(ctx, tt.respBody, false, Whole)
			if ba.Verdict != Continue || !bytes.Equal(ba.Body, want) {
				t.Fatalf("response body: %v\n got % x\nwant % x", ba.Verdict, ba.Body, want)
			}
			if ta := s.ResponseTrailers(ctx, hdr{"grpc-status": "0"}); ta.Verdict != Continue || !s.Answered() {
				t.Errorf("trailers: %+v, answered %v", ta, s.Answered())
			}
		})
	}
}

// TestGRPCCompressedRefusals: a compressed answer that cannot be read is
// the TF client's INTERNAL, as a gRPC client reading it would fail.
func TestGRPCCompressedRefusals(t *testing.T) {
	v2, _ := v2Answer(2.5, 3)
	tests := []struct {
		name     string
		encoding string
		body     []byte
		msg      string
	}{
		{"flag without an encoding", "", flagged(gzipped(t, v2)), "Response message is compressed but no grpc-encoding was given"},
		{"not gzip", "gzip", flagged(v2), "Failed to decompress the Response message: decompress body: gzip: invalid header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := predictSent(t)
			h := hdr{"content-type": "application/grpc"}
			if tt.encoding != "" {
				h["grpc-encoding"] = tt.encoding
			}
			s.ResponseHeaders(ctx, 200, h, false)
			checkGRPCStatus(t, s.ResponseChunk(ctx, tt.body, false, Whole), "13", tt.msg)
		})
	}
}
