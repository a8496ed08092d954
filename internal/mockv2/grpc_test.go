package mockv2

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/internal/pbwire"
	"github.com/tfsbridge/tfsbridge/translate/oipgrpc"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/x448/float16"
)

// The tests build requests and read answers with the translator's v2 wire package
// (translate/oipgrpc): the mock's own reader and writer (grpcwire.go) are a second,
// independent reading of the same .proto, so agreement checks both.

// grpcMock serves a mock of kind over gRPC on a loopback port and returns a connection.
func grpcMock(t *testing.T, kind string) *grpc.ClientConn {
	t.Helper()
	s, err := New(Options{Kind: kind, Delay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.NewGRPCServer()
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(math.MaxInt32), grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return conn
}

// call invokes a GRPCInferenceService method; the deadline only bounds a hang on a busy
// machine.
func grpcCall(t *testing.T, conn *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	err := conn.Invoke(ctx, "/"+GRPCService+"/"+method, req, &out)
	return out, err
}

func f32Bytes(vs ...float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func f16Bytes(vs ...float32) []byte {
	b := make([]byte, 0, 2*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(v).Bits())
	}
	return b
}

// hasRaw reports whether an answer carries raw_output_contents (field 6).
func hasRaw(t *testing.T, msg []byte) bool {
	t.Helper()
	raw := false
	if err := pbwire.Walk(msg, func(f *pbwire.Field) error {
		raw = raw || f.Num == 6
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestGRPCInfer(t *testing.T) {
	x := tensor.Tensor{Name: "x", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(1, 2, 5)}
	h := tensor.Tensor{Name: "x", DataType: tensor.FP16, Shape: []int64{1, 4}, Data: f16Bytes(1, 2, -3, 0.5)}
	text := tensor.Tensor{Name: "text", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ab"), []byte("c")}}
	rawReq := func(m string, ts ...tensor.Tensor) []byte {
		return oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: m, ID: "r1"}, ts, nil)
	}
	// A typed request has the layout of a typed answer: inputs=5 with contents=5.
	typedReq := func(m string, ts ...tensor.Tensor) []byte {
		return oipgrpc.AppendInferResponseTyped(nil, oipgrpc.Head{ModelName: m, ID: "r1"}, ts)
	}
	for _, tc := range []struct {
		kind, name string
		req        []byte
		wantRaw    bool
		version    string
		want       []tensor.Tensor
	}{
		{"triton", "raw", rawReq("half_plus_two", x), true, "1", []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(2.5, 3, 4.5)}}},
		{"triton", "typed in, raw out", typedReq("half_plus_two", x), true, "1", []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(2.5, 3, 4.5)}}},
		{"kserve", "raw", rawReq("half_plus_two", x), true, "", []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(2.5, 3, 4.5)}}},
		{"kserve", "typed", typedReq("half_plus_two", x), false, "", []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(2.5, 3, 4.5)}}},
		{"mlserver", "typed", typedReq("half_plus_two", x), false, "1", []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(2.5, 3, 4.5)}}},
		{"mlserver", "raw bytes", rawReq("bytes_echo", text), true, "1", []tensor.Tensor{
			{Name: "echo", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ab"), []byte("c")}},
			{Name: "echo_bytes", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ba"), []byte("c")}},
		}},
		// FP16 has no typed field: MLServer's habit is bytes_contents both ways; KServe
		// answers raw whenever an output is FP16.
		{"mlserver", "typed FP16", typedReq("half_times_two", h), false, "1", []tensor.Tensor{{Name: "y", DataType: tensor.FP16, Shape: []int64{1, 4}, Data: f16Bytes(2, 4, -6, 1)}}},
		{"kserve", "raw FP16", rawReq("half_times_two", h), true, "", []tensor.Tensor{{Name: "y", DataType: tensor.FP16, Shape: []int64{1, 4}, Data: f16Bytes(2, 4, -6, 1)}}},
		{"kserve", "typed bytes", typedReq("bytes_echo", text), false, "", []tensor.Tensor{
			{Name: "echo", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ab"), []byte("c")}},
			{Name: "echo_bytes", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("ba"), []byte("c")}},
		}},
	} {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			out, err := grpcCall(t, grpcMock(t, tc.kind), "ModelInfer", tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := hasRaw(t, out); got != tc.wantRaw {
				t.Errorf("raw_output_contents present = %v, want %v", got, tc.wantRaw)
			}
			msg, err := oipgrpc.DecodeInferResponse(out, tensor.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			wantModel := "half_plus_two"
			switch {
			case tc.want[0].Name == "echo":
				wantModel = "bytes_echo"
			case tc.want[0].DataType == tensor.FP16:
				wantModel = "half_times_two"
			}
			if msg.ModelVersion != tc.version || msg.ID != "r1" || msg.ModelName != wantModel {
				t.Errorf("head %+v", msg.Head)
			}
			if len(msg.Tensors) != len(tc.want) {
				t.Fatalf("outputs %+v", msg.Tensors)
			}
			for i, w := range tc.want {
				g := msg.Tensors[i]
				if g.Name != w.Name || g.DataType != w.DataType || !reflect.DeepEqual(g.Shape, w.Shape) || string(g.Data) != string(w.Data) || !reflect.DeepEqual(g.Strings, w.Strings) {
					t.Errorf("output %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestGRPCInferErrors(t *testing.T) {
	x := tensor.Tensor{Name: "x", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(1, 2, 5)}
	fp16 := tensor.Tensor{Name: "x", DataType: tensor.FP16, Shape: []int64{1, 4}, Data: make([]byte, 8)}
	xInt := tensor.Tensor{Name: "x", DataType: tensor.Int32, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}}
	in0 := tensor.Tensor{Name: "INPUT0", DataType: tensor.Int32, Shape: []int64{1, 16}, Data: make([]byte, 64)}
	in1 := in0
	in1.Name = "INPUT1"
	req := func(h oipgrpc.Head, outputs []string, ts ...tensor.Tensor) []byte {
		return oipgrpc.AppendInferRequestTensors(nil, h, ts, outputs)
	}
	// Two inputs but one raw entry: the second input's data is missing.
	oneRaw := oipgrpc.AppendInferRequest(nil, oipgrpc.Head{ModelName: "simple"},
		[]oipgrpc.Input{{Name: "INPUT0", DataType: tensor.Int32, Shape: []int64{1, 16}, Size: 64}, {Name: "INPUT1", DataType: tensor.Int32, Shape: []int64{1, 16}}},
		nil, func(dst []byte, i int) []byte { return append(dst, make([]byte, []int{64, 0}[i])...) })
	oneRaw = oneRaw[:len(oneRaw)-2] // drop the empty second raw entry (tag and length)
	for _, tc := range []struct {
		kind, name string
		req        []byte
		code       codes.Code
		msg        string
	}{
		{"triton", "unknown model", req(oipgrpc.Head{ModelName: "nope"}, nil, x), codes.NotFound, "Request for unknown model: 'nope' is not found"},
		{"triton", "unknown version", req(oipgrpc.Head{ModelName: "half_plus_two", ModelVersion: "3"}, nil, x), codes.NotFound, "Request for unknown model: 'half_plus_two' version 3 is not found"},
		{"triton", "non-numeric version", req(oipgrpc.Head{ModelName: "half_plus_two", ModelVersion: "v1"}, nil, x), codes.InvalidArgument,
			"failed to get model version from specified version string 'v1' (details: stol), version should be an integral value > 0"},
		{"kserve", "unknown model", req(oipgrpc.Head{ModelName: "nope"}, nil, x), codes.NotFound, "Model with name nope does not exist."},
		{"kserve", "version ignored", req(oipgrpc.Head{ModelName: "nope", ModelVersion: "7"}, nil, x), codes.NotFound, "Model with name nope does not exist."},
		{"mlserver", "unknown model", req(oipgrpc.Head{ModelName: "nope"}, nil, x), codes.NotFound, "Model nope with version  not found"},
		{"triton", "wrong datatype", req(oipgrpc.Head{ModelName: "half_plus_two"}, nil, xInt), codes.InvalidArgument,
			"inference input 'x' data-type is 'INT32', but model 'half_plus_two' expects 'FP32'"},
		{"triton", "missing raw entry", oneRaw, codes.InvalidArgument, "unable to find data for input tensor 'INPUT1' for model 'simple' in request."},
		{"kserve", "raw count mismatch", oneRaw, codes.InvalidArgument, "the number of inputs and raw_input_contents must match: got 2 inputs and 1 raw_input_contents"},
		{"triton", "unknown output", req(oipgrpc.Head{ModelName: "half_plus_two"}, []string{"z"}, x), codes.InvalidArgument, "unexpected inference output 'z' for model 'half_plus_two'"},
		{"triton", "malformed", []byte{0x0a, 0x05, 'a'}, codes.Internal, "grpc: error unmarshalling request: malformed protobuf message"},
		{"triton", "good simple", req(oipgrpc.Head{ModelName: "simple"}, nil, in0, in1), codes.OK, ""},
		{"kserve", "typed FP16 read as empty", oipgrpc.AppendInferResponseTyped(nil, oipgrpc.Head{ModelName: "half_times_two"}, []tensor.Tensor{fp16}), codes.InvalidArgument,
			"input byte size mismatch for input 'x' for model 'half_times_two'. Expected 8, got 0"},
	} {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			_, err := grpcCall(t, grpcMock(t, tc.kind), "ModelInfer", tc.req)
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}

func TestGRPCMetadataAndHealth(t *testing.T) {
	for _, tc := range []struct {
		kind              string
		versions          []string
		platform          string
		readyUnknownCode  codes.Code
		metaUnknownSubstr string
	}{
		{"triton", []string{"1"}, "onnxruntime_onnx", codes.NotFound, "Request for unknown model: 'nope' is not found"},
		{"kserve", nil, "", codes.NotFound, "Model with name nope does not exist."},
		{"mlserver", []string{"1"}, "", codes.Unknown, "Model nope with version  not found"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			conn := grpcMock(t, tc.kind)
			for _, m := range []string{"ServerLive", "ServerReady"} {
				if out, err := grpcCall(t, conn, m, nil); err != nil || string(out) != "\x08\x01" {
					t.Errorf("%s: %x %v", m, out, err)
				}
			}
			out, err := grpcCall(t, conn, "ModelMetadata", oipgrpc.AppendModelRequest(nil, "multi_out", ""))
			if err != nil {
				t.Fatal(err)
			}
			sig, err := oipgrpc.DecodeModelMetadata(out)
			if err != nil {
				t.Fatal(err)
			}
			wantIn := []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1, 2}}}
			if sig.Model != "multi_out" || !reflect.DeepEqual(sig.Versions, tc.versions) || sig.Platform != tc.platform ||
				!reflect.DeepEqual(sig.Inputs, wantIn) || len(sig.Outputs) != 3 || sig.Outputs[1].DataType != tensor.Bytes {
				t.Errorf("metadata %+v", sig)
			}
			out, err = grpcCall(t, conn, "ModelReady", oipgrpc.AppendModelRequest(nil, "multi_out", ""))
			if ready, derr := oipgrpc.DecodeModelReady(out); err != nil || derr != nil || !ready {
				t.Errorf("ModelReady: %v %v %v", ready, err, derr)
			}
			_, err = grpcCall(t, conn, "ModelReady", oipgrpc.AppendModelRequest(nil, "nope", ""))
			if st := status.Convert(err); st.Code() != tc.readyUnknownCode || !strings.Contains(st.Message(), tc.metaUnknownSubstr) {
				t.Errorf("ModelReady(nope): %v", err)
			}
			_, err = grpcCall(t, conn, "ModelMetadata", oipgrpc.AppendModelRequest(nil, "nope", ""))
			if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != tc.metaUnknownSubstr {
				t.Errorf("ModelMetadata(nope): %v", err)
			}
		})
	}
}

// TestGRPCMessageCaps: KServe's 8 MiB and MLServer's 4 MiB receive caps answer
// RESOURCE_EXHAUSTED; Triton takes the same request.
func TestGRPCMessageCaps(t *testing.T) {
	n := (5 << 20) / 4 // a 5 MiB FP32 tensor
	big := tensor.Tensor{Name: "x", DataType: tensor.FP32, Shape: []int64{int64(n)}, Data: make([]byte, 4*n)}
	req := oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "half_plus_two"}, []tensor.Tensor{big}, nil)
	for kind, want := range map[string]codes.Code{"triton": codes.OK, "kserve": codes.OK, "mlserver": codes.ResourceExhausted} {
		t.Run(kind, func(t *testing.T) {
			if _, err := grpcCall(t, grpcMock(t, kind), "ModelInfer", req); status.Code(err) != want {
				t.Errorf("got %v, want %v", err, want)
			}
		})
	}
}

