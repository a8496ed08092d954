package extproc

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tfsbridge/tfsbridge/internal/mockv2"
	"github.com/tfsbridge/tfsbridge/proxy/backend"
	"github.com/tfsbridge/tfsbridge/proxy/internal/grpctest"
	"github.com/tfsbridge/tfsbridge/proxy/session"
	"github.com/tfsbridge/tfsbridge/test/envoysim"
	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

// rawCodec passes the messages the test builds as they are; its empty
// name makes grpc-go send plain application/grpc, as grpcio does.
type rawCodec struct{}

func (rawCodec) Name() string                  { return "" }
func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}

// TestGRPCThroughEnvoySim runs TF gRPC calls from a real gRPC client
// through the Envoy stand-in (h2c both ways) and the processor to the
// mock's v2 gRPC service, in the REST deployment's BUFFERED mode (the
// processor's mode_override turns the response trailers on) and in
// FULL_DUPLEX_STREAMED, and checks the stand-in saw no protocol violation.
func TestGRPCThroughEnvoySim(t *testing.T) {
	mock, err := mockv2.New(mockv2.Options{Kind: "triton"})
	if err != nil {
		t.Fatal(err)
	}
	rest := httptest.NewServer(mock)
	defer rest.Close()
	glis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := mock.NewGRPCServer()
	go func() { _ = gs.Serve(glis) }()
	defer gs.Stop()
	be, err := backend.New(backend.Config{BaseURL: rest.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(NewProcessor(&session.Config{Backend: be}, Options{}), ServerOptions{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, lis, time.Second) }()

	// np.array([[1, 2]], np.float32): shape [1, 2], which the mock's
	// half_plus_two (dims [-1]) refuses.
	matrix12 := []byte{0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x01, 0x12, 0x02, 0x08, 0x02, 0x22, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}
	predict := grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", grpctest.F32Content)
	want := tfgrpc.AppendPredictResponse(nil, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{2},
		Data: []byte{0, 0, 0x20, 0x40, 0, 0, 0x40, 0x40}}},
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields)
	for _, mode := range []struct {
		name string
		mode *extprocfilterv3.ProcessingMode
	}{{"buffered", envoysim.DefaultMode()}, {"full-duplex", envoysim.FullDuplexMode()}} {
		t.Run(mode.name, func(t *testing.T) {
			env, err := envoysim.Start(envoysim.Config{ProcessorAddr: lis.Addr().String(), Upstream: "http://" + glis.Addr().String(),
				UpstreamHTTP2: true, Mode: mode.mode, AllowModeOverride: true, MessageTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			conn, err := grpc.NewClient(strings.TrimPrefix(env.URL(), "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A bound for a hang on a busy machine, not a timing assumption.
			cctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
			defer stop()
			var out []byte
			if err := conn.Invoke(cctx, grpctest.PredictPath, &predict, &out); err != nil {
				t.Fatalf("Predict: %v", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("PredictResponse % x\nwant % x", out, want)
			}
			// A message over the codec's largeBody: the request arrives
			// left in its frames, the reply body goes as its own buffer.
			big, bigWant := largePredict(20000)
			if err := conn.Invoke(cctx, grpctest.PredictPath, &big, &out); err != nil {
				t.Fatalf("large Predict: %v", err)
			}
			if !bytes.Equal(out, bigWant) {
				t.Errorf("large PredictResponse: %d bytes, want %d", len(out), len(bigWant))
			}
			for _, c := range []struct {
				name string
				in   []byte
				code codes.Code
				msg  string
			}{
				{"unknown model, refused", grpctest.Predict(tfgrpc.ModelSpec{Name: "nope"}, "x", grpctest.F32Content),
					codes.NotFound, "Servable not found for request: Latest(nope)"},
				{"unknown version, from v2", grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two", Version: 9, HasVersion: true}, "x", grpctest.F32Content),
					codes.NotFound, "Servable not found for request: Specific(half_plus_two, 9)"},
				{"shape error, from v2's trailers", grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", matrix12),
					codes.InvalidArgument, "unexpected shape for input 'x' for model 'half_plus_two'. Expected [-1], got [1,2]."},
				{"status of an unknown version, rewritten from v2's NOT_FOUND", grpctest.Spec(nil, tfgrpc.ModelSpec{Name: "half_plus_two", Version: 9, HasVersion: true}),
					codes.NotFound, "Could not find version 9 of model half_plus_two"},
			} {
				path := grpctest.PredictPath
				if strings.HasPrefix(c.name, "status") {
					path = "/tensorflow.serving.ModelService/GetModelStatus"
				}
				var out []byte
				err := conn.Invoke(cctx, path, &c.in, &out)
				if st, _ := status.FromError(err); st.Code() != c.code || st.Message() != c.msg {
					t.Errorf("%s: %v %q, want %v %q", c.name, st.Code(), st.Message(), c.code, c.msg)
				}
			}
			for _, v := range env.Violations() {
				t.Errorf("envoysim violation: %s", v)
			}
		})
	}
}

// largePredict returns a Predict of half_plus_two with n float32 values
// (1, 2, ..., n) as tensor_content and the PredictResponse the mock's
// answer becomes (x/2+2, typed fields).
func largePredict(n int) (req, want []byte) {
	x := make([]byte, 4*n)
	y := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i+1)))
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(float32(i+1)/2+2))
	}
	// TensorProto{dtype: DT_FLOAT, tensor_shape{dim{size: n}}, tensor_content: x}
	dim := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(n))
	shape := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), dim)
	tp := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
	tp = protowire.AppendBytes(protowire.AppendTag(tp, 2, protowire.BytesType), shape)
	tp = protowire.AppendBytes(protowire.AppendTag(tp, 4, protowire.BytesType), x)
	req = grpctest.Predict(tfgrpc.ModelSpec{Name: "half_plus_two"}, "x", tp)
	want = tfgrpc.AppendPredictResponse(nil, []tensor.Tensor{{Name: "y", DataType: tensor.FP32, Shape: []int64{int64(n)}, Data: y}},
		tfgrpc.ModelSpec{Name: "half_plus_two", Version: 1, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields)
	return req, want
}
