package tfclient

import (
	"context"
	"encoding/hex"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tfsbridge/tfsbridge/translate/tensor"
	"github.com/tfsbridge/tfsbridge/translate/tfgrpc"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMakeTensorProtoBytes: the exact bytes of spec grpc.md §7 and the choices
// make_tensor_proto makes between tensor_content and the typed fields.
func TestMakeTensorProtoBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    TensorProto
		want string
	}{
		{"float32 [[1,2]]", Float32([]int64{1, 2}, 1, 2), "08 01 12 08 12 02 08 01 12 02 08 02 22 08 00 00 80 3f 00 00 00 40"},
		{"scalar 3.0", Float32(nil, 3), "08 01 12 00 2a 04 00 00 40 40"},
		{"strings", Strings([]int64{2}, "ab", "c"), "08 07 12 04 12 02 08 02 42 02 61 62 42 01 63"},
		{"float64 [2] in tensor_content", Float64([]int64{2}, 1, -2), "08 02 12 04 12 02 08 02 22 10 00 00 00 00 00 00 f0 3f 00 00 00 00 00 00 00 c0"},
		{"one-element array in the typed field", Int32([]int64{1}, -1), "08 03 12 04 12 02 08 01 3a 0a ff ff ff ff ff ff ff ff ff 01"},
		{"short values broadcast: typed field", Float32([]int64{3}, 7), "08 01 12 04 12 02 08 03 2a 04 00 00 e0 40"},
		{"bool is never tensor_content", Bool([]int64{2}, true, false), "08 0a 12 04 12 02 08 02 5a 02 01 00"},
		{"int64 [2]", Int64([]int64{2}, 1, 2), "08 09 12 04 12 02 08 02 22 10 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00"},
		{"zero dimension", Float32([]int64{0, 3}), "08 01 12 06 12 00 12 02 08 03"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.t.Marshal()
			if want := unhex(t, tc.want); string(got) != string(want) {
				t.Fatalf("bytes\n got % x\nwant % x", got, want)
			}
			back, err := DecodeTensorProto(got)
			if err != nil || !reflect.DeepEqual(back, tc.t) {
				t.Errorf("decode: %+v %v, want %+v", back, err, tc.t)
			}
		})
	}
}

// TestRequestsReadByTFGRPC: tfsbridge's own decoder reads the requests the way this
// package wrote them (two independent readings of the layout agree).
func TestRequestsReadByTFGRPC(t *testing.T) {
	spec := ModelSpec{Name: "m", SignatureName: "sig"}.WithVersion(3)
	req := PredictRequest(spec, map[string]TensorProto{"b": Strings([]int64{1}, "x"), "a": Float32([]int64{2}, 1, 2)}, "y")
	got, err := tfgrpc.DecodePredictRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if !got.HasSpec || got.Spec.Name != "m" || !got.Spec.HasVersion || got.Spec.Version != 3 || got.Spec.SignatureName != "sig" {
		t.Errorf("spec %+v", got.Spec)
	}
	if len(got.Inputs) != 2 || got.Inputs[0].Name != "a" || got.Inputs[1].Name != "b" || !reflect.DeepEqual(got.OutputFilter, []string{"y"}) {
		t.Fatalf("inputs %+v, filter %v", got.Inputs, got.OutputFilter)
	}
	if a := got.Inputs[0].Tensor; a.DType != tfgrpc.DType(DTFloat) || !reflect.DeepEqual(a.Shape, []int64{2}) || len(a.Content) != 8 {
		t.Errorf("input a %+v", a)
	}
	md, err := tfgrpc.DecodeMetadataRequest(GetModelMetadataRequest(ModelSpec{Name: "m", Label: "stable"}, "signature_def"))
	if err != nil || md.Spec.Name != "m" || md.Spec.VersionLabel != "stable" {
		t.Errorf("metadata request %+v %v", md, err)
	}
	st, err := tfgrpc.DecodeStatusRequest(GetModelStatusRequest(Spec("m").WithVersion(0)))
	if err != nil || st.Spec.Name != "m" || !st.Spec.HasVersion || st.Spec.Version != 0 {
		t.Errorf("status request %+v %v", st, err)
	}
	ex, ok, err := tfgrpc.DecodeExamplesRequest(ClassificationRequest(Spec("m"), Example(map[string]Feature{"x": {Floats: []float32{1}}}), Example(nil)), 1<<20)
	if err != nil || !ok || ex == nil {
		t.Errorf("classification request %+v %v %v", ex, ok, err)
	}
}