// TestGRPCSlowDeadline: model "slow" waits Options.Delay (a minute here); the client's
// deadline ends the call, and the handler with it.
func TestGRPCSlowDeadline(t *testing.T) {
	conn := grpcMock(t, "triton")
	x := tensor.Tensor{Name: "x", DataType: tensor.FP32, Shape: []int64{1}, Data: f32Bytes(1)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // the deadline under test
	defer cancel()
	var out []byte
	err := conn.Invoke(ctx, "/"+GRPCService+"/ModelInfer", oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "slow"}, []tensor.Tensor{x}, nil), &out)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
}

// FuzzGRPCModelInfer throws arbitrary ModelInferRequest bytes at every kind: the service
// must never panic, answer the codes the real servers use, and a success must decode.
func FuzzGRPCModelInfer(f *testing.F) {
	x := tensor.Tensor{Name: "x", DataType: tensor.FP32, Shape: []int64{3}, Data: f32Bytes(1, 2, 5)}
	f.Add(uint8(0), oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "half_plus_two"}, []tensor.Tensor{x}, nil))
	f.Add(uint8(1), oipgrpc.AppendInferResponseTyped(nil, oipgrpc.Head{ModelName: "half_plus_two"}, []tensor.Tensor{x}))
	f.Add(uint8(2), oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "bytes_echo"},
		[]tensor.Tensor{{Name: "text", DataType: tensor.Bytes, Shape: []int64{2}, Strings: [][]byte{[]byte("a"), nil}}}, []string{"echo"}))
	f.Add(uint8(0), oipgrpc.AppendInferRequestTensors(nil, oipgrpc.Head{ModelName: "mixed_types"}, []tensor.Tensor{
		{Name: "flag", DataType: tensor.Bool, Shape: []int64{1, 1}, Data: []byte{1}},
		{Name: "count", DataType: tensor.Int64, Shape: []int64{1, 1}, Data: make([]byte, 8)},
		{Name: "value", DataType: tensor.FP64, Shape: []int64{1, 1}, Data: make([]byte, 8)}}, nil))
	servers := make([]*Server, 3)
	for i, k := range []string{"triton", "kserve", "mlserver"} {
		s, err := New(Options{Kind: k, Delay: time.Nanosecond})
		if err != nil {
			f.Fatal(err)
		}
		servers[i] = s
	}
	allowed := map[codes.Code]bool{codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.Internal: true}
	f.Fuzz(func(t *testing.T, kind uint8, msg []byte) {
		out, err := servers[int(kind)%len(servers)].grpcModelInfer(context.Background(), msg)
		if !allowed[status.Code(err)] {
			t.Fatalf("code %v: %v", status.Code(err), err)
		}
		if err == nil {
			if _, derr := oipgrpc.DecodeInferResponse(out, tensor.DefaultLimits); derr != nil && !bytes.Equal(out, []byte{0x0a, 0xff, 0x01}) {
				t.Fatalf("answer does not decode: %v", derr)
			}
		}
	})
}