// TestAnswersWrittenByTFGRPC: answers tfsbridge's encoder writes decode here to what was
// encoded.
func TestAnswersWrittenByTFGRPC(t *testing.T) {
	out := []tensor.Tensor{
		{Name: "y", DataType: tensor.FP32, Shape: []int64{2}, Data: unhex(t, "0000803f 00000040")},
		{Name: "s", DataType: tensor.Bytes, Shape: []int64{1}, Strings: [][]byte{[]byte("hi")}},
	}
	b := tfgrpc.AppendPredictResponse(nil, out, tfgrpc.ModelSpec{Name: "m", Version: 4, HasVersion: true, SignatureName: "serving_default"}, tfgrpc.TypedFields)
	r, err := DecodePredictResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	if y := r.Outputs["y"]; y.DType != DTFloat || !reflect.DeepEqual(y.FloatVal, []float32{1, 2}) || !reflect.DeepEqual(y.Shape, []int64{2}) {
		t.Errorf("y %+v", y)
	}
	if s := r.Outputs["s"]; s.DType != DTString || len(s.StringVal) != 1 || string(s.StringVal[0]) != "hi" {
		t.Errorf("s %+v", s)
	}
	if r.ModelSpec.Name != "m" || r.ModelSpec.Version == nil || *r.ModelSpec.Version != 4 || r.ModelSpec.SignatureName != "serving_default" {
		t.Errorf("model_spec %+v", r.ModelSpec)
	}
	sig := &tensor.Signature{Inputs: []tensor.Spec{{Name: "x", DataType: tensor.FP32, Shape: []int64{-1, 3}}}, Outputs: []tensor.Spec{{Name: "y", DataType: tensor.Int64, Shape: []int64{-1}}}}
	mb := tfgrpc.AppendMetadataResponse(nil, tfgrpc.ModelSpec{Name: "m", Version: 1, HasVersion: true}, []tfgrpc.SignatureDef{{Name: "serving_default", Signature: sig, Method: "tensorflow/serving/predict"}})
	md, err := DecodeMetadataResponse(mb)
	if err != nil {
		t.Fatal(err)
	}
	sd := md.SignatureDefs["serving_default"]
	if md.TypeURL != SignatureDefMapURL || sd.MethodName != "tensorflow/serving/predict" ||
		!reflect.DeepEqual(sd.Inputs["x"], TensorInfo{Name: "x:0", DType: DTFloat, Shape: []int64{-1, 3}}) ||
		!reflect.DeepEqual(sd.Outputs["y"], TensorInfo{Name: "y:0", DType: DTInt64, Shape: []int64{-1}}) {
		t.Errorf("metadata %+v", md)
	}
	classes := &tensor.Tensor{DataType: tensor.Bytes, Shape: []int64{2, 2}, Strings: [][]byte{[]byte("a"), []byte("b"), []byte("a"), []byte("b")}}
	scores := &tensor.Tensor{DataType: tensor.FP32, Shape: []int64{2, 2}, Data: unhex(t, "0000003f 0000003f 0000803e 0000403f")}
	cr, err := DecodeClassificationResponse(tfgrpc.AppendClassificationResponse(nil, classes, scores, 2, 2, tfgrpc.ModelSpec{Name: "c"}))
	if err != nil || !reflect.DeepEqual(cr.Classifications, [][]Class{{{"a", 0.5}, {"b", 0.5}}, {{"a", 0.25}, {"b", 0.75}}}) || cr.ModelSpec.Name != "c" {
		t.Errorf("classification %+v %v", cr, err)
	}
	outs := &tensor.Tensor{DataType: tensor.FP32, Shape: []int64{2}, Data: unhex(t, "0000a040 00000000")}
	rr, err := DecodeRegressionResponse(tfgrpc.AppendRegressionResponse(nil, outs, 2, tfgrpc.ModelSpec{Name: "r"}))
	if err != nil || !reflect.DeepEqual(rr.Values, []float32{5, 0}) || rr.ModelSpec.Name != "r" {
		t.Errorf("regression %+v %v", rr, err)
	}
	vs, err := DecodeStatusResponse(tfgrpc.AppendStatusResponse(nil, []tfgrpc.VersionStatus{{Version: 2, State: tfgrpc.StateAvailable}, {Version: 1, State: 50, ErrorCode: 5, ErrorMessage: "gone"}}))
	if err != nil || !reflect.DeepEqual(vs, []ModelVersionStatus{{Version: 2, State: 30}, {Version: 1, State: 50, ErrorCode: 5, ErrorMessage: "gone"}}) {
		t.Errorf("status %+v %v", vs, err)
	}
}

// TestClientOverGRPC: calls over a real HTTP/2 connection; the server sees TF's method
// paths and content-type application/grpc, answers and statuses come back.
func TestClientOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	answer := predictResponseBytes(t)
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, s grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(s)
		md, _ := metadata.FromIncomingContext(s.Context())
		var in []byte
		if err := s.RecvMsg(&in); err != nil {
			return err
		}
		if ct := md.Get("content-type"); len(ct) != 1 || ct[0] != "application/grpc" {
			return status.Errorf(codes.Internal, "content-type %v", ct)
		}
		switch method {
		case MethodPredict:
			if _, err := tfgrpc.DecodePredictRequest(in); err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
			s.SetTrailer(metadata.Pairs("x-seen", "predict"))
			return s.SendMsg(answer)
		default:
			return status.Errorf(codes.Unimplemented, "no %s", method)
		}
	}))
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	c, err := Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The deadline bounds a hang on a busy machine; the calls answer at once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Predict(ctx, PredictRequest(Spec("m"), map[string]TensorProto{"x": Float32(nil, 1)}))
	if err != nil || !reflect.DeepEqual(r.Outputs["y"].FloatVal, []float32{1, 2}) {
		t.Fatalf("Predict: %+v %v", r, err)
	}
	raw, err := c.Call(ctx, MethodPredict, PredictRequest(Spec("m"), nil))
	if err != nil || raw.Trailers.Get("x-seen")[0] != "predict" {
		t.Errorf("Call: %v %v", raw, err)
	}
	_, err = c.GetModelStatus(ctx, GetModelStatusRequest(Spec("m")))
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "no "+MethodGetModelStatus {
		t.Errorf("GetModelStatus: %v", err)
	}
}

// predictResponseBytes is a PredictResponse with y = float_val [1, 2].
func predictResponseBytes(t *testing.T) []byte {
	t.Helper()
	y := TensorProto{DType: DTFloat, Shape: []int64{2}, FloatVal: []float32{1, 2}}
	entry := appendString(nil, 1, "y")
	entry = appendBytes(entry, 2, y.Marshal())
	return appendBytes(nil, 1, entry)
}
